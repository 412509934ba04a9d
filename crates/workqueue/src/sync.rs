//! The lock the queues are built on, swappable for shuttle's or loom's under the features of
//! the same names.
//!
//! Every interleaving-sensitive piece of the queue (the dirty and processing bookkeeping, the
//! waiter lists) sits behind this one mutex, so swapping it lets shuttle explore every schedule.

#[cfg(not(any(feature = "shuttle", feature = "loom")))]
pub(crate) use parking_lot::{Mutex, MutexGuard};

#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::{Mutex, MutexGuard};

#[cfg(all(feature = "loom", not(feature = "shuttle")))]
pub(crate) use loom::sync::{Mutex, MutexGuard};

/// Locks `mutex`.
///
/// The queue's lock is held for a few hundred nanoseconds at most and is hammered by producers
/// and workers on every core: parking_lot's lock spins briefly before it parks, which under that
/// contention costs far fewer futex calls than `std`'s. It has no poisoning: the state is only
/// ever mutated in small steps that keep it consistent (a user's `Hash`, `Eq` or `Clone` that
/// panics interrupts a step before it changes anything that matters), so after a panic the
/// queue keeps working instead of turning one panic into a dead queue.
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.try_lock() {
        Some(guard) => guard,
        None => lock_contended(mutex),
    }
}

/// Spins (reading, not writing, the lock word) with a doubling pause, 511 pauses in all (about
/// 15 µs on a core whose pause takes 30 ns), before falling back to parking_lot's own wait,
/// which after a few short spins calls `sched_yield` and then parks. A producer adding in a
/// tight loop re-takes the lock at once, so a waiter on another core often waits for many
/// critical sections, not one; a system call per wait cost a quarter of the workers' time in the
/// 4 × 4 benchmark, and this spin raised its adds per second by a fifth to a third.
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
#[cold]
fn lock_contended<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    const ROUNDS: u32 = 10;
    for round in 0..ROUNDS {
        for _ in 0..(1u32 << round.min(7)) {
            std::hint::spin_loop();
        }
        if !mutex.is_locked()
            && let Some(guard) = mutex.try_lock()
        {
            return guard;
        }
    }
    mutex.lock()
}

/// Locks the model checker's `mutex`, taking the state over even if a holder panicked.
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
