//! The ready times of delayed items, earliest first.
//!
//! Most delays a controller queue sees are equal or growing (one requeue period, one backoff
//! base), so their ready times arrive in order: those go to the back of a FIFO in O(1), and only
//! the out-of-order ones pay for a binary heap. The earliest entry is the earlier of the two fronts.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use tokio::time::Instant;

/// A ready time for a slot: `(when, sequence, slot, generation)`. The sequence keeps equal times
/// in the order they were set; the generation tells a reused slot from the one that set it.
pub(crate) type TimerEntry = (Instant, u64, u32, u32);

#[derive(Default)]
pub(crate) struct Timers {
    in_order: VecDeque<TimerEntry>,
    out_of_order: BinaryHeap<Reverse<TimerEntry>>,
    next_seq: u64,
}

impl Timers {
    /// Records that `slot` (of `generation`) becomes ready at `at`.
    pub(crate) fn push(&mut self, at: Instant, slot: u32, generation: u32) {
        let entry = (at, self.next_seq, slot, generation);
        self.next_seq += 1;
        match self.in_order.back() {
            Some(last) if at < last.0 => self.out_of_order.push(Reverse(entry)),
            _ => self.in_order.push_back(entry),
        }
    }

    /// The earliest entry.
    pub(crate) fn peek(&self) -> Option<TimerEntry> {
        match (self.in_order.front(), self.out_of_order.peek()) {
            (Some(a), Some(Reverse(b))) => Some(if a <= b { *a } else { *b }),
            (Some(a), None) => Some(*a),
            (None, Some(Reverse(b))) => Some(*b),
            (None, None) => None,
        }
    }

    /// Takes the earliest entry if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<TimerEntry> {
        let earliest = self.peek()?;
        if earliest.0 > now {
            return None;
        }
        if self.in_order.front() == Some(&earliest) {
            self.in_order.pop_front()
        } else {
            self.out_of_order.pop().map(|Reverse(entry)| entry)
        }
    }

    /// Takes every entry.
    pub(crate) fn take_all(&mut self) -> impl Iterator<Item = TimerEntry> {
        let in_order = std::mem::take(&mut self.in_order);
        let out_of_order = std::mem::take(&mut self.out_of_order);
        in_order
            .into_iter()
            .chain(out_of_order.into_iter().map(|Reverse(entry)| entry))
    }

    /// Forgets every entry.
    pub(crate) fn clear(&mut self) {
        self.in_order.clear();
        self.out_of_order.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn pops_in_time_then_insertion_order_whatever_the_push_order() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut timers = Timers::default();
        for (ms, slot) in [(10, 1), (10, 2), (5, 3), (20, 4), (5, 5), (15, 6), (30, 7)] {
            timers.push(at(ms), slot, 0);
        }
        assert_eq!(timers.pop_due(at(4)), None);
        let mut order = Vec::new();
        while let Some((_, _, slot, _)) = timers.pop_due(at(100)) {
            order.push(slot);
        }
        assert_eq!(order, [3, 5, 1, 2, 6, 4, 7]);
        assert_eq!(timers.peek(), None);
    }
}
