//! Work queue throughput, in items per second, for the scenarios client-go's own queue is
//! measured on:
//!
//! - (a)  1,000,000 distinct keys: every add, then drain with get + done;
//! - (a') the same keys, add; get; done one key at a time; and its floor: the three
//!   uncontended lock round trips per key that any one-lock queue with this API makes, without
//!   the queue (with ctrlkit's lock, and the yardstick's);
//! - (b)  4 producers × 4 consumers, 100,000 keys: each producer adds every key once (b1), or
//!   every key 10 times (b10); counted in adds per second;
//! - (c)  100,000 distinct keys through `add_rate_limited` (exponential 5 ms … 1000 s), one
//!   consumer doing get, forget, done.
//!
//! Run: `cargo bench -p ctrlkit-workqueue --bench throughput` (add `-- --quick` for one round,
//! `-- --ctrlkit-only` to leave out the yardstick, for profiling, `-- --threads N` to run (b) on
//! N runtime threads instead of 2, and a scenario's name or part of it to run only those
//! scenarios).
//! Keys are `Arc<str>`s like `"default/object-000042"`: like a Go string (what client-go queues),
//! copying one copies a pointer. Unlike a Go string's, an `Arc`'s copy and drop also write its
//! count, on the line that holds the key's text, which every producer and worker shares. (a) and
//! (a') are also run with `String` keys, whose every copy allocates, `u64`s, and `&'static str`
//! keys, whose copy writes nothing, as a Go string's; (b) with `&'static str` keys too, and with
//! `add_cloned(&key)`, which clones only a key the queue does not hold. Each figure is the
//! median of several rounds.
//!
//! Each row ends with the machine's core-to-core hand-off time, taken after each round (median;
//! see `core_to_core_handoff_ns`): it tells rows run while the host placed the two virtual CPUs
//! apart.
//!
//! Beside ctrlkit's figure, each row prints that of client-go's queue design written in Rust
//! (`support/client_go_design.rs`; for (c), its rate-limiting design over it,
//! `support/client_go_rate_limiting.rs`), measured round by round in turn with ctrlkit's: this
//! machine's speed moves too much for figures taken at another time to be compared with.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctrlkit_workqueue::{ItemExponentialFailureRateLimiter, Queue, RateLimitingQueue};

#[path = "support/client_go_design.rs"]
mod client_go_design;
#[path = "support/client_go_rate_limiting.rs"]
mod client_go_rate_limiting;

use client_go_design::ClientGoQueue;
use client_go_rate_limiting::ClientGoRateLimitingQueue;

const A_KEYS: usize = 1_000_000;
const B_KEYS: usize = 100_000;
const C_KEYS: usize = 100_000;

type Key = Arc<str>;

fn string_keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("default/object-{i:06}")).collect()
}

/// Keys that live as long as the bench, copied as a Go string is: nothing written.
fn static_keys(n: usize) -> Vec<&'static str> {
    string_keys(n).into_iter().map(|key| &*key.leak()).collect()
}

fn keys(n: usize) -> Vec<Key> {
    string_keys(n).into_iter().map(Key::from).collect()
}

fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// (a): all adds, then drain.
fn adds_then_drain<T: Clone + Eq + Hash + Send + 'static>(keys: &[T]) -> f64 {
    let runtime = current_thread();
    let keys = keys.to_vec();
    runtime.block_on(async move {
        let queue = Queue::new();
        let n = keys.len();
        let start = Instant::now();
        for key in keys {
            queue.add(key);
        }
        for _ in 0..n {
            let item = queue.get().await.unwrap();
            drop(item);
        }
        let elapsed = start.elapsed();
        assert_eq!(queue.len(), 0);
        n as f64 / elapsed.as_secs_f64()
    })
}

/// (a'): add; get; done per key.
fn interleaved<T: Clone + Eq + Hash + Send + 'static>(keys: &[T]) -> f64 {
    let runtime = current_thread();
    let keys = keys.to_vec();
    runtime.block_on(async move {
        let queue = Queue::new();
        let n = keys.len();
        let start = Instant::now();
        for key in keys {
            queue.add(key);
            let item = queue.get().await.unwrap();
            drop(item);
        }
        n as f64 / start.elapsed().as_secs_f64()
    })
}

/// The floor under (a'): per key, the three uncontended lock round trips (add, get, done) any
/// queue with client-go's API and one lock makes, and nothing else; with the queue's lock
/// (parking_lot's) or the yardstick's (std's).
fn lock_round_trips<M>(keys: usize, mutex: M, round_trip: impl Fn(&M, usize)) -> f64 {
    let start = Instant::now();
    for key in 0..keys {
        for _ in 0..3 {
            round_trip(std::hint::black_box(&mutex), key);
        }
    }
    keys as f64 / start.elapsed().as_secs_f64()
}

/// How (b)'s producers hand a key they keep to the queue.
#[derive(Clone, Copy)]
enum Adding {
    /// `add(key.clone())`, client-go's way.
    Clones,
    /// `add_cloned(&key)`: cloned only if the queue does not hold the key yet.
    AddCloned,
}

/// (b): 4 producers × 4 consumers on a runtime of `threads` threads (2 unless `--threads N`);
/// adds per second.
fn producers_consumers<T: Clone + Eq + Hash + Send + Sync + 'static>(
    keys: &[T],
    rounds: usize,
    adding: Adding,
    threads: usize,
) -> f64 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_time()
        .build()
        .unwrap();
    let keys = std::sync::Arc::new(keys.to_vec());
    runtime.block_on(async move {
        let queue: Queue<T> = Queue::new();
        let start = Instant::now();
        let producers: Vec<_> = (0..4)
            .map(|_| {
                let queue = queue.clone();
                let keys = std::sync::Arc::clone(&keys);
                tokio::spawn(async move {
                    for _ in 0..rounds {
                        match adding {
                            Adding::Clones => keys.iter().for_each(|key| queue.add(key.clone())),
                            Adding::AddCloned => keys.iter().for_each(|key| queue.add_cloned(key)),
                        }
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..4)
            .map(|_| {
                let queue = queue.clone();
                tokio::spawn(async move {
                    let mut processed = 0usize;
                    while let Some(item) = queue.get().await {
                        drop(item);
                        processed += 1;
                    }
                    processed
                })
            })
            .collect();
        for producer in producers {
            producer.await.unwrap();
        }
        queue.shut_down_with_drain().await;
        let mut processed = 0;
        for consumer in consumers {
            processed += consumer.await.unwrap();
        }
        let elapsed = start.elapsed();
        assert!(processed >= keys.len());
        (4 * rounds * keys.len()) as f64 / elapsed.as_secs_f64()
    })
}

/// (c): rate-limited adds, one consumer doing get, forget, done.
fn rate_limited(keys: &[Key]) -> f64 {
    let runtime = current_thread();
    let keys = keys.to_vec();
    runtime.block_on(async move {
        let queue = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        ));
        let n = keys.len();
        let start = Instant::now();
        for key in keys {
            queue.add_rate_limited(key);
        }
        for _ in 0..n {
            queue.get().await.unwrap().forget();
        }
        n as f64 / start.elapsed().as_secs_f64()
    })
}

/// (c) on the client-go design.
fn client_go_rate_limited(keys: &[Key]) -> f64 {
    let keys = keys.to_vec();
    let queue = ClientGoRateLimitingQueue::new(Duration::from_millis(5), Duration::from_secs(1000));
    let n = keys.len();
    let start = Instant::now();
    for key in keys {
        queue.add_rate_limited(key);
    }
    for _ in 0..n {
        let item = queue.get().unwrap();
        queue.forget(&item);
        queue.done(&item);
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// (a) on the client-go design.
fn client_go_adds_then_drain<T: Clone + Eq + Hash>(keys: &[T]) -> f64 {
    let keys = keys.to_vec();
    let queue = ClientGoQueue::new();
    let n = keys.len();
    let start = Instant::now();
    for key in keys {
        queue.add(key);
    }
    for _ in 0..n {
        let item = queue.get().unwrap();
        queue.done(&item);
    }
    let elapsed = start.elapsed();
    assert_eq!(queue.len(), 0);
    n as f64 / elapsed.as_secs_f64()
}

/// (a') on the client-go design.
fn client_go_interleaved<T: Clone + Eq + Hash>(keys: &[T]) -> f64 {
    let keys = keys.to_vec();
    let queue = ClientGoQueue::new();
    let n = keys.len();
    let start = Instant::now();
    for key in keys {
        queue.add(key);
        let item = queue.get().unwrap();
        queue.done(&item);
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// (b) on the client-go design: 4 producer and 4 consumer threads.
fn client_go_producers_consumers<T: Clone + Eq + Hash + Send + Sync>(
    keys: &[T],
    rounds: usize,
) -> f64 {
    let queue = ClientGoQueue::new();
    let start = Instant::now();
    let processed = std::thread::scope(|scope| {
        let producers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    for _ in 0..rounds {
                        for key in keys {
                            queue.add(key.clone());
                        }
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let mut processed = 0usize;
                    while let Some(item) = queue.get() {
                        queue.done(&item);
                        processed += 1;
                    }
                    processed
                })
            })
            .collect();
        for producer in producers {
            producer.join().unwrap();
        }
        queue.shut_down();
        consumers
            .into_iter()
            .map(|consumer| consumer.join().unwrap())
            .sum::<usize>()
    });
    let elapsed = start.elapsed();
    assert!(processed >= keys.len());
    (4 * rounds * keys.len()) as f64 / elapsed.as_secs_f64()
}

/// The time one core takes to see a write another core made, in nanoseconds: two threads take
/// turns incrementing one counter, each waiting to see the other's increment; the time per turn
/// over 200,000 turns.
///
/// On a virtual machine this moves with where the host places the two virtual CPUs: about 30 ns
/// when they share a core complex, about 180–270 ns when they do not. (b), where two cores take
/// one lock and share the keys' lines, follows it; one-thread scenarios do not.
fn core_to_core_handoff_ns() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    const TURNS: u64 = 200_000;
    let turn = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for me in 0..2 {
            let turn = &turn;
            scope.spawn(move || {
                let mut mine = me;
                while mine < TURNS {
                    while turn.load(Ordering::Acquire) != mine {
                        std::hint::spin_loop();
                    }
                    turn.store(mine + 1, Ordering::Release);
                    mine += 2;
                }
            });
        }
    });
    start.elapsed().as_nanos() as f64 / TURNS as f64
}

/// Medians over `rounds` rounds (after one warm-up) of ctrlkit's figure, of the yardstick's
/// when given (run in turn, so that both see the machine in the same state), and of the
/// core-to-core hand-off time taken after each round.
fn measure(
    rounds: usize,
    run: &mut dyn FnMut() -> f64,
    mut yardstick: Option<&mut Box<dyn FnMut() -> f64 + '_>>,
) -> (f64, Option<f64>, f64) {
    run();
    if let Some(yardstick) = yardstick.as_mut() {
        yardstick();
    }
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut handoffs = Vec::new();
    for _ in 0..rounds {
        ours.push(run());
        handoffs.push(core_to_core_handoff_ns());
        if let Some(yardstick) = yardstick.as_mut() {
            theirs.push(yardstick());
        }
    }
    (
        median(ours),
        yardstick.map(|_| median(theirs)),
        median(handoffs),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--quick");
    let ctrlkit_only = args.iter().any(|arg| arg == "--ctrlkit-only");
    let rounds = if quick { 1 } else { 5 };
    let threads = args
        .iter()
        .position(|arg| arg == "--threads")
        .and_then(|at| args.get(at + 1))
        .map(|n| n.parse::<usize>().expect("--threads takes a number"))
        .unwrap_or(2);
    // Keys are made on first use, so that a filtered run makes only its own.
    let a_keys = std::cell::OnceCell::new();
    let a_keys = || a_keys.get_or_init(|| keys(A_KEYS)).as_slice();
    let a_strings = std::cell::OnceCell::new();
    let a_strings = || a_strings.get_or_init(|| string_keys(A_KEYS)).as_slice();
    let a_ints = std::cell::OnceCell::new();
    let a_ints = || {
        a_ints
            .get_or_init(|| (0..A_KEYS as u64).collect::<Vec<_>>())
            .as_slice()
    };
    // Keys whose copy writes nothing, as a Go string's does (an `Arc`'s clone and drop write
    // its count, on a line every holder shares): leaked once, for the bench's lifetime.
    let a_static = std::cell::OnceCell::new();
    let a_static = || a_static.get_or_init(|| static_keys(A_KEYS)).as_slice();
    let b_keys = keys(B_KEYS);
    let b_static = static_keys(B_KEYS);
    let c_keys = keys(C_KEYS);

    // Optional filter: only the scenarios whose name contains this text.
    let filter = args
        .iter()
        .enumerate()
        .skip(1)
        .find(|(at, arg)| !arg.starts_with("--") && args[at - 1] != "--threads")
        .map(|(_, arg)| arg.clone())
        .unwrap_or_default();
    println!("ctrlkit-workqueue throughput (median of {rounds} rounds; M = million per second)");
    println!(
        "{:<66} {:>9} {:>15} {:>6} {:>9}",
        "scenario", "ctrlkit", "client-go design", "ratio", "hand-off"
    );
    type Run<'a> = Box<dyn FnMut() -> f64 + 'a>;
    type Scenario<'a> = (&'static str, Run<'a>, Option<Run<'a>>);
    let scenarios: Vec<Scenario> = vec![
        (
            "(a)  1M distinct keys, adds then drain",
            Box::new(|| adds_then_drain(a_keys())),
            Some(Box::new(|| client_go_adds_then_drain(a_keys()))),
        ),
        (
            "(a)  1M distinct String keys, adds then drain",
            Box::new(|| adds_then_drain(a_strings())),
            Some(Box::new(|| client_go_adds_then_drain(a_strings()))),
        ),
        (
            "(a)  1M distinct u64 keys, adds then drain",
            Box::new(|| adds_then_drain(a_ints())),
            Some(Box::new(|| client_go_adds_then_drain(a_ints()))),
        ),
        (
            "(a)  1M distinct &'static str keys, adds then drain",
            Box::new(|| adds_then_drain(a_static())),
            Some(Box::new(|| client_go_adds_then_drain(a_static()))),
        ),
        (
            "(a') 1M keys, add;get;done interleaved",
            Box::new(|| interleaved(a_keys())),
            Some(Box::new(|| client_go_interleaved(a_keys()))),
        ),
        (
            "(a') 1M String keys, add;get;done interleaved",
            Box::new(|| interleaved(a_strings())),
            Some(Box::new(|| client_go_interleaved(a_strings()))),
        ),
        (
            "(a') 1M u64 keys, add;get;done interleaved",
            Box::new(|| interleaved(a_ints())),
            Some(Box::new(|| client_go_interleaved(a_ints()))),
        ),
        (
            "(a') 1M &'static str keys, add;get;done interleaved",
            Box::new(|| interleaved(a_static())),
            Some(Box::new(|| client_go_interleaved(a_static()))),
        ),
        (
            "(a') floor: 3 uncontended lock round trips per key, no queue",
            Box::new(|| {
                lock_round_trips(A_KEYS, parking_lot::Mutex::new(0), |mutex, key| {
                    *mutex.lock() += key;
                })
            }),
            Some(Box::new(|| {
                lock_round_trips(A_KEYS, std::sync::Mutex::new(0), |mutex, key| {
                    *mutex
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) += key;
                })
            })),
        ),
        (
            "(b1) 4x4, 100k keys, each producer adds each once (adds/s)",
            Box::new(|| producers_consumers(&b_keys, 1, Adding::Clones, threads)),
            Some(Box::new(|| client_go_producers_consumers(&b_keys, 1))),
        ),
        (
            "(b1) the same, add_cloned(&key)",
            Box::new(|| producers_consumers(&b_keys, 1, Adding::AddCloned, threads)),
            Some(Box::new(|| client_go_producers_consumers(&b_keys, 1))),
        ),
        (
            "(b1) the same, &'static str keys",
            Box::new(|| producers_consumers(&b_static, 1, Adding::Clones, threads)),
            Some(Box::new(|| client_go_producers_consumers(&b_static, 1))),
        ),
        (
            "(b10) 4x4, 100k keys, each producer adds each 10x (adds/s)",
            Box::new(|| producers_consumers(&b_keys, 10, Adding::Clones, threads)),
            Some(Box::new(|| client_go_producers_consumers(&b_keys, 10))),
        ),
        (
            "(b10) the same, add_cloned(&key)",
            Box::new(|| producers_consumers(&b_keys, 10, Adding::AddCloned, threads)),
            Some(Box::new(|| client_go_producers_consumers(&b_keys, 10))),
        ),
        (
            "(b10) the same, &'static str keys",
            Box::new(|| producers_consumers(&b_static, 10, Adding::Clones, threads)),
            Some(Box::new(|| client_go_producers_consumers(&b_static, 10))),
        ),
        (
            "(c)  100k keys add_rate_limited exp(5ms,1000s), get/forget/done",
            Box::new(|| rate_limited(&c_keys)),
            Some(Box::new(|| client_go_rate_limited(&c_keys))),
        ),
    ];
    for (name, mut run, mut yardstick) in scenarios {
        if !name.contains(filter.as_str()) {
            continue;
        }
        if ctrlkit_only {
            yardstick = None;
        }
        let (ours, theirs, handoff) = measure(rounds, &mut run, yardstick.as_mut());
        match theirs {
            Some(theirs) => println!(
                "{name:<66} {:>5.2} M/s {:>11.2} M/s {:>5.2}x {handoff:>6.0} ns",
                ours / 1e6,
                theirs / 1e6,
                ours / theirs
            ),
            None => println!(
                "{name:<66} {:>5.2} M/s {:>15} {:>6} {handoff:>6.0} ns",
                ours / 1e6,
                "",
                ""
            ),
        }
    }
}
