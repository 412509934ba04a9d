//! A FIFO list of tasks parked on a queue, each identified so that it can leave the list when its
//! future is dropped.

use std::collections::VecDeque;
use std::task::Waker;

/// Tasks waiting for something a queue will signal (an item to get, the end of a drain).
///
/// It lives inside the queue's mutex: registering and waking happen under the same lock as the
/// state change that makes waiting unnecessary, so no wake-up can fall between a check and a park.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    next_id: u64,
    parked: VecDeque<(u64, Waker)>,
}

impl Waiters {
    /// Parks the task of `waker` under the id in `slot`, giving it a new id if it has none or if its
    /// earlier entry was already woken (and so removed).
    pub(crate) fn park(&mut self, slot: &mut Option<u64>, waker: &Waker) {
        if let Some(id) = *slot
            && let Some(entry) = self.parked.iter_mut().find(|(parked, _)| *parked == id)
        {
            if !entry.1.will_wake(waker) {
                entry.1 = waker.clone();
            }
            return;
        }
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.parked.push_back((id, waker.clone()));
        *slot = Some(id);
    }

    /// Removes the entry `id`; returns `false` when it was not parked any more, meaning it was
    /// woken and the wake-up has not been consumed by a poll yet.
    pub(crate) fn leave(&mut self, id: u64) -> bool {
        match self.parked.iter().position(|(parked, _)| *parked == id) {
            Some(index) => {
                self.parked.remove(index);
                true
            }
            None => false,
        }
    }

    /// Takes the longest-waiting task, to be woken once the lock is released.
    #[inline]
    pub(crate) fn take_one(&mut self) -> Option<Waker> {
        self.parked.pop_front().map(|(_, waker)| waker)
    }

    /// Takes every waiting task, to be woken once the lock is released.
    pub(crate) fn take_all(&mut self) -> Vec<Waker> {
        self.parked.drain(..).map(|(_, waker)| waker).collect()
    }

    /// Whether no task waits.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn park_leave_and_take_keep_fifo_order() {
        let mut waiters = Waiters::default();
        let waker = Waker::noop();
        let (mut a, mut b, mut c) = (None, None, None);
        waiters.park(&mut a, waker);
        waiters.park(&mut b, waker);
        waiters.park(&mut c, waker);
        // Parking again under the same id does not add a second entry.
        waiters.park(&mut a, waker);
        assert_eq!(waiters.parked.len(), 3);
        assert!(waiters.leave(b.unwrap_or(u64::MAX)));
        assert!(!waiters.leave(b.unwrap_or(u64::MAX)));
        assert!(waiters.take_one().is_some());
        // `a` was taken first: it is gone, `c` remains.
        assert!(!waiters.leave(a.unwrap_or(u64::MAX)));
        assert_eq!(waiters.take_all().len(), 1);
        assert!(waiters.is_empty());
    }
}
