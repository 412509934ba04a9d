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
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use crate::backlog::Backlog;

/// Where a queued item sits: its priority, its sequence number within the priority's FIFO, and
/// its arrival (the sequence number it was first queued under, which fixes its age rank).
#[derive(Clone, Copy)]
struct Place {
    priority: i32,
    seq: u64,
    arrival: u64,
}

/// Per priority a FIFO and one FIFO of arrivals, with the queued items' places in a table indexed
/// by slot: push, touch and pop are O(1) apart from finding the highest priority level (a map of
/// the few priorities in use). A touch or an overdue pop leaves an entry behind in a FIFO; such an
/// entry no longer matches its slot's place, is skipped when it reaches the front, and the FIFOs
/// are compacted once stale entries outnumber live ones.
pub(crate) struct PriorityBacklog {
    /// Hand-out order: priority descending, then FIFO (sequence number, slot).
    levels: BTreeMap<Reverse<i32>, VecDeque<(u64, u32)>>,
    /// Arrival order: (arrival, when it became ready, slot).
    arrivals: VecDeque<(u64, Instant, u32)>,
    /// By slot, the place of each queued item.
    places: Vec<Option<Place>>,
    len: usize,
    /// Entries in `levels` and `arrivals`, live and stale.
    entries: usize,
    next_seq: u64,
    max_wait: Duration,
}

impl PriorityBacklog {
    pub(crate) fn new(max_wait: Duration) -> Self {
        Self {
            levels: BTreeMap::new(),
            arrivals: VecDeque::new(),
            places: Vec::new(),
            len: 0,
            entries: 0,
            next_seq: 0,
            max_wait,
        }
    }

    fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    fn place(&self, slot: u32) -> Option<Place> {
        place_in(&self.places, slot)
    }

    fn take(&mut self, slot: u32) -> u32 {
        if let Some(place) = self.places.get_mut(slot as usize) {
            *place = None;
        }
        self.len -= 1;
        slot
    }

    /// Drops stale entries once they outnumber the live ones (two entries per queued item).
    fn compact(&mut self) {
        if self.entries <= 4 * self.len + 64 {
            return;
        }
        let places = &self.places;
        for level in self.levels.values_mut() {
            level.retain(|&(seq, slot)| ranked(places, seq, slot));
        }
        self.levels.retain(|_, level| !level.is_empty());
        self.arrivals
            .retain(|&(arrival, _, slot)| arrived(places, arrival, slot));
        self.entries = self.levels.values().map(VecDeque::len).sum::<usize>() + self.arrivals.len();
    }

    /// The oldest item, if it has waited `max_wait`.
    fn overdue(&mut self) -> Option<u32> {
        while let Some(&front) = self.arrivals.front() {
            let (arrival, since, slot) = front;
            if arrived(&self.places, arrival, slot) {
                if since.elapsed() < self.max_wait {
                    return None;
                }
                self.arrivals.pop_front();
                self.entries -= 1;
                return Some(slot);
            }
            self.arrivals.pop_front();
            self.entries -= 1;
        }
        None
    }

    /// The first item of the highest priority.
    fn highest(&mut self) -> Option<u32> {
        loop {
            let mut level = self.levels.first_entry()?;
            while let Some(&front) = level.get().front() {
                level.get_mut().pop_front();
                self.entries -= 1;
                let (seq, slot) = front;
                if ranked(&self.places, seq, slot) {
                    if level.get().is_empty() {
                        level.remove();
                    }
                    return Some(slot);
                }
            }
            level.remove();
        }
    }
}

/// The place of `slot`, if it is queued.
fn place_in(places: &[Option<Place>], slot: u32) -> Option<Place> {
    places.get(slot as usize).copied().flatten()
}

/// Whether a level entry (`seq`, `slot`) is still where `slot` is queued.
fn ranked(places: &[Option<Place>], seq: u64, slot: u32) -> bool {
    place_in(places, slot).is_some_and(|place| place.seq == seq)
}

/// Whether an arrival entry (`arrival`, `slot`) is still `slot`'s.
fn arrived(places: &[Option<Place>], arrival: u64, slot: u32) -> bool {
    place_in(places, slot).is_some_and(|place| place.arrival == arrival)
}

impl Backlog for PriorityBacklog {
    type Rank = i32;

    fn merge(a: i32, b: i32) -> i32 {
        a.max(b)
    }

    fn push(&mut self, slot: u32, priority: i32) {
        if self.place(slot).is_some() {
            // Not reachable while the core's invariants hold (a queued slot is touched).
            self.touch(slot, priority);
            return;
        }
        let seq = self.next_seq();
        let index = slot as usize;
        if index >= self.places.len() {
            self.places.resize(index + 1, None);
        }
        self.places[index] = Some(Place {
            priority,
            seq,
            arrival: seq,
        });
        self.len += 1;
        self.levels
            .entry(Reverse(priority))
            .or_default()
            .push_back((seq, slot));
        self.arrivals.push_back((seq, Instant::now(), slot));
        self.entries += 2;
        self.compact();
    }

    fn touch(&mut self, slot: u32, priority: i32) {
        let Some(place) = self.place(slot) else {
            return;
        };
        if priority <= place.priority {
            return;
        }
        // A raised priority goes to the back of its new level, as controller-runtime; its age
        // (arrival) is kept, so aging still counts from when it first became ready. The entry
        // in the old level is now stale.
        let seq = self.next_seq();
        self.places[slot as usize] = Some(Place {
            priority,
            seq,
            arrival: place.arrival,
        });
        self.levels
            .entry(Reverse(priority))
            .or_default()
            .push_back((seq, slot));
        self.entries += 1;
        self.compact();
    }

    fn pop(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let slot = match self.overdue() {
            Some(slot) => slot,
            None => self.highest()?,
        };
        let slot = self.take(slot);
        self.compact();
        Some(slot)
    }

    fn len(&self) -> usize {
        self.len
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

    /// The backlog against a plain model (a list ordered by priority, then by when each item
    /// took its priority) through many pushes, touches and pops: the same order, and the
    /// entries left behind by touches stay within the compaction bound.
    #[test]
    fn matches_a_plain_model_and_stays_compact() {
        let mut backlog = PriorityBacklog::new(Duration::MAX);
        // (slot, priority, sequence) of the queued items.
        let mut model: Vec<(u32, i32, u64)> = Vec::new();
        let mut seq = 0u64;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut random = |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        for _ in 0..200_000 {
            let slot = u32::try_from(random(64)).unwrap();
            let priority = i32::try_from(random(5)).unwrap() - 2;
            match random(3) {
                0 | 1 => {
                    seq += 1;
                    match model.iter_mut().find(|(s, ..)| *s == slot) {
                        Some(queued) if priority > queued.1 => {
                            *queued = (slot, priority, seq);
                            backlog.touch(slot, priority);
                        }
                        Some(_) => backlog.touch(slot, priority),
                        None => {
                            model.push((slot, priority, seq));
                            backlog.push(slot, priority);
                        }
                    }
                }
                _ => {
                    let next = model
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, (_, priority, seq))| (Reverse(*priority), *seq))
                        .map(|(index, _)| index);
                    let expected = next.map(|index| model.remove(index).0);
                    assert_eq!(backlog.pop(), expected);
                }
            }
            assert_eq!(backlog.len(), model.len());
            assert!(backlog.entries <= 4 * backlog.len() + 64 + 2);
        }
    }
}
