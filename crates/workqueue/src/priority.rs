//! [`PriorityQueue`]: controller-runtime's priority work queue, with aging so that low-priority
//! items cannot starve.

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use crate::delaying::Delayer;
use crate::item::{QueueHandle, WorkItem};
use crate::metrics::MetricsConfig;
use crate::priority_backlog::PriorityBacklog;
use crate::rate_limiters::{ItemExponentialFailureRateLimiter, RateLimiter};

/// The priority controller-runtime gives to events of an informer's initial list, so that real
/// changes go first after a restart.
pub const LOW_PRIORITY: i32 = -100;

/// How long an item may be ready before it overtakes every item that became ready after it,
/// whatever their priorities (see [`PriorityQueueBuilder::max_wait`]).
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(60);

/// How to add an item to a [`PriorityQueue`], as controller-runtime's `AddOpts`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddOpts {
    /// Higher is handed out first; 0 by default.
    pub priority: i32,
    /// Make the item ready only after this delay.
    pub after: Duration,
    /// Ask the rate limiter for a delay too (counting a failure); the shorter of a non-zero
    /// `after` and the limiter's wait is used, as controller-runtime.
    pub rate_limited: bool,
}

impl AddOpts {
    /// Options with `priority` and nothing else.
    pub fn priority(priority: i32) -> Self {
        Self {
            priority,
            ..Self::default()
        }
    }
}

/// A rate-limiting work queue that hands out the highest priority first, FIFO within a priority,
/// as controller-runtime's `priorityqueue` (its default since v0.23).
///
/// Everything [`RateLimitingQueue`](crate::RateLimitingQueue) guarantees holds: deduplication, no
/// item handed to two workers at once, drain. Re-adding a waiting item keeps the higher priority
/// and the earlier ready time; a raised priority moves the item to the back of its new level. A
/// plain add of an item waiting for a delay makes it ready at once.
///
/// Beyond controller-runtime, items age: once an item has been ready for
/// [`max_wait`](PriorityQueueBuilder::max_wait) (default [`DEFAULT_MAX_WAIT`]) it is handed out
/// before every item that became ready after it. Under a steady stream of high-priority changes,
/// a low-priority item therefore waits at most `max_wait` plus the processing of the items that
/// were ready before it, instead of forever.
///
/// Where controller-runtime differs from client-go, this queue keeps client-go's behaviour: after
/// shutdown, `get` still hands out ready items before returning `None`; an item re-added while it
/// is processed is not counted by `len` until it is done.
///
/// ```
/// use ctrlkit_workqueue::{AddOpts, LOW_PRIORITY, PriorityQueue};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let queue = PriorityQueue::builder().build();
/// queue.add_with_opts("from-initial-list", AddOpts::priority(LOW_PRIORITY));
/// queue.add("changed");
/// assert_eq!(*queue.get().await.unwrap(), "changed");
/// assert_eq!(*queue.get().await.unwrap(), "from-initial-list");
/// # }
/// ```
pub struct PriorityQueue<T: Clone + Eq + Hash + Send + 'static> {
    inner: Arc<Delayer<T, PriorityBacklog>>,
    limiter: Arc<dyn RateLimiter<T>>,
}

/// Builds a [`PriorityQueue`].
#[must_use]
pub struct PriorityQueueBuilder<T> {
    limiter: Option<Arc<dyn RateLimiter<T>>>,
    metrics: Option<MetricsConfig>,
    max_wait: Duration,
}

impl<T: Clone + Eq + Hash + Send + 'static> PriorityQueueBuilder<T> {
    /// The rate limiter of rate-limited adds; controller-runtime's default is exponential from
    /// 5 ms to 1000 s.
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.limiter = Some(Arc::new(limiter));
        self
    }

    /// Report client-go's workqueue metrics.
    pub fn metrics(mut self, config: MetricsConfig) -> Self {
        self.metrics = Some(config);
        self
    }

    /// The aging bound: an item ready this long goes before every item that became ready after
    /// it. `Duration::MAX` turns aging off (strict priorities, as controller-runtime).
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// The queue.
    pub fn build(self) -> PriorityQueue<T> {
        let limiter = self.limiter.unwrap_or_else(|| {
            Arc::new(ItemExponentialFailureRateLimiter::new(
                Duration::from_millis(5),
                Duration::from_secs(1000),
            ))
        });
        PriorityQueue {
            inner: Delayer::new(PriorityBacklog::new(self.max_wait), self.metrics.as_ref()),
            limiter,
        }
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> PriorityQueue<T> {
    /// A builder with controller-runtime's defaults and aging after [`DEFAULT_MAX_WAIT`].
    pub fn builder() -> PriorityQueueBuilder<T> {
        PriorityQueueBuilder {
            limiter: None,
            metrics: None,
            max_wait: DEFAULT_MAX_WAIT,
        }
    }

    /// Adds `item` at priority 0.
    pub fn add(&self, item: T) {
        self.add_with_opts(item, AddOpts::default());
    }

    /// Like [`add`](PriorityQueue::add), for an item the caller keeps: it is cloned only when
    /// the queue does not hold it yet (see [`Queue::add_cloned`](crate::Queue::add_cloned)).
    pub fn add_cloned(&self, item: &T) {
        self.inner.core.add(crate::core::Borrowed(item), 0, true);
    }

    /// Adds `item` with a priority, a delay and/or a rate-limited delay.
    pub fn add_with_opts(&self, item: T, opts: AddOpts) {
        let mut delay = opts.after;
        if opts.rate_limited {
            let limited = self.limiter.when(&item);
            delay = if delay.is_zero() {
                limited
            } else {
                delay.min(limited)
            };
        }
        if delay.is_zero() {
            // A plain add makes an item waiting for a delay ready at once.
            self.inner.core.add(item, opts.priority, true);
        } else {
            // A delayed add of an item already ready leaves it ready.
            Delayer::add_after(&self.inner, item, delay, opts.priority, true);
        }
    }

    /// Adds `item` at priority 0 after `delay`.
    pub fn add_after(&self, item: T, delay: Duration) {
        self.add_with_opts(
            item,
            AddOpts {
                after: delay,
                ..AddOpts::default()
            },
        );
    }

    /// Adds `item` at priority 0 after its rate limiter's wait.
    pub fn add_rate_limited(&self, item: T) {
        self.add_with_opts(
            item,
            AddOpts {
                rate_limited: true,
                ..AddOpts::default()
            },
        );
    }

    /// Tells the rate limiter to stop tracking `item`.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` has been rate-limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

crate::delayer_queue::delayer_queue_methods!(PriorityQueue, rate_limited);

impl<T, Q> WorkItem<T, Q>
where
    T: Clone + Eq + Hash + Send + 'static,
    Q: QueueHandle<T> + Borrow<PriorityQueue<T>>,
{
    /// The item comes back as `opts` say, and processing ends.
    pub fn requeue_with_opts(self, opts: AddOpts) {
        self.queue()
            .borrow()
            .add_with_opts(self.item().clone(), opts);
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Clone for PriorityQueue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            limiter: Arc::clone(&self.limiter),
        }
    }
}
