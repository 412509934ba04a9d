//! The hash index from items to their slots: open addressing with linear probing over 8-byte
//! entries (a slot number and the item's 32-bit hash).
//!
//! A general hash table keeps control bytes apart from its entries, so that an insert into a
//! table larger than the CPU cache misses twice; here an entry is found, compared and written in
//! one cache line. The index never holds items: comparing one means asking the caller, which
//! looks into its slot, only when the 32-bit hashes agree. Deletion shifts the following entries
//! back (no tombstones), so a long-lived queue's probes stay short.

/// An entry packs the item's 32-bit hash (high half) and its slot number plus one (low half), so
/// that a zeroed table is an empty one: a large table is then fresh zero pages from the kernel,
/// not written before use. Slot `u32::MAX` cannot be entered (the queue never hands it out).
type Entry = u64;

const EMPTY: Entry = 0;
/// The smallest table allocated.
const MIN_CAPACITY: usize = 16;
/// Tables from this size up are mapped apart and backed by huge pages where the kernel allows
/// (with transparent huge pages in `madvise` mode, a heap allocation never gets them): a probe
/// into a table larger than the cache otherwise also misses the TLB. With them, the benchmark's
/// million-key adds-then-drain ran about a third faster.
#[cfg(target_os = "linux")]
const HUGE_TABLE_BYTES: usize = 2 << 20;

fn entry(hash: u32, slot: u32) -> Entry {
    (u64::from(hash) << 32) | u64::from(slot.wrapping_add(1))
}

fn slot_of(entry: Entry) -> u32 {
    (entry as u32).wrapping_sub(1)
}

fn hash_of(entry: Entry) -> u32 {
    (entry >> 32) as u32
}

/// Where the entries live: the heap for small tables, an anonymous mapping advised to use huge
/// pages for large ones.
enum Table {
    Heap(Box<[Entry]>),
    #[cfg(target_os = "linux")]
    Mapped(memmap2::MmapMut),
}

impl Table {
    /// A table of `capacity` empty entries.
    fn zeroed(capacity: usize) -> Self {
        #[cfg(target_os = "linux")]
        if capacity * size_of::<Entry>() >= HUGE_TABLE_BYTES {
            // A failed mapping falls back to the heap; a refused advice only costs speed.
            if let Ok(map) = memmap2::MmapMut::map_anon(capacity * size_of::<Entry>()) {
                let _ = map.advise(memmap2::Advice::HugePage);
                return Table::Mapped(map);
            }
        }
        Table::Heap(vec![EMPTY; capacity].into_boxed_slice())
    }

    #[inline]
    fn entries(&self) -> &[Entry] {
        match self {
            Table::Heap(entries) => entries,
            // A mapping is page aligned and a whole number of entries long.
            #[cfg(target_os = "linux")]
            Table::Mapped(map) => bytemuck::cast_slice(map),
        }
    }

    #[inline]
    fn entries_mut(&mut self) -> &mut [Entry] {
        match self {
            Table::Heap(entries) => entries,
            #[cfg(target_os = "linux")]
            Table::Mapped(map) => bytemuck::cast_slice_mut(map),
        }
    }
}

impl Default for Table {
    fn default() -> Self {
        Table::Heap(Box::default())
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Table::Heap(_) => "heap",
            #[cfg(target_os = "linux")]
            Table::Mapped(_) => "mapped",
        };
        write!(f, "Table({kind}, {} places)", self.entries().len())
    }
}

/// Slot numbers by 32-bit item hash; several entries may share a hash.
#[derive(Debug, Default)]
pub(crate) struct SlotIndex {
    /// A power of two long (or empty); at most half full.
    table: Table,
    len: usize,
}

/// Where the probe for `hash` starts in a table with this `mask`.
#[inline]
fn home(hash: u32, mask: usize) -> usize {
    hash as usize & mask
}

impl SlotIndex {
    /// How many entries the index holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The first slot entered under `hash` for which `matches` holds.
    #[inline]
    pub(crate) fn find(&self, hash: u32, matches: impl FnMut(u32) -> bool) -> Option<u32> {
        let entries = self.table.entries();
        position(entries, hash, matches).map(|at| slot_of(entries[at]))
    }

    /// Enters `slot` under `hash` (the caller knows no entry for this item exists).
    #[inline]
    pub(crate) fn insert(&mut self, hash: u32, slot: u32) {
        if (self.len + 1) * 2 > self.table.entries().len() {
            self.grow();
        }
        place(self.table.entries_mut(), entry(hash, slot));
        self.len += 1;
    }

    /// Doubles the table and re-enters every entry (hashes are kept: the slots are not read).
    #[cold]
    fn grow(&mut self) {
        let capacity = (self.table.entries().len() * 2).max(MIN_CAPACITY);
        let old = std::mem::replace(&mut self.table, Table::zeroed(capacity));
        let entries = self.table.entries_mut();
        for &entry in old.entries().iter().filter(|&&entry| entry != EMPTY) {
            place(entries, entry);
        }
    }

    /// Removes the entry of `slot` made under `hash`; returns whether there was one.
    pub(crate) fn remove(&mut self, hash: u32, slot: u32) -> bool {
        let entries = self.table.entries_mut();
        let Some(mut hole) = position(entries, hash, |found| found == slot) else {
            return false;
        };
        let mask = entries.len() - 1;
        // Shift back each following entry of the run whose probe starts at or before the hole,
        // so that every entry stays reachable from its start without crossing an empty place.
        let mut next = hole;
        loop {
            next = (next + 1) & mask;
            let entry = entries[next];
            if entry == EMPTY {
                break;
            }
            let start = home(hash_of(entry), mask);
            if (next.wrapping_sub(start) & mask) >= (next.wrapping_sub(hole) & mask) {
                entries[hole] = entry;
                hole = next;
            }
        }
        entries[hole] = EMPTY;
        self.len -= 1;
        true
    }
}

/// Where the first entry made under `hash` whose slot `matches` sits.
#[inline]
fn position(entries: &[Entry], hash: u32, mut matches: impl FnMut(u32) -> bool) -> Option<usize> {
    if entries.is_empty() {
        return None;
    }
    let mask = entries.len() - 1;
    let mut at = home(hash, mask);
    loop {
        let entry = entries[at];
        if entry == EMPTY {
            return None;
        }
        if hash_of(entry) == hash && matches(slot_of(entry)) {
            return Some(at);
        }
        at = (at + 1) & mask;
    }
}

/// Puts `entry` at the first free place of its probe sequence (the table has one).
#[inline]
fn place(entries: &mut [Entry], entry: Entry) {
    let mask = entries.len() - 1;
    let mut at = home(hash_of(entry), mask);
    while entries[at] != EMPTY {
        at = (at + 1) & mask;
    }
    entries[at] = entry;
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

    #[test]
    fn a_table_past_the_huge_page_size_keeps_every_entry() {
        let mut index = SlotIndex::default();
        let count = 300_000u32; // grows to 1 Mi places, 8 MiB: mapped apart on Linux
        let hash = |slot: u32| slot.wrapping_mul(0x9E37_79B9);
        for slot in 0..count {
            index.insert(hash(slot), slot);
        }
        #[cfg(target_os = "linux")]
        assert!(matches!(index.table, Table::Mapped(_)), "{:?}", index.table);
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
