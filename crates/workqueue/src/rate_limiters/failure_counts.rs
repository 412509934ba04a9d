//! Per-item failure counts, the state of the per-item limiters.

use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use parking_lot::Mutex;

use crate::sync::HashState;

/// How many times each item has failed since it was last forgotten.
///
/// Each call hashes the item once and finds its entry once; the item is cloned only when it has
/// no entry yet. (A map's `get_mut` then `insert` would hash and probe a new item twice, and
/// `entry(item.clone())` would clone an item it already holds.)
#[derive(Debug)]
pub(crate) struct FailureCounts<T> {
    counts: Mutex<HashTable<(T, u32)>>,
    hasher: HashState,
}

impl<T: Clone + Eq + Hash> FailureCounts<T> {
    pub(crate) fn new() -> Self {
        Self {
            counts: Mutex::new(HashTable::new()),
            hasher: HashState::default(),
        }
    }

    /// Counts one more failure of `item`; returns the count before it (0 for a first failure).
    /// The count stops at `u32::MAX`.
    pub(crate) fn record(&self, item: &T) -> u32 {
        let hash = self.hasher.hash_one(item);
        let mut counts = self.counts.lock();
        let entry = counts.entry(
            hash,
            |(held, _)| held == item,
            |(held, _)| self.hasher.hash_one(held),
        );
        match entry {
            Entry::Occupied(mut occupied) => {
                let count = &mut occupied.get_mut().1;
                let before = *count;
                *count = count.saturating_add(1);
                before
            }
            Entry::Vacant(vacant) => {
                vacant.insert((item.clone(), 1));
                0
            }
        }
    }

    /// Drops the count of `item`.
    pub(crate) fn forget(&self, item: &T) {
        let hash = self.hasher.hash_one(item);
        let mut counts = self.counts.lock();
        if let Ok(occupied) = counts.find_entry(hash, |(held, _)| held == item) {
            occupied.remove();
        }
    }

    /// The count of `item`.
    pub(crate) fn count(&self, item: &T) -> u32 {
        let hash = self.hasher.hash_one(item);
        self.counts
            .lock()
            .find(hash, |(held, _)| held == item)
            .map_or(0, |(_, count)| *count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_item_until_it_is_forgotten() {
        let counts = FailureCounts::new();
        assert_eq!(counts.record(&"a"), 0);
        assert_eq!(counts.record(&"a"), 1);
        assert_eq!(counts.record(&"b"), 0);
        assert_eq!(counts.count(&"a"), 2);
        assert_eq!(counts.count(&"b"), 1);
        counts.forget(&"a");
        counts.forget(&"never");
        assert_eq!(counts.count(&"a"), 0);
        assert_eq!(counts.count(&"b"), 1);
        assert_eq!(counts.record(&"a"), 0);
    }

    #[test]
    fn many_items_survive_the_table_growing() {
        let counts = FailureCounts::new();
        for round in 0..3 {
            for item in 0..10_000u64 {
                assert_eq!(counts.record(&item), round);
            }
        }
        for item in (0..10_000u64).step_by(2) {
            counts.forget(&item);
        }
        assert_eq!(counts.count(&2), 0);
        assert_eq!(counts.count(&3), 3);
    }
}
