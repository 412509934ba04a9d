//! Property tests: random sequences of operations against a plain model of client-go's semantics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use ctrlkit_workqueue::{AddOpts, PriorityQueue, Queue, WorkItem};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8),
    AddCloned(u8),
    AddWithPriority(u8, i8),
    Get,
    Done(usize),
    ShutDown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..8).prop_map(Op::Add),
        2 => (0u8..8).prop_map(Op::AddCloned),
        2 => (0u8..8, -2i8..3).prop_map(|(item, priority)| Op::AddWithPriority(item, priority)),
        4 => Just(Op::Get),
        3 => (0usize..8).prop_map(Op::Done),
        1 => Just(Op::ShutDown),
    ]
}

/// Polls `future` once; `None` if it is not ready (and then drops it, cancelling it).
fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// client-go's queue, written as plainly as possible; `priority` orders ready items when set.
#[derive(Default)]
struct Model {
    ready: VecDeque<(u8, i8)>,
    dirty: HashSet<u8>,
    processing: HashSet<u8>,
    pending_priority: std::collections::HashMap<u8, i8>,
    shutting_down: bool,
    by_priority: bool,
}

impl Model {
    fn add(&mut self, item: u8, priority: i8) {
        if self.shutting_down {
            return;
        }
        if self.dirty.contains(&item) {
            if let Some(entry) = self.ready.iter_mut().find(|(queued, _)| *queued == item) {
                if priority > entry.1 {
                    // Raised: to the back of its new level.
                    self.ready.retain(|(queued, _)| *queued != item);
                    self.ready.push_back((item, priority));
                }
            } else {
                let pending = self.pending_priority.entry(item).or_insert(priority);
                *pending = (*pending).max(priority);
            }
            return;
        }
        self.dirty.insert(item);
        if self.processing.contains(&item) {
            self.pending_priority.insert(item, priority);
            return;
        }
        self.ready.push_back((item, priority));
    }

    fn get(&mut self) -> Option<Option<u8>> {
        let index = if self.by_priority {
            // Highest priority, earliest within it.
            let best = self.ready.iter().map(|(_, p)| *p).max();
            best.and_then(|best| self.ready.iter().position(|(_, p)| *p == best))
        } else if self.ready.is_empty() {
            None
        } else {
            Some(0)
        };
        match index {
            Some(index) => {
                let (item, _) = self.ready.remove(index).unwrap();
                self.dirty.remove(&item);
                self.processing.insert(item);
                Some(Some(item))
            }
            None if self.shutting_down => Some(None),
            None => None,
        }
    }

    fn done(&mut self, item: u8) {
        self.processing.remove(&item);
        if self.dirty.contains(&item) {
            let priority = self.pending_priority.remove(&item).unwrap_or(0);
            self.ready.push_back((item, priority));
        }
    }
}

fn check_queue(ops: Vec<Op>) {
    let queue: Queue<u8> = Queue::new();
    let mut model = Model::default();
    let mut held: Vec<WorkItem<u8, &Queue<u8>>> = Vec::new();
    for op in ops {
        match op {
            Op::Add(item) | Op::AddWithPriority(item, _) => {
                queue.add(item);
                model.add(item, 0);
            }
            Op::AddCloned(item) => {
                queue.add_cloned(&item);
                model.add(item, 0);
            }
            Op::Get => {
                let got = poll_once(queue.get()).map(|item| {
                    item.map(|item| {
                        let value = *item;
                        held.push(item);
                        value
                    })
                });
                assert_eq!(got, model.get());
            }
            Op::Done(index) => {
                if !held.is_empty() {
                    let item = held.remove(index % held.len());
                    model.done(*item);
                    drop(item);
                }
            }
            Op::ShutDown => {
                queue.shut_down();
                model.shutting_down = true;
            }
        }
        assert_eq!(queue.len(), model.ready.len());
        assert_eq!(queue.shutting_down(), model.shutting_down);
    }
}

fn check_priority_queue(ops: Vec<Op>) {
    let queue: PriorityQueue<u8> = PriorityQueue::builder()
        .max_wait(std::time::Duration::MAX)
        .build();
    let mut model = Model {
        by_priority: true,
        ..Model::default()
    };
    let mut held = Vec::new();
    for op in ops {
        match op {
            Op::Add(item) => {
                queue.add(item);
                model.add(item, 0);
            }
            Op::AddCloned(item) => {
                queue.add_cloned(&item);
                model.add(item, 0);
            }
            Op::AddWithPriority(item, priority) => {
                queue.add_with_opts(item, AddOpts::priority(i32::from(priority)));
                model.add(item, priority);
            }
            Op::Get => {
                let got = poll_once(queue.get()).map(|item| {
                    item.map(|item| {
                        let value = *item;
                        held.push(item);
                        value
                    })
                });
                assert_eq!(got, model.get());
            }
            Op::Done(index) => {
                if !held.is_empty() {
                    let item = held.remove(index % held.len());
                    model.done(*item);
                    drop(item);
                }
            }
            Op::ShutDown => {
                queue.shut_down();
                model.shutting_down = true;
            }
        }
        assert_eq!(queue.len(), model.ready.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn queue_matches_the_model(ops in proptest::collection::vec(op(), 0..80)) {
        check_queue(ops);
    }

    #[test]
    fn priority_queue_matches_the_model(ops in proptest::collection::vec(op(), 0..80)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async { check_priority_queue(ops) });
    }
}
