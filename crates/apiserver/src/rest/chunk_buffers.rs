//! The buffers watch streams write their batched chunks into, shared by the server's streams and
//! reused.
//!
//! A stream sends the events that are ready together, in one chunk (see `read.rs`). Each such
//! chunk used to be a vector of its own, grown by doubling to 80–130 KiB. On glibc the freed
//! vector went back to the system, and the next chunk faulted its pages in again: while the
//! server replayed a burst of Pod updates, three quarters of its work was the kernel zeroing
//! those pages. Chunks are now written one after another into a few large buffers, each chunk
//! sent being a slice of one of them; once every chunk cut from a buffer has been written to
//! its socket and dropped, the buffer is written from its start again.
//!
//! The buffers belong to the server, not to a stream, so that memory stays bounded however many
//! watches are open: at most [`KEPT`] buffers of [`BUFFER_BYTES`] (2 MiB) at the default batch
//! size, each at most [`LARGEST`] for a larger one. When every kept buffer still has chunks in
//! flight, a chunk gets a buffer of its own that is not kept, as before.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;

/// The size of each buffer: room for a few chunks.
const BUFFER_BYTES: usize = 256 * 1024;

/// The longest buffer kept: a chunk asking for more room (a batch size set far above the
/// default) gets a buffer of its own.
const LARGEST: usize = 4 << 20;

/// Buffers kept at most. hyper holds up to about 400 KiB of a response's chunks before it
/// writes them, so one stream replaying a burst has two or three buffers in flight.
const KEPT: usize = 8;

/// The server's chunk buffers; clones share them.
#[derive(Debug, Default, Clone)]
pub(crate) struct ChunkBuffers {
    buffers: Arc<Mutex<Vec<BytesMut>>>,
}

impl ChunkBuffers {
    /// Writes one chunk with `write` into a buffer with room for at least `room` bytes and
    /// hands it out. Writing past `room` is allowed: the buffer then grows by moving what is
    /// written so far.
    pub(crate) fn write(&self, room: usize, write: impl FnOnce(&mut BytesMut)) -> Bytes {
        if room > LARGEST {
            return own(room, write);
        }
        let mut buffers = self.buffers.lock();
        // The first with room left, or one whose chunks are all gone; else a new one, kept if
        // there is a place for it.
        let reusable = buffers.iter_mut().position(|buffer| {
            buffer.capacity() - buffer.len() >= room || buffer.try_reclaim(room)
        });
        let buffer = match reusable {
            Some(index) => &mut buffers[index],
            None if buffers.len() < KEPT => {
                buffers.push(BytesMut::with_capacity(room.max(BUFFER_BYTES)));
                let last = buffers.len() - 1;
                &mut buffers[last]
            }
            None => {
                drop(buffers);
                return own(room, write);
            }
        };
        write(buffer);
        buffer.split().freeze()
    }

    /// How many buffers are kept now.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.buffers.lock().len()
    }
}

/// A chunk in a buffer of its own, not kept.
fn own(room: usize, write: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut own = BytesMut::with_capacity(room);
    write(&mut own);
    own.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(buffers: &ChunkBuffers, room: usize, text: &[u8]) -> Bytes {
        buffers.write(room, |buffer| buffer.extend_from_slice(text))
    }

    #[test]
    fn chunks_follow_each_other_in_one_buffer_and_it_is_reused_once_they_are_gone() {
        let buffers = ChunkBuffers::default();
        let first = chunk(&buffers, 1000, b"first chunk");
        let second = chunk(&buffers, 1000, b"second");
        assert_eq!(&first[..], b"first chunk");
        assert_eq!(&second[..], b"second");
        // Both were cut from one allocation, one after the other.
        assert_eq!(first.as_ptr().wrapping_add(first.len()), second.as_ptr());
        assert_eq!(buffers.kept(), 1);

        // Too little room left, and chunks still held: a second buffer.
        let start = first.as_ptr();
        let third = chunk(&buffers, BUFFER_BYTES, b"third");
        assert_eq!(buffers.kept(), 2);
        assert_ne!(third.as_ptr(), start);

        // Once the first buffer's chunks are gone, it is written from its start again.
        drop((first, second));
        let fourth = chunk(&buffers, BUFFER_BYTES, b"fourth");
        assert_eq!(fourth.as_ptr(), start);
        assert_eq!(&fourth[..], b"fourth");
        assert_eq!(&third[..], b"third");
        assert_eq!(buffers.kept(), 2);
    }

    #[test]
    fn at_most_kept_buffers_and_then_chunks_of_their_own() {
        let buffers = ChunkBuffers::default();
        let held: Vec<Bytes> = (0..KEPT as u8 + 2)
            .map(|n| chunk(&buffers, BUFFER_BYTES, &[n; 10]))
            .collect();
        assert_eq!(buffers.kept(), KEPT);
        for (n, chunk) in (0..).zip(&held) {
            assert_eq!(&chunk[..], &[n; 10]);
        }
        // Clones share the buffers.
        let clone = buffers.clone();
        drop(held);
        let _again = chunk(&clone, BUFFER_BYTES, b"again");
        assert_eq!(buffers.kept(), KEPT);
    }

    #[test]
    fn a_chunk_asking_for_more_than_the_largest_buffer_is_not_kept() {
        let buffers = ChunkBuffers::default();
        let written = buffers.write(LARGEST + 1, |buffer| buffer.extend_from_slice(b"x"));
        assert_eq!(&written[..], b"x");
        assert_eq!(buffers.kept(), 0);
    }

    #[test]
    fn a_chunk_longer_than_its_room_is_whole() {
        let buffers = ChunkBuffers::default();
        let long = vec![7u8; BUFFER_BYTES * 2];
        let written = chunk(&buffers, 16, &long);
        assert_eq!(written.len(), long.len());
        assert!(written.iter().all(|byte| *byte == 7));
        let next = chunk(&buffers, 16, b"next");
        assert_eq!(&next[..], b"next");
    }
}
