//! [`Queue`]: client-go's basic work queue (ordered, deduplicating, never handing one item to two
//! workers at once).

use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Weak};

use crate::backlog::{Backlog, Fifo};
use crate::core::Core;
use crate::item::{QueueHandle, Ticket, WorkItem, sealed};
use crate::metrics::{MetricsConfig, QueueMetricHandles};

/// A work queue, as client-go's `workqueue.Interface`.
///
/// - Ordered: items are handed out in the order they were added.
/// - Deduplicating: an item added several times before it is handed out is handed out once.
/// - Exclusive: an item is never handed to two workers at once; added again while it is being
///   processed, it is handed out again after [`done`](Queue::done).
/// - After [`shut_down`](Queue::shut_down) adds are dropped, and [`get`](Queue::get) hands out
///   what is still queued, then returns `None`.
///
/// `Queue` is a handle: clone it to share one queue between producers and workers.
///
/// Items are compared by `Hash` and `Eq` and copied with `Clone` (once, when handed out): keys
/// that are cheap to clone (`Arc<str>`, or a small `Copy` struct) make the queue fastest. If the
/// item type's `Hash`, `Eq` or `Clone` panics, the panic reaches the caller and the queue stays
/// usable, but the item being handled may be lost.
///
/// ```
/// use ctrlkit_workqueue::Queue;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let queue = Queue::new();
/// queue.add("default/a");
/// queue.add("default/b");
/// queue.add("default/a"); // deduplicated
/// assert_eq!(queue.len(), 2);
///
/// queue.shut_down();
/// let mut seen = Vec::new();
/// while let Some(item) = queue.get().await {
///     seen.push(*item);
/// }
/// assert_eq!(seen, ["default/a", "default/b"]);
/// # }
/// ```
pub struct Queue<T: Clone + Eq + Hash + Send + 'static> {
    core: Arc<Core<T, Fifo>>,
}

impl<T: Clone + Eq + Hash + Send + 'static> Queue<T> {
    /// A queue without metrics.
    pub fn new() -> Self {
        Self {
            core: Arc::new(Core::new(Fifo::default(), None)),
        }
    }

    /// A queue that reports client-go's workqueue metrics.
    ///
    /// The unfinished-work gauges are refreshed by a task on the current Tokio runtime; created
    /// outside a runtime, the queue works and reports every other metric, and those two gauges
    /// stay at zero.
    pub fn with_metrics(config: MetricsConfig) -> Self {
        let core = Arc::new(new_core(Fifo::default(), Some(&config)));
        spawn_unfinished_work_updater(&core, &config);
        Self { core }
    }

    /// Adds `item` unless it is already waiting (dropped once the queue is shut down).
    pub fn add(&self, item: T) {
        self.core.add(item, (), false);
    }

    /// Like [`add`](Queue::add), for an item the caller keeps: it is cloned only when the queue
    /// does not hold it yet.
    ///
    /// A producer that re-adds keys it holds (a resync, a periodic sweep) mostly adds duplicates;
    /// with `add(key.clone())` each of them costs a clone and a drop (an allocation and a free
    /// for a `String`; two atomic writes, shared with every other holder, for an `Arc<str>`),
    /// and with `add_cloned(&key)` nothing.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use ctrlkit_workqueue::Queue;
    ///
    /// let key: Arc<str> = Arc::from("default/a");
    /// let queue = Queue::new();
    /// queue.add_cloned(&key); // the queue now holds a clone
    /// queue.add_cloned(&key); // deduplicated: not cloned
    /// assert_eq!(queue.len(), 1);
    /// assert_eq!(Arc::strong_count(&key), 2);
    /// ```
    pub fn add_cloned(&self, item: &T) {
        self.core.add(crate::core::Borrowed(item), (), false);
    }

    /// How many items are waiting to be handed out (an item re-added while it is being processed
    /// is not counted until it is done).
    pub fn len(&self) -> usize {
        self.core.len()
    }

    /// Whether no item is waiting to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for the next item. Returns `None` only when the queue is shut down and empty.
    ///
    /// Cancel-safe: dropping the future before it completes loses no item.
    pub async fn get(&self) -> Option<WorkItem<T, &Self>> {
        let (item, ticket) = self.core.get().await?;
        Some(WorkItem::new(item, ticket, self))
    }

    /// Marks `item` as processed, for client-go parity; dropping the [`WorkItem`] does the same.
    /// An item that is not being processed is ignored.
    pub fn done(&self, item: &T) {
        self.core.done_item(item);
    }

    /// Drops further adds and makes idle `get`s return `None`; cancels a drain in progress.
    pub fn shut_down(&self) {
        let _ = self.core.shut_down();
    }

    /// Shuts down like [`shut_down`](Queue::shut_down), then waits until every item handed out
    /// is done. A `shut_down` while it waits ends the wait.
    pub async fn shut_down_with_drain(&self) {
        self.core.shut_down_with_drain().await;
    }

    /// Whether the queue is shutting down.
    pub fn shutting_down(&self) -> bool {
        self.core.shutting_down()
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Default for Queue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            core: Arc::clone(&self.core),
        }
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("len", &self.len())
            .field("shutting_down", &self.shutting_down())
            .finish()
    }
}

impl<T: Clone + Eq + Hash + Send + 'static> sealed::Sealed for Queue<T> {}

impl<T: Clone + Eq + Hash + Send + 'static> QueueHandle<T> for Queue<T> {
    fn finish(&self, ticket: Ticket) {
        self.core.done(ticket);
    }
}

/// A core with the metric handles `config` asks for.
pub(crate) fn new_core<T, B>(backlog: B, config: Option<&MetricsConfig>) -> Core<T, B>
where
    T: Clone + Eq + Hash + Send + 'static,
    B: Backlog,
{
    let handles =
        config.map(|config| Arc::new(QueueMetricHandles::new(&*config.provider, &config.name)));
    Core::new(backlog, handles)
}

/// Refreshes the unfinished-work gauges of `core` every period until the queue shuts down or is
/// dropped, as client-go's `updateUnfinishedWorkLoop`.
pub(crate) fn spawn_unfinished_work_updater<T, B>(core: &Arc<Core<T, B>>, config: &MetricsConfig)
where
    T: Clone + Eq + Hash + Send + 'static,
    B: Backlog + 'static,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            queue = %config.name,
            "workqueue created outside a Tokio runtime: its unfinished-work gauges are not refreshed"
        );
        return;
    };
    let weak: Weak<Core<T, B>> = Arc::downgrade(core);
    let period = config.unfinished_work_update_period;
    // The first tick is one period after the queue was made, not after the task first runs.
    let start = tokio::time::Instant::now() + period;
    runtime.spawn(async move {
        let mut ticks = tokio::time::interval_at(start, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(core) = weak.upgrade() else {
                return;
            };
            if !core.update_unfinished_work() {
                return;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use std::hash::{Hash, Hasher};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

    use super::Queue;

    /// An item that counts how often it is cloned.
    #[derive(Debug)]
    struct Counted {
        key: u32,
        clones: Arc<AtomicUsize>,
    }

    impl Clone for Counted {
        fn clone(&self) -> Self {
            self.clones.fetch_add(1, Ordering::Relaxed);
            Self {
                key: self.key,
                clones: Arc::clone(&self.clones),
            }
        }
    }

    impl PartialEq for Counted {
        fn eq(&self, other: &Self) -> bool {
            self.key == other.key
        }
    }

    impl Eq for Counted {}

    impl Hash for Counted {
        fn hash<H: Hasher>(&self, state: &mut H) {
            self.key.hash(state);
        }
    }

    #[tokio::test]
    async fn add_cloned_clones_only_an_item_the_queue_does_not_hold() {
        let clones = Arc::new(AtomicUsize::new(0));
        let count = || clones.load(Ordering::Relaxed);
        let a = Counted {
            key: 1,
            clones: Arc::clone(&clones),
        };
        let queue = Queue::new();

        queue.add_cloned(&a);
        assert_eq!(count(), 1, "a new item is cloned into the queue");
        queue.add_cloned(&a);
        assert_eq!(count(), 1, "a waiting duplicate is not cloned");
        assert_eq!(queue.len(), 1);

        let item = queue.get().await.expect("queued");
        assert_eq!(count(), 2, "get hands out a clone");
        queue.add_cloned(&a);
        assert_eq!(count(), 2, "an item being processed is not cloned again");
        assert_eq!(queue.len(), 0, "not handed out while it is processed");
        drop(item);
        assert_eq!(queue.len(), 1, "handed out again after done");

        let item = queue.get().await.expect("re-queued");
        assert_eq!(item.key, 1);
        drop(item);
        queue.shut_down();
        let before = count();
        queue.add_cloned(&a);
        assert_eq!(count(), before, "adds after shutdown are dropped uncloned");
        assert!(queue.get().await.is_none());
    }

    /// Adds `keys`, then takes and finishes every item.
    async fn burst(queue: &Queue<u32>, keys: std::ops::Range<u32>) {
        for key in keys {
            queue.add(key);
        }
        while !queue.is_empty() {
            drop(queue.get().await);
        }
    }

    #[tokio::test]
    async fn a_drained_queue_keeps_its_tables_for_a_burst_of_the_same_size() {
        let queue = Queue::new();
        burst(&queue, 0..10_000).await;
        assert_eq!(
            queue.core.slot_count(),
            10_000,
            "kept after the first burst"
        );
        burst(&queue, 10_000..20_000).await;
        assert_eq!(queue.core.slot_count(), 10_000, "reused, not grown");
        burst(&queue, 0..2_600).await;
        assert_eq!(queue.core.slot_count(), 10_000, "a quarter or more: kept");
        burst(&queue, 0..2_400).await;
        assert_eq!(queue.core.slot_count(), 0, "under a quarter: given back");
        burst(&queue, 0..3).await;
        assert_eq!(queue.core.slot_count(), 3, "small tables are kept");
    }

    #[tokio::test]
    async fn a_done_item_added_again_takes_its_slot_back() {
        let queue = Queue::new();
        for key in ["a", "b"] {
            queue.add(key);
        }
        for _ in 0..2 {
            drop(queue.get().await);
        }
        assert_eq!(queue.core.free_list_len(), 2);

        // "a" takes its own slot back; it stays on the free list until popped.
        queue.add("a");
        assert_eq!(queue.core.slot_count(), 2);
        assert_eq!(queue.core.free_list_len(), 2);
        // "c" pops the free slot "b" had; "d" pops the one "a" took back, skips it, and
        // gets a new one.
        queue.add("c");
        queue.add("d");
        assert_eq!(queue.core.slot_count(), 3);
        assert_eq!(queue.core.free_list_len(), 0);
        assert_eq!(queue.len(), 3);

        let mut order = Vec::new();
        for _ in 0..3 {
            let item = queue.get().await.expect("queued");
            order.push(*item);
        }
        assert_eq!(order, ["a", "c", "d"]);
        // Each freed slot is listed once.
        assert_eq!(queue.core.free_list_len(), 3);
        queue.add("a");
        queue.add("a");
        assert_eq!(queue.len(), 1, "deduplicated in its taken-back slot");
        queue.shut_down();
        assert_eq!(queue.get().await.as_deref(), Some(&"a"));
        assert!(queue.get().await.is_none());
    }

    /// The real lock under contention (the model checkers swap in their own): producers and
    /// workers in tight loops on more runtime threads than the machine has cores.
    #[tokio::test(flavor = "multi_thread", worker_threads = 6)]
    async fn under_contention_no_item_is_handed_out_twice_at_once_and_no_add_is_lost() {
        const KEYS: usize = 500;
        const ROUNDS: u64 = 40;
        let queue: Queue<usize> = Queue::new();
        // Each producer bumps a key's version before adding it: a `get` that hands the key out
        // after an add sees that add's version or a later one.
        let versions: Arc<Vec<AtomicU64>> =
            Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
        let seen: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
        let in_flight: Arc<Vec<AtomicBool>> =
            Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
        let producers: Vec<_> = (0..4)
            .map(|_| {
                let queue = queue.clone();
                let versions = Arc::clone(&versions);
                tokio::spawn(async move {
                    for _ in 0..ROUNDS {
                        for key in 0..KEYS {
                            versions[key].fetch_add(1, Ordering::SeqCst);
                            queue.add(key);
                        }
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let queue = queue.clone();
                let (versions, seen, in_flight) = (
                    Arc::clone(&versions),
                    Arc::clone(&seen),
                    Arc::clone(&in_flight),
                );
                tokio::spawn(async move {
                    while let Some(item) = queue.get().await {
                        let key = *item;
                        assert!(
                            !in_flight[key].swap(true, Ordering::SeqCst),
                            "key {key} handed to two workers at once"
                        );
                        seen[key].fetch_max(versions[key].load(Ordering::SeqCst), Ordering::SeqCst);
                        in_flight[key].store(false, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for producer in producers {
            producer.await.expect("a producer panicked");
        }
        queue.shut_down_with_drain().await;
        for worker in workers {
            worker.await.expect("a worker panicked");
        }
        for key in 0..KEYS {
            assert_eq!(
                seen[key].load(Ordering::SeqCst),
                4 * ROUNDS,
                "key {key}: its last add was never handed out"
            );
        }
    }
}
