//! Exhaustive model checking with loom: every interleaving of small cases (up to three
//! preemptions per run; two for the four-thread cases) of the queue's promises: no item is processed by
//! two workers at once, no add is lost, a drain waits for every item in flight, and a getter
//! woken by an add always gets the item.
//!
//! Run with `cargo test -p ctrlkit-workqueue --features loom --test loom --release`; the feature
//! swaps the queue's lock for loom's so that loom controls every step.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ctrlkit_workqueue::Queue;
use loom::future::block_on;
use loom::sync::Mutex;
use loom::thread;

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f);
}

/// Cases with four threads explode past three preemptions; two is the bound tokio's own loom
/// suite runs with.
fn model_bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}

#[derive(Default)]
struct History {
    tick: u64,
    in_flight: HashSet<u8>,
    last_add: HashMap<u8, u64>,
    last_start: HashMap<u8, u64>,
}

/// One producer thread adds `items`, `consumers` threads process until shutdown; the main thread
/// shuts down (with drain when `drain`) after the producer.
fn produce_and_consume(items: &'static [u8], consumers: usize, drain: bool) {
    let queue: Queue<u8> = Queue::new();
    let history = Arc::new(Mutex::new(History::default()));
    let workers: Vec<_> = (0..consumers)
        .map(|_| {
            let queue = queue.clone();
            let history = Arc::clone(&history);
            thread::spawn(move || {
                block_on(async {
                    while let Some(item) = queue.get().await {
                        {
                            let mut history = history.lock().unwrap();
                            assert!(history.in_flight.insert(*item), "{} twice", *item);
                            history.tick += 1;
                            let tick = history.tick;
                            history.last_start.insert(*item, tick);
                        }
                        history.lock().unwrap().in_flight.remove(&*item);
                        drop(item);
                    }
                });
            })
        })
        .collect();
    let producer = {
        let queue = queue.clone();
        let history = Arc::clone(&history);
        thread::spawn(move || {
            for &item in items {
                {
                    let mut history = history.lock().unwrap();
                    history.tick += 1;
                    let tick = history.tick;
                    history.last_add.insert(item, tick);
                }
                queue.add(item);
            }
        })
    };
    producer.join().unwrap();
    if drain {
        // As client-go, a drain waits for the items being processed; items still queued are
        // handed out after it (checked below by the no-lost-add check).
        block_on(queue.shut_down_with_drain());
    } else {
        queue.shut_down();
    }
    for worker in workers {
        worker.join().unwrap();
    }
    let history = history.lock().unwrap();
    for (item, added) in &history.last_add {
        let started = history.last_start.get(item).copied().unwrap_or(0);
        assert!(started > *added, "the add of {item} at {added} was lost");
    }
    assert_eq!(queue.len(), 0);
}

#[test]
fn one_consumer_same_item_twice() {
    model(|| produce_and_consume(&[1, 1], 1, false));
}

#[test]
fn one_consumer_two_items_with_drain() {
    model(|| produce_and_consume(&[1, 2], 1, true));
}

#[test]
fn two_consumers_same_item_twice() {
    model_bounded(2, || produce_and_consume(&[1, 1], 2, false));
}

#[test]
fn two_consumers_with_drain() {
    model_bounded(2, || produce_and_consume(&[1, 2], 2, true));
}

/// A getter parked on an empty queue is woken by an add from another thread (without any
/// shutdown to wake it), and by a `done` that hands a re-added item back.
#[test]
fn an_add_wakes_a_parked_getter() {
    model(|| {
        let queue: Queue<u8> = Queue::new();
        let getters: Vec<_> = (0..2)
            .map(|_| {
                let queue = queue.clone();
                thread::spawn(move || block_on(queue.get()).map(|item| *item))
            })
            .collect();
        queue.add(1);
        queue.add(2);
        let mut got: Vec<_> = getters
            .into_iter()
            .map(|getter| getter.join().unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, [Some(1), Some(2)]);
    });
}

#[test]
fn a_done_wakes_a_parked_getter_for_a_re_added_item() {
    model(|| {
        let queue: Queue<u8> = Queue::new();
        queue.add(1);
        let held = block_on(queue.get()).unwrap();
        queue.add(1);
        let getter = {
            let queue = queue.clone();
            thread::spawn(move || block_on(queue.get()).map(|item| *item))
        };
        drop(held);
        assert_eq!(getter.join().unwrap(), Some(1));
    });
}

/// A drain returns only after every item handed out is done.
#[test]
fn drain_waits_for_items_in_flight() {
    model(|| {
        let queue: Queue<u8> = Queue::new();
        queue.add(1);
        queue.add(2);
        let finished = Arc::new(Mutex::new(HashSet::new()));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let item = block_on(queue.get()).unwrap().into_owned();
                let finished = Arc::clone(&finished);
                thread::spawn(move || {
                    finished.lock().unwrap().insert(*item);
                    drop(item);
                })
            })
            .collect();
        block_on(queue.shut_down_with_drain());
        assert_eq!(
            finished.lock().unwrap().len(),
            2,
            "the drain returned early"
        );
        for worker in workers {
            worker.join().unwrap();
        }
    });
}

/// A `shut_down` during a drain ends the wait although an item is still in flight.
#[test]
fn shut_down_cancels_a_drain() {
    model(|| {
        let queue: Queue<u8> = Queue::new();
        queue.add(1);
        let held = block_on(queue.get()).unwrap();
        let drainer = {
            let queue = queue.clone();
            thread::spawn(move || block_on(queue.shut_down_with_drain()))
        };
        while !queue.shutting_down() {
            thread::yield_now();
        }
        queue.shut_down();
        drainer.join().unwrap();
        drop(held);
    });
}

/// An item re-added while processing is handed out again after done, to whichever worker.
#[test]
fn re_add_while_processing() {
    model(|| {
        let queue: Queue<u8> = Queue::new();
        queue.add(1);
        let first = block_on(queue.get()).unwrap();
        let other = {
            let queue = queue.clone();
            thread::spawn(move || block_on(queue.get()).map(|item| *item))
        };
        queue.add(1);
        drop(first);
        // Either the other worker got the re-added item, or it sees shutdown with it handed back.
        let mine = {
            queue.shut_down();
            block_on(queue.get()).map(|item| *item)
        };
        let theirs = other.join().unwrap();
        let mut got: Vec<_> = [mine, theirs].into_iter().flatten().collect();
        got.sort_unstable();
        assert_eq!(got, [1]);
    });
}
