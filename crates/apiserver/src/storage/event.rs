//! A change to one object, as watchers receive it, serialized at most once.

use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};

use super::StoredObject;
use crate::resource::ResourceKey;

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created (or, in a watch's initial events, exists).
    Added,
    /// The object changed.
    Modified,
    /// The object was removed; the event carries its last state.
    Deleted,
}

impl EventType {
    /// The wire name: `ADDED`, `MODIFIED`, `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, shared by every watcher that receives it.
#[derive(Debug)]
pub struct WatchEvent {
    /// What happened.
    pub event_type: EventType,
    /// The resource of the object.
    pub resource: ResourceKey,
    /// The object's namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// The resourceVersion of the change.
    pub resource_version: u64,
    /// The object after the change (its last state for a deletion).
    pub object: Arc<StoredObject>,
    /// The object before the change, for a modification or a deletion: a filtered watch turns a
    /// change in or out of its selection into an `ADDED` or `DELETED`, and a list as of an earlier
    /// resourceVersion undoes the change.
    pub previous: Option<Arc<StoredObject>>,
    /// The memory the change takes, as the history and the watchers' buffers count it.
    size: usize,
    line: OnceLock<Bytes>,
}

impl WatchEvent {
    pub(crate) fn new(
        event_type: EventType,
        resource: ResourceKey,
        namespace: String,
        resource_version: u64,
        object: Arc<StoredObject>,
        previous: Option<Arc<StoredObject>>,
    ) -> Self {
        Self {
            event_type,
            resource,
            namespace,
            resource_version,
            object,
            previous,
            size: 0,
            line: OnceLock::new(),
        }
    }

    /// The event with the memory it takes (`bytes`), which bounds how many such events are
    /// kept.
    pub(crate) fn with_size(mut self, bytes: usize) -> Self {
        self.size = bytes;
        self
    }

    /// The memory the change takes, as given to [`with_size`](Self::with_size).
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Appends [`line`](Self::line) to `out`, without making and keeping the line when the
    /// object's serialization exists already: a watch stream that sends events in batches
    /// copies each into its chunk anyway, and making the line first would be a second copy,
    /// a fresh allocation kept in the history as long as the event.
    pub(crate) fn write_line(&self, out: &mut BytesMut) {
        if let Some(line) = self.line.get() {
            out.extend_from_slice(line);
            return;
        }
        match self.object.cached_json() {
            Some(json) => {
                for part in head_parts(self.event_type.as_str()) {
                    out.extend_from_slice(part);
                }
                out.extend_from_slice(&json);
                out.extend_from_slice(LINE_TAIL);
            }
            None => out.extend_from_slice(&self.line()),
        }
    }

    /// The event as one line of a watch stream: `{"type":T,"object":{…}}` and a newline.
    /// Made the first time it is asked for, then shared by every watcher. The object's
    /// serialization is shared with it: copied in if made already, else written into the line
    /// and handed to the object as a slice of it.
    pub fn line(&self) -> Bytes {
        self.line
            .get_or_init(|| {
                if let Some(json) = self.object.cached_json() {
                    return watch_line(self.event_type.as_str(), &json);
                }
                let mut line = line_head(self.event_type.as_str(), 1024);
                let start = line.len();
                super::stored::write_kube_order(self.object.value(), &mut line);
                let end = line.len();
                line.extend_from_slice(LINE_TAIL);
                let line = Bytes::from(line);
                self.object.offer_json(line.slice(start..end));
                line
            })
            .clone()
    }
}

/// What ends a watch line after its object.
const LINE_TAIL: &[u8] = b"}\n";

/// `{"type":"T","object":`, with room for `capacity` more bytes.
fn line_head(event_type: &str, capacity: usize) -> Vec<u8> {
    let mut line = Vec::with_capacity(capacity + event_type.len() + 24);
    for part in head_parts(event_type) {
        line.extend_from_slice(part);
    }
    line
}

/// What a line starts with, up to the object: `{"type":"T","object":`.
fn head_parts(event_type: &str) -> [&[u8]; 3] {
    [b"{\"type\":\"", event_type.as_bytes(), b"\",\"object\":"]
}

/// One line of a watch stream for an event of `event_type` (`ADDED`, `BOOKMARK`, …) whose object
/// is already serialized. `type` comes first, as kube-apiserver writes it: clients that decode the
/// event as an adjacently tagged enum (kube-rs's `WatchEvent`) otherwise buffer the whole object.
pub(crate) fn watch_line(event_type: &str, object_json: &[u8]) -> Bytes {
    let mut line = line_head(event_type, object_json.len() + LINE_TAIL.len());
    line.extend_from_slice(object_json);
    line.extend_from_slice(LINE_TAIL);
    Bytes::from(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_serialized_once_and_shared() {
        let event = WatchEvent::new(
            EventType::Modified,
            ResourceKey {
                group: String::new(),
                plural: "configmaps".into(),
            },
            "default".into(),
            7,
            Arc::new(StoredObject::new(
                serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "a"}}),
            )),
            None,
        );
        let first = event.line();
        assert_eq!(
            &first[..],
            b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}}\n"
        );
        // The same bytes, not a second serialization; the object's own serialization is a
        // slice of them.
        assert_eq!(first.as_ptr(), event.line().as_ptr());
        let json = event.object.json();
        assert_eq!(
            &json[..],
            br#"{"kind":"ConfigMap","metadata":{"name":"a"}}"#
        );
        assert_eq!(json.as_ptr(), first[28..].as_ptr());
    }

    #[test]
    fn a_line_written_into_a_batch_is_the_line_and_is_not_kept() {
        let object = Arc::new(StoredObject::new(
            serde_json::json!({"kind": "ConfigMap", "metadata": {"name": "b"}}),
        ));
        let json = object.json();
        let event = WatchEvent::new(
            EventType::Added,
            ResourceKey {
                group: String::new(),
                plural: "configmaps".into(),
            },
            "default".into(),
            8,
            object,
            None,
        );
        let mut batch = BytesMut::from(&b"before\n"[..]);
        event.write_line(&mut batch);
        let expected =
            b"before\n{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"b\"}}}\n";
        assert_eq!(&batch[..], &expected[..]);
        // Written from its parts: no line was made and kept.
        assert!(event.line.get().is_none());
        // Once the line is made, it is the same bytes, and it is what is copied.
        assert_eq!(&event.line()[..], &expected[7..]);
        let mut again = BytesMut::new();
        event.write_line(&mut again);
        assert_eq!(&again[..], &expected[7..]);
        assert_eq!(
            again.len(),
            br#"{"type":"ADDED","object":"#.len() + json.len() + b"}\n".len()
        );
    }
}
