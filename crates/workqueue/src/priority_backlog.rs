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

pub(crate) struct PriorityBacklog {
    /// Hand-out order: priority descending, then sequence ascending.
    by_rank: BTreeMap<(Reverse<i32>, u64), u32>,
    /// Arrival order (never changes for a queued item) with when it became ready.
    by_age: BTreeMap<u64, (Instant, Reverse<i32>, u64)>,
    index: HashMap<u32, Place>,
    next_seq: u64,
    max_wait: Duration,
}

impl PriorityBacklog {
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

impl Backlog for PriorityBacklog {
    type Rank = i32;

    fn merge(a: i32, b: i32) -> i32 {
        a.max(b)
    }

    fn push(&mut self, slot: u32, priority: i32) {
        let seq = self.next_seq();
        let place = Place {
            priority,
            seq,
            arrival: seq,
        };
        self.index.insert(slot, place);
        self.by_rank.insert((Reverse(priority), seq), slot);
        self.by_age
            .insert(seq, (Instant::now(), Reverse(priority), seq));
    }

    fn touch(&mut self, slot: u32, priority: i32) {
        let Some(place) = self.index.get(&slot).copied() else {
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
        if let Some(entry) = self.index.get_mut(&slot) {
            entry.priority = priority;
            entry.seq = seq;
        }
    }

    fn pop(&mut self) -> Option<u32> {
        let overdue = self
            .by_age
            .first_key_value()
            .filter(|(_, (since, _, _))| since.elapsed() >= self.max_wait)
            .map(|(_, (_, priority, seq))| (*priority, *seq));
        let slot = match overdue {
            Some(key) => self.by_rank.remove(&key)?,
            None => self.by_rank.pop_first()?.1,
        };
        if let Some(place) = self.index.remove(&slot) {
            self.by_age.remove(&place.arrival);
        }
        Some(slot)
    }

    fn len(&self) -> usize {
        self.by_rank.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(backlog: &mut PriorityBacklog) -> Vec<u32> {
        std::iter::from_fn(|| backlog.pop()).collect()
    }

    #[test]
    fn highest_priority_first_and_fifo_within_a_priority() {
        let mut backlog = PriorityBacklog::new(Duration::MAX);
        backlog.push(1, -100);
        backlog.push(2, 0);
        backlog.push(3, 10);
        backlog.push(4, 0);
        backlog.push(5, -100);
        assert_eq!(backlog.len(), 5);
        assert_eq!(drain(&mut backlog), [3, 2, 4, 1, 5]);
        assert_eq!(backlog.len(), 0);
    }

    #[test]
    fn touch_raises_never_lowers_and_moves_to_the_back_of_the_new_level() {
        let mut backlog = PriorityBacklog::new(Duration::MAX);
        backlog.push(1, 0);
        backlog.push(2, 1);
        backlog.touch(1, 1);
        backlog.push(3, 5);
        backlog.touch(3, 2);
        assert_eq!(drain(&mut backlog), [3, 2, 1]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_ready_for_max_wait_goes_before_later_ones() {
        let mut backlog = PriorityBacklog::new(Duration::from_secs(10));
        backlog.push(9, -100);
        tokio::time::sleep(Duration::from_secs(5)).await;
        backlog.push(1, 0);
        assert_eq!(backlog.pop(), Some(1));
        tokio::time::sleep(Duration::from_secs(5)).await;
        backlog.push(2, 0);
        // `initial-list` has now waited 10 s: it overtakes the newer high-priority change.
        assert_eq!(backlog.pop(), Some(9));
        assert_eq!(backlog.pop(), Some(2));
        assert_eq!(backlog.pop(), None);
    }
}
