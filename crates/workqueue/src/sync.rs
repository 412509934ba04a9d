//! The lock the queues are built on, swappable for shuttle's or loom's under the features of
//! the same names.
//!
//! Every interleaving-sensitive piece of the queue (the dirty and processing bookkeeping, the
//! waiter lists) sits behind this one mutex, so swapping it lets the model checkers explore every
//! schedule. The lock itself is an ordinary blocking mutex (parking_lot's), whose semantics the
//! model checkers' mutexes model exactly: what they check is what runs.

#[cfg(not(any(feature = "shuttle", feature = "loom")))]
pub(crate) use parking_lot::{Mutex, MutexGuard};

#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::{Mutex, MutexGuard};

#[cfg(all(feature = "loom", not(feature = "shuttle")))]
pub(crate) use loom::sync::{Mutex, MutexGuard};

/// Locks `mutex`.
///
/// The queue's lock is held for a few table operations; no user code but the item's `Hash`,
/// `Eq`, `Clone` and `Drop` runs under it, and no `.await`. It has no poisoning: the state is
/// only ever mutated in small steps that keep it consistent (a user's `Hash`, `Eq` or `Clone`
/// that panics interrupts a step before it changes anything that matters), so after a panic the
/// queue keeps working instead of turning one panic into a dead queue.
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock()
}

/// Locks the model checker's `mutex`, taking the state over even if a holder panicked, as the
/// real lock (which has no poisoning) does.
#[cfg(any(feature = "shuttle", feature = "loom"))]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The hasher of the queue's maps: fast, and seeded per map except under model checking, where a
/// fixed seed keeps schedules replayable.
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
pub(crate) type HashState = foldhash::fast::RandomState;
#[cfg(any(feature = "shuttle", feature = "loom"))]
pub(crate) type HashState = foldhash::fast::FixedState;

/// A `HashMap` with the queue's hasher.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, HashState>;
