//! `delaying_queue_test.go`, on Tokio's paused clock: sleeping moves the clock exactly, and the
//! queue's timer fires at its ready time on the way.

use std::time::Duration;

use ctrlkit_workqueue::DelayingQueue;
use tokio::time::sleep;

const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn simple_queue() {
    let queue = DelayingQueue::new();
    queue.add_after("foo", 50 * MS);
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.waiting_len(), 1);

    sleep(60 * MS).await;
    assert_eq!(queue.len(), 1);
    let item = queue.get().await.unwrap();
    assert_eq!(*item, "foo");
    drop(item);

    sleep(Duration::from_secs(10)).await;
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.waiting_len(), 0);
}

#[tokio::test(start_paused = true)]
async fn deduping() {
    let queue = DelayingQueue::new();
    queue.add_after("foo", 50 * MS);
    queue.add_after("foo", 70 * MS);
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.waiting_len(), 1);

    sleep(60 * MS).await;
    assert_eq!(queue.len(), 1);
    drop(queue.get().await.unwrap());

    // The 70 ms add merged into the 50 ms one: nothing comes at 80 ms.
    sleep(20 * MS).await;
    assert_eq!(queue.len(), 0);

    queue.add_after("foo", 50 * MS);
    queue.add_after("foo", 30 * MS);
    assert_eq!(queue.len(), 0);

    sleep(40 * MS).await;
    assert_eq!(queue.len(), 1);
    drop(queue.get().await.unwrap());

    // The earlier ready time replaced the later one: nothing at 50 ms either.
    sleep(20 * MS).await;
    assert_eq!(queue.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn add_two_fire_early() {
    let queue = DelayingQueue::new();
    queue.add_after("foo", Duration::from_secs(1));
    queue.add_after("bar", 50 * MS);
    assert_eq!(queue.len(), 0);

    sleep(60 * MS).await;
    assert_eq!(queue.len(), 1);
    assert_eq!(*queue.get().await.unwrap(), "bar");

    queue.add_after("baz", Duration::from_secs(2));
    sleep(Duration::from_secs(1)).await;
    assert_eq!(queue.len(), 1);
    assert_eq!(*queue.get().await.unwrap(), "foo");

    sleep(Duration::from_secs(2)).await;
    assert_eq!(queue.len(), 1);
    assert_eq!(*queue.get().await.unwrap(), "baz");
}

#[tokio::test(start_paused = true)]
async fn copy_shifting() {
    let queue = DelayingQueue::new();
    queue.add_after("foo", Duration::from_secs(1));
    queue.add_after("bar", 500 * MS);
    queue.add_after("baz", 250 * MS);
    assert_eq!(queue.len(), 0);

    sleep(Duration::from_secs(2)).await;
    assert_eq!(queue.len(), 3);
    let order = [
        *queue.get().await.unwrap(),
        *queue.get().await.unwrap(),
        *queue.get().await.unwrap(),
    ];
    assert_eq!(order, ["baz", "bar", "foo"]);
}

#[tokio::test(start_paused = true)]
async fn zero_delay_adds_at_once() {
    let queue = DelayingQueue::new();
    queue.add_after("foo", Duration::ZERO);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.waiting_len(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_timer_is_exact() {
    let queue = DelayingQueue::new();
    let start = tokio::time::Instant::now();
    queue.add_after("foo", 1234 * MS);
    let item = queue.get().await.unwrap();
    assert_eq!(*item, "foo");
    assert_eq!(start.elapsed(), 1234 * MS);
}

#[tokio::test(start_paused = true)]
async fn a_blocked_get_wakes_for_an_earlier_item() {
    let queue = DelayingQueue::new();
    let start = tokio::time::Instant::now();
    queue.add_after("late", Duration::from_secs(60));
    let getter = tokio::spawn({
        let queue = queue.clone();
        async move { *queue.get().await.unwrap() }
    });
    sleep(MS).await;
    queue.add_after("early", 10 * MS);
    assert_eq!(getter.await.unwrap(), "early");
    assert_eq!(start.elapsed(), 11 * MS);
}

#[tokio::test(start_paused = true)]
async fn shutdown_drops_waiting_items_and_stops_the_timer() {
    let queue = DelayingQueue::new();
    queue.add_after("foo", 10 * MS);
    queue.shut_down();
    assert_eq!(queue.waiting_len(), 0);
    queue.add_after("bar", 10 * MS);
    assert_eq!(queue.waiting_len(), 0);
    sleep(Duration::from_secs(1)).await;
    assert!(queue.get().await.is_none());
    // The timer task has ended: only this test's task is alive.
    let metrics = tokio::runtime::Handle::current().metrics();
    assert_eq!(metrics.num_alive_tasks(), 0);
}

#[tokio::test(start_paused = true)]
async fn absurd_delays_are_capped_not_overflowed() {
    let queue = DelayingQueue::new();
    queue.add_after("foo", Duration::MAX);
    queue.add_after("bar", ctrlkit_workqueue::MAX_DELAY);
    assert_eq!(queue.waiting_len(), 2);
    sleep(Duration::from_secs(3600)).await;
    assert_eq!(queue.len(), 0);
}

#[test]
fn a_queue_made_outside_a_runtime_starts_its_timer_at_first_use() {
    let queue = DelayingQueue::new();
    queue.add_after("foo", 5 * MS);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        assert_eq!(*queue.get().await.unwrap(), "foo");
    });
}
