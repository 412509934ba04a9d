//! `rate_limiting_queue_test.go`: `add_rate_limited` waits as the limiter says, `forget` resets.

use std::time::Duration;

use ctrlkit_workqueue::{ItemExponentialFailureRateLimiter, RateLimitingQueue};
use tokio::time::{Instant, sleep};

const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn rate_limiting_queue() {
    let queue = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
        MS,
        Duration::from_secs(1),
    ));

    queue.add_rate_limited("one"); // ready in 1 ms
    queue.add_rate_limited("one"); // 2 ms: the earlier ready time wins
    assert_eq!(queue.num_requeues(&"one"), 2);
    queue.add_rate_limited("two"); // 1 ms
    queue.add_rate_limited("two"); // 2 ms
    assert_eq!(queue.num_requeues(&"two"), 2);
    assert_eq!(queue.waiting_len(), 2);

    sleep(MS).await;
    // The timer fires at the same instant as this sleep: let it run.
    tokio::task::yield_now().await;
    assert_eq!(queue.len(), 2);
    drop(queue.get().await.unwrap());
    drop(queue.get().await.unwrap());

    queue.forget(&"one");
    assert_eq!(queue.num_requeues(&"one"), 0);
    let start = Instant::now();
    queue.add_rate_limited("one");
    let item = queue.get().await.unwrap();
    assert_eq!(*item, "one");
    assert_eq!(start.elapsed(), MS);
}

#[tokio::test(start_paused = true)]
async fn the_work_item_guard_drives_the_limiter() {
    let queue = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
        5 * MS,
        Duration::from_secs(1000),
    ));
    queue.add("foo");
    let start = Instant::now();
    let mut waits = Vec::new();
    for _ in 0..5 {
        let item = queue.get().await.unwrap();
        waits.push(start.elapsed());
        item.requeue_rate_limited();
    }
    // 0, then 5, 10, 20, 40 ms later.
    let expected: Vec<_> = [0, 5, 15, 35, 75].iter().map(|ms| *ms * MS).collect();
    assert_eq!(waits, expected);

    let item = queue.get().await.unwrap();
    assert_eq!(item.num_requeues(), 5);
    item.forget();
    assert_eq!(queue.num_requeues(&"foo"), 0);
    assert_eq!(queue.len() + queue.waiting_len(), 0);

    queue.add("foo");
    let item = queue.get().await.unwrap();
    let before = Instant::now();
    item.requeue_after(Duration::from_secs(3));
    drop(queue.get().await.unwrap());
    assert_eq!(before.elapsed(), Duration::from_secs(3));
    assert_eq!(queue.num_requeues(&"foo"), 0);
}

#[tokio::test(start_paused = true)]
async fn default_controller_rate_limiter_starts_at_five_milliseconds() {
    let queue = RateLimitingQueue::with_default_rate_limiter();
    let start = Instant::now();
    queue.add_rate_limited("foo".to_string());
    drop(queue.get().await.unwrap());
    assert_eq!(start.elapsed(), 5 * MS);
}
