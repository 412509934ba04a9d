//! The on-disk encoding of changes and snapshots: checksummed frames, and the records inside.
//!
//! A frame is `length (u32, little endian) · CRC-32 of the payload (u32, little endian) ·
//! payload`. A record of the write-ahead log is one frame whose payload is a header line
//! (`{"rv":…,"group":…,"resource":…,"namespace":…,"name":…}` and a newline) followed by the
//! change exactly as watchers receive it (`{"type":…,"object":{…}}` and a newline), so a change is
//! serialized once for the log and every watcher. A snapshot entry is a header line followed by
//! the object's JSON.
//!
//! Reading stops at the first frame that is cut short, too long, fails its checksum or does not
//! decode: everything before it is good, and where it starts is where a torn log is truncated.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::event::{EventType, WatchEvent};
use crate::resource::ResourceKey;

/// The bytes before each payload: its length and its checksum.
pub(crate) const FRAME_HEADER: usize = 8;

/// The largest payload a frame may carry. Request bodies are capped far below this, so a larger
/// length can only be a damaged header.
pub(crate) const MAX_PAYLOAD: usize = 256 * 1024 * 1024;

/// Appends one frame carrying `payload` to `out`.
pub(crate) fn encode_frame(payload: &[u8], out: &mut Vec<u8>) {
    // Payloads are bounded by MAX_PAYLOAD, far below u32::MAX.
    let length = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Why the frames of a file end before its last byte.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The file ends inside a frame (a write cut short by a crash).
    #[error("the last frame is cut short: {needed} bytes needed, {available} left")]
    Truncated {
        /// The bytes the frame needs from its start.
        needed: usize,
        /// The bytes left in the file from the frame's start.
        available: usize,
    },
    /// The length field is beyond any payload ctrlkit writes.
    #[error("a frame claims {0} bytes, more than any record")]
    TooLong(usize),
    /// The payload does not match its checksum.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The checksum in the frame.
        stored: u32,
        /// The checksum of the payload as read.
        computed: u32,
    },
}

/// The frames of a file's bytes, each with its offset; after an error, nothing more.
pub(crate) struct Frames<'a> {
    bytes: &'a [u8],
    offset: usize,
    failed: bool,
}

impl<'a> Frames<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            offset: 0,
            failed: false,
        }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = (usize, Result<&'a [u8], FrameError>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.offset >= self.bytes.len() {
            return None;
        }
        let start = self.offset;
        let rest = &self.bytes[start..];
        let result = read_frame(rest);
        match &result {
            Ok(payload) => self.offset += FRAME_HEADER + payload.len(),
            Err(_) => self.failed = true,
        }
        Some((start, result))
    }
}

fn read_frame(bytes: &[u8]) -> Result<&[u8], FrameError> {
    let truncated = |needed| FrameError::Truncated {
        needed,
        available: bytes.len(),
    };
    let (Some(length), Some(stored)) = (bytes.get(0..4), bytes.get(4..8)) else {
        return Err(truncated(FRAME_HEADER));
    };
    let length = u32::from_le_bytes([length[0], length[1], length[2], length[3]]) as usize;
    let stored = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
    if length > MAX_PAYLOAD {
        return Err(FrameError::TooLong(length));
    }
    let payload = bytes
        .get(FRAME_HEADER..FRAME_HEADER + length)
        .ok_or_else(|| truncated(FRAME_HEADER + length))?;
    let computed = crc32fast::hash(payload);
    if computed != stored {
        return Err(FrameError::Checksum { stored, computed });
    }
    Ok(payload)
}

/// What identifies a stored object, written before each log record and snapshot entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EntryHeader {
    /// The resourceVersion of the change (log records only; 0 in snapshots).
    #[serde(default)]
    pub(crate) rv: u64,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl EntryHeader {
    pub(crate) fn resource_key(&self) -> ResourceKey {
        ResourceKey {
            group: self.group.clone(),
            plural: self.resource.clone(),
        }
    }
}

/// One change read back from the log.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    pub(crate) header: EntryHeader,
    pub(crate) event_type: EventType,
    pub(crate) object: Value,
}

/// Why a frame's payload is not a record (or a snapshot entry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The payload has no header line.
    #[error("the record has no header line")]
    NoHeader,
    /// The header or the body is not the JSON expected.
    #[error("the record does not decode: {0}")]
    Json(String),
    /// The event type is not one a store writes.
    #[error("unknown event type {0:?}")]
    EventType(String),
}

/// Appends the log record of `event` (the change to the object `name`) to `out`, as one frame.
pub(crate) fn encode_record(event: &WatchEvent, name: &str, out: &mut Vec<u8>) {
    let header = EntryHeader {
        rv: event.resource_version,
        group: event.resource.group.clone(),
        resource: event.resource.plural.clone(),
        namespace: event.namespace.clone(),
        name: name.to_string(),
    };
    let mut payload = header_line(&header);
    payload.extend_from_slice(&event.line());
    encode_frame(&payload, out);
}

/// Decodes a log record's payload.
pub(crate) fn decode_record(payload: &[u8]) -> Result<Record, RecordError> {
    #[derive(Deserialize)]
    struct Change {
        #[serde(rename = "type")]
        event_type: String,
        object: Value,
    }
    let (header, body) = split_header(payload)?;
    let change: Change =
        serde_json::from_slice(body).map_err(|error| RecordError::Json(error.to_string()))?;
    let event_type = match change.event_type.as_str() {
        "ADDED" => EventType::Added,
        "MODIFIED" => EventType::Modified,
        "DELETED" => EventType::Deleted,
        _ => return Err(RecordError::EventType(change.event_type)),
    };
    Ok(Record {
        header,
        event_type,
        object: change.object,
    })
}

/// Appends a snapshot entry (the object's header and JSON) to `out`, as one frame.
pub(crate) fn encode_entry(header: &EntryHeader, object: &Value, out: &mut Vec<u8>) {
    let mut payload = header_line(header);
    // Writing a `Value` into a Vec cannot fail: its keys are strings.
    if serde_json::to_writer(&mut payload, object).is_err() {
        payload.extend_from_slice(b"null");
    }
    encode_frame(&payload, out);
}

/// Decodes a snapshot entry's payload.
pub(crate) fn decode_entry(payload: &[u8]) -> Result<(EntryHeader, Value), RecordError> {
    let (header, body) = split_header(payload)?;
    let object =
        serde_json::from_slice(body).map_err(|error| RecordError::Json(error.to_string()))?;
    Ok((header, object))
}

fn header_line(header: &EntryHeader) -> Vec<u8> {
    let mut line = Vec::with_capacity(256);
    // Serializing plain strings and numbers cannot fail.
    if serde_json::to_writer(&mut line, header).is_err() {
        line.extend_from_slice(b"{}");
    }
    line.push(b'\n');
    line
}

fn split_header(payload: &[u8]) -> Result<(EntryHeader, &[u8]), RecordError> {
    let newline = payload
        .iter()
        .position(|byte| *byte == b'\n')
        .ok_or(RecordError::NoHeader)?;
    let header = serde_json::from_slice(&payload[..newline])
        .map_err(|error| RecordError::Json(error.to_string()))?;
    Ok((header, &payload[newline + 1..]))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn event(rv: u64) -> WatchEvent {
        WatchEvent::new(
            EventType::Modified,
            ResourceKey {
                group: "apps".into(),
                plural: "deployments".into(),
            },
            "default".into(),
            rv,
            Arc::new(serde_json::json!({"kind": "Deployment", "metadata": {"name": "web"}}).into()),
            None,
        )
    }

    #[test]
    fn a_record_round_trips() {
        let mut bytes = Vec::new();
        encode_record(&event(7), "web", &mut bytes);
        encode_record(&event(8), "web", &mut bytes);
        let frames: Vec<_> = Frames::new(&bytes).collect();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].0, 0);
        let (offset, payload) = &frames[1];
        let record = decode_record(payload.as_ref().unwrap()).unwrap();
        assert_eq!(*offset, bytes.len() / 2);
        assert_eq!(record.header.rv, 8);
        assert_eq!(record.header.group, "apps");
        assert_eq!(record.header.resource, "deployments");
        assert_eq!(record.header.namespace, "default");
        assert_eq!(record.header.name, "web");
        assert_eq!(record.event_type, EventType::Modified);
        assert_eq!(record.object["metadata"]["name"], "web");
    }

    #[test]
    fn a_cut_frame_is_reported_where_it_starts() {
        let mut bytes = Vec::new();
        encode_record(&event(1), "web", &mut bytes);
        let first = bytes.len();
        encode_record(&event(2), "web", &mut bytes);
        for cut in [first + 3, first + FRAME_HEADER, bytes.len() - 1] {
            let frames: Vec<_> = Frames::new(&bytes[..cut]).collect();
            assert_eq!(frames.len(), 2, "cut at {cut}");
            assert!(frames[0].1.is_ok());
            assert_eq!(frames[1].0, first);
            assert!(matches!(frames[1].1, Err(FrameError::Truncated { .. })));
        }
    }

    #[test]
    fn a_flipped_bit_fails_the_checksum() {
        let mut bytes = Vec::new();
        encode_record(&event(1), "web", &mut bytes);
        let last = bytes.len() - 5;
        bytes[last] ^= 0x10;
        let frames: Vec<_> = Frames::new(&bytes).collect();
        assert!(matches!(frames[0].1, Err(FrameError::Checksum { .. })));
    }

    #[test]
    fn a_huge_length_is_refused_without_allocating() {
        let mut bytes = vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        bytes.extend_from_slice(b"{}");
        let frames: Vec<_> = Frames::new(&bytes).collect();
        assert_eq!(
            frames[0].1,
            Err(FrameError::TooLong(u32::MAX as usize)),
            "{frames:?}"
        );
    }

    #[test]
    fn payloads_that_are_not_records_are_typed_errors() {
        assert_eq!(decode_record(b"no newline"), Err(RecordError::NoHeader));
        assert!(matches!(
            decode_record(b"{\"rv\":1}\n{}"),
            Err(RecordError::Json(_))
        ));
        let header = br#"{"rv":1,"group":"","resource":"pods","namespace":"","name":"a"}"#;
        let mut payload = header.to_vec();
        payload.extend_from_slice(b"\n{\"type\":\"BOOKMARK\",\"object\":{}}");
        assert_eq!(
            decode_record(&payload),
            Err(RecordError::EventType("BOOKMARK".into()))
        );
    }

    #[test]
    fn a_snapshot_entry_round_trips() {
        let header = EntryHeader {
            rv: 0,
            group: String::new(),
            resource: "configmaps".into(),
            namespace: "kube-system".into(),
            name: "settings".into(),
        };
        let object = serde_json::json!({"data": {"a": "1"}});
        let mut bytes = Vec::new();
        encode_entry(&header, &object, &mut bytes);
        let (_, payload) = Frames::new(&bytes).next().unwrap();
        assert_eq!(decode_entry(payload.unwrap()).unwrap(), (header, object));
    }
}
