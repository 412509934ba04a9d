//! `queue_test.go`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctrlkit_workqueue::Queue;

#[derive(Clone, Copy, Debug)]
enum Shutdown {
    Plain,
    Drain,
}

async fn shut_down(queue: &Queue<String>, how: Shutdown) {
    match how {
        Shutdown::Plain => queue.shut_down(),
        Shutdown::Drain => queue.shut_down_with_drain().await,
    }
}

/// 50 producers add their number 50 times each, 10 consumers process; then shutdown, and an add
/// after it must never reach a consumer.
async fn basic(how: Shutdown) {
    let queue: Queue<String> = Queue::new();
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let processed = Arc::new(Mutex::new(0usize));

    let producers: Vec<_> = (0..50)
        .map(|i| {
            let queue = queue.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    queue.add(i.to_string());
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..10)
        .map(|_| {
            let queue = queue.clone();
            let in_flight = Arc::clone(&in_flight);
            let processed = Arc::clone(&processed);
            tokio::spawn(async move {
                while let Some(item) = queue.get().await {
                    assert_ne!(*item, "added after shutdown!");
                    assert!(
                        in_flight.lock().unwrap().insert(item.clone()),
                        "{} handed to two consumers at once",
                        *item
                    );
                    tokio::time::sleep(Duration::from_micros(600)).await;
                    in_flight.lock().unwrap().remove(&*item);
                    *processed.lock().unwrap() += 1;
                }
            })
        })
        .collect();

    for producer in producers {
        producer.await.unwrap();
    }
    shut_down(&queue, how).await;
    queue.add("added after shutdown!".to_string());
    for consumer in consumers {
        consumer.await.unwrap();
    }
    assert_eq!(queue.len(), 0);
    let processed = *processed.lock().unwrap();
    // Every number was processed at least once, and deduplication kept it well under 2,500.
    assert!((50..2500).contains(&processed), "processed {processed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn basic_with_shut_down() {
    basic(Shutdown::Plain).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn basic_with_shut_down_with_drain() {
    basic(Shutdown::Drain).await;
}

/// Consumers re-add each item while processing it until they have seen it twice.
async fn add_while_processing(how: Shutdown) {
    let queue: Queue<String> = Queue::new();
    let seen = Arc::new(Mutex::new(std::collections::HashMap::<String, usize>::new()));
    let producers: Vec<_> = (0..50)
        .map(|i| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.add(i.to_string()) })
        })
        .collect();
    let consumers: Vec<_> = (0..10)
        .map(|_| {
            let queue = queue.clone();
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                while let Some(item) = queue.get().await {
                    let count = {
                        let mut seen = seen.lock().unwrap();
                        let count = seen.entry(item.clone()).or_default();
                        *count += 1;
                        *count
                    };
                    if count < 2 {
                        queue.add(item.clone());
                    }
                }
            })
        })
        .collect();
    for producer in producers {
        producer.await.unwrap();
    }
    // Let the consumers see every item twice before shutting down.
    while seen
        .lock()
        .unwrap()
        .values()
        .filter(|count| **count == 2)
        .count()
        < 50
    {
        tokio::task::yield_now().await;
    }
    shut_down(&queue, how).await;
    for consumer in consumers {
        consumer.await.unwrap();
    }
    assert_eq!(queue.len(), 0);
    assert!(seen.lock().unwrap().values().all(|count| *count == 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn add_while_processing_with_shut_down() {
    add_while_processing(Shutdown::Plain).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn add_while_processing_with_shut_down_with_drain() {
    add_while_processing(Shutdown::Drain).await;
}

#[test]
fn len() {
    let queue = Queue::new();
    queue.add("foo");
    assert_eq!(queue.len(), 1);
    queue.add("bar");
    assert_eq!(queue.len(), 2);
    queue.add("foo"); // already queued
    assert_eq!(queue.len(), 2);
}

#[tokio::test]
async fn reinsert() {
    let queue = Queue::new();
    queue.add("foo");
    let item = queue.get().await.unwrap();
    assert_eq!(*item, "foo");
    queue.add("foo"); // while processing
    drop(item);
    let item = queue.get().await.unwrap();
    assert_eq!(*item, "foo");
    drop(item);
    assert_eq!(queue.len(), 0);
}

#[tokio::test]
async fn collapse() {
    let queue = Queue::new();
    queue.add("bar");
    queue.add("bar");
    let item = queue.get().await.unwrap();
    assert_eq!(*item, "bar");
    drop(item);
    assert_eq!(queue.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn collapse_while_processing() {
    let queue = Queue::new();
    queue.add("foo");
    let first = queue.get().await.unwrap();
    queue.add("foo");
    queue.add("foo");
    let second = tokio::spawn({
        let queue = queue.clone();
        async move {
            let item = queue.get().await.unwrap();
            let value = *item;
            drop(item);
            value
        }
    });
    // foo is being processed: the second getter must not get it.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!second.is_finished());
    drop(first);
    assert_eq!(second.await.unwrap(), "foo");
    assert_eq!(queue.len(), 0);
}

#[tokio::test]
async fn drainage_using_shut_down_with_drain() {
    let queue = Queue::new();
    queue.add("foo");
    queue.add("bar");
    let foo = queue.get().await.unwrap();
    let bar = queue.get().await.unwrap();
    let drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    // Wait until the drain has shut the queue down: then `get` returns None.
    while queue.get().await.is_some() {}
    assert!(!drain.is_finished());
    drop(foo);
    tokio::task::yield_now().await;
    assert!(
        !drain.is_finished(),
        "the drain returned with bar in flight"
    );
    drop(bar);
    drain.await.unwrap();
}

#[tokio::test]
async fn no_drainage_using_shut_down() {
    let queue = Queue::new();
    queue.add("foo");
    queue.add("bar");
    let _foo = queue.get().await.unwrap();
    let _bar = queue.get().await.unwrap();
    // Plain shutdown returns with both still in flight.
    queue.shut_down();
    assert!(queue.get().await.is_none());
}

#[tokio::test]
async fn force_shutdown_using_shut_down() {
    let queue = Queue::new();
    queue.add("foo");
    queue.add("bar");
    let _foo = queue.get().await.unwrap();
    let _bar = queue.get().await.unwrap();
    let drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    while queue.get().await.is_some() {}
    queue.shut_down();
    drain.await.unwrap();
}

#[tokio::test]
async fn drainage_with_a_dirty_item() {
    let queue = Queue::new();
    queue.add("foo");
    let gotten = queue.get().await.unwrap();
    queue.add("foo");
    let drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    while !queue.shutting_down() {
        tokio::task::yield_now().await;
    }
    assert!(queue.get().await.is_none());
    drop(gotten);
    // Done put the dirty foo back: it is handed out although the queue is shutting down.
    let next = queue.get().await.expect("the dirty item is handed out");
    assert_eq!(*next, "foo");
    drop(next);
    assert!(queue.get().await.is_none());
    drain.await.unwrap();
}

#[tokio::test]
async fn processed_items_are_not_retained() {
    let queue = Queue::new();
    let item = Arc::new(());
    queue.add(Arc::clone(&item));
    // The queue holds a copy for the backlog and one for its bookkeeping.
    assert!(Arc::strong_count(&item) > 1);
    drop(queue.get().await.unwrap());
    assert_eq!(Arc::strong_count(&item), 1);
}

#[tokio::test]
async fn done_of_an_item_not_processing_is_ignored() {
    let queue = Queue::new();
    queue.add("foo");
    queue.done(&"foo"); // queued, not processing: client-go would queue it twice
    queue.done(&"bar"); // unknown
    assert_eq!(queue.len(), 1);
    let item = queue.get().await.unwrap();
    queue.done(&"foo");
    drop(item); // a second done is harmless
    assert_eq!(queue.len(), 0);
}

#[tokio::test]
async fn a_cancelled_get_passes_its_wake_up_on() {
    let queue: Queue<&str> = Queue::new();
    let waiting = tokio::spawn({
        let queue = queue.clone();
        async move { *queue.get().await.unwrap() }
    });
    // A getter that gives up without taking anything.
    let abandoned = tokio::time::timeout(Duration::from_millis(1), queue.get()).await;
    assert!(abandoned.is_err());
    tokio::task::yield_now().await;
    queue.add("foo");
    assert_eq!(waiting.await.unwrap(), "foo");
}

#[tokio::test]
async fn the_guard_marks_done_on_panic() {
    let queue = Queue::new();
    queue.add("foo");
    let worker = tokio::spawn({
        let queue = queue.clone();
        async move {
            let item = queue.get().await.unwrap();
            queue.add(*item);
            panic!("reconcile of {} panicked", *item);
        }
    });
    assert!(worker.await.unwrap_err().is_panic());
    // The panic dropped the guard: foo is done, and its re-add is ready again.
    let item = queue.get().await.unwrap();
    assert_eq!(*item, "foo");
}
