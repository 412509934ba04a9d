//! `metrics_test.go`: exact metric values on the paused clock, through a recording provider, and
//! the Prometheus names through a real registry.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctrlkit_workqueue::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric,
};
use ctrlkit_workqueue::{
    ItemExponentialFailureRateLimiter, MetricsConfig, PrometheusMetricsProvider, Queue,
    RateLimitingQueue,
};
use tokio::time::{advance, sleep};

/// A gauge, counter or histogram that remembers what it was told.
#[derive(Default)]
struct Recorder {
    inc: Mutex<i64>,
    set: Mutex<Option<f64>>,
    observations: Mutex<Vec<f64>>,
    sets: Mutex<usize>,
}

impl Recorder {
    fn value(&self) -> f64 {
        match *self.set.lock().unwrap() {
            Some(value) => value,
            None => *self.inc.lock().unwrap() as f64,
        }
    }
    fn last_observation(&self) -> f64 {
        *self.observations.lock().unwrap().last().unwrap()
    }
    fn observation_count(&self) -> usize {
        self.observations.lock().unwrap().len()
    }
}

impl GaugeMetric for Recorder {
    fn inc(&self) {
        *self.inc.lock().unwrap() += 1;
    }
    fn dec(&self) {
        *self.inc.lock().unwrap() -= 1;
    }
}
impl CounterMetric for Recorder {
    fn inc(&self) {
        *self.inc.lock().unwrap() += 1;
    }
}
impl SettableGaugeMetric for Recorder {
    fn set(&self, value: f64) {
        *self.set.lock().unwrap() = Some(value);
        *self.sets.lock().unwrap() += 1;
    }
}
impl HistogramMetric for Recorder {
    fn observe(&self, value: f64) {
        self.observations.lock().unwrap().push(value);
    }
}

#[derive(Default)]
struct RecordingProvider {
    depth: Arc<Recorder>,
    adds: Arc<Recorder>,
    latency: Arc<Recorder>,
    duration: Arc<Recorder>,
    unfinished: Arc<Recorder>,
    longest: Arc<Recorder>,
    retries: Arc<Recorder>,
}

impl MetricsProvider for RecordingProvider {
    fn new_depth_metric(&self, _: &str) -> Arc<dyn GaugeMetric> {
        self.depth.clone()
    }
    fn new_adds_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        self.adds.clone()
    }
    fn new_latency_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        self.latency.clone()
    }
    fn new_work_duration_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        self.duration.clone()
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Arc<dyn SettableGaugeMetric> {
        self.unfinished.clone()
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        self.longest.clone()
    }
    fn new_retries_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        self.retries.clone()
    }
}

const US: Duration = Duration::from_micros(1);
const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn metrics() {
    let provider = Arc::new(RecordingProvider::default());
    let queue = Queue::with_metrics(
        MetricsConfig::new("test", provider.clone()).unfinished_work_update_period(MS),
    );

    queue.add("foo");
    assert_eq!(provider.adds.value(), 1.0);
    assert_eq!(provider.depth.value(), 1.0);

    // Tokio's timers tick in milliseconds; `advance` moves the clock by exactly 50 µs.
    advance(50 * US).await;
    let item = queue.get().await.unwrap();
    assert_eq!(*item, "foo");
    assert_eq!(provider.latency.last_observation(), 5e-05);
    assert_eq!(provider.latency.observation_count(), 1);
    assert_eq!(provider.depth.value(), 0.0);

    // Added back while processing; the repeats are deduplicated.
    for _ in 0..5 {
        queue.add("foo");
    }
    assert_eq!(provider.adds.value(), 2.0);
    assert_eq!(provider.depth.value(), 1.0);

    advance(25 * US).await;
    drop(item);
    assert_eq!(provider.duration.last_observation(), 2.5e-05);
    assert_eq!(provider.duration.observation_count(), 1);
    assert_eq!(provider.depth.value(), 1.0);

    let item = queue.get().await.unwrap();
    assert_eq!(provider.latency.last_observation(), 2.5e-05);
    assert_eq!(provider.latency.observation_count(), 2);

    // The updater ticks every millisecond since the queue was made; stepping the clock 1 ms
    // from 75 µs passes the tick at 1 ms, which reads the clock at 1.075 ms.
    advance(MS).await;
    tokio::task::yield_now().await;
    assert_eq!(provider.unfinished.value(), 0.001);
    assert_eq!(provider.longest.value(), 0.001);

    drop(item);
    assert_eq!(provider.duration.last_observation(), 0.001);
    assert_eq!(provider.duration.observation_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn unfinished_work_is_exact_at_each_tick() {
    let provider = Arc::new(RecordingProvider::default());
    let queue = Queue::with_metrics(
        MetricsConfig::new("test", provider.clone()).unfinished_work_update_period(MS),
    );
    queue.add("a");
    queue.add("b");
    let _a = queue.get().await.unwrap();
    advance(MS / 2).await;
    let _b = queue.get().await.unwrap();
    // The first tick comes 1 ms after the queue was made: a has run 1 ms, b 0.5 ms.
    advance(MS / 2).await;
    tokio::task::yield_now().await;
    assert_eq!(provider.unfinished.value(), 0.0015);
    assert_eq!(provider.longest.value(), 0.001);
}

#[tokio::test(start_paused = true)]
async fn metric_shutdown() {
    let provider = Arc::new(RecordingProvider::default());
    let queue: Queue<&str> = Queue::with_metrics(
        MetricsConfig::new("test", provider.clone()).unfinished_work_update_period(MS),
    );
    sleep(MS).await;
    tokio::task::yield_now().await;
    assert_eq!(*provider.unfinished.sets.lock().unwrap(), 1);
    queue.shut_down();
    sleep(Duration::from_secs(3600)).await;
    assert_eq!(*provider.unfinished.sets.lock().unwrap(), 1);
    assert_eq!(
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        0
    );
}

#[tokio::test(start_paused = true)]
async fn retries_count_every_delayed_add() {
    let provider = Arc::new(RecordingProvider::default());
    let queue = RateLimitingQueue::with_metrics(
        ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1)),
        MetricsConfig::new("test", provider.clone()),
    );
    queue.add("plain");
    queue.add_after("zero", Duration::ZERO);
    queue.add_after("later", MS);
    queue.add_rate_limited("limited");
    assert_eq!(provider.retries.value(), 3.0);
    // Delayed items count as adds (and depth) only once they are ready.
    assert_eq!(provider.adds.value(), 2.0);
    sleep(MS).await;
    tokio::task::yield_now().await;
    assert_eq!(provider.adds.value(), 4.0);
    assert_eq!(provider.depth.value(), 4.0);
    queue.shut_down();
    queue.add_rate_limited("after shutdown");
    assert_eq!(provider.retries.value(), 3.0);
}

#[tokio::test(start_paused = true)]
async fn prometheus_names_labels_and_buckets() {
    let mut registry = prometheus_client::registry::Registry::default();
    let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
    let queue = RateLimitingQueue::with_metrics(
        ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1)),
        MetricsConfig::new("foos", provider),
    );
    queue.add("a");
    queue.add("b");
    queue.add_rate_limited("c");
    advance(10 * US).await;
    let item = queue.get().await.unwrap();
    advance(2 * US).await;
    drop(item);

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for expected in [
        r#"workqueue_depth{name="foos"} 1"#,
        r#"workqueue_adds_total{name="foos"} 2"#,
        r#"workqueue_retries_total{name="foos"} 1"#,
        r#"workqueue_queue_duration_seconds_count{name="foos"} 1"#,
        r#"workqueue_queue_duration_seconds_sum{name="foos"} 0.00001"#,
        r#"workqueue_queue_duration_seconds_bucket{le="1e-8",name="foos"} 0"#,
        r#"workqueue_queue_duration_seconds_bucket{le="0.00001",name="foos"} 1"#,
        r#"workqueue_queue_duration_seconds_bucket{le="10.0",name="foos"} 1"#,
        r#"workqueue_work_duration_seconds_count{name="foos"} 1"#,
        r#"workqueue_work_duration_seconds_sum{name="foos"} 0.000002"#,
        r#"workqueue_unfinished_work_seconds{name="foos"} 0.0"#,
        r#"workqueue_longest_running_processor_seconds{name="foos"} 0.0"#,
    ] {
        assert!(text.contains(expected), "{expected} not in:\n{text}");
    }
}
