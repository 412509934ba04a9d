//! [`RateLimitingQueue`]: a [`DelayingQueue`](crate::DelayingQueue) whose retries wait as a
//! [`RateLimiter`] says.

use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use crate::backlog::Fifo;
use crate::delaying::Delayer;
use crate::item::{DelayingHandle, QueueHandle, RateLimitedHandle, Ticket, WorkItem, sealed};
use crate::metrics::MetricsConfig;
use crate::rate_limiters::{RateLimiter, default_controller_rate_limiter};

/// A work queue with rate-limited retries, as client-go's `RateLimitingInterface`: the queue of
/// every controller.
///
/// Workers take items with [`get`](RateLimitingQueue::get) and end each one through its
/// [`WorkItem`] guard: [`forget`](WorkItem::forget) on success (the limiter stops counting the
/// item's failures), [`requeue_rate_limited`](WorkItem::requeue_rate_limited) on failure, or
/// [`requeue_after`](WorkItem::requeue_after); every path marks the item done.
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

    /// How many items are ready to be handed out.
    pub fn len(&self) -> usize {
        self.inner.core.len()
    }

    /// Whether no item is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many items wait for a delay to pass.
    pub fn waiting_len(&self) -> usize {
        self.inner.core.waiting_len()
    }

    /// Waits for the next item; `None` only when shut down and empty. Cancel-safe.
    pub async fn get(&self) -> Option<WorkItem<T, &Self>> {
        Delayer::ensure_timer(&self.inner);
        let (item, ticket) = self.inner.core.get().await?;
        Some(WorkItem::new(item, ticket, self))
    }

    /// Marks `item` as processed (dropping the [`WorkItem`] does the same).
    pub fn done(&self, item: &T) {
        self.inner.core.done_item(item);
    }

    /// Drops further adds and waiting items, stops the timer, makes idle `get`s return `None`.
    pub fn shut_down(&self) {
        self.inner.shut_down();
    }

    /// Shuts down, then waits until every item handed out is done.
    pub async fn shut_down_with_drain(&self) {
        self.inner.shut_down_with_drain().await;
    }

    /// Whether the queue is shutting down.
    pub fn shutting_down(&self) -> bool {
        self.inner.core.shutting_down()
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            limiter: Arc::clone(&self.limiter),
        }
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> fmt::Debug for RateLimitingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueue")
            .field("len", &self.len())
            .field("waiting", &self.waiting_len())
            .field("shutting_down", &self.shutting_down())
            .finish()
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> sealed::Sealed for RateLimitingQueue<T> {}

impl<T: Clone + Eq + Hash + Send + 'static> QueueHandle<T> for RateLimitingQueue<T> {
    fn finish(&self, ticket: Ticket) {
        self.inner.core.done(ticket);
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> DelayingHandle<T> for RateLimitingQueue<T> {
    fn requeue_after(&self, item: T, delay: Duration) {
        self.add_after(item, delay);
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> RateLimitedHandle<T> for RateLimitingQueue<T> {
    fn requeue_rate_limited(&self, item: T) {
        self.add_rate_limited(item);
    }
    fn forget(&self, item: &T) {
        RateLimitingQueue::forget(self, item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        RateLimitingQueue::num_requeues(self, item)
    }
}
