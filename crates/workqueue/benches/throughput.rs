//! Work queue throughput, in items per second, for the scenarios client-go's own queue is
//! measured on:
//!
//! - (a)  1,000,000 distinct keys: every add, then drain with get + done;
//! - (a') the same keys, add; get; done one key at a time;
//! - (b)  4 producers × 4 consumers, 100,000 keys: each producer adds every key once (b1), or
//!   every key 10 times (b10); counted in adds per second;
//! - (c)  100,000 distinct keys through `add_rate_limited` (exponential 5 ms … 1000 s), one
//!   consumer doing get, forget, done.
//!
//! Run: `cargo bench -p ctrlkit-workqueue --bench throughput` (add `-- --quick` for one round).
//! Keys are `String`s like `"default/object-000042"` (what controllers queue), and, for (a) and
//! (a'), also `u64`s. Each figure is the median of several rounds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::hash::Hash;
use std::time::{Duration, Instant};

use ctrlkit_workqueue::{ItemExponentialFailureRateLimiter, Queue, RateLimitingQueue};

const A_KEYS: usize = 1_000_000;
const B_KEYS: usize = 100_000;
const C_KEYS: usize = 100_000;

fn string_keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("default/object-{i:06}")).collect()
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

/// (b): 4 producers × 4 consumers on a two-thread runtime; adds per second.
fn producers_consumers(keys: &[String], rounds: usize) -> f64 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let keys = std::sync::Arc::new(keys.to_vec());
    runtime.block_on(async move {
        let queue: Queue<String> = Queue::new();
        let start = Instant::now();
        let producers: Vec<_> = (0..4)
            .map(|_| {
                let queue = queue.clone();
                let keys = std::sync::Arc::clone(&keys);
                tokio::spawn(async move {
                    for _ in 0..rounds {
                        for key in keys.iter() {
                            queue.add(key.clone());
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
fn rate_limited(keys: &[String]) -> f64 {
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

fn measure(rounds: usize, mut run: impl FnMut() -> f64) -> f64 {
    run(); // warm-up
    median((0..rounds).map(|_| run()).collect())
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let rounds = if quick { 1 } else { 5 };
    let a_strings = string_keys(A_KEYS);
    let a_ints: Vec<u64> = (0..A_KEYS as u64).collect();
    let b_keys = string_keys(B_KEYS);
    let c_keys = string_keys(C_KEYS);

    println!("ctrlkit-workqueue throughput (median of {rounds} rounds; M = million per second)");
    let rows: Vec<(&str, f64)> = vec![
        (
            "(a)  1M distinct String keys, adds then drain",
            measure(rounds, || adds_then_drain(&a_strings)),
        ),
        (
            "(a)  1M distinct u64 keys, adds then drain",
            measure(rounds, || adds_then_drain(&a_ints)),
        ),
        (
            "(a') 1M String keys, add;get;done interleaved",
            measure(rounds, || interleaved(&a_strings)),
        ),
        (
            "(a') 1M u64 keys, add;get;done interleaved",
            measure(rounds, || interleaved(&a_ints)),
        ),
        (
            "(b1) 4x4, 100k keys, each producer adds each once (adds/s)",
            measure(rounds, || producers_consumers(&b_keys, 1)),
        ),
        (
            "(b10) 4x4, 100k keys, each producer adds each 10x (adds/s)",
            measure(rounds, || producers_consumers(&b_keys, 10)),
        ),
        (
            "(c)  100k keys add_rate_limited exp(5ms,1000s), get/forget/done",
            measure(rounds, || rate_limited(&c_keys)),
        ),
    ];
    for (name, rate) in rows {
        println!("{name:<68} {:>7.2} M/s", rate / 1e6);
    }
}
