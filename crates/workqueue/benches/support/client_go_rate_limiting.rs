//! The yardstick of scenario (c): client-go's rate-limiting queue design, written plainly in
//! Rust over the basic queue of `client_go_design.rs`. As client-go has it: the exponential
//! per-item failure limiter is a mutex over a map of failure counts; a delayed add goes through
//! a channel of 1,000 (`waitingForAddCh`) to one waiting loop, which keeps the waiting items in
//! a heap by ready time (an earlier time for an item already waiting wins) and adds each to the
//! queue when its time comes.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::client_go_design::ClientGoQueue;

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// An item waiting in the heap, earliest first.
struct Waiting<T> {
    ready: Instant,
    item: T,
}

impl<T> PartialEq for Waiting<T> {
    fn eq(&self, other: &Self) -> bool {
        self.ready == other.ready
    }
}
impl<T> Eq for Waiting<T> {}
impl<T> PartialOrd for Waiting<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Waiting<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        other.ready.cmp(&self.ready)
    }
}

/// client-go's `TypedRateLimitingQueue` over an `ItemExponentialFailureRateLimiter`.
pub struct ClientGoRateLimitingQueue<T> {
    queue: Arc<ClientGoQueue<T>>,
    failures: Mutex<Map<T, u32>>,
    base: Duration,
    max: Duration,
    waiting: Option<SyncSender<(T, Instant)>>,
    loop_thread: Option<JoinHandle<()>>,
}

impl<T: Clone + Eq + Hash + Send + 'static> ClientGoRateLimitingQueue<T> {
    pub fn new(base: Duration, max: Duration) -> Self {
        let queue = Arc::new(ClientGoQueue::new());
        let (waiting, arrivals) = mpsc::sync_channel(1000);
        let target = Arc::clone(&queue);
        let loop_thread = std::thread::spawn(move || waiting_loop(&target, &arrivals));
        Self {
            queue,
            failures: Mutex::new(Map::default()),
            base,
            max,
            waiting: Some(waiting),
            loop_thread: Some(loop_thread),
        }
    }

    /// The limiter's `When`: base × 2^failures, at most `max`; counts one more failure.
    fn when(&self, item: &T) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let count = failures.entry(item.clone()).or_insert(0);
        let backoff = self
            .base
            .checked_mul(2u32.saturating_pow(*count))
            .map_or(self.max, |backoff| backoff.min(self.max));
        *count += 1;
        backoff
    }

    pub fn add_rate_limited(&self, item: T) {
        let delay = self.when(&item);
        if delay.is_zero() {
            self.queue.add(item);
        } else if let Some(waiting) = &self.waiting {
            let _ = waiting.send((item, Instant::now() + delay));
        }
    }

    pub fn get(&self) -> Option<T> {
        self.queue.get()
    }

    pub fn forget(&self, item: &T) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(item);
    }

    pub fn done(&self, item: &T) {
        self.queue.done(item);
    }
}

impl<T> Drop for ClientGoRateLimitingQueue<T> {
    fn drop(&mut self) {
        drop(self.waiting.take());
        if let Some(thread) = self.loop_thread.take() {
            let _ = thread.join();
        }
    }
}

/// client-go's `waitingLoop`: adds each waiting item to the queue once its time comes.
fn waiting_loop<T: Clone + Eq + Hash>(
    queue: &ClientGoQueue<T>,
    arrivals: &mpsc::Receiver<(T, Instant)>,
) {
    let mut heap: BinaryHeap<Waiting<T>> = BinaryHeap::new();
    let mut known: Map<T, Instant> = Map::default();
    loop {
        let now = Instant::now();
        while heap.peek().is_some_and(|next| next.ready <= now) {
            if let Some(Waiting { ready, item }) = heap.pop()
                && known.get(&item) == Some(&ready)
            {
                known.remove(&item);
                queue.add(item);
            }
        }
        let received = match heap.peek() {
            Some(next) => arrivals.recv_timeout(next.ready.saturating_duration_since(now)),
            None => arrivals.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok((item, ready)) => {
                arrive(queue, &mut known, &mut heap, item, ready);
                while let Ok((item, ready)) = arrivals.try_recv() {
                    arrive(queue, &mut known, &mut heap, item, ready);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// An item that arrived at the waiting loop: added at once if its time has come, else kept in
/// the heap unless it already waits for an earlier time.
fn arrive<T: Clone + Eq + Hash>(
    queue: &ClientGoQueue<T>,
    known: &mut Map<T, Instant>,
    heap: &mut BinaryHeap<Waiting<T>>,
    item: T,
    ready: Instant,
) {
    if ready <= Instant::now() {
        queue.add(item);
        return;
    }
    match known.get(&item) {
        Some(earlier) if *earlier <= ready => {}
        _ => {
            known.insert(item.clone(), ready);
            heap.push(Waiting { ready, item });
        }
    }
}
