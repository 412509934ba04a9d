//! The mappings the bodies of one list's pages take turns in.
//!
//! A list body of a megabyte or more is read into an anonymous mapping of its own (see
//! [`response_body`](crate::response_body)), and making one is most of what reading it costs
//! the client: the system call, and the kernel finding and zeroing a page for every 4 KiB,
//! which on a virtual machine costs more than the copy itself. A list of many pages therefore
//! keeps the mappings of the pages it has decoded, and the next page's body is read into one of
//! them: its pages are resident already.
//!
//! The spare mappings live as long as the list: once the [`BodyMaps`] and every fetch holding
//! it are gone, each mapping is unmapped when its body is dropped, and the memory goes back to
//! the system.

#[cfg(target_os = "linux")]
use std::sync::{Arc, Weak};

#[cfg(target_os = "linux")]
use bytes::Bytes;
#[cfg(target_os = "linux")]
use parking_lot::Mutex;

/// How many spare mappings a list keeps: one for each page that can be decoded or fetched while
/// another is read.
#[cfg(target_os = "linux")]
const KEPT: usize = 3;

/// The spare mappings of one list; clones share them.
#[derive(Clone, Default)]
pub(crate) struct BodyMaps {
    #[cfg(target_os = "linux")]
    spare: Arc<Mutex<Vec<memmap2::MmapMut>>>,
}

impl BodyMaps {
    /// A list's mappings, none yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// A spare mapping that holds `len` bytes without being more than twice as long, if there
    /// is one.
    #[cfg(target_os = "linux")]
    pub(crate) fn take(&self, len: usize) -> Option<memmap2::MmapMut> {
        let mut spare = self.spare.lock();
        let fits = spare
            .iter()
            .position(|map| map.len() >= len && map.len() / 2 <= len)?;
        Some(spare.swap_remove(fits))
    }

    /// The first `len` bytes of `map` as a body; once the body's last part is dropped, the
    /// mapping comes back here if the list still runs and keeps fewer than [`KEPT`].
    #[cfg(target_os = "linux")]
    pub(crate) fn lend(&self, map: memmap2::MmapMut, len: usize) -> Bytes {
        Bytes::from_owner(Lent {
            len: len.min(map.len()),
            map: Some(map),
            home: Arc::downgrade(&self.spare),
        })
    }

    /// How many spare mappings there are.
    #[cfg(all(test, target_os = "linux"))]
    pub(crate) fn spare_count(&self) -> usize {
        self.spare.lock().len()
    }
}

/// A body in a mapping lent by a list's [`BodyMaps`].
#[cfg(target_os = "linux")]
struct Lent {
    map: Option<memmap2::MmapMut>,
    /// The body's length; the bytes after it are an earlier body's and never shown.
    len: usize,
    home: Weak<Mutex<Vec<memmap2::MmapMut>>>,
}

#[cfg(target_os = "linux")]
impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        self.map
            .as_ref()
            .and_then(|map| map.get(..self.len))
            .unwrap_or_default()
    }
}

#[cfg(target_os = "linux")]
impl Drop for Lent {
    fn drop(&mut self) {
        let (Some(map), Some(home)) = (self.map.take(), self.home.upgrade()) else {
            return;
        };
        let mut spare = home.lock();
        if spare.len() < KEPT {
            spare.push(map);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn filled(len: usize, byte: u8) -> std::io::Result<memmap2::MmapMut> {
        let mut map = memmap2::MmapMut::map_anon(len)?;
        map.fill(byte);
        Ok(map)
    }

    #[test]
    fn a_dropped_body_lends_its_mapping_to_the_next_one_of_its_size() {
        let maps = BodyMaps::new();
        let body = maps.lend(filled(1 << 20, 7).expect("mapping"), 1000);
        assert_eq!(body.len(), 1000);
        let address = body.as_ptr();
        let part = body.slice(10..20);
        drop(body);
        assert_eq!(maps.spare_count(), 0, "a part still holds it");
        drop(part);
        assert_eq!(maps.spare_count(), 1);

        assert!(maps.take((1 << 20) + 1).is_none(), "too short");
        assert!(maps.take((1 << 19) - 1).is_none(), "over twice as long");
        let map = maps.take(600_000).expect("fits");
        assert_eq!(map.as_ptr(), address, "the same mapping");
        assert_eq!(maps.spare_count(), 0);
        let body = maps.lend(map, 3);
        assert_eq!(&body[..], [7, 7, 7], "only the new body's length shows");
    }

    #[test]
    fn a_list_keeps_a_few_mappings_and_none_once_it_is_gone() {
        let maps = BodyMaps::new();
        let bodies: Vec<Bytes> = (0..KEPT + 2)
            .map(|_| maps.lend(filled(4096, 1).expect("mapping"), 4096))
            .collect();
        drop(bodies);
        assert_eq!(maps.spare_count(), KEPT);

        let late = maps.lend(maps.take(4096).expect("spare"), 4096);
        drop(maps);
        // Its list is gone: the mapping is unmapped, not kept.
        assert_eq!(&late[..2], [1, 1]);
        drop(late);
    }
}
