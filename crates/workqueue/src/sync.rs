//! The lock the queues are built on, swappable for shuttle's or loom's under the features of
//! the same names.
//!
//! Every interleaving-sensitive piece of the queue (the dirty and processing bookkeeping, the
//! waiter lists) sits behind this one mutex, so swapping it lets shuttle explore every schedule.

#[cfg(not(any(feature = "shuttle", feature = "loom")))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::{Mutex, MutexGuard};

#[cfg(all(feature = "loom", not(feature = "shuttle")))]
pub(crate) use loom::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking the state over even if a thread panicked while holding it.
///
/// The state is only ever mutated in small steps that keep it consistent (a user's `Hash`, `Eq` or
/// `Clone` that panics can only interrupt a step before it changes anything that matters), so a
/// poisoned lock is safe to keep using; refusing it would turn one panic into a dead queue.
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

/// Locks a `std` mutex, taking the state over if a holder panicked; for the state that model
/// checking leaves alone (rate limiters).
pub(crate) fn std_lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
