//! Per-item failure counts, the state of the per-item limiters.

use std::hash::{BuildHasher, Hash};

use hashbrown::HashTable;
use hashbrown::hash_table::Entry as TableEntry;
use parking_lot::Mutex;

use crate::sync::HashState;

/// How many times each item has failed since it was last forgotten.
///
/// Each call hashes the item once and finds its entry once; the item is cloned only when it has
/// no entry yet. (A map's `get_mut` then `insert` would hash and probe a new item twice, and
/// `entry(item.clone())` would clone an item it already holds.)
#[derive(Debug)]
pub(crate) struct FailureCounts<T> {
    counts: Mutex<HashTable<Entry<T>>>,
    hasher: HashState,
}

/// An item's count, with the item's hash: growing the table moves entries by their kept
/// hashes and never reads the items again. (An item may live elsewhere, as an `Arc<str>`'s
/// text does: hashing it again would fetch it.) The hash fits where the entry has padding
/// for the items the queues usually hold (pointers, `Arc`s, strings).
#[derive(Debug)]
struct Entry<T> {
    item: T,
    hash: u32,
    count: u32,
}

/// The table's 64-bit hash of a kept 32-bit one: hashbrown takes a probe position from the
/// low bits and a tag from the top 7, so both halves carry the item's hash.
#[inline]
fn wide(hash: u32) -> u64 {
    (u64::from(hash) << 32) | u64::from(hash)
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
        let hash = self.hash(item);
        let mut counts = self.counts.lock();
        let entry = counts.entry(
            wide(hash),
            |held| held.hash == hash && held.item == *item,
            |held| wide(held.hash),
        );
        match entry {
            TableEntry::Occupied(mut occupied) => {
                let count = &mut occupied.get_mut().count;
                let before = *count;
                *count = count.saturating_add(1);
                before
            }
            TableEntry::Vacant(vacant) => {
                vacant.insert(Entry {
                    item: item.clone(),
                    hash,
                    count: 1,
                });
                0
            }
        }
    }

    /// Drops the count of `item`.
    pub(crate) fn forget(&self, item: &T) {
        let hash = self.hash(item);
        let mut counts = self.counts.lock();
        if let Ok(occupied) =
            counts.find_entry(wide(hash), |held| held.hash == hash && held.item == *item)
        {
            occupied.remove();
        }
    }

    /// The count of `item`.
    pub(crate) fn count(&self, item: &T) -> u32 {
        let hash = self.hash(item);
        self.counts
            .lock()
            .find(wide(hash), |held| held.hash == hash && held.item == *item)
            .map_or(0, |held| held.count)
    }

    /// The 32 bits of `item`'s hash that its entry keeps.
    fn hash(&self, item: &T) -> u32 {
        // Truncating keeps the low half, which is as well mixed as the whole.
        self.hasher.hash_one(item) as u32
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

    /// An item whose every value hashes alike: entries are told apart by the items themselves.
    #[derive(Clone, PartialEq, Eq)]
    struct SameHash(u32);

    impl Hash for SameHash {
        fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
            state.write_u8(0);
        }
    }

    #[test]
    fn items_with_the_same_hash_keep_their_own_counts() {
        let counts = FailureCounts::new();
        for item in 0..100 {
            for _ in 0..=item % 3 {
                counts.record(&SameHash(item));
            }
        }
        for item in (0..100).step_by(2) {
            counts.forget(&SameHash(item));
        }
        for item in 0..100 {
            let expected = if item % 2 == 0 { 0 } else { item % 3 + 1 };
            assert_eq!(counts.count(&SameHash(item)), expected, "item {item}");
        }
    }
}
