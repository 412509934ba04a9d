//! The lock the queues are built on, swappable for shuttle's or loom's under the features of
//! the same names.
//!
//! Every interleaving-sensitive piece of the queue (the dirty and processing bookkeeping, the
//! waiter lists) sits behind this one mutex, so swapping it lets shuttle explore every schedule.

#[cfg(not(any(feature = "shuttle", feature = "loom")))]
use std::time::Duration;

#[cfg(not(any(feature = "shuttle", feature = "loom")))]
pub(crate) type Mutex<T> = spin::mutex::SpinMutex<T>;
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
pub(crate) type MutexGuard<'a, T> = spin::mutex::SpinMutexGuard<'a, T>;

#[cfg(feature = "shuttle")]
pub(crate) use shuttle::sync::{Mutex, MutexGuard};

#[cfg(all(feature = "loom", not(feature = "shuttle")))]
pub(crate) use loom::sync::{Mutex, MutexGuard};

/// Locks `mutex`.
///
/// The queue's lock is held for well under a microsecond (a few table operations), except
/// while a table grows or a drained queue gives its tables back, and every add, `get` and done
/// takes it once. So it is a spin lock: taking it is one atomic compare-and-swap and releasing
/// it one plain store, where a parking lock (parking_lot's, or `std`'s futex lock) also needs an
/// atomic read-modify-write to release, to learn whether a waiter sleeps. On the 2-core machine
/// of `docs/BENCHMARKS.md`, with parking_lot's lock before it, bench binaries alternated
/// (benches/throughput.rs; M items or adds per second):
///
/// - (a') add; get; done with `Arc<str>` keys, 14.2–14.6 → 17.5–17.8 (nine atomic instructions
///   an item became six);
/// - (b1), 4 producers and 4 workers adding clones, 6.3–12.8 → 13.8–15.9; (b10) 7.8–14.2 →
///   14.2–16.1;
/// - (b) on 8 and on 32 runtime threads, more threads than cores, was not slower either, and
///   took less CPU time.
///
/// A waiter does not sleep on the lock word: see [`lock_contended`] for how it waits.
///
/// The lock has no poisoning: the state is only ever mutated in small steps that keep it
/// consistent (a user's `Hash`, `Eq` or `Clone` that panics interrupts a step before it changes
/// anything that matters), so after a panic the queue keeps working instead of turning one
/// panic into a dead queue.
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.try_lock() {
        Some(guard) => guard,
        None => lock_contended(mutex),
    }
}

/// How many pause rounds a waiter spins before it starts yielding its thread.
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
const SPIN_ROUNDS: u32 = 10;
/// How many times a waiter yields its thread before it starts sleeping.
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
const YIELDS: u32 = 16;
/// A sleeping waiter's first sleep (about what Linux's timer slack makes of any shorter one).
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
const FIRST_SLEEP: Duration = Duration::from_micros(50);
/// A sleeping waiter's longest sleep: the most it can oversleep a release.
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
const LONGEST_SLEEP: Duration = Duration::from_millis(1);

/// Waits for the lock in three stages, each for a longer hold than the last:
///
/// 1. Spins, reading (not writing) the lock word, with a pause of 16 spin hints doubling to 128:
///    1,008 in all, about 30 µs on a core whose hint takes 30 ns. A producer adding in a tight
///    loop re-takes the lock at once, so a waiter on another core often waits for many holds,
///    not one. Not checking at once lets a holder run a burst of holds with the queue's lines in
///    its own cache, instead of having them taken at every release: pauses starting at 16
///    instead of 1 gave (b) 10–25% more adds per second, on both kinds of host placement of
///    `docs/BENCHMARKS.md`; starting at 16 but doubling to 1,024 gave less.
/// 2. Yields its thread, [`YIELDS`] times, checking the word between yields: a holder that was
///    preempted on this core gets to run.
/// 3. Sleeps, from [`FIRST_SLEEP`] doubling to [`LONGEST_SLEEP`], for a hold that lasts (a table
///    of millions growing, or a holder the system descheduled): the thread gives its core away
///    instead of burning it, and takes the lock at most [`LONGEST_SLEEP`] after it is free.
///
/// Nothing wakes a sleeping waiter, which is what keeps the release a plain store; the price is
/// that oversleep, paid only once a wait has lasted far longer than any ordinary hold.
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
#[cold]
fn lock_contended<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    for round in 0..SPIN_ROUNDS {
        for _ in 0..(16u32 << round.min(3)) {
            std::hint::spin_loop();
        }
        if let Some(guard) = try_if_free(mutex) {
            return guard;
        }
    }
    for _ in 0..YIELDS {
        std::thread::yield_now();
        if let Some(guard) = try_for_a_while(mutex) {
            return guard;
        }
    }
    let mut sleep = FIRST_SLEEP;
    loop {
        std::thread::sleep(sleep);
        sleep = (sleep * 2).min(LONGEST_SLEEP);
        if let Some(guard) = try_for_a_while(mutex) {
            return guard;
        }
    }
}

/// Looks at the lock word 64 times, a spin hint apart, taking the lock if it is seen free: what
/// a waiter does each time its thread runs again after a yield or a sleep.
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
fn try_for_a_while<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    for _ in 0..64 {
        if let Some(guard) = try_if_free(mutex) {
            return Some(guard);
        }
        std::hint::spin_loop();
    }
    None
}

/// Takes the lock if its word says it is free: a waiter reads the word, and writes it (taking
/// its cache line from the holder's core) only when that can succeed.
#[cfg(not(any(feature = "shuttle", feature = "loom")))]
#[inline]
fn try_if_free<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    if mutex.is_locked() {
        None
    } else {
        mutex.try_lock()
    }
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

#[cfg(all(test, not(any(feature = "shuttle", feature = "loom"))))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::{Mutex, lock};

    #[test]
    fn holders_exclude_each_other() {
        // A non-atomic read-modify-write under the lock: an overlap would lose increments.
        let counter = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || {
                    for _ in 0..50_000 {
                        let mut held = lock(&counter);
                        let seen = *held;
                        std::hint::spin_loop();
                        *held = seen + 1;
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("a locking thread panicked");
        }
        assert_eq!(*lock(&counter), 200_000);
    }

    #[test]
    fn a_waiter_that_went_to_sleep_takes_the_lock_once_it_is_free() {
        let shared = Arc::new(Mutex::new(Vec::new()));
        let waiting = Arc::new(AtomicBool::new(false));
        let held = lock(&shared);
        let waiter = {
            let shared = Arc::clone(&shared);
            let waiting = Arc::clone(&waiting);
            std::thread::spawn(move || {
                waiting.store(true, Ordering::Release);
                lock(&shared).push("waiter");
            })
        };
        while !waiting.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        // Long past the spinning and yielding stages: the waiter sleeps.
        std::thread::sleep(Duration::from_millis(20));
        drop(held);
        waiter.join().expect("the waiter panicked");
        lock(&shared).push("holder");
        assert_eq!(*lock(&shared), ["waiter", "holder"]);
    }
}
