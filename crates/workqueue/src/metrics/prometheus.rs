//! The Prometheus implementation of [`MetricsProvider`], on `prometheus-client`.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric,
    duration_buckets,
};

type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Registers client-go's workqueue metrics in a `prometheus-client` registry, one series per
/// queue name (label `name`).
///
/// Make one provider per registry and share it between queues:
///
/// ```
/// use std::sync::Arc;
/// use prometheus_client::registry::Registry;
/// use ctrlkit_workqueue::{MetricsConfig, PrometheusMetricsProvider, Queue};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let mut registry = Registry::default();
/// let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
/// let queue: Queue<String> = Queue::with_metrics(MetricsConfig::new("foos", provider));
/// queue.add("default/foo".to_string());
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"workqueue_adds_total{name="foos"} 1"#));
/// assert!(text.contains(r#"workqueue_depth{name="foos"} 1"#));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PrometheusMetricsProvider {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    latency: HistogramFamily,
    work_duration: HistogramFamily,
    unfinished_work: Family<Labels, Gauge<f64, AtomicU64>>,
    longest_running: Family<Labels, Gauge<f64, AtomicU64>>,
    retries: Family<Labels, Counter>,
    /// Label each series `controller` as well as `name` (controller-runtime's labels).
    controller_label: bool,
}

fn duration_histogram() -> Histogram {
    Histogram::new(duration_buckets())
}

impl PrometheusMetricsProvider {
    /// Registers the seven workqueue metric families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let provider = Self {
            depth: Family::default(),
            adds: Family::default(),
            latency: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            retries: Family::default(),
            controller_label: false,
        };
        registry.register(
            "workqueue_depth",
            "Current depth of the workqueue",
            provider.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by the workqueue",
            provider.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in the workqueue before being requested",
            provider.latency.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from the workqueue takes",
            provider.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet observed by work_duration; a steady rise means stuck workers",
            provider.unfinished_work.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds the longest running processor of the workqueue has been running",
            provider.longest_running.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by the workqueue",
            provider.retries.clone(),
        );
        provider
    }

    /// Registers the families as [`new`](Self::new) does, with controller-runtime's labels:
    /// each series carries `controller` beside `name`, both the queue's name (a controller's
    /// queue is named after the controller), so dashboards made for controller-runtime work.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use prometheus_client::registry::Registry;
    /// use ctrlkit_workqueue::{MetricsConfig, PrometheusMetricsProvider, Queue};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let mut registry = Registry::default();
    /// let provider = Arc::new(PrometheusMetricsProvider::for_controllers(&mut registry));
    /// let queue: Queue<String> = Queue::with_metrics(MetricsConfig::new("foos", provider));
    /// queue.add("default/foo".to_string());
    ///
    /// let mut text = String::new();
    /// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    /// assert!(text.contains(r#"workqueue_adds_total{name="foos",controller="foos"} 1"#));
    /// # }
    /// ```
    pub fn for_controllers(registry: &mut Registry) -> Self {
        Self {
            controller_label: true,
            ..Self::new(registry)
        }
    }

    fn labels(&self, name: &str) -> Labels {
        let mut labels = vec![("name".to_string(), name.to_string())];
        if self.controller_label {
            labels.push(("controller".to_string(), name.to_string()));
        }
        labels
    }
}

struct PromGauge(Gauge);
struct PromSettable(Gauge<f64, AtomicU64>);
struct PromCounter(Counter);
struct PromHistogram(Histogram);

impl GaugeMetric for PromGauge {
    fn inc(&self) {
        self.0.inc();
    }
    fn dec(&self) {
        self.0.dec();
    }
}

impl SettableGaugeMetric for PromSettable {
    fn set(&self, value: f64) {
        self.0.set(value);
    }
}

impl CounterMetric for PromCounter {
    fn inc(&self) {
        self.0.inc();
    }
}

impl HistogramMetric for PromHistogram {
    fn observe(&self, value: f64) {
        self.0.observe(value);
    }
}

impl MetricsProvider for PrometheusMetricsProvider {
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(PromGauge(
            self.depth.get_or_create(&self.labels(name)).clone(),
        ))
    }

    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        Arc::new(PromCounter(
            self.adds.get_or_create(&self.labels(name)).clone(),
        ))
    }

    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(PromHistogram(
            self.latency.get_or_create(&self.labels(name)).clone(),
        ))
    }

    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(PromHistogram(
            self.work_duration.get_or_create(&self.labels(name)).clone(),
        ))
    }

    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(PromSettable(
            self.unfinished_work
                .get_or_create(&self.labels(name))
                .clone(),
        ))
    }

    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(PromSettable(
            self.longest_running
                .get_or_create(&self.labels(name))
                .clone(),
        ))
    }

    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        Arc::new(PromCounter(
            self.retries.get_or_create(&self.labels(name)).clone(),
        ))
    }
}
