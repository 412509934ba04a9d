//! The index from items to their slots: slot numbers filed under the item's 32-bit hash.
//!
//! The index never holds items: comparing one means asking the caller, which looks into its
//! slot, only when the hashes agree. So an item is stored once (in its slot) however many
//! structures refer to it, and an entry is 8 bytes. Several entries may share a hash.

use hashbrown::HashTable;

/// Slot numbers by 32-bit item hash.
#[derive(Debug, Default)]
pub(crate) struct SlotIndex {
    /// `(hash, slot)` pairs; the hash is kept so that growing never reads the slots.
    table: HashTable<(u32, u32)>,
}

/// The table's 64-bit hash of a 32-bit one: hashbrown takes a probe position from the low bits
/// and a tag from the top 7, so both halves carry the item's hash.
#[inline]
fn wide(hash: u32) -> u64 {
    (u64::from(hash) << 32) | u64::from(hash)
}

impl SlotIndex {
    /// How many entries the index holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// The first slot entered under `hash` for which `matches` holds.
    #[inline]
    pub(crate) fn find(&self, hash: u32, mut matches: impl FnMut(u32) -> bool) -> Option<u32> {
        self.table
            .find(wide(hash), |&(entered, slot)| {
                entered == hash && matches(slot)
            })
            .map(|&(_, slot)| slot)
    }

    /// Enters `slot` under `hash` (the caller knows no entry for this item exists).
    #[inline]
    pub(crate) fn insert(&mut self, hash: u32, slot: u32) {
        self.table
            .insert_unique(wide(hash), (hash, slot), |&(entered, _)| wide(entered));
    }

    /// Removes the entry of `slot` made under `hash`; returns whether there was one.
    pub(crate) fn remove(&mut self, hash: u32, slot: u32) -> bool {
        match self
            .table
            .find_entry(wide(hash), |&entry| entry == (hash, slot))
        {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn colliding_hashes_are_told_apart_by_the_caller() {
        let mut index = SlotIndex::default();
        index.insert(7, 1);
        index.insert(7, 2);
        index.insert(7 + 16, 3);
        assert_eq!(index.find(7, |slot| slot == 2), Some(2));
        assert_eq!(index.find(7, |_| true), Some(1));
        assert_eq!(index.find(23, |_| true), Some(3));
        assert_eq!(index.find(8, |_| true), None);
        assert!(index.remove(7, 1));
        assert!(!index.remove(7, 1));
        assert_eq!(index.find(7, |_| true), Some(2));
        assert_eq!(index.find(23, |_| true), Some(3));
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn entries_under_one_hash_survive_the_removal_of_another() {
        let mut index = SlotIndex::default();
        for slot in 0..4 {
            index.insert(15, slot);
        }
        assert!(index.remove(15, 0));
        for slot in 1..4 {
            assert_eq!(index.find(15, |found| found == slot), Some(slot));
        }
    }

    #[test]
    fn a_large_index_keeps_every_entry() {
        let mut index = SlotIndex::default();
        let count = 300_000u32;
        let hash = |slot: u32| slot.wrapping_mul(0x9E37_79B9);
        for slot in 0..count {
            index.insert(hash(slot), slot);
        }
        for slot in (0..count).step_by(7) {
            assert_eq!(index.find(hash(slot), |found| found == slot), Some(slot));
        }
        for slot in (0..count).filter(|slot| slot % 2 == 0) {
            assert!(index.remove(hash(slot), slot));
        }
        assert_eq!(index.len(), count as usize / 2);
        for slot in 0..count {
            let expected = (slot % 2 == 1).then_some(slot);
            assert_eq!(index.find(hash(slot), |found| found == slot), expected);
        }
    }

    #[test]
    fn the_highest_usable_slot_is_told_from_an_empty_place() {
        let mut index = SlotIndex::default();
        index.insert(3, u32::MAX - 1);
        index.insert(3, 0);
        assert_eq!(index.find(3, |_| true), Some(u32::MAX - 1));
        assert!(index.remove(3, u32::MAX - 1));
        assert_eq!(index.find(3, |_| true), Some(0));
    }

    proptest! {
        /// Any sequence of inserts and removes leaves the index agreeing with a map.
        #[test]
        fn agrees_with_a_map(ops in proptest::collection::vec((any::<bool>(), 0u32..64, 0u32..8), 0..400)) {
            let mut index = SlotIndex::default();
            let mut model: HashMap<u32, u32> = HashMap::new(); // slot -> hash
            for (insert, slot, hash) in ops {
                // Few distinct hashes: many entries share one.
                let hash = hash.wrapping_mul(0x9E37_79B9) >> 27;
                if insert {
                    if let std::collections::hash_map::Entry::Vacant(vacant) = model.entry(slot) {
                        vacant.insert(hash);
                        index.insert(hash, slot);
                    }
                } else {
                    let expected = model.get(&slot) == Some(&hash);
                    prop_assert_eq!(index.remove(hash, slot), expected);
                    if expected {
                        model.remove(&slot);
                    }
                }
                prop_assert_eq!(index.len(), model.len());
                for (&slot, &hash) in &model {
                    prop_assert_eq!(index.find(hash, |found| found == slot), Some(slot));
                }
            }
        }
    }
}
