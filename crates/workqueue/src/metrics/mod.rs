//! Queue metrics under client-go's names and meanings, behind client-go's provider interface.
//!
//! A queue reports metrics only when it is given a name and a [`MetricsProvider`]; the provider
//! makes one metric of each kind per queue name. [`PrometheusMetricsProvider`] registers them in a
//! `prometheus-client` [`Registry`](prometheus_client::registry::Registry) as
//! `workqueue_depth`, `workqueue_adds_total`, `workqueue_queue_duration_seconds`,
//! `workqueue_work_duration_seconds`, `workqueue_unfinished_work_seconds`,
//! `workqueue_longest_running_processor_seconds` and `workqueue_retries_total`, labelled `name`,
//! so dashboards built for client-go controllers work unchanged.
//!
//! What each one counts, exactly as client-go:
//! - depth: items waiting to be handed out, including one re-added while it is being processed;
//! - adds: adds that were not deduplicated;
//! - queue duration: from an item's (non-deduplicated) add to the `get` that hands it out;
//! - work duration: from `get` to `done`;
//! - unfinished work: the summed age of every item being processed, refreshed periodically;
//! - longest running processor: the age of the oldest item being processed, likewise;
//! - retries: every `add_after` (and so every rate-limited add) on a queue not shut down.

mod prometheus;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::sync::HashMap;

pub use self::prometheus::PrometheusMetricsProvider;

/// A gauge moved up and down by one (the queue depth).
pub trait GaugeMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
    /// Subtracts one.
    fn dec(&self);
}

/// A gauge set to a value (unfinished work, longest running processor).
pub trait SettableGaugeMetric: Send + Sync {
    /// Sets the value.
    fn set(&self, value: f64);
}

/// A monotonic counter (adds, retries).
pub trait CounterMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
}

/// A distribution of observed values in seconds (queue and work durations).
pub trait HistogramMetric: Send + Sync {
    /// Records one value.
    fn observe(&self, value: f64);
}

/// Makes the metrics of a named queue, as client-go's `MetricsProvider`.
///
/// Implement it to send queue metrics to a system other than Prometheus; each method is called
/// once per queue, with the queue's name.
pub trait MetricsProvider: Send + Sync {
    /// The current depth of the queue.
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric>;
    /// The number of adds handled by the queue.
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric>;
    /// How long items stay in the queue before being requested.
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric>;
    /// How long processing an item takes.
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric>;
    /// Seconds of work in progress that `work_duration` has not observed yet.
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric>;
    /// Seconds the longest-running processor has been running.
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric>;
    /// The number of retries (delayed adds) handled by the queue.
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric>;
}

/// The histogram buckets of both durations, as client-go: 1e-8 s to 10 s, ten per decade step.
pub fn duration_buckets() -> impl Iterator<Item = f64> {
    (0..10).map(|k| 1e-8 * 10f64.powi(k))
}

/// The metric handles of one named queue.
pub(crate) struct QueueMetricHandles {
    depth: Arc<dyn GaugeMetric>,
    adds: Arc<dyn CounterMetric>,
    latency: Arc<dyn HistogramMetric>,
    work_duration: Arc<dyn HistogramMetric>,
    unfinished_work: Arc<dyn SettableGaugeMetric>,
    longest_running: Arc<dyn SettableGaugeMetric>,
    retries: Arc<dyn CounterMetric>,
}

impl QueueMetricHandles {
    pub(crate) fn new(provider: &dyn MetricsProvider, name: &str) -> Self {
        Self {
            depth: provider.new_depth_metric(name),
            adds: provider.new_adds_metric(name),
            latency: provider.new_latency_metric(name),
            work_duration: provider.new_work_duration_metric(name),
            unfinished_work: provider.new_unfinished_work_seconds_metric(name),
            longest_running: provider.new_longest_running_processor_seconds_metric(name),
            retries: provider.new_retries_metric(name),
        }
    }

    pub(crate) fn retry(&self) {
        self.retries.inc();
    }
}

/// Per-item timestamps behind the duration metrics, by the item's slot in the queue; kept inside
/// the queue's lock.
pub(crate) struct QueueMetrics {
    handles: Arc<QueueMetricHandles>,
    added_at: HashMap<u32, Instant>,
    started_at: HashMap<u32, Instant>,
}

impl QueueMetrics {
    pub(crate) fn new(handles: Arc<QueueMetricHandles>) -> Self {
        Self {
            handles,
            added_at: HashMap::default(),
            started_at: HashMap::default(),
        }
    }

    /// A non-deduplicated add.
    pub(crate) fn add(&mut self, slot: u32, now: Instant) {
        self.handles.adds.inc();
        self.handles.depth.inc();
        self.added_at.entry(slot).or_insert(now);
    }

    /// An item handed out by `get`.
    pub(crate) fn get(&mut self, slot: u32, now: Instant) {
        self.handles.depth.dec();
        if let Some(added) = self.added_at.remove(&slot) {
            self.handles.latency.observe(seconds(now - added));
        }
        self.started_at.insert(slot, now);
    }

    /// An item marked done.
    pub(crate) fn done(&mut self, slot: u32, now: Instant) {
        if let Some(started) = self.started_at.remove(&slot) {
            self.handles.work_duration.observe(seconds(now - started));
        }
    }

    /// Refreshes the unfinished-work and longest-running gauges.
    pub(crate) fn update_unfinished_work(&self, now: Instant) {
        let mut total = 0.0;
        let mut oldest = 0.0f64;
        for started in self.started_at.values() {
            let age = seconds(now.saturating_duration_since(*started));
            total += age;
            oldest = oldest.max(age);
        }
        self.handles.unfinished_work.set(total);
        self.handles.longest_running.set(oldest);
    }
}

/// Seconds as client-go computes them (whole seconds plus nanoseconds / 1e9), so that
/// 50 µs is exactly `5e-05`.
fn seconds(d: Duration) -> f64 {
    d.as_secs() as f64 + f64::from(d.subsec_nanos()) / 1e9
}

/// How a queue reports metrics: the queue's name and the provider that makes them.
#[derive(Clone)]
pub struct MetricsConfig {
    pub(crate) name: String,
    pub(crate) provider: Arc<dyn MetricsProvider>,
    pub(crate) unfinished_work_update_period: Duration,
}

impl MetricsConfig {
    /// Metrics for the queue `name` from `provider`, the unfinished-work gauges refreshed every
    /// 500 ms as client-go.
    pub fn new(name: impl Into<String>, provider: Arc<dyn MetricsProvider>) -> Self {
        Self {
            name: name.into(),
            provider,
            unfinished_work_update_period: Duration::from_millis(500),
        }
    }

    /// Refreshes the unfinished-work gauges every `period` instead (at least 1 ms).
    #[must_use]
    pub fn unfinished_work_update_period(mut self, period: Duration) -> Self {
        self.unfinished_work_update_period = period.max(Duration::from_millis(1));
        self
    }
}

impl std::fmt::Debug for MetricsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsConfig")
            .field("name", &self.name)
            .field(
                "unfinished_work_update_period",
                &self.unfinished_work_update_period,
            )
            .finish_non_exhaustive()
    }
}
