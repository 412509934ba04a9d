//! Reading a list response's body whole, in memory that goes back to the system when the body
//! is dropped.
//!
//! A list page is a megabyte or more that lives only until its items are decoded. Taken from
//! the allocator, the freed pages of the bodies read during a sync stay resident in its heaps
//! for good: several megabytes a process keeps although it holds nothing there. A body whose
//! length the response states is therefore read into an anonymous mapping of its own (on
//! Linux), which is unmapped as soon as the last part of the body is dropped, and each frame is
//! freed as soon as it is copied. The pages of one list take turns in a few mappings instead
//! ([`BodyMaps`]), which go back to the system once the list is read. A body of unknown
//! length, or one the system gives no mapping for, is gathered on the heap.

use bytes::Bytes;
#[cfg(target_os = "linux")]
use bytes::BytesMut;
#[cfg(target_os = "linux")]
use http_body::Body as _;
use http_body_util::BodyExt;
use kube::client::Body;

use crate::body_maps::BodyMaps;

/// Bodies shorter than this are read onto the heap: a mapping costs a system call and page
/// faults that a small body does not repay.
#[cfg(target_os = "linux")]
const MAPPED_FROM: usize = 256 << 10;

/// The longest body that gets a mapping of its stated length; a longer one is gathered as it
/// arrives, so that a wrong length cannot reserve a huge mapping.
#[cfg(target_os = "linux")]
const MAPPED_UP_TO: usize = 256 << 20;

/// The longest body whose mapping is populated when it is made; a longer one gets its pages as
/// they are written, so that a stated length alone never makes memory resident.
#[cfg(target_os = "linux")]
const POPULATED_UP_TO: usize = 32 << 20;

/// A writable anonymous mapping of `len` bytes. Up to [`POPULATED_UP_TO`] its pages are made
/// in the one system call: faulting them in one at a time as they are written costs several
/// times the CPU, most of all on a virtual machine.
#[cfg(target_os = "linux")]
fn map_for(len: usize) -> std::io::Result<memmap2::MmapMut> {
    let mut options = memmap2::MmapOptions::new();
    options.len(len);
    if len <= POPULATED_UP_TO {
        options.populate();
    }
    options.map_anon()
}

/// Reads `body` to its end; a mapped body goes into a spare mapping of `maps` when one fits,
/// and its mapping goes back there once the body is dropped.
pub(crate) async fn read_whole(
    mut body: Body,
    maps: Option<&BodyMaps>,
) -> Result<Bytes, kube::Error> {
    #[cfg(not(target_os = "linux"))]
    let _ = maps;
    #[cfg(target_os = "linux")]
    if let Some(len) = body
        .size_hint()
        .exact()
        .and_then(|len| usize::try_from(len).ok())
        && (MAPPED_FROM..=MAPPED_UP_TO).contains(&len)
        && let Some(mut map) = maps
            .and_then(|maps| maps.take(len))
            // A mapping that a list's later pages will take turns in gets room for a page a
            // little longer than this one.
            .or_else(|| map_for(if maps.is_some() { len + len / 8 } else { len }).ok())
    {
        let mut filled = 0;
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame?.into_data() else {
                continue; // trailers
            };
            let Some(room) = map.get_mut(filled..filled + data.len()) else {
                // Longer than it said: keep what came and gather the rest.
                let rest = body.collect().await?.to_bytes();
                let mut whole = BytesMut::from(&map[..filled]);
                whole.extend_from_slice(&data);
                whole.extend_from_slice(&rest);
                return Ok(whole.freeze());
            };
            room.copy_from_slice(&data);
            filled += data.len();
        }
        if filled < len {
            return Ok(Bytes::copy_from_slice(&map[..filled]));
        }
        return Ok(match maps {
            Some(maps) => maps.lend(map, filled),
            None => Bytes::from_owner(map),
        });
    }
    Ok(body.collect().await?.to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_reads_whole_whatever_its_length() {
        for len in [
            0,
            100,
            (256 << 10) - 1,
            256 << 10,
            (1 << 20) + 3,
            (32 << 20) + 1,
        ] {
            let sent: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let read = read_whole(Body::from(sent.clone()), None).await.unwrap();
            assert_eq!(read.len(), len);
            assert!(read[..] == sent[..], "{len} bytes");
            // The parts of a mapped body outlive the whole, as a list page's items do.
            let tail = read.slice(len / 2..);
            drop(read);
            assert!(tail[..] == sent[len / 2..], "{len} bytes");
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_list_s_next_body_is_read_into_the_mapping_of_one_it_has_dropped() {
        let maps = BodyMaps::new();
        let first: Vec<u8> = (0..1_000_000).map(|i| (i % 251) as u8).collect();
        let read = read_whole(Body::from(first.clone()), Some(&maps))
            .await
            .unwrap();
        assert!(read[..] == first[..]);
        let address = read.as_ptr();
        drop(read);

        // A little shorter: the same mapping, and none of the first body's tail shows.
        let second: Vec<u8> = (0..900_000).map(|i| (i % 241) as u8).collect();
        let read = read_whole(Body::from(second.clone()), Some(&maps))
            .await
            .unwrap();
        assert_eq!(read.as_ptr(), address);
        assert_eq!(read.len(), second.len());
        assert!(read[..] == second[..]);

        // Held while the next is read: that one gets a mapping of its own.
        let third = read_whole(Body::from(second.clone()), Some(&maps))
            .await
            .unwrap();
        assert_ne!(third.as_ptr(), address);
        assert!(third[..] == second[..]);
    }
}
