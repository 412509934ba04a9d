//! An object as the store keeps it: its JSON tree, and the tree serialized once, the first time
//! a response, a list page or a watch event needs the bytes.

use std::ops::Deref;
use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::Value;

use super::footprint::{Footprint, estimate};

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
/// let typed = StoredObject::new(serde_json::json!({"apiVersion": "v1", "data": {}, "kind": "ConfigMap"}));
/// assert_eq!(&typed.json()[..], br#"{"kind":"ConfigMap","apiVersion":"v1","data":{}}"#);
/// // Asked again: the same bytes, not a second serialization.
/// assert_eq!(object.json().as_ptr(), object.json().as_ptr());
/// ```
#[derive(Debug)]
pub struct StoredObject {
    value: Value,
    json: OnceLock<Bytes>,
    estimate: OnceLock<Footprint>,
}

impl StoredObject {
    /// Keeps `value`; it is serialized when first asked for.
    pub fn new(value: Value) -> Self {
        Self {
            value,
            json: OnceLock::new(),
            estimate: OnceLock::new(),
        }
    }

    /// Keeps `value`, whose estimate (see [`footprint`](Self::footprint)) the caller made
    /// already.
    pub(super) fn with_estimate(value: Value, estimate: Footprint) -> Self {
        Self {
            value,
            json: OnceLock::new(),
            estimate: OnceLock::from(estimate),
        }
    }

    /// The memory the object takes, in bytes, estimated from its tree's shape: the tree's heap
    /// blocks, its JSON (made or not yet), and the object itself. Worked out once, in one walk
    /// of the tree.
    ///
    /// ```
    /// use ctrlkit_apiserver::storage::StoredObject;
    ///
    /// let small = StoredObject::new(serde_json::json!({"metadata": {"name": "a"}}));
    /// let data = serde_json::json!({"metadata": {"name": "b"}, "data": {"blob": "x".repeat(1000)}});
    /// let large = StoredObject::new(data);
    /// // A map is a B-tree leaf of several hundred bytes, however few its entries.
    /// assert!(small.footprint() > 1_000);
    /// assert!(large.footprint() > small.footprint() + 2_000);
    /// ```
    pub fn footprint(&self) -> usize {
        let estimate = self.estimate();
        estimate
            .tree
            .saturating_add(estimate.json)
            .saturating_add(size_of::<Self>())
    }

    /// The tree's estimated memory and JSON length, worked out on first use.
    pub(super) fn estimate(&self) -> Footprint {
        *self.estimate.get_or_init(|| estimate(&self.value))
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

    /// The object serialized as compact JSON, shared by every caller: `kind`, `apiVersion` and
    /// `metadata` first, as kube-apiserver writes them (its types begin with them), then the
    /// other fields.
    pub fn json(&self) -> Bytes {
        self.json
            .get_or_init(|| {
                // Room for the estimated length and a few escapes: one allocation, where a
                // buffer doubling from small sizes would be reallocated and copied some seven
                // times for a Pod, and keep up to twice the room it needs. No more room up
                // front than a stored object may take; a larger tree grows its buffer.
                let length = self.estimate().json.min(super::MAX_OBJECT_BYTES);
                let mut out = Vec::with_capacity(length + length / 32 + 32);
                write_kube_order(&self.value, &mut out);
                Bytes::from(out)
            })
            .clone()
    }
}

/// The fields an object of kube-apiserver begins with, in its order.
const LEADING: [&str; 3] = ["kind", "apiVersion", "metadata"];

/// Appends `value` as compact JSON to `out`, an object's leading fields in kube-apiserver's
/// order.
pub(crate) fn write_kube_order(value: &Value, out: &mut Vec<u8>) {
    let Value::Object(fields) = value else {
        // Writing a `Value` into a Vec cannot fail: its keys are strings.
        if serde_json::to_writer(&mut *out, value).is_err() {
            out.extend_from_slice(b"null");
        }
        return;
    };
    out.push(b'{');
    let leading = LEADING.iter().filter_map(|key| fields.get_key_value(*key));
    let rest = fields
        .iter()
        .filter(|(key, _)| !LEADING.contains(&key.as_str()));
    for (index, (key, field)) in leading.chain(rest).enumerate() {
        if index > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, key);
        out.push(b':');
        let _ = serde_json::to_writer(&mut *out, field);
    }
    out.push(b'}');
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
