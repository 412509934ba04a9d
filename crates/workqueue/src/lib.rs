//! client-go's work queue for Rust: the rate-limited queue at the heart of every controller.
//!
//! Event handlers add keys; workers [`get`](RateLimitingQueue::get) them, reconcile, and end
//! each one through the [`WorkItem`] guard: forget on success, requeue rate-limited on failure,
//! done always (dropping the guard is done, even on a panic). The queue guarantees what
//! client-go's does: keys are handed out in order, a key added many times before it is processed
//! is processed once, a key is never processed by two workers at once, and a key added while it
//! is being processed is processed again afterwards.
//!
//! | type | what it adds |
//! |---|---|
//! | [`Queue`] | ordering, deduplication, the processing set, shutdown and drain |
//! | [`DelayingQueue`] | `add_after` on exact timers |
//! | [`RateLimitingQueue`] | `add_rate_limited`, `forget`, `num_requeues` with any [`RateLimiter`] |
//! | [`PriorityQueue`] | priorities (with aging) on top of all the above, as controller-runtime |
//!
//! Every queue also has `add_cloned(&item)`, which clones the item only when the queue does not
//! hold it yet ([`Queue::add_cloned`]).
//!
//! Metrics are opt-in, per named queue, under client-go's Prometheus names ([`metrics`]).
//! This crate knows nothing of Kubernetes: items are any `Clone + Eq + Hash + Send` type.
//!
//! ```
//! use ctrlkit_workqueue::RateLimitingQueue;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let queue = RateLimitingQueue::with_default_rate_limiter();
//! queue.add("default/foo".to_string());
//! queue.shut_down(); // workers finish what is queued, then stop
//!
//! while let Some(key) = queue.get().await {
//!     match reconcile(&key) {
//!         Ok(()) => key.forget(),
//!         Err(_) => key.requeue_rate_limited(),
//!     }
//! }
//! # fn reconcile(_: &str) -> Result<(), ()> { Ok(()) }
//! # }
//! ```

mod backlog;
mod core;
mod delayer_queue;
mod delaying;
mod item;
pub mod metrics;
mod priority;
mod priority_backlog;
mod queue;
pub mod rate_limiters;
mod rate_limiting;
mod slot_index;
mod sync;
mod timers;
mod waiters;

pub use self::delaying::{DelayingQueue, MAX_DELAY};
pub use self::item::{DelayingHandle, QueueHandle, RateLimitedHandle, WorkItem};
pub use self::metrics::{MetricsConfig, MetricsProvider, PrometheusMetricsProvider};
pub use self::priority::{
    AddOpts, DEFAULT_MAX_WAIT, LOW_PRIORITY, PriorityQueue, PriorityQueueBuilder,
};
pub use self::queue::Queue;
pub use self::rate_limiters::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, RateLimiter, RateLimiterError, WithMaxWaitRateLimiter,
    default_controller_rate_limiter, default_item_based_rate_limiter,
};
pub use self::rate_limiting::RateLimitingQueue;
