//! [`DelayingQueue`]: a [`Queue`](crate::Queue) that can add an item after a delay, with an exact
//! timer per ready time (no periodic polling).

use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backlog::{Backlog, Fifo};
use crate::core::Core;
use crate::metrics::MetricsConfig;
use crate::queue::{new_core, spawn_unfinished_work_updater};

pub use crate::core::MAX_DELAY;

/// A queue core and the task that makes delayed items ready on time; shared by
/// [`DelayingQueue`], [`RateLimitingQueue`](crate::RateLimitingQueue) and
/// [`PriorityQueue`](crate::PriorityQueue).
pub(crate) struct Delayer<T: Clone + Eq + Hash + Send + 'static, B: Backlog> {
    pub(crate) core: Arc<Core<T, B>>,
    /// Wakes the timer task: a new earliest ready time, or shutdown.
    wake_timer: Arc<Notify>,
    timer_started: AtomicBool,
}

impl<T, B> Delayer<T, B>
where
    T: Clone + Eq + Hash + Send + 'static,
    B: Backlog + 'static,
{
    pub(crate) fn new(backlog: B, metrics: Option<&MetricsConfig>) -> Arc<Self> {
        let core = Arc::new(new_core(backlog, metrics));
        if let Some(config) = metrics {
            spawn_unfinished_work_updater(&core, config);
        }
        let delayer = Arc::new(Self {
            core,
            wake_timer: Arc::new(Notify::new()),
            timer_started: AtomicBool::new(false),
        });
        Self::ensure_timer(&delayer);
        delayer
    }

    /// Starts the timer task if it is not running yet and a Tokio runtime is at hand. A queue made
    /// outside a runtime starts its timer at its first use inside one.
    pub(crate) fn ensure_timer(this: &Arc<Self>) {
        if this.timer_started.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if this.timer_started.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(this);
        let wake = Arc::clone(&this.wake_timer);
        runtime.spawn(run_timer(weak, wake));
    }

    /// Adds `item` once `delay` has passed (at once when it is zero). For an item already waiting,
    /// the earlier ready time wins and the ranks merge; with `ready_wins`, an item already ready
    /// stays ready.
    pub(crate) fn add_after(
        this: &Arc<Self>,
        item: T,
        delay: Duration,
        rank: B::Rank,
        ready_wins: bool,
    ) {
        if !delay.is_zero() {
            Self::ensure_timer(this);
        }
        if this.core.add_after(item, delay, rank, ready_wins) {
            this.wake_timer.notify_one();
        }
    }

    /// Shuts the queue down, dropping waiting items, and stops the timer.
    pub(crate) fn shut_down(&self) {
        let _ = self.core.shut_down();
        self.wake_timer.notify_one();
    }

    /// Shuts down, stops the timer, and waits until every item handed out is done.
    pub(crate) async fn shut_down_with_drain(&self) {
        let drain = self.core.shut_down_with_drain();
        self.wake_timer.notify_one();
        drain.await;
    }
}

impl<T: Clone + Eq + Hash + Send + 'static, B: Backlog> Drop for Delayer<T, B> {
    fn drop(&mut self) {
        // Let the timer task see that the queue is gone.
        self.wake_timer.notify_one();
    }
}

/// The timer task: sleeps until the earliest ready time (or a notification), makes what is due
/// ready, and ends when the queue shuts down or is dropped.
async fn run_timer<T, B>(delayer: Weak<Delayer<T, B>>, wake: Arc<Notify>)
where
    T: Clone + Eq + Hash + Send + 'static,
    B: Backlog + 'static,
{
    loop {
        let next = {
            let Some(delayer) = delayer.upgrade() else {
                return;
            };
            if delayer.core.shutting_down() {
                return;
            }
            delayer.core.promote_due(Instant::now())
        };
        // A notification sent since the promotion above is stored as a permit, so it is not lost.
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

/// A work queue that can also add an item after a delay, as client-go's `DelayingInterface`.
///
/// For an item already waiting, the earlier ready time wins. Each ready time has an exact timer on
/// the Tokio clock, so tests on a paused clock are deterministic. Waiting items do not count in
/// [`len`](DelayingQueue::len), and are dropped at shutdown.
///
/// ```
/// use std::time::Duration;
/// use ctrlkit_workqueue::DelayingQueue;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let queue = DelayingQueue::new();
/// queue.add_after("default/foo", Duration::from_millis(50));
/// assert_eq!(queue.len(), 0);
/// tokio::time::sleep(Duration::from_millis(60)).await;
/// assert_eq!(queue.len(), 1);
/// # }
/// ```
pub struct DelayingQueue<T: Clone + Eq + Hash + Send + 'static> {
    inner: Arc<Delayer<T, Fifo>>,
}

impl<T: Clone + Eq + Hash + Send + 'static> DelayingQueue<T> {
    /// A delaying queue without metrics. Its timer runs on the current Tokio runtime (or, made
    /// outside one, on the runtime of its first use inside one).
    pub fn new() -> Self {
        Self {
            inner: Delayer::new(Fifo::default(), None),
        }
    }

    /// A delaying queue that reports client-go's workqueue metrics.
    pub fn with_metrics(config: MetricsConfig) -> Self {
        Self {
            inner: Delayer::new(Fifo::default(), Some(&config)),
        }
    }

    /// Adds `item` unless it is already waiting to be handed out.
    pub fn add(&self, item: T) {
        self.inner.core.add(item, (), false);
    }

    /// Like [`add`](DelayingQueue::add), for an item the caller keeps: it is cloned only when
    /// the queue does not hold it yet (see [`Queue::add_cloned`](crate::Queue::add_cloned)).
    pub fn add_cloned(&self, item: &T) {
        self.inner.core.add(crate::core::Borrowed(item), (), false);
    }

    /// Adds `item` after `delay` (at once for a zero delay). For an item already waiting for its
    /// ready time, the earlier time wins. Delays over [`MAX_DELAY`] are shortened to it.
    pub fn add_after(&self, item: T, delay: Duration) {
        Delayer::add_after(&self.inner, item, delay, (), false);
    }
}

crate::delayer_queue::delayer_queue_methods!(DelayingQueue);

impl<T: Clone + Eq + Hash + Send + 'static> Default for DelayingQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Clone for DelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}
