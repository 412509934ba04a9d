//! Room in the calling thread's heap, made ahead of the small allocations of decoding.
//!
//! glibc's malloc grows the heap of every thread but the main one by exactly what the allocation
//! at hand lacks, rounded up to a page: a decoding thread that builds objects of many small
//! allocations calls `mprotect` for about every 4 KiB, and each call takes the process's
//! memory-map lock, which the page faults of every other thread need too. List pages are decoded
//! on several threads (the reading task's and tokio's blocking threads), so a sync pays this on
//! every page.
//!
//! Allocating and at once freeing a block of [`ROOM`] bytes every so often makes glibc grow the
//! heap by that much in one call; the objects are then carved from the free room. The block is
//! never written, so it costs no resident memory, and it is smaller than glibc's smallest mmap
//! threshold, so it always comes from the heap and moves none of glibc's thresholds (a larger
//! block would raise glibc's trim threshold and keep more memory resident). Other allocators pay
//! an allocation and a free of untouched memory per [`JSON_PER_ROOM`] bytes decoded.
//!
//! It is a tuning against one allocator, kept because the informer benchmark's sync loses more
//! than a tenth without it (the commit that kept it has the figures). Only list pages use it:
//! watch events, decoded one at a time where they are received, showed no gain.

/// The block allocated and freed: just under glibc's smallest mmap threshold (128 KiB).
const ROOM: usize = 120 << 10;

/// Bytes of JSON decoded per block. A decoded ConfigMap takes about 3.6 times its JSON in heap, a
/// Pod with its managedFields about 7.7 times: one block per 15 KiB keeps ahead of both.
const JSON_PER_ROOM: usize = ROOM / 8;

/// Makes room for a run of decoding on the calling thread; create one per run.
#[derive(Debug, Default)]
pub(crate) struct HeapRoom {
    /// Bytes of JSON decoded since the last block.
    json_since: usize,
}

impl HeapRoom {
    /// Call before decoding `json_bytes` of JSON: makes room first, then again each time another
    /// [`JSON_PER_ROOM`] bytes have been decoded. Returns whether it made room.
    pub(crate) fn before_decoding(&mut self, json_bytes: usize) -> bool {
        let made = self.json_since == 0;
        if made {
            make_room();
        }
        self.json_since = self.json_since.saturating_add(json_bytes);
        if self.json_since >= JSON_PER_ROOM {
            self.json_since = 0;
        }
        made
    }
}

/// Allocates [`ROOM`] bytes and frees them; if the allocator refuses, nothing happens.
fn make_room() {
    let mut room: Vec<u8> = Vec::new();
    // `black_box`: an allocation freed unused could otherwise be optimized away.
    if std::hint::black_box(room.try_reserve_exact(ROOM)).is_ok() {
        drop(std::hint::black_box(room));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_made_first_then_once_per_15_kib_of_json() {
        assert_eq!(JSON_PER_ROOM, 15 * 1024);
        let mut room = HeapRoom::default();
        let at: Vec<usize> = (1..=20).filter(|_| room.before_decoding(2_000)).collect();
        // Room before the 1st item; 8 items (16,000 bytes) fill a window, so again before the
        // 9th and the 17th.
        assert_eq!(at, vec![1, 9, 17]);
    }

    #[test]
    fn an_item_larger_than_the_window_starts_a_new_one_after_it() {
        let mut room = HeapRoom::default();
        assert!(room.before_decoding(1 << 20));
        assert!(room.before_decoding(10));
        assert!(!room.before_decoding(10));
        assert!(!room.before_decoding(usize::MAX));
        assert!(room.before_decoding(0));
    }
}
