//! The state machine every queue shares: the items and where each stands, the backlog of ready
//! items, the items waiting for a delay, shutdown and drain, and the tasks parked in `get` or in a
//! drain.
//!
//! It is client-go's `Typed` queue plus its delaying queue's heap under one lock. Instead of a
//! `dirty` set, a `processing` set and a map of waiting items (three hashes per item and a copy of
//! the item in each), every item lives once in a slot of a slab, found through an index of slot
//! numbers by hash ([`SlotIndex`]); the backlog and the timers hold slot numbers. An item costs
//! one index lookup when added; `done` finds its slot through the ticket `get` handed out.

use std::future::Future;
use std::hash::{BuildHasher, Hash};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

use crate::backlog::Backlog;
use crate::metrics::{QueueMetricHandles, QueueMetrics};
use crate::slot_index::SlotIndex;
use crate::sync::{HashState, Mutex, lock};
use crate::timers::Timers;
use crate::waiters::Waiters;

/// The longest delay a queue honours; longer ones are shortened to it. About ten years: far
/// beyond any sensible retry, and far from overflowing the clock.
pub const MAX_DELAY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// Which item a [`WorkItem`](crate::WorkItem) holds: its slot, and the slot's generation so that
/// a stale ticket (its item already done by other means) is recognized.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    slot: u32,
    generation: u32,
}

impl Ticket {
    /// The ticket of a guard whose item was handed on to another guard: it ends nothing.
    pub(crate) const HANDED_ON: Self = Self {
        slot: u32::MAX,
        generation: u32::MAX,
    };
}

/// An item on its way into the queue: one the caller hands over (`T`), or one the caller keeps
/// ([`Borrowed`]), cloned only if the queue does not hold it yet.
pub(crate) trait Incoming<T> {
    /// The item, to hash and look up.
    fn get(&self) -> &T;
    /// The item for a new slot.
    fn into_owned(self) -> T;
}

impl<T> Incoming<T> for T {
    #[inline]
    fn get(&self) -> &T {
        self
    }

    #[inline]
    fn into_owned(self) -> T {
        self
    }
}

/// An item the caller keeps; see [`Incoming`].
pub(crate) struct Borrowed<'a, T>(pub(crate) &'a T);

impl<T: Clone> Incoming<T> for Borrowed<'_, T> {
    #[inline]
    fn get(&self) -> &T {
        self.0
    }

    #[inline]
    fn into_owned(self) -> T {
        self.0.clone()
    }
}

/// Where one item stands.
struct Slot<T, R> {
    /// The item; `None` while the slot is free.
    item: Option<T>,
    /// The item's hash (see `Core::hash`); once the slot is free, that of its table entry.
    hash: u32,
    generation: u32,
    /// Waiting to be handed out: in the backlog, or (while processing) to re-enter it after done.
    dirty: bool,
    /// Handed out by `get`, not done yet.
    processing: bool,
    /// Listed in `State::free`. A free slot can be taken back by its own item without leaving
    /// the list (see `Core::find_or_insert`); popped while taken, it is skipped.
    listed_free: bool,
    /// The merged rank of adds made while processing, used when it re-enters the backlog.
    pending_rank: R,
    /// The ready time of a delayed add, and its rank.
    wait: Option<(Instant, R)>,
}

impl<T, R> Slot<T, R> {
    fn is_unused(&self) -> bool {
        !self.dirty && !self.processing && self.wait.is_none()
    }
}

struct State<T, B: Backlog> {
    slots: Vec<Slot<T, B::Rank>>,
    /// Free slots, and slots taken back since they were freed (skipped when popped).
    free: Vec<u32>,
    /// How many slots hold an item.
    live: usize,
    /// The most slots that held an item at once since the queue last had none.
    peak_live: usize,
    index: SlotIndex,
    backlog: B,
    /// Ready times of delayed items; an entry is valid only while its slot still waits for
    /// exactly that time.
    timers: Timers,
    waiting: usize,
    processing: usize,
    shutting_down: bool,
    drain: bool,
    getters: Waiters,
    drainers: Waiters,
    metrics: Option<QueueMetrics>,
}

/// The tasks an operation must wake once the lock is released.
#[must_use]
pub(crate) enum Wake {
    Nothing,
    One(Waker),
    All(Vec<Waker>),
}

impl Wake {
    #[inline]
    fn one(waker: Option<Waker>) -> Self {
        waker.map_or(Self::Nothing, Self::One)
    }

    #[inline]
    fn all(waiters: &mut Waiters) -> Self {
        if waiters.is_empty() {
            Self::Nothing
        } else {
            Self::All(waiters.take_all())
        }
    }

    /// Wakes the tasks.
    #[inline]
    pub(crate) fn run(self) {
        match self {
            Self::Nothing => {}
            Self::One(waker) => waker.wake(),
            Self::All(wakers) => wakers.into_iter().for_each(Waker::wake),
        }
    }
}

/// The shared core of a queue; the public queues are handles around an `Arc` of it.
pub(crate) struct Core<T, B: Backlog> {
    state: Mutex<State<T, B>>,
    hasher: HashState,
    handles: Option<Arc<QueueMetricHandles>>,
}

impl<T, B> Core<T, B>
where
    T: Clone + Eq + Hash + Send,
    B: Backlog,
{
    pub(crate) fn new(backlog: B, handles: Option<Arc<QueueMetricHandles>>) -> Self {
        Self {
            state: Mutex::new(State {
                slots: Vec::new(),
                free: Vec::new(),
                live: 0,
                peak_live: 0,
                index: SlotIndex::default(),
                backlog,
                timers: Timers::default(),
                waiting: 0,
                processing: 0,
                shutting_down: false,
                drain: false,
                getters: Waiters::default(),
                drainers: Waiters::default(),
                metrics: handles.clone().map(QueueMetrics::new),
            }),
            hasher: HashState::default(),
            handles,
        }
    }

    /// The 32-bit hash of `item`, as the index files it.
    ///
    /// Computed before taking the lock, to keep the lock's hold short.
    fn hash(&self, item: &T) -> u32 {
        let full = self.hasher.hash_one(item);
        (full ^ (full >> 32)) as u32
    }

    /// The slot of `item` (whose hash is `short`), if the queue knows it.
    fn find(state: &State<T, B>, item: &T, short: u32) -> Option<u32> {
        let slots = &state.slots;
        state.index.find(short, |slot| {
            slots[slot as usize].item.as_ref() == Some(item)
        })
    }

    /// The slot of `item` (whose hash is `short`), made (with nothing set) if the queue does not
    /// know it.
    ///
    /// A free slot whose table entry was made under the same hash (most often the slot this
    /// very item had before it was done: a key re-added round after round) is taken back as
    /// it is, its entry kept, instead of taking another slot and moving the entry.
    ///
    /// An `item` the queue holds already is handed back unused, for the caller to drop.
    fn find_or_insert<I: Incoming<T>>(
        state: &mut State<T, B>,
        item: I,
        short: u32,
    ) -> (u32, Option<I>) {
        let slots = &state.slots;
        let mut vacant = None;
        let found = state
            .index
            .find(short, |slot| match &slots[slot as usize].item {
                Some(known) => known == item.get(),
                None => {
                    vacant.get_or_insert(slot);
                    false
                }
            });
        if let Some(slot) = found {
            return (slot, Some(item));
        }
        let slot = match vacant {
            Some(slot) => {
                // Its entry maps `short` to it already; it stays listed as free until popped.
                state.slots[slot as usize].item = Some(item.into_owned());
                Self::count_live(state);
                slot
            }
            None => Self::insert(state, item.into_owned(), short),
        };
        (slot, None)
    }

    /// One more slot holds an item.
    #[inline]
    fn count_live(state: &mut State<T, B>) {
        state.live += 1;
        state.peak_live = state.peak_live.max(state.live);
    }

    /// A free slot off the free list, if there is one.
    fn pop_free(state: &mut State<T, B>) -> Option<u32> {
        while let Some(slot) = state.free.pop() {
            let entry = &mut state.slots[slot as usize];
            entry.listed_free = false;
            if entry.item.is_none() {
                return Some(slot);
            }
        }
        None
    }

    /// Files `item` (unknown to the queue) in a slot, with nothing set.
    fn insert(state: &mut State<T, B>, item: T, short: u32) -> u32 {
        let slot = match Self::pop_free(state) {
            Some(slot) => {
                let entry = &mut state.slots[slot as usize];
                // The index still maps the slot's previous item here: drop that entry now.
                let stale = entry.hash;
                entry.item = Some(item);
                entry.hash = short;
                state.index.remove(stale, slot);
                slot
            }
            None => {
                // More than 4 billion distinct items at once would not fit in memory anyway.
                let slot = u32::try_from(state.slots.len()).unwrap_or(u32::MAX);
                state.slots.push(Slot {
                    item: Some(item),
                    hash: short,
                    generation: 0,
                    dirty: false,
                    processing: false,
                    listed_free: false,
                    pending_rank: B::Rank::default(),
                    wait: None,
                });
                slot
            }
        };
        Self::count_live(state);
        state.index.insert(short, slot);
        slot
    }

    /// Frees `slot` if nothing refers to it any more, and returns its item, for the caller to
    /// drop once the lock is released: no user `Drop` runs under the queue's lock, and the lock
    /// is not held while a shared key (an `Arc`) writes its count.
    ///
    /// Its table entry stays until the slot is reused (then it is removed, or kept when the new
    /// item has the same hash, see [`find_or_insert`](Self::find_or_insert)): a lookup can never
    /// match it, since the slot's item is gone, and an item processed once then never seen again
    /// costs one table operation instead of two.
    fn release_if_unused(state: &mut State<T, B>, slot: u32) -> Option<T> {
        let entry = &mut state.slots[slot as usize];
        if !entry.is_unused() {
            return None;
        }
        let item = entry.item.take();
        entry.generation = entry.generation.wrapping_add(1);
        entry.pending_rank = B::Rank::default();
        if !entry.listed_free {
            entry.listed_free = true;
            state.free.push(slot);
        }
        state.live -= 1;
        if state.live == 0 {
            Self::drained(state);
        }
        item
    }

    /// The queue holds no item any more: every table entry and timer is stale. Gives the memory
    /// back if the burst that just drained used under a quarter of it, so a queue whose bursts
    /// repeat at one size (a resync every few minutes) keeps its tables, and one that held a
    /// large burst once gives them back at the next smaller one.
    fn drained(state: &mut State<T, B>) {
        let peak = std::mem::take(&mut state.peak_live);
        if state.slots.len() > 4096 && peak < state.slots.len() / 4 {
            state.slots = Vec::new();
            state.free = Vec::new();
            state.index = SlotIndex::default();
            state.timers.clear();
        }
    }

    /// Marks the item in `slot` dirty: into the backlog, or (while processing) to re-enter it
    /// after done.
    fn mark_dirty(state: &mut State<T, B>, slot: u32, rank: B::Rank) -> Wake {
        let entry = &mut state.slots[slot as usize];
        if entry.dirty {
            // Already waiting to be handed out: deduplicate; only the rank may improve.
            if entry.processing {
                entry.pending_rank = B::merge(entry.pending_rank, rank);
            } else {
                state.backlog.touch(slot, rank);
            }
            return Wake::Nothing;
        }
        entry.dirty = true;
        let processing = entry.processing;
        if processing {
            entry.pending_rank = rank;
        }
        if let Some(metrics) = state.metrics.as_mut() {
            metrics.add(slot, Instant::now());
        }
        if processing {
            return Wake::Nothing;
        }
        state.backlog.push(slot, rank);
        Wake::one(state.getters.take_one())
    }

    /// Marks `item` as needing processing (dropped once the queue is shut down). With
    /// `cancel_wait`, a delayed add of it waiting for its time is cancelled, its rank merged.
    pub(crate) fn add(&self, item: impl Incoming<T>, rank: B::Rank, cancel_wait: bool) {
        let short = self.hash(item.get());
        let (wake, _unused) = {
            let mut state = lock(&self.state);
            if state.shutting_down {
                return;
            }
            // A duplicate comes back unused; it is dropped after the lock, like the item a `done`
            // releases (see `release_if_unused`).
            let (slot, unused) = Self::find_or_insert(&mut state, item, short);
            let mut rank = rank;
            if cancel_wait && let Some((_, waited)) = state.slots[slot as usize].wait.take() {
                state.waiting -= 1;
                rank = B::merge(rank, waited);
            }
            (Self::mark_dirty(&mut state, slot, rank), unused)
        };
        wake.run();
    }

    /// Adds `item` once `delay` has passed (at once when it is zero); for an item already waiting
    /// the earlier ready time wins and the ranks merge. With `ready_wins`, an item that is ready
    /// already just takes the rank. Returns whether the timer must re-arm.
    pub(crate) fn add_after(
        &self,
        item: T,
        delay: Duration,
        rank: B::Rank,
        ready_wins: bool,
    ) -> bool {
        let short = self.hash(&item);
        if delay.is_zero() {
            let wake = {
                let mut state = lock(&self.state);
                if state.shutting_down {
                    return false;
                }
                self.count_retry();
                // A duplicate is dropped under the lock, as in `add`.
                let (slot, _unused) = Self::find_or_insert(&mut state, item, short);
                Self::mark_dirty(&mut state, slot, rank)
            };
            wake.run();
            return false;
        }
        let mut state = lock(&self.state);
        if state.shutting_down {
            return false;
        }
        self.count_retry();
        let at = Instant::now() + delay.min(MAX_DELAY);
        let (slot, _unused) = Self::find_or_insert(&mut state, item, short);
        let state = &mut *state;
        let entry = &mut state.slots[slot as usize];
        if ready_wins && entry.dirty && !entry.processing {
            state.backlog.touch(slot, rank);
            return false;
        }
        let earliest = state.timers.peek().map(|(at, ..)| at);
        match &mut entry.wait {
            Some((waiting_at, waiting_rank)) => {
                *waiting_rank = B::merge(*waiting_rank, rank);
                if at >= *waiting_at {
                    return false;
                }
                *waiting_at = at;
            }
            None => {
                entry.wait = Some((at, rank));
                state.waiting += 1;
            }
        }
        let generation = entry.generation;
        state.timers.push(at, slot, generation);
        earliest.is_none_or(|earliest| at < earliest)
    }

    fn count_retry(&self) {
        if let Some(handles) = &self.handles {
            handles.retry();
        }
    }

    /// Makes every item whose ready time has come ready, in ready-time order; returns the next
    /// ready time.
    pub(crate) fn promote_due(&self, now: Instant) -> Option<Instant> {
        let mut wakes = Vec::new();
        let next = {
            let mut state = lock(&self.state);
            while let Some((at, _, slot, generation)) = state.timers.pop_due(now) {
                let Some(entry) = state.slots.get_mut(slot as usize) else {
                    continue;
                };
                let current = entry.generation == generation
                    && entry.wait.is_some_and(|(waiting_at, _)| waiting_at == at);
                if !current {
                    continue; // superseded by an earlier ready time, or cancelled
                }
                let Some((_, rank)) = entry.wait.take() else {
                    continue;
                };
                state.waiting -= 1;
                if state.shutting_down {
                    drop(Self::release_if_unused(&mut state, slot));
                    continue;
                }
                wakes.push(Self::mark_dirty(&mut state, slot, rank));
            }
            state.timers.peek().map(|(at, ..)| at)
        };
        for wake in wakes {
            wake.run();
        }
        next
    }

    /// How many items are ready to be handed out.
    pub(crate) fn len(&self) -> usize {
        lock(&self.state).backlog.len()
    }

    /// How many items wait for a delay to pass.
    pub(crate) fn waiting_len(&self) -> usize {
        lock(&self.state).waiting
    }

    /// How many slots the free list holds (some may have been taken back since).
    #[cfg(test)]
    pub(crate) fn free_list_len(&self) -> usize {
        lock(&self.state).free.len()
    }

    /// How many slots the queue's slab has, free or not.
    #[cfg(test)]
    pub(crate) fn slot_count(&self) -> usize {
        lock(&self.state).slots.len()
    }

    pub(crate) fn shutting_down(&self) -> bool {
        lock(&self.state).shutting_down
    }

    /// Takes the next ready item, if any, moving it to the processing set.
    fn take_ready(state: &mut State<T, B>) -> Option<(T, Ticket)> {
        loop {
            let slot = state.backlog.pop()?;
            let Some(entry) = state.slots.get_mut(slot as usize) else {
                continue;
            };
            // Not reachable while the invariants hold (the backlog holds dirty, idle items); a
            // stray entry is skipped rather than handed out twice.
            let Some(item) = entry
                .item
                .as_ref()
                .filter(|_| entry.dirty && !entry.processing)
            else {
                continue;
            };
            let item = item.clone();
            entry.dirty = false;
            entry.processing = true;
            let ticket = Ticket {
                slot,
                generation: entry.generation,
            };
            state.processing += 1;
            if let Some(metrics) = state.metrics.as_mut() {
                metrics.get(slot, Instant::now());
            }
            return Some((item, ticket));
        }
    }

    /// Waits for the next item; `None` once the queue is shut down and has nothing ready.
    pub(crate) fn get(&self) -> Get<'_, T, B> {
        Get {
            core: self,
            slot: None,
        }
    }

    /// Marks the item of `ticket` as processed; a stale ticket is ignored.
    pub(crate) fn done(&self, ticket: Ticket) {
        let (wake, _released) = {
            let mut state = lock(&self.state);
            Self::finish(&mut state, ticket)
        };
        wake.run();
    }

    /// Marks `item` as processed, for client-go parity. An item that is not being processed is
    /// ignored (client-go would queue a dirty one a second time).
    pub(crate) fn done_item(&self, item: &T) {
        let short = self.hash(item);
        let (wake, _released) = {
            let mut state = lock(&self.state);
            let Some(slot) = Self::find(&state, item, short) else {
                return;
            };
            let ticket = Ticket {
                slot,
                generation: state.slots[slot as usize].generation,
            };
            Self::finish(&mut state, ticket)
        };
        wake.run();
    }

    /// Ends the processing of `ticket`'s item: the tasks to wake, and the item if its slot was
    /// freed, to drop once the lock is released.
    fn finish(state: &mut State<T, B>, ticket: Ticket) -> (Wake, Option<T>) {
        let Some(entry) = state.slots.get_mut(ticket.slot as usize) else {
            return (Wake::Nothing, None);
        };
        if entry.generation != ticket.generation || !entry.processing {
            return (Wake::Nothing, None);
        }
        entry.processing = false;
        let requeue = entry.dirty.then_some(entry.pending_rank);
        state.processing -= 1;
        if let Some(metrics) = state.metrics.as_mut() {
            metrics.done(ticket.slot, Instant::now());
        }
        if let Some(rank) = requeue {
            state.backlog.push(ticket.slot, rank);
            return (Wake::one(state.getters.take_one()), None);
        }
        let released = Self::release_if_unused(state, ticket.slot);
        if state.processing == 0 {
            return (Wake::all(&mut state.drainers), released);
        }
        (Wake::Nothing, released)
    }

    /// Stops accepting adds, drops the items waiting for a delay, and wakes every waiter;
    /// cancels a drain in progress unless `drain`. Returns whether the timer must re-arm.
    fn begin_shutdown(&self, drain: bool) -> bool {
        let wake = {
            let mut guard = lock(&self.state);
            let state = &mut *guard;
            state.shutting_down = true;
            state.drain = drain;
            let timers: Vec<_> = state.timers.take_all().collect();
            for (_, _, slot, generation) in timers {
                let Some(entry) = state.slots.get_mut(slot as usize) else {
                    continue;
                };
                if entry.generation == generation && entry.wait.take().is_some() {
                    state.waiting -= 1;
                    drop(Self::release_if_unused(state, slot));
                }
            }
            let mut wakers = state.getters.take_all();
            if !drain {
                wakers.extend(state.drainers.take_all());
            }
            wakers
        };
        for waker in wake {
            waker.wake();
        }
        true
    }

    /// Shuts down; returns whether the timer must be told.
    pub(crate) fn shut_down(&self) -> bool {
        self.begin_shutdown(false)
    }

    /// Shuts down, then waits until no item is being processed (or `shut_down` cancels the wait).
    pub(crate) fn shut_down_with_drain(&self) -> Drain<'_, T, B> {
        let _ = self.begin_shutdown(true);
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
pub(crate) struct Get<'a, T, B: Backlog>
where
    T: Clone + Eq + Hash + Send,
{
    core: &'a Core<T, B>,
    slot: Option<u64>,
}

impl<T, B> Future for Get<'_, T, B>
where
    T: Clone + Eq + Hash + Send,
    B: Backlog,
{
    type Output = Option<(T, Ticket)>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut state = lock(&this.core.state);
        if let Some(taken) = Core::take_ready(&mut state) {
            if let Some(id) = this.slot.take() {
                state.getters.leave(id);
            }
            return Poll::Ready(Some(taken));
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
    B: Backlog,
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
pub(crate) struct Drain<'a, T, B: Backlog>
where
    T: Clone + Eq + Hash + Send,
{
    core: &'a Core<T, B>,
    slot: Option<u64>,
}

impl<T, B> Future for Drain<'_, T, B>
where
    T: Clone + Eq + Hash + Send,
    B: Backlog,
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
    B: Backlog,
{
    fn drop(&mut self) {
        if let Some(id) = self.slot.take() {
            lock(&self.core.state).drainers.leave(id);
        }
    }
}
