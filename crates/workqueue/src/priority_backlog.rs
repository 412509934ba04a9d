//! The backlog of [`PriorityQueue`](crate::PriorityQueue): highest priority first, FIFO within a
//! priority, and aging so that no item waits behind higher priorities forever.
//!
//! Aging: once an item has been ready for `max_wait`, it is handed out before every item that
//! became ready after it, whatever their priorities. So an item is never overtaken by more than
//! the items that arrive during its first `max_wait`: under a steady stream of high-priority
//! changes a low-priority item waits at most `max_wait` plus the time to process the items that
//! were ready before it. Controller-runtime's queue has no such bound (its issue #3496: items of
//! the initial list starve behind a steady stream of updates).

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

use crate::backlog::Backlog;
use crate::sync::HashMap;

/// Where an item sits: its priority, its place among equal priorities, and its age rank.
#[derive(Clone, Copy)]
struct Place {
    priority: i32,
    seq: u64,
    arrival: u64,
}

pub(crate) struct PriorityBacklog<T> {
    /// Hand-out order: priority descending, then sequence ascending.
    by_rank: BTreeMap<(Reverse<i32>, u64), T>,
    /// Arrival order (never changes for a queued item) with when it became ready.
    by_age: BTreeMap<u64, (Instant, Reverse<i32>, u64)>,
    index: HashMap<T, Place>,
    next_seq: u64,
    max_wait: Duration,
}

impl<T> PriorityBacklog<T> {
    pub(crate) fn new(max_wait: Duration) -> Self {
        Self {
            by_rank: BTreeMap::new(),
            by_age: BTreeMap::new(),
            index: HashMap::default(),
            next_seq: 0,
            max_wait,
        }
    }

    fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }
}

impl<T: Clone + Eq + Hash + Send> Backlog<T> for PriorityBacklog<T> {
    type Rank = i32;

    fn merge(a: i32, b: i32) -> i32 {
        a.max(b)
    }

    fn push(&mut self, item: T, priority: i32) {
        let seq = self.next_seq();
        let place = Place {
            priority,
            seq,
            arrival: seq,
        };
        self.index.insert(item.clone(), place);
        self.by_rank.insert((Reverse(priority), seq), item);
        self.by_age
            .insert(seq, (Instant::now(), Reverse(priority), seq));
    }

    fn touch(&mut self, item: &T, priority: i32) {
        let Some(place) = self.index.get(item).copied() else {
            return;
        };
        if priority <= place.priority {
            return;
        }
        // A raised priority goes to the back of its new level, as controller-runtime; its age
        // (arrival) is kept, so aging still counts from when it first became ready.
        let Some(stored) = self.by_rank.remove(&(Reverse(place.priority), place.seq)) else {
            return;
        };
        let seq = self.next_seq();
        self.by_rank.insert((Reverse(priority), seq), stored);
        if let Some(age) = self.by_age.get_mut(&place.arrival) {
            age.1 = Reverse(priority);
            age.2 = seq;
        }
        if let Some(entry) = self.index.get_mut(item) {
            entry.priority = priority;
            entry.seq = seq;
        }
    }

    fn pop(&mut self) -> Option<T> {
        let overdue = self
            .by_age
            .first_key_value()
            .filter(|(_, (since, _, _))| since.elapsed() >= self.max_wait)
            .map(|(_, (_, priority, seq))| (*priority, *seq));
        let item = match overdue {
            Some(key) => self.by_rank.remove(&key)?,
            None => self.by_rank.pop_first()?.1,
        };
        if let Some(place) = self.index.remove(&item) {
            self.by_age.remove(&place.arrival);
        }
        Some(item)
    }

    fn len(&self) -> usize {
        self.by_rank.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(backlog: &mut PriorityBacklog<&'static str>) -> Vec<&'static str> {
        std::iter::from_fn(|| backlog.pop()).collect()
    }

    #[test]
    fn highest_priority_first_and_fifo_within_a_priority() {
        let mut backlog = PriorityBacklog::new(Duration::MAX);
        backlog.push("low-a", -100);
        backlog.push("mid-a", 0);
        backlog.push("high", 10);
        backlog.push("mid-b", 0);
        backlog.push("low-b", -100);
        assert_eq!(backlog.len(), 5);
        assert_eq!(
            drain(&mut backlog),
            ["high", "mid-a", "mid-b", "low-a", "low-b"]
        );
        assert_eq!(backlog.len(), 0);
    }

    #[test]
    fn touch_raises_never_lowers_and_moves_to_the_back_of_the_new_level() {
        let mut backlog = PriorityBacklog::new(Duration::MAX);
        backlog.push("foo", 0);
        backlog.push("bar", 1);
        backlog.touch(&"foo", 1);
        backlog.push("baz", 5);
        backlog.touch(&"baz", 2);
        assert_eq!(drain(&mut backlog), ["baz", "bar", "foo"]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_ready_for_max_wait_goes_before_later_ones() {
        let mut backlog = PriorityBacklog::new(Duration::from_secs(10));
        backlog.push("initial-list", -100);
        tokio::time::sleep(Duration::from_secs(5)).await;
        backlog.push("change-1", 0);
        assert_eq!(backlog.pop(), Some("change-1"));
        tokio::time::sleep(Duration::from_secs(5)).await;
        backlog.push("change-2", 0);
        // `initial-list` has now waited 10 s: it overtakes the newer high-priority change.
        assert_eq!(backlog.pop(), Some("initial-list"));
        assert_eq!(backlog.pop(), Some("change-2"));
        assert_eq!(backlog.pop(), None);
    }
}
