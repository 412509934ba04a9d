//! A controller's work loop on ctrlkit's work queue, without Kubernetes: event handlers add keys,
//! workers reconcile them, failures come back rate-limited, successes are forgotten, and the
//! queue's Prometheus metrics are printed at the end.
//!
//! The rate limiter waits by the kind of the last error (a conflict is retried soon, throttling
//! late, anything else with exponential backoff), combined with client-go's overall token
//! bucket: a limiter of your own, written against the `RateLimiter` trait.
//!
//! ```text
//! cargo run --release -p ctrlkit-examples --example workqueue -- --keys 2000 --workers 4
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::Parser;
use ctrlkit::workqueue::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, MetricsConfig,
    PrometheusMetricsProvider, RateLimiter, RateLimitingQueue,
};

/// Runs a simulated controller on a rate-limited work queue.
#[derive(Parser, Debug)]
struct Args {
    /// How many distinct object keys the event handlers produce.
    #[arg(long, default_value_t = 2000)]
    keys: usize,
    /// How many events per key (duplicates are collapsed by the queue).
    #[arg(long, default_value_t = 5)]
    events_per_key: usize,
    /// How many workers reconcile in parallel.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Give up on a key after this many failed attempts.
    #[arg(long, default_value_t = 5)]
    max_retries: usize,
}

/// Why a reconcile failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// Someone else updated the object first: retry soon.
    Conflict,
    /// The API server throttled us: back off for long.
    TooManyRequests,
    /// Anything else: exponential backoff.
    Other,
}

/// Waits by the kind of a key's last failure: an error-type-aware limiter.
struct ByFailure {
    last: Mutex<HashMap<String, Failure>>,
    other: ItemExponentialFailureRateLimiter<String>,
}

impl ByFailure {
    fn record(&self, key: &str, failure: Failure) {
        self.failures().insert(key.to_string(), failure);
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, Failure>> {
        self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RateLimiter<String> for ByFailure {
    fn when(&self, key: &String) -> Duration {
        let last = self.failures().get(key).copied();
        // Count the failure in the exponential limiter whatever its kind, so num_requeues is
        // right.
        let exponential = self.other.when(key);
        match last {
            Some(Failure::Conflict) => Duration::from_millis(2),
            Some(Failure::TooManyRequests) => Duration::from_millis(50),
            Some(Failure::Other) | None => exponential,
        }
    }

    fn forget(&self, key: &String) {
        self.failures().remove(key);
        self.other.forget(key);
    }

    fn num_requeues(&self, key: &String) -> usize {
        self.other.num_requeues(key)
    }
}

/// A stand-in reconcile: some keys fail their first attempts, each with a kind of failure.
fn reconcile(key: &str, attempt: usize) -> Result<(), Failure> {
    let index: usize = key
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    match (index % 10, attempt) {
        (0, 0) => Err(Failure::Conflict),
        (1, 0 | 1) => Err(Failure::Other),
        (2, 0) => Err(Failure::TooManyRequests),
        (3, _) if index % 100 == 3 => Err(Failure::Other), // never succeeds: given up
        _ => Ok(()),
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let by_failure = Arc::new(ByFailure {
        last: Mutex::new(HashMap::new()),
        other: ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1),
        ),
    });
    let limiter = MaxOfRateLimiter::new(vec![
        Box::new(Arc::clone(&by_failure)),
        Box::new(BucketRateLimiter::new(1000.0, 100).unwrap_or_else(|_| unreachable!())),
    ]);
    let mut registry = prometheus_client::registry::Registry::default();
    let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
    let queue = RateLimitingQueue::with_metrics(limiter, MetricsConfig::new("example", provider));

    let reconciled = Arc::new(AtomicUsize::new(0));
    let attempts = Arc::new(AtomicUsize::new(0));
    let given_up = Arc::new(AtomicUsize::new(0));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();

    let workers: Vec<_> = (0..args.workers)
        .map(|_| {
            let queue = queue.clone();
            let (reconciled, attempts, given_up, in_flight) = (
                reconciled.clone(),
                attempts.clone(),
                given_up.clone(),
                in_flight.clone(),
            );
            let by_failure = Arc::clone(&by_failure);
            let max_retries = args.max_retries;
            tokio::spawn(async move {
                while let Some(key) = queue.get().await {
                    in_flight.fetch_add(1, Ordering::SeqCst);
                    attempts.fetch_add(1, Ordering::Relaxed);
                    match reconcile(&key, key.num_requeues()) {
                        Ok(()) => {
                            reconciled.fetch_add(1, Ordering::Relaxed);
                            key.forget();
                        }
                        Err(_) if key.num_requeues() + 1 >= max_retries => {
                            if given_up.fetch_add(1, Ordering::Relaxed) < 3 {
                                println!(
                                    "giving up on {} after {max_retries} attempts (the first 3 are shown)",
                                    *key
                                );
                            }
                            key.forget();
                        }
                        Err(failure) => {
                            by_failure.record(&key, failure);
                            key.requeue_rate_limited();
                        }
                    }
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                }
            })
        })
        .collect();

    // The event handlers: every key changes several times; the queue collapses the repeats.
    for round in 0..args.events_per_key {
        for i in 0..args.keys {
            queue.add(format!("default/object-{i}"));
        }
        if round == 0 {
            println!(
                "queued {} keys; {} waiting (the workers took the others already)",
                args.keys,
                queue.len()
            );
        }
        tokio::task::yield_now().await;
    }

    // Wait until nothing is queued, waiting or in flight twice in a row (a worker between `get`
    // and counting itself in flight is caught by the second look), then drain and stop.
    let idle =
        || queue.is_empty() && queue.waiting_len() == 0 && in_flight.load(Ordering::SeqCst) == 0;
    loop {
        tokio::time::sleep(Duration::from_millis(10)).await;
        if idle() {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if idle() {
                break;
            }
        }
    }
    queue.shut_down_with_drain().await;
    for worker in workers {
        if let Err(error) = worker.await {
            eprintln!("a worker failed: {error}");
            std::process::exit(1);
        }
    }

    let elapsed = start.elapsed();
    println!(
        "{} keys changed {} times in all: the queue collapsed repeats of a waiting key, so {} reconciles succeeded in {} attempts ({} workers, {:.1?}); {} keys failed every attempt and were given up after {}",
        args.keys,
        args.keys * args.events_per_key,
        reconciled.load(Ordering::Relaxed),
        attempts.load(Ordering::Relaxed),
        args.workers,
        elapsed,
        given_up.load(Ordering::Relaxed),
        args.max_retries,
    );
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &registry).is_ok() {
        println!("\nmetrics:");
        for line in text
            .lines()
            .filter(|line| !line.starts_with('#') && !line.contains("_bucket"))
        {
            println!("  {line}");
        }
    }
}
