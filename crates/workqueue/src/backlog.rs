//! The order in which a queue hands out its ready items: FIFO for the client-go queues, by
//! priority (with aging) for [`PriorityQueue`](crate::PriorityQueue).
//!
//! A backlog orders slot numbers (the core keeps the items); deduplication, the processing set and
//! shutdown live in the queue core, which guarantees that a slot is in the backlog at most once.

use std::collections::VecDeque;

/// An ordering of ready items, as client-go's `Queue` storage interface (`Push`, `Pop`, `Touch`,
/// `Len`).
pub(crate) trait Backlog: Send {
    /// What an add says about an item's place besides its arrival (a priority, or nothing).
    type Rank: Copy + Default + Send + 'static;

    /// The rank of the merger of two adds of one item (for a priority: the higher one).
    fn merge(a: Self::Rank, b: Self::Rank) -> Self::Rank;

    /// Appends an item that is not in the backlog.
    fn push(&mut self, slot: u32, rank: Self::Rank);

    /// An item already in the backlog was added again with `rank`.
    fn touch(&mut self, slot: u32, rank: Self::Rank);

    /// Takes the next item to hand out.
    fn pop(&mut self) -> Option<u32>;

    /// How many items are ready.
    fn len(&self) -> usize;
}

/// First in, first out: client-go's default queue storage.
#[derive(Debug, Default)]
pub(crate) struct Fifo {
    items: VecDeque<u32>,
}

impl Backlog for Fifo {
    type Rank = ();

    fn merge(_: (), _: ()) {}

    #[inline]
    fn push(&mut self, slot: u32, _: ()) {
        self.items.push_back(slot);
    }

    #[inline]
    fn touch(&mut self, _: u32, _: ()) {}

    #[inline]
    fn pop(&mut self) -> Option<u32> {
        let item = self.items.pop_front();
        // Give memory back once a burst has drained, as client-go lets its slice shrink.
        if self.items.is_empty() && self.items.capacity() > 4096 {
            self.items = VecDeque::new();
        }
        item
    }

    #[inline]
    fn len(&self) -> usize {
        self.items.len()
    }
}
