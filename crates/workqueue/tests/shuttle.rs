//! Randomized model checking with shuttle: thousands of random and PCT (probabilistic
//! concurrency testing, which finds any bug of depth 3 with a known probability per run)
//! schedules of the queue's promises: no item is processed by two workers at once, no add is
//! lost, a drain waits for every item in flight, and a cancelled `get` loses no wake-up.
//! (`tests/loom.rs` checks small cases exhaustively.)
//!
//! Run with `cargo test -p ctrlkit-workqueue --features shuttle --test shuttle`; the feature
//! swaps the queue's lock for shuttle's so that shuttle controls every step.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use ctrlkit_workqueue::Queue;
use shuttle::future::{block_on, spawn, yield_now};
use shuttle::sync::Mutex;

/// A logical clock and what happened at each tick, shared by the tasks of one run.
#[derive(Default)]
struct History {
    tick: u64,
    in_flight: HashSet<u8>,
    last_add: HashMap<u8, u64>,
    last_start: HashMap<u8, u64>,
}

impl History {
    fn next(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }
}

/// `producers` tasks add `items` (each item by every producer), `consumers` tasks process until
/// shutdown. Checks: never two workers on one item; every add is followed by a processing start
/// of its item (no add lost); the queue ends empty.
fn produce_and_consume(producers: usize, consumers: usize, items: &'static [u8]) {
    block_on(async move {
        let queue: Queue<u8> = Queue::new();
        let history = Arc::new(Mutex::new(History::default()));

        let consumer_tasks: Vec<_> = (0..consumers)
            .map(|_| {
                let queue = queue.clone();
                let history = Arc::clone(&history);
                spawn(async move {
                    while let Some(item) = queue.get().await {
                        {
                            let mut history = history.lock().unwrap();
                            assert!(
                                history.in_flight.insert(*item),
                                "item {} handed to two workers",
                                *item
                            );
                            let tick = history.next();
                            history.last_start.insert(*item, tick);
                        }
                        history.lock().unwrap().in_flight.remove(&*item);
                        drop(item);
                    }
                })
            })
            .collect();
        let producer_tasks: Vec<_> = (0..producers)
            .map(|_| {
                let queue = queue.clone();
                let history = Arc::clone(&history);
                spawn(async move {
                    for &item in items {
                        {
                            let mut history = history.lock().unwrap();
                            let tick = history.next();
                            history.last_add.insert(item, tick);
                        }
                        queue.add(item);
                    }
                })
            })
            .collect();

        for producer in producer_tasks {
            producer.await.unwrap();
        }
        queue.shut_down_with_drain().await;
        // Shutdown keeps handing out what is queued: consumers finish everything.
        for consumer in consumer_tasks {
            consumer.await.unwrap();
        }
        let history = history.lock().unwrap();
        for (item, added) in &history.last_add {
            let started = history.last_start.get(item).copied().unwrap_or(0);
            assert!(
                started > *added,
                "item {item} added at tick {added} but last started at {started}: an add was lost"
            );
        }
        assert_eq!(queue.len(), 0);
    });
}

#[test]
fn random_two_producers_two_consumers() {
    shuttle::check_random(|| produce_and_consume(2, 2, &[1, 2, 1]), 20000);
}

#[test]
fn pct_two_producers_two_consumers() {
    shuttle::check_pct(|| produce_and_consume(2, 2, &[1, 2, 1]), 20000, 3);
}

#[test]
fn random_three_producers_three_consumers() {
    shuttle::check_random(|| produce_and_consume(3, 3, &[1, 2, 3, 1, 2]), 10000);
}

#[test]
fn pct_three_producers_three_consumers() {
    shuttle::check_pct(|| produce_and_consume(3, 3, &[1, 2, 1, 3]), 10000, 3);
}

/// A drain returns only after every handed-out item is done.
fn drain_waits() {
    block_on(async {
        let queue: Queue<u8> = Queue::new();
        queue.add(1);
        queue.add(2);
        let finished = Arc::new(Mutex::new(HashSet::new()));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let queue = queue.clone();
                let finished = Arc::clone(&finished);
                spawn(async move {
                    if let Some(item) = queue.get().await {
                        yield_now().await;
                        finished.lock().unwrap().insert(*item);
                        drop(item);
                    }
                })
            })
            .collect();
        let drainer = spawn({
            let queue = queue.clone();
            let finished = Arc::clone(&finished);
            async move {
                queue.shut_down_with_drain().await;
                // Whatever was handed out before the drain ended has finished.
                finished.lock().unwrap().len()
            }
        });
        for worker in workers {
            worker.await.unwrap();
        }
        let finished_at_drain = drainer.await.unwrap();
        // Both items were handed out (shutdown still hands out queued items), and the drain
        // saw every one that was in flight when it started finish.
        assert_eq!(finished.lock().unwrap().len(), 2);
        assert!(finished_at_drain <= 2);
        assert_eq!(queue.len(), 0);
    });
}

#[test]
fn pct_drain_waits_for_in_flight_items() {
    shuttle::check_pct(drain_waits, 20000, 3);
}

/// A drain cancelled by a later `shut_down` returns although an item is still in flight.
#[test]
fn pct_shut_down_cancels_a_drain() {
    shuttle::check_pct(
        || {
            block_on(async {
                let queue: Queue<u8> = Queue::new();
                queue.add(1);
                let held = queue.get().await.unwrap();
                let drainer = spawn({
                    let queue = queue.clone();
                    async move { queue.shut_down_with_drain().await }
                });
                let canceller = spawn({
                    let queue = queue.clone();
                    async move {
                        // Cancel only once the drain has begun (a drain started after a plain
                        // shutdown waits, as in client-go).
                        while !queue.shutting_down() {
                            yield_now().await;
                        }
                        queue.shut_down()
                    }
                });
                canceller.await.unwrap();
                drainer.await.unwrap();
                drop(held);
            });
        },
        20000,
        3,
    );
}

/// A getter that gives up after being woken passes its wake-up on: the other getter is not left
/// asleep beside a ready item (shuttle reports a deadlock if it is).
#[test]
fn pct_a_cancelled_get_loses_no_wake_up() {
    shuttle::check_pct(
        || {
            block_on(async {
                let queue: Queue<u8> = Queue::new();
                let waiter = spawn({
                    let queue = queue.clone();
                    async move { *queue.get().await.unwrap() }
                });
                let quitter = spawn({
                    let queue = queue.clone();
                    async move {
                        // Park once, then give up without taking anything.
                        let mut get = pin!(queue.get());
                        let first = get.as_mut().poll(&mut Context::from_waker(Waker::noop()));
                        if let Poll::Ready(Some(item)) = first {
                            // It got the item before parking: hand it back.
                            queue.add(*item);
                        }
                    }
                });
                let producer = spawn({
                    let queue = queue.clone();
                    async move { queue.add(7) }
                });
                producer.await.unwrap();
                quitter.await.unwrap();
                assert_eq!(waiter.await.unwrap(), 7);
            });
        },
        20000,
        3,
    );
}
