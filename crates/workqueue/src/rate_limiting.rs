//! [`RateLimitingQueue`]: a [`DelayingQueue`](crate::DelayingQueue) whose retries wait as a
//! [`RateLimiter`] says.

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use crate::backlog::Fifo;
use crate::delaying::Delayer;
use crate::metrics::MetricsConfig;
use crate::rate_limiters::{RateLimiter, default_controller_rate_limiter};

/// A work queue with rate-limited retries, as client-go's `RateLimitingInterface`: the queue of
/// every controller.
///
/// Workers take items with [`get`](RateLimitingQueue::get) and end each one through its
/// [`WorkItem`](crate::WorkItem) guard: [`forget`](crate::WorkItem::forget) on success (the limiter stops counting the
/// item's failures), [`requeue_rate_limited`](crate::WorkItem::requeue_rate_limited) on failure, or
/// [`requeue_after`](crate::WorkItem::requeue_after); every path marks the item done.
///
/// ```
/// use std::time::Duration;
/// use ctrlkit_workqueue::{ItemExponentialFailureRateLimiter, RateLimitingQueue};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000));
/// let queue = RateLimitingQueue::new(limiter);
/// queue.add("default/foo");
///
/// let item = queue.get().await.unwrap();
/// item.requeue_rate_limited(); // it failed: back in 5 ms
/// assert_eq!(queue.num_requeues(&"default/foo"), 1);
///
/// let start = tokio::time::Instant::now();
/// let item = queue.get().await.unwrap();
/// assert_eq!(start.elapsed(), Duration::from_millis(5));
/// item.forget(); // it worked
/// assert_eq!(queue.num_requeues(&"default/foo"), 0);
/// # }
/// ```
pub struct RateLimitingQueue<T: Clone + Eq + Hash + Send + 'static> {
    inner: Arc<Delayer<T, Fifo>>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> RateLimitingQueue<T> {
    /// A queue with client-go's default controller rate limiter
    /// ([`default_controller_rate_limiter`]).
    pub fn with_default_rate_limiter() -> Self {
        Self::new(default_controller_rate_limiter())
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> RateLimitingQueue<T> {
    /// A queue whose retries wait as `limiter` says, without metrics.
    pub fn new(limiter: impl RateLimiter<T> + 'static) -> Self {
        Self {
            inner: Delayer::new(Fifo::default(), None),
            limiter: Arc::new(limiter),
        }
    }

    /// A queue whose retries wait as `limiter` says, reporting client-go's workqueue metrics.
    pub fn with_metrics(limiter: impl RateLimiter<T> + 'static, config: MetricsConfig) -> Self {
        Self {
            inner: Delayer::new(Fifo::default(), Some(&config)),
            limiter: Arc::new(limiter),
        }
    }

    /// Adds `item` unless it is already waiting to be handed out.
    pub fn add(&self, item: T) {
        self.inner.core.add(item, (), false);
    }

    /// Like [`add`](RateLimitingQueue::add), for an item the caller keeps: it is cloned only when
    /// the queue does not hold it yet (see [`Queue::add_cloned`](crate::Queue::add_cloned)).
    pub fn add_cloned(&self, item: &T) {
        self.inner.core.add(crate::core::Borrowed(item), (), false);
    }

    /// Adds `item` after `delay` (at once for zero); for an item already waiting, the earlier
    /// ready time wins.
    pub fn add_after(&self, item: T, delay: Duration) {
        Delayer::add_after(&self.inner, item, delay, (), false);
    }

    /// Adds `item` after the wait its rate limiter gives (counting a failure).
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.limiter.when(&item);
        Delayer::add_after(&self.inner, item, delay, (), false);
    }

    /// Tells the rate limiter to stop tracking `item`; it does not remove the item from the queue.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` has been rate-limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

crate::delayer_queue::delayer_queue_methods!(RateLimitingQueue, rate_limited);

impl<T: Clone + Eq + Hash + Send + 'static> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            limiter: Arc::clone(&self.limiter),
        }
    }
}
