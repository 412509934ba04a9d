//! Recovery of a durable store's data directory whose newest write-ahead log segment holds any
//! bytes at all (a torn write, a flipped bit, garbage): `Store::open` never panics; it either
//! refuses with a typed error or recovers, and then the segment is cut exactly at the reported
//! offset (or left whole when nothing was damaged), and opening the directory again recovers
//! the same resourceVersion with nothing more to truncate.
//!
//! Input that starts with 0xFF is framed here instead: the rest, split at NUL bytes, becomes
//! one correctly checksummed frame per piece, so the fuzzer reaches the decoding and replay of
//! records rather than stopping at checksums it cannot forge.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use ctrlkit_apiserver::storage::{Store, StoreConfig};
use libfuzzer_sys::fuzz_target;

const SNAPSHOT: &str = "snapshot-00000000000000000000.snap";
const SEGMENT: &str = "wal-00000000000000000001.log";

/// A scratch directory, and the empty snapshot a new data directory starts with.
fn setup() -> &'static (PathBuf, Vec<u8>) {
    static SETUP: OnceLock<(PathBuf, Vec<u8>)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("ctrlkit-fuzz-wal-{}", std::process::id()));
        let template = root.join("template");
        let _ = std::fs::remove_dir_all(&root);
        drop(Store::open(StoreConfig::default(), &template).expect("a new data directory opens"));
        let snapshot = std::fs::read(template.join(SNAPSHOT)).expect("the empty snapshot exists");
        (root.join("dir"), snapshot)
    })
}

/// One frame: length and CRC-32 (little endian), then the payload.
fn frame(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// CRC-32 (IEEE, reflected), bit by bit: the checksum the log uses.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

fuzz_target!(|input: &[u8]| {
    let framed;
    let data = match input.split_first() {
        Some((0xFF, rest)) => {
            let mut bytes = Vec::new();
            for payload in rest.split(|byte| *byte == 0) {
                frame(payload, &mut bytes);
            }
            framed = bytes;
            &framed[..]
        }
        _ => input,
    };
    let (dir, snapshot) = setup();
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("the scratch directory can be made");
    std::fs::write(dir.join(SNAPSHOT), snapshot).expect("the snapshot can be written");
    std::fs::write(dir.join(SEGMENT), data).expect("the segment can be written");

    let Ok(store) = Store::open(StoreConfig::default(), dir) else {
        return;
    };
    let recovery = store.recovery().expect("a durable store reports its recovery").clone();
    let length = std::fs::metadata(dir.join(SEGMENT)).expect("the segment is there").len();
    // A directory that recovers nothing starts like a new one, with the default namespaces
    // appended to the segment.
    let fresh = recovery.resource_version == 0;
    match &recovery.truncated {
        Some(tail) => {
            assert_eq!(tail.offset + tail.discarded, data.len() as u64);
            assert!(length == tail.offset || (fresh && length > tail.offset));
        }
        None => assert!(length == data.len() as u64 || (fresh && length > data.len() as u64)),
    }
    let version = store.resource_version();
    drop(store);
    let again = Store::open(StoreConfig::default(), dir).expect("a recovered directory opens again");
    let second = again.recovery().expect("a durable store reports its recovery");
    assert_eq!(second.truncated, None, "the first opening cut everything damaged");
    assert_eq!(again.resource_version(), version);
});
