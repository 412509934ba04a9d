//! Reading a list response's body whole, in memory that goes back to the system when the body
//! is dropped.
//!
//! A list page is a megabyte or more that lives only until its items are decoded. Taken from
//! the allocator, the freed pages of the bodies read during a sync stay resident in its heaps
//! for good: several megabytes a process keeps although it holds nothing there. A body whose
//! length the response states is therefore read into an anonymous mapping of its own (on
//! Linux), which is unmapped as soon as the last part of the body is dropped, and each frame is
//! freed as soon as it is copied. A body of unknown length, or one the system gives no mapping
//! for, is gathered on the heap.

use bytes::Bytes;
#[cfg(target_os = "linux")]
use bytes::BytesMut;
#[cfg(target_os = "linux")]
use http_body::Body as _;
use http_body_util::BodyExt;
use kube::client::Body;

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

/// Reads `body` to its end.
pub(crate) async fn read_whole(mut body: Body) -> Result<Bytes, kube::Error> {
    #[cfg(target_os = "linux")]
    if let Some(len) = body
        .size_hint()
        .exact()
        .and_then(|len| usize::try_from(len).ok())
        && (MAPPED_FROM..=MAPPED_UP_TO).contains(&len)
        && let Ok(mut map) = map_for(len)
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
        return Ok(Bytes::from_owner(map));
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
            let read = read_whole(Body::from(sent.clone())).await.unwrap();
            assert_eq!(read.len(), len);
            assert!(read[..] == sent[..], "{len} bytes");
            // The parts of a mapped body outlive the whole, as a list page's items do.
            let tail = read.slice(len / 2..);
            drop(read);
            assert!(tail[..] == sent[len / 2..], "{len} bytes");
        }
    }
}
