//! The same-run yardstick of the throughput benchmark: client-go's basic work queue design as Go
//! runs it, written plainly in Rust. One mutex and a condition variable guard an ordered list
//! and two sets (items waiting, items being processed); each item is copied into the sets it
//! enters.
//!
//! The published client-go figures were measured on a machine of this kind, but this machine's
//! speed moves by 2× from hour to hour; running this design in the same process, on the same
//! keys, says how fast the host is right now. It uses the same hasher as ctrlkit, and blocking
//! threads for its waiting consumers (Go parks goroutines instead). As Go's `sync.Cond.Signal`,
//! a signal with nobody waiting costs no system call.

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Condvar, Mutex, PoisonError};

type Set<T> = HashSet<T, foldhash::fast::RandomState>;

struct State<T> {
    order: VecDeque<T>,
    dirty: Set<T>,
    processing: Set<T>,
    shutting_down: bool,
    /// Consumers blocked in `get`.
    sleepers: usize,
}

/// client-go's `Typed` queue, without metrics: add, blocking get, done, shut down.
pub struct ClientGoQueue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T: Clone + Eq + Hash> ClientGoQueue<T> {
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State {
                order: VecDeque::new(),
                dirty: Set::default(),
                processing: Set::default(),
                shutting_down: false,
                sleepers: 0,
            }),
            ready: Condvar::new(),
        }
    }

    pub fn add(&self, item: T) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.shutting_down || state.dirty.contains(&item) {
            return;
        }
        state.dirty.insert(item.clone());
        if state.processing.contains(&item) {
            return;
        }
        state.order.push_back(item);
        self.signal(&state);
    }

    fn signal(&self, state: &State<T>) {
        if state.sleepers > 0 {
            self.ready.notify_one();
        }
    }

    /// Blocks until an item is ready; `None` once shut down and empty.
    pub fn get(&self) -> Option<T> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while state.order.is_empty() && !state.shutting_down {
            state.sleepers += 1;
            state = self
                .ready
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.sleepers -= 1;
        }
        let item = state.order.pop_front()?;
        state.processing.insert(item.clone());
        state.dirty.remove(&item);
        Some(item)
    }

    pub fn done(&self, item: &T) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.processing.remove(item);
        if state.dirty.contains(item) {
            state.order.push_back(item.clone());
            self.signal(&state);
        }
    }

    pub fn shut_down(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .shutting_down = true;
        self.ready.notify_all();
    }

    pub fn len(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .order
            .len()
    }
}
