//! [`DelayingQueue`]: a [`Queue`](crate::Queue) that can add an item after a delay, with an exact
//! timer per ready time (no periodic polling).

use std::collections::BTreeMap;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backlog::{Backlog, Fifo};
use crate::core::Core;
use crate::item::{QueueHandle, WorkItem, sealed};
use crate::metrics::MetricsConfig;
use crate::queue::{new_core, spawn_unfinished_work_updater};
use crate::sync::{HashMap, Mutex, lock};

/// The longest delay a queue honours; longer ones are shortened to it. About ten years: far
/// beyond any sensible retry, and far from overflowing the clock.
pub const MAX_DELAY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// Items waiting for their ready time, ordered by it.
struct Waiting<T, R> {
    by_time: BTreeMap<(Instant, u64), T>,
    index: HashMap<T, (Instant, u64, R)>,
    next_seq: u64,
}

/// A queue core plus the items waiting to enter it; shared by [`DelayingQueue`],
/// [`RateLimitingQueue`](crate::RateLimitingQueue) and [`PriorityQueue`](crate::PriorityQueue).
pub(crate) struct Delayer<T: Clone + Eq + Hash + Send + 'static, B: Backlog<T>> {
    pub(crate) core: Arc<Core<T, B>>,
    waiting: Mutex<Waiting<T, B::Rank>>,
    /// Wakes the timer task: a new earliest ready time, or shutdown.
    wake_timer: Arc<Notify>,
    timer_started: AtomicBool,
}

impl<T, B> Delayer<T, B>
where
    T: Clone + Eq + Hash + Send + 'static,
    B: Backlog<T> + 'static,
{
    pub(crate) fn new(backlog: B, metrics: Option<&MetricsConfig>) -> Arc<Self> {
        let core = Arc::new(new_core(backlog, metrics));
        if let Some(config) = metrics {
            spawn_unfinished_work_updater(&core, config);
        }
        let delayer = Arc::new(Self {
            core,
            waiting: Mutex::new(Waiting {
                by_time: BTreeMap::new(),
                index: HashMap::default(),
                next_seq: 0,
            }),
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

    /// Adds `item` once `delay` has passed; at once when `delay` is zero. For an item already
    /// waiting, the earlier ready time wins and the ranks merge.
    pub(crate) fn add_after(this: &Arc<Self>, item: T, delay: Duration, rank: B::Rank) {
        if this.core.shutting_down() {
            return;
        }
        if let Some(handles) = this.core.metric_handles() {
            handles.retry();
        }
        if delay.is_zero() {
            this.core.add(item, rank);
            return;
        }
        Self::ensure_timer(this);
        let ready_at = Instant::now() + delay.min(MAX_DELAY);
        let new_earliest = {
            let mut waiting = lock(&this.waiting);
            let waiting = &mut *waiting;
            let earliest = waiting.by_time.keys().next().map(|(at, _)| *at);
            match waiting.index.get_mut(&item) {
                Some((at, seq, pending)) => {
                    *pending = B::merge(*pending, rank);
                    if ready_at < *at {
                        if let Some(stored) = waiting.by_time.remove(&(*at, *seq)) {
                            waiting.by_time.insert((ready_at, *seq), stored);
                        }
                        *at = ready_at;
                    }
                }
                None => {
                    let seq = waiting.next_seq;
                    waiting.next_seq += 1;
                    waiting.index.insert(item.clone(), (ready_at, seq, rank));
                    waiting.by_time.insert((ready_at, seq), item);
                }
            }
            earliest.is_none_or(|earliest| ready_at < earliest)
        };
        if new_earliest {
            this.wake_timer.notify_one();
        }
    }

    /// Removes `item` from the items waiting for a delay; returns the rank it waited with.
    pub(crate) fn cancel_wait(&self, item: &T) -> Option<B::Rank> {
        let mut waiting = lock(&self.waiting);
        let (at, seq, rank) = waiting.index.remove(item)?;
        waiting.by_time.remove(&(at, seq));
        Some(rank)
    }

    /// Moves every item whose ready time has come into the queue, in ready-time order; returns the
    /// next ready time.
    fn promote_due(&self, now: Instant) -> Option<Instant> {
        let (due, next) = {
            let mut waiting = lock(&self.waiting);
            let mut due = Vec::new();
            while let Some(entry) = waiting.by_time.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                let item = entry.remove();
                let rank = waiting.index.remove(&item).map(|(_, _, rank)| rank);
                due.push((item, rank.unwrap_or_default()));
            }
            (due, waiting.by_time.keys().next().map(|(at, _)| *at))
        };
        for (item, rank) in due {
            self.core.add(item, rank);
        }
        next
    }

    /// How many items wait for their ready time.
    pub(crate) fn waiting_len(&self) -> usize {
        lock(&self.waiting).by_time.len()
    }

    /// Shuts the queue down and stops the timer; waiting items are dropped.
    pub(crate) fn shut_down(&self) {
        self.core.shut_down();
        self.stop_timer();
    }

    pub(crate) fn stop_timer(&self) {
        {
            let mut waiting = lock(&self.waiting);
            waiting.by_time.clear();
            waiting.index.clear();
        }
        self.wake_timer.notify_one();
    }
}

impl<T: Clone + Eq + Hash + Send + 'static, B: Backlog<T>> Drop for Delayer<T, B> {
    fn drop(&mut self) {
        // Let the timer task see that the queue is gone.
        self.wake_timer.notify_one();
    }
}

/// The timer task: sleeps until the earliest ready time (or a notification), promotes what is
/// due, and ends when the queue shuts down or is dropped.
async fn run_timer<T, B>(delayer: Weak<Delayer<T, B>>, wake: Arc<Notify>)
where
    T: Clone + Eq + Hash + Send + 'static,
    B: Backlog<T> + 'static,
{
    loop {
        let next = {
            let Some(delayer) = delayer.upgrade() else {
                return;
            };
            if delayer.core.shutting_down() {
                return;
            }
            delayer.promote_due(Instant::now())
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
    inner: Arc<Delayer<T, Fifo<T>>>,
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
        self.inner.core.add(item, ());
    }

    /// Adds `item` after `delay` (at once for a zero delay). For an item already waiting for its
    /// ready time, the earlier time wins. Delays over [`MAX_DELAY`] are shortened to it.
    pub fn add_after(&self, item: T, delay: Duration) {
        Delayer::add_after(&self.inner, item, delay, ());
    }

    /// How many items are ready to be handed out (not counting those waiting for a delay).
    pub fn len(&self) -> usize {
        self.inner.core.len()
    }

    /// Whether no item is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many items wait for their delay to pass.
    pub fn waiting_len(&self) -> usize {
        self.inner.waiting_len()
    }

    /// Waits for the next item; `None` only when shut down and empty. Cancel-safe.
    pub async fn get(&self) -> Option<WorkItem<T, Self>> {
        Delayer::ensure_timer(&self.inner);
        let item = self.inner.core.get().await?;
        Some(WorkItem::new(item, self.clone()))
    }

    /// Marks `item` as processed (dropping the [`WorkItem`] does the same).
    pub fn done(&self, item: &T) {
        self.inner.core.done(item);
    }

    /// Drops further adds and the items waiting for a delay, stops the timer, and makes idle
    /// `get`s return `None`.
    pub fn shut_down(&self) {
        self.inner.shut_down();
    }

    /// Shuts down, then waits until every item handed out is done.
    pub async fn shut_down_with_drain(&self) {
        let drain = self.inner.core.shut_down_with_drain();
        self.inner.stop_timer();
        drain.await;
    }

    /// Whether the queue is shutting down.
    pub fn shutting_down(&self) -> bool {
        self.inner.core.shutting_down()
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> WorkItem<T, DelayingQueue<T>> {
    /// Ends processing and adds the item again after `delay`.
    pub fn requeue_after(self, delay: Duration) {
        self.queue().add_after(self.item().clone(), delay);
    }
}

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

impl<T: Clone + Eq + Hash + Send + 'static> fmt::Debug for DelayingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayingQueue")
            .field("len", &self.len())
            .field("waiting", &self.waiting_len())
            .field("shutting_down", &self.shutting_down())
            .finish()
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> sealed::Sealed for DelayingQueue<T> {}

impl<T: Clone + Eq + Hash + Send + 'static> QueueHandle<T> for DelayingQueue<T> {
    fn finish(&self, item: &T) {
        self.inner.core.done(item);
    }
}
