//! The state machine every queue shares: the backlog of ready items, the dirty and processing
//! bookkeeping, shutdown and drain, and the tasks parked in `get` or in a drain.
//!
//! It is client-go's `Typed` queue with one map instead of two sets: an item has an entry while it
//! is dirty (waiting to be handed out) or processing (handed out, not yet done), or both (added
//! again while being processed, to be handed out again after `done`).

use std::collections::hash_map::Entry as MapEntry;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::time::Instant;

use crate::backlog::Backlog;
use crate::metrics::{QueueMetricHandles, QueueMetrics};
use crate::sync::{HashMap, Mutex, lock};
use crate::waiters::Waiters;

/// Where one item stands.
struct ItemState<R> {
    /// Waiting to be handed out (in the backlog, or parked until its processing is done).
    dirty: bool,
    /// Handed out by `get` and not done yet.
    processing: bool,
    /// The merged rank of the adds made while processing, used when it goes back to the backlog.
    pending_rank: Option<R>,
}

struct State<T, B: Backlog<T>> {
    backlog: B,
    items: HashMap<T, ItemState<B::Rank>>,
    processing: usize,
    shutting_down: bool,
    drain: bool,
    getters: Waiters,
    drainers: Waiters,
    metrics: Option<QueueMetrics<T>>,
}

/// The shared core of a queue; the public queues are handles around an `Arc` of it.
pub(crate) struct Core<T, B: Backlog<T>> {
    state: Mutex<State<T, B>>,
    handles: Option<Arc<QueueMetricHandles>>,
}

impl<T, B> Core<T, B>
where
    T: Clone + Eq + Hash + Send,
    B: Backlog<T>,
{
    pub(crate) fn new(backlog: B, handles: Option<Arc<QueueMetricHandles>>) -> Self {
        let metrics = handles.clone().map(QueueMetrics::new);
        Self {
            state: Mutex::new(State {
                backlog,
                items: HashMap::default(),
                processing: 0,
                shutting_down: false,
                drain: false,
                getters: Waiters::default(),
                drainers: Waiters::default(),
                metrics,
            }),
            handles,
        }
    }

    /// The metric handles, if the queue reports metrics.
    pub(crate) fn metric_handles(&self) -> Option<&Arc<QueueMetricHandles>> {
        self.handles.as_ref()
    }

    /// The time, read only when metrics need it.
    fn clock(state: &State<T, B>) -> Option<Instant> {
        state.metrics.is_some().then(Instant::now)
    }

    /// Marks `item` as needing processing. Returns whether the queue took it (it does not once
    /// shut down).
    pub(crate) fn add(&self, item: T, rank: B::Rank) -> bool {
        let waker;
        {
            let mut guard = lock(&self.state);
            let state = &mut *guard;
            if state.shutting_down {
                return false;
            }
            let now = Self::clock(state);
            match state.items.entry(item) {
                MapEntry::Occupied(mut entry) => {
                    let item_state = entry.get_mut();
                    if item_state.dirty {
                        // Already waiting: deduplicate, only the rank may improve.
                        if item_state.processing {
                            item_state.pending_rank = Some(match item_state.pending_rank {
                                Some(pending) => B::merge(pending, rank),
                                None => rank,
                            });
                        } else {
                            state.backlog.touch(entry.key(), rank);
                        }
                        return true;
                    }
                    // Being processed: hand it out again once it is done.
                    item_state.dirty = true;
                    item_state.pending_rank = Some(rank);
                    if let (Some(metrics), Some(now)) = (state.metrics.as_mut(), now) {
                        metrics.add(entry.key(), now);
                    }
                    return true;
                }
                MapEntry::Vacant(entry) => {
                    let item = entry.key().clone();
                    entry.insert(ItemState {
                        dirty: true,
                        processing: false,
                        pending_rank: None,
                    });
                    if let (Some(metrics), Some(now)) = (state.metrics.as_mut(), now) {
                        metrics.add(&item, now);
                    }
                    state.backlog.push(item, rank);
                    waker = state.getters.take_one();
                }
            }
        }
        if let Some(waker) = waker {
            waker.wake();
        }
        true
    }

    /// If `item` is ready and waiting to be handed out, merges `rank` into it and returns `true`.
    pub(crate) fn touch_if_ready(&self, item: &T, rank: B::Rank) -> bool {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        match state.items.get(item) {
            Some(item_state) if item_state.dirty && !item_state.processing => {
                state.backlog.touch(item, rank);
                true
            }
            _ => false,
        }
    }

    /// How many items are ready to be handed out.
    pub(crate) fn len(&self) -> usize {
        lock(&self.state).backlog.len()
    }

    pub(crate) fn shutting_down(&self) -> bool {
        lock(&self.state).shutting_down
    }

    /// Takes the next ready item, if any, moving it to the processing set.
    fn take_ready(state: &mut State<T, B>) -> Option<T> {
        let item = state.backlog.pop()?;
        let now = Self::clock(state);
        match state.items.get_mut(&item) {
            Some(item_state) => {
                item_state.dirty = false;
                item_state.processing = true;
            }
            None => {
                // Not reachable while the core's invariants hold; recover rather than lose it.
                state.items.insert(
                    item.clone(),
                    ItemState {
                        dirty: false,
                        processing: true,
                        pending_rank: None,
                    },
                );
            }
        }
        state.processing += 1;
        if let (Some(metrics), Some(now)) = (state.metrics.as_mut(), now) {
            metrics.get(&item, now);
        }
        Some(item)
    }

    /// Waits for the next item; `None` once the queue is shut down and has nothing ready.
    pub(crate) fn get(&self) -> Get<'_, T, B> {
        Get {
            core: self,
            slot: None,
        }
    }

    /// Marks `item` as processed. An item that is not being processed is ignored (client-go would
    /// queue a dirty one a second time).
    pub(crate) fn done(&self, item: &T) {
        let wakers: Vec<Waker>;
        {
            let mut guard = lock(&self.state);
            let state = &mut *guard;
            let now = Self::clock(state);
            let Some(item_state) = state.items.get_mut(item) else {
                return;
            };
            if !item_state.processing {
                return;
            }
            item_state.processing = false;
            state.processing -= 1;
            if let (Some(metrics), Some(now)) = (state.metrics.as_mut(), now) {
                metrics.done(item, now);
            }
            if item_state.dirty {
                let rank = item_state.pending_rank.take().unwrap_or_default();
                state.backlog.push(item.clone(), rank);
                wakers = state.getters.take_one().into_iter().collect();
            } else {
                state.items.remove(item);
                wakers = if state.processing == 0 {
                    state.drainers.take_all()
                } else {
                    Vec::new()
                };
            }
        }
        for waker in wakers {
            waker.wake();
        }
    }

    /// Stops accepting adds and wakes every waiter; cancels a drain in progress.
    pub(crate) fn shut_down(&self) {
        self.begin_shutdown(false);
    }

    fn begin_shutdown(&self, drain: bool) {
        let (getters, drainers) = {
            let mut state = lock(&self.state);
            state.shutting_down = true;
            state.drain = drain;
            let drainers = if drain {
                Vec::new()
            } else {
                state.drainers.take_all()
            };
            (state.getters.take_all(), drainers)
        };
        for waker in getters.into_iter().chain(drainers) {
            waker.wake();
        }
    }

    /// Shuts down, then waits until no item is being processed (or `shut_down` cancels the wait).
    pub(crate) fn shut_down_with_drain(&self) -> Drain<'_, T, B> {
        self.begin_shutdown(true);
        Drain {
            core: self,
            slot: None,
        }
    }

    /// Refreshes the unfinished-work gauges; returns `false` once the queue is shut down.
    pub(crate) fn update_unfinished_work(&self) -> bool {
        let state = lock(&self.state);
        if state.shutting_down {
            return false;
        }
        if let Some(metrics) = state.metrics.as_ref() {
            metrics.update_unfinished_work(Instant::now());
        }
        true
    }
}

/// The future of [`Core::get`].
pub(crate) struct Get<'a, T, B: Backlog<T>>
where
    T: Clone + Eq + Hash + Send,
{
    core: &'a Core<T, B>,
    slot: Option<u64>,
}

impl<T, B> Future for Get<'_, T, B>
where
    T: Clone + Eq + Hash + Send,
    B: Backlog<T>,
{
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        let mut state = lock(&this.core.state);
        if let Some(item) = Core::take_ready(&mut state) {
            if let Some(id) = this.slot.take() {
                state.getters.leave(id);
            }
            return Poll::Ready(Some(item));
        }
        if state.shutting_down {
            if let Some(id) = this.slot.take() {
                state.getters.leave(id);
            }
            return Poll::Ready(None);
        }
        state.getters.park(&mut this.slot, cx.waker());
        Poll::Pending
    }
}

impl<T, B> Drop for Get<'_, T, B>
where
    T: Clone + Eq + Hash + Send,
    B: Backlog<T>,
{
    fn drop(&mut self) {
        let Some(id) = self.slot.take() else {
            return;
        };
        let waker = {
            let mut state = lock(&self.core.state);
            if state.getters.leave(id) {
                None
            } else if state.backlog.len() > 0 {
                // This getter was woken for an item and is going away without taking it: pass the
                // wake-up on so the item does not sit there while another getter sleeps.
                state.getters.take_one()
            } else {
                None
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The future of [`Core::shut_down_with_drain`].
pub(crate) struct Drain<'a, T, B: Backlog<T>>
where
    T: Clone + Eq + Hash + Send,
{
    core: &'a Core<T, B>,
    slot: Option<u64>,
}

impl<T, B> Future for Drain<'_, T, B>
where
    T: Clone + Eq + Hash + Send,
    B: Backlog<T>,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut state = lock(&this.core.state);
        if state.processing == 0 || !state.drain {
            if let Some(id) = this.slot.take() {
                state.drainers.leave(id);
            }
            return Poll::Ready(());
        }
        state.drainers.park(&mut this.slot, cx.waker());
        Poll::Pending
    }
}

impl<T, B> Drop for Drain<'_, T, B>
where
    T: Clone + Eq + Hash + Send,
    B: Backlog<T>,
{
    fn drop(&mut self) {
        if let Some(id) = self.slot.take() {
            lock(&self.core.state).drainers.leave(id);
        }
    }
}
