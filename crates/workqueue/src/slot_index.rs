//! The hash index from items to their slots: open addressing with linear probing over 8-byte
//! entries (a slot number and the item's 32-bit hash).
//!
//! A general hash table keeps control bytes apart from its entries, so that an insert into a
//! table larger than the CPU cache misses twice; here an entry is found, compared and written in
//! one cache line. The index never holds items: comparing one means asking the caller, which
//! looks into its slot, only when the 32-bit hashes agree. Deletion shifts the following entries
//! back (no tombstones), so a long-lived queue's probes stay short.

/// One entry: a slot number (`EMPTY` for none) and the hash of the item it was entered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    slot: u32,
    hash: u32,
}

const EMPTY: u32 = u32::MAX;
const VACANT: Entry = Entry {
    slot: EMPTY,
    hash: 0,
};
/// The smallest table allocated.
const MIN_CAPACITY: usize = 16;

/// Slot numbers by 32-bit item hash; several entries may share a hash.
#[derive(Debug, Default)]
pub(crate) struct SlotIndex {
    /// A power of two long (or empty); at most half full.
    entries: Box<[Entry]>,
    len: usize,
}

impl SlotIndex {
    fn mask(&self) -> usize {
        self.entries.len().wrapping_sub(1)
    }

    /// Where the probe for `hash` starts.
    fn home(&self, hash: u32) -> usize {
        hash as usize & self.mask()
    }

    /// How many entries the index holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The first slot entered under `hash` for which `matches` holds.
    #[inline]
    pub(crate) fn find(&self, hash: u32, matches: impl FnMut(u32) -> bool) -> Option<u32> {
        self.position(hash, matches).map(|at| self.entries[at].slot)
    }

    /// Where the first entry made under `hash` whose slot `matches` sits.
    #[inline]
    fn position(&self, hash: u32, mut matches: impl FnMut(u32) -> bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        let mut at = self.home(hash);
        loop {
            let entry = self.entries[at];
            if entry.slot == EMPTY {
                return None;
            }
            if entry.hash == hash && matches(entry.slot) {
                return Some(at);
            }
            at = (at + 1) & mask;
        }
    }

    /// Enters `slot` under `hash` (the caller knows no entry for this item exists).
    #[inline]
    pub(crate) fn insert(&mut self, hash: u32, slot: u32) {
        if (self.len + 1) * 2 > self.entries.len() {
            self.grow();
        }
        self.place(Entry { slot, hash });
        self.len += 1;
    }

    /// Puts `entry` at the first free place of its probe sequence.
    fn place(&mut self, entry: Entry) {
        let mask = self.mask();
        let mut at = self.home(entry.hash);
        while self.entries[at].slot != EMPTY {
            at = (at + 1) & mask;
        }
        self.entries[at] = entry;
    }

    /// Doubles the table and re-enters every entry (hashes are kept: the slots are not read).
    #[cold]
    fn grow(&mut self) {
        let capacity = (self.entries.len() * 2).max(MIN_CAPACITY);
        let old = std::mem::replace(&mut self.entries, vec![VACANT; capacity].into_boxed_slice());
        for entry in old.iter().filter(|entry| entry.slot != EMPTY) {
            self.place(*entry);
        }
    }

    /// Removes the entry of `slot` made under `hash`; returns whether there was one.
    pub(crate) fn remove(&mut self, hash: u32, slot: u32) -> bool {
        let Some(mut hole) = self.position(hash, |found| found == slot) else {
            return false;
        };
        let mask = self.mask();
        // Shift back each following entry of the run whose probe starts at or before the hole,
        // so that every entry stays reachable from its start without crossing an empty place.
        let mut next = hole;
        loop {
            next = (next + 1) & mask;
            let entry = self.entries[next];
            if entry.slot == EMPTY {
                break;
            }
            let start = self.home(entry.hash);
            if (next.wrapping_sub(start) & mask) >= (next.wrapping_sub(hole) & mask) {
                self.entries[hole] = entry;
                hole = next;
            }
        }
        self.entries[hole] = VACANT;
        self.len -= 1;
        true
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
        index.insert(7 + 16, 3); // same start in a 16-place table
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
    fn the_run_wraps_around_the_end_of_the_table() {
        let mut index = SlotIndex::default();
        for slot in 0..4 {
            index.insert(15, slot); // start at the last place, wrap to the front
        }
        assert!(index.remove(15, 0));
        for slot in 1..4 {
            assert_eq!(index.find(15, |found| found == slot), Some(slot));
        }
    }

    proptest! {
        /// Any sequence of inserts and removes leaves the index agreeing with a map.
        #[test]
        fn agrees_with_a_map(ops in proptest::collection::vec((any::<bool>(), 0u32..64, 0u32..8), 0..400)) {
            let mut index = SlotIndex::default();
            let mut model: HashMap<u32, u32> = HashMap::new(); // slot -> hash
            for (insert, slot, hash) in ops {
                // Few distinct hashes and a small table: long runs, collisions and wrap-around.
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
