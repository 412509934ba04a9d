//! controller-runtime's `priorityqueue_test.go` scenarios that hold for this queue, and the aging
//! bound that it lacks.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctrlkit_workqueue::{AddOpts, ItemExponentialFailureRateLimiter, LOW_PRIORITY, PriorityQueue};
use tokio::time::{Instant, sleep};

const MS: Duration = Duration::from_millis(1);

fn queue() -> PriorityQueue<&'static str> {
    PriorityQueue::builder().build()
}

fn after(after: Duration) -> AddOpts {
    AddOpts {
        after,
        ..AddOpts::default()
    }
}

async fn next(queue: &PriorityQueue<&'static str>) -> &'static str {
    *queue.get().await.unwrap()
}

#[tokio::test]
async fn returns_items_in_order() {
    let queue = queue();
    queue.add("foo");
    queue.add("bar");
    assert_eq!(next(&queue).await, "foo");
    assert_eq!(next(&queue).await, "bar");
}

#[tokio::test]
async fn skips_an_item_being_processed_and_returns_it_after_done() {
    let queue = queue();
    queue.add("foo");
    let foo = queue.get().await.unwrap();
    queue.add("foo");
    queue.add("bar");
    assert_eq!(next(&queue).await, "bar");
    queue.add("baz");
    drop(foo);
    // foo went back at the end, after baz.
    assert_eq!(next(&queue).await, "baz");
    assert_eq!(next(&queue).await, "foo");
}

#[tokio::test]
async fn deduplicates() {
    let queue = queue();
    queue.add("foo");
    queue.add("foo");
    assert_eq!(queue.len(), 1);
}

#[tokio::test]
async fn keeps_the_highest_priority() {
    let queue = queue();
    queue.add_with_opts("foo", AddOpts::priority(1));
    queue.add_with_opts("foo", AddOpts::priority(2));
    queue.add("bar");
    assert_eq!(queue.len(), 2);
    assert_eq!(next(&queue).await, "foo");

    queue.add_with_opts("baz", AddOpts::priority(2));
    queue.add_with_opts("baz", AddOpts::priority(1)); // never lowered
    queue.add_with_opts("qux", AddOpts::priority(1));
    assert_eq!(next(&queue).await, "baz");
}

#[tokio::test]
async fn a_priority_bump_moves_to_the_back_of_the_new_level() {
    let queue = queue();
    queue.add("foo");
    queue.add("bar");
    queue.add("baz");
    queue.add_with_opts("baz", AddOpts::priority(1));
    assert_eq!(next(&queue).await, "baz");
    assert_eq!(queue.len(), 2);

    queue.add_with_opts("qux", AddOpts::priority(1));
    queue.add_with_opts("foo", AddOpts::priority(1));
    assert_eq!(next(&queue).await, "qux");
    assert_eq!(next(&queue).await, "foo");
    assert_eq!(next(&queue).await, "bar");
}

#[tokio::test]
async fn a_priority_raised_while_processing_applies_when_it_is_back() {
    let queue = queue();
    queue.add("foo");
    let foo = queue.get().await.unwrap();
    queue.add_with_opts("foo", AddOpts::priority(LOW_PRIORITY));
    queue.add_with_opts("foo", AddOpts::priority(5));
    queue.add("bar");
    drop(foo);
    assert_eq!(next(&queue).await, "foo");
    assert_eq!(next(&queue).await, "bar");
}

#[tokio::test(start_paused = true)]
async fn the_lowest_after_wins_and_a_ready_item_stays_ready() {
    let queue = queue();
    queue.add_with_opts("foo", after(Duration::ZERO));
    queue.add_with_opts("foo", after(Duration::from_secs(3600)));
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.waiting_len(), 0);
    assert_eq!(next(&queue).await, "foo");
}

#[tokio::test(start_paused = true)]
async fn len_counts_ready_items_only() {
    let queue = queue();
    queue.add_with_opts("foo", after(Duration::from_secs(60)));
    queue.add("baz");
    queue.add_with_opts("bar", after(Duration::from_secs(60)));
    queue.add("bal");
    assert_eq!(queue.len(), 2);
    assert_eq!(queue.waiting_len(), 2);
    sleep(Duration::from_secs(61)).await;
    assert_eq!(queue.len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_plain_add_makes_a_waiting_item_ready_at_its_priority() {
    let queue = queue();
    queue.add_with_opts("foo", after(Duration::from_secs(3600)));
    assert_eq!(queue.len(), 0);
    queue.add_with_opts("bar", AddOpts::priority(0));
    queue.add_with_opts("foo", AddOpts::priority(1));
    assert_eq!(queue.len(), 2);
    assert_eq!(queue.waiting_len(), 0);
    assert_eq!(next(&queue).await, "foo");
    assert_eq!(next(&queue).await, "bar");
    // The cancelled wait does not bring foo back an hour later.
    sleep(Duration::from_secs(3601)).await;
    assert_eq!(queue.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn after_is_respected() {
    let queue = queue();
    let start = Instant::now();
    queue.add_with_opts("foo", after(Duration::from_secs(1)));
    assert_eq!(next(&queue).await, "foo");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_high_priority_item_that_becomes_ready_goes_first() {
    let queue = queue();
    queue.add_with_opts("foo", AddOpts::priority(LOW_PRIORITY));
    queue.add_with_opts(
        "prio",
        AddOpts {
            priority: 0,
            after: Duration::from_secs(1),
            rate_limited: false,
        },
    );
    sleep(Duration::from_secs(1)).await;
    tokio::task::yield_now().await;
    assert_eq!(next(&queue).await, "prio");
    assert_eq!(next(&queue).await, "foo");
}

#[tokio::test(start_paused = true)]
async fn timed_items_come_in_ready_time_order() {
    let queue = queue();
    let start = Instant::now();
    queue.add_with_opts("foo", after(Duration::from_secs(1)));
    queue.add_with_opts("bar", after(200 * MS));
    assert_eq!(next(&queue).await, "bar");
    assert_eq!(start.elapsed(), 200 * MS);
    assert_eq!(next(&queue).await, "foo");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn rate_limited_adds_use_the_limiter() {
    let queue = PriorityQueue::builder()
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            5 * MS,
            Duration::from_secs(1000),
        ))
        .build();
    let limited = AddOpts {
        rate_limited: true,
        ..AddOpts::default()
    };
    // bar has failed 7 times already: its next wait is 5 ms · 2^7 = 640 ms.
    for _ in 0..7 {
        queue.add_rate_limited("bar");
        drop(queue.get().await.unwrap());
    }
    let start = Instant::now();
    queue.add_with_opts("foo", limited);
    queue.add_with_opts("bar", limited);
    assert_eq!(next(&queue).await, "foo");
    assert_eq!(start.elapsed(), 5 * MS);
    assert_eq!(next(&queue).await, "bar");
    assert_eq!(start.elapsed(), 640 * MS);
    assert_eq!(queue.num_requeues(&"bar"), 8);

    // With both, the shorter of `after` and the limiter's wait.
    let start = Instant::now();
    queue.add_with_opts(
        "bar",
        AddOpts {
            after: 100 * MS,
            ..limited
        },
    );
    assert_eq!(next(&queue).await, "bar");
    assert_eq!(start.elapsed(), 100 * MS);
}

#[tokio::test]
async fn shutdown_unblocks_get_and_drops_adds() {
    let queue = queue();
    let getter = tokio::spawn({
        let queue = queue.clone();
        async move { queue.get().await.is_none() }
    });
    tokio::task::yield_now().await;
    queue.shut_down();
    assert!(getter.await.unwrap());
    queue.add("foo");
    queue.add_with_opts("bar", after(Duration::from_secs(1)));
    assert!(queue.get().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn priority_levels_come_out_in_order() {
    let queue: PriorityQueue<String> = PriorityQueue::builder().build();
    let levels = [
        ("high", 10),
        ("upper", 5),
        ("middle", 0),
        ("lower", -5),
        ("low", -10),
    ];
    for i in 0..1000 {
        for (name, priority) in levels.iter().rev() {
            queue.add_with_opts(format!("{name}-{i}"), AddOpts::priority(*priority));
        }
    }
    for (name, _) in levels {
        for i in 0..1000 {
            assert_eq!(*queue.get().await.unwrap(), format!("{name}-{i}"));
        }
    }
    assert_eq!(queue.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn aging_bounds_how_long_a_low_priority_item_waits() {
    let max_wait = Duration::from_secs(10);
    let queue: PriorityQueue<String> = PriorityQueue::builder().max_wait(max_wait).build();
    let start = Instant::now();
    queue.add_with_opts("initial-list".to_string(), AddOpts::priority(LOW_PRIORITY));

    // A steady stream of changes: one new key every 100 ms, each processed in 100 ms, so the
    // queue is never empty of higher-priority work.
    let mut handed_out_at = None;
    for i in 0..1000 {
        queue.add(format!("change-{i}"));
        let item = queue.get().await.unwrap();
        if *item == "initial-list" {
            handed_out_at = Some(start.elapsed());
            break;
        }
        sleep(100 * MS).await;
    }
    // Handed out at the first get after it had waited max_wait.
    assert_eq!(handed_out_at, Some(max_wait));
}

#[tokio::test(start_paused = true)]
async fn without_aging_a_low_priority_item_starves() {
    let queue: PriorityQueue<String> = PriorityQueue::builder().max_wait(Duration::MAX).build();
    queue.add_with_opts("initial-list".to_string(), AddOpts::priority(LOW_PRIORITY));
    for i in 0..1000 {
        queue.add(format!("change-{i}"));
        let item = queue.get().await.unwrap();
        assert_ne!(*item, "initial-list");
        sleep(100 * MS).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stress_never_hands_one_item_to_two_workers() {
    let queue: PriorityQueue<u32> = PriorityQueue::builder().build();
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let producers: Vec<_> = (0..4u32)
        .map(|p| {
            let queue = queue.clone();
            tokio::spawn(async move {
                for i in 0..5000u32 {
                    let key = (i * 7 + p) % 300;
                    let opts = AddOpts {
                        priority: (i % 13) as i32 - 6,
                        after: if i % 10 == 0 {
                            (i % 3) * MS
                        } else {
                            Duration::ZERO
                        },
                        rate_limited: false,
                    };
                    queue.add_with_opts(key, opts);
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let queue = queue.clone();
            let in_flight = Arc::clone(&in_flight);
            tokio::spawn(async move {
                let mut processed = 0usize;
                while let Some(item) = queue.get().await {
                    assert!(in_flight.lock().unwrap().insert(*item), "{} twice", *item);
                    tokio::task::yield_now().await;
                    in_flight.lock().unwrap().remove(&*item);
                    processed += 1;
                }
                processed
            })
        })
        .collect();
    for producer in producers {
        producer.await.unwrap();
    }
    // Let delayed adds land, then drain.
    sleep(10 * MS).await;
    queue.shut_down_with_drain().await;
    let mut processed = 0;
    for worker in workers {
        processed += worker.await.unwrap();
    }
    assert!(processed >= 300, "processed {processed}");
    assert_eq!(queue.len(), 0);
}
