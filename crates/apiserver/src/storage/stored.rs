//! An object as the store keeps it: its JSON tree, and the tree serialized once, the first time
//! a response, a list page or a watch event needs the bytes.

use std::ops::Deref;
use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::Value;

/// A stored object. Reads go to the tree through `Deref` (`object["metadata"]`); every reader
/// that needs the serialized form shares one serialization through [`json`](Self::json). There
/// is no mutable access: a change makes a new `StoredObject`, so the bytes can never go stale.
///
/// ```
/// use ctrlkit_apiserver::storage::StoredObject;
///
/// let object = StoredObject::new(serde_json::json!({"metadata": {"name": "a"}}));
/// assert_eq!(object["metadata"]["name"], "a");
/// assert_eq!(&object.json()[..], br#"{"metadata":{"name":"a"}}"#);
/// // Asked again: the same bytes, not a second serialization.
/// assert_eq!(object.json().as_ptr(), object.json().as_ptr());
/// ```
#[derive(Debug)]
pub struct StoredObject {
    value: Value,
    json: OnceLock<Bytes>,
}

impl StoredObject {
    /// Keeps `value`; it is serialized when first asked for.
    pub fn new(value: Value) -> Self {
        Self {
            value,
            json: OnceLock::new(),
        }
    }

    /// The object as a JSON tree.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The serialization, if made already.
    pub(crate) fn cached_json(&self) -> Option<Bytes> {
        self.json.get().cloned()
    }

    /// Takes `json`, a serialization of this object made elsewhere (a watch line's slice), if
    /// none is cached yet.
    pub(crate) fn offer_json(&self, json: Bytes) {
        let _ = self.json.set(json);
    }

    /// The object serialized as compact JSON, shared by every caller.
    pub fn json(&self) -> Bytes {
        self.json
            .get_or_init(|| {
                // Writing a `Value` into a Vec cannot fail: its keys are strings.
                Bytes::from(serde_json::to_vec(&self.value).unwrap_or_else(|_| b"null".to_vec()))
            })
            .clone()
    }
}

impl Deref for StoredObject {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.value
    }
}

impl From<Value> for StoredObject {
    fn from(value: Value) -> Self {
        Self::new(value)
    }
}

impl PartialEq for StoredObject {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}
