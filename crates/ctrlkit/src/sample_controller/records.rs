//! The records the sample-controller keeps outside the cluster for each Foo: what its
//! finalizer protects.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// What the sample-controller records about one Foo outside the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalRecord {
    /// The Deployment the Foo asks for.
    pub deployment_name: String,
    /// The replicas it asks for.
    pub replicas: Option<i32>,
}

/// A system outside the cluster (a DNS zone, an inventory, a billing account) that holds one
/// record per Foo, kept in memory here. Nothing in the API server deletes these records: the
/// Foo's finalizer makes the controller delete its record before the Foo goes. Cloning shares
/// the records.
#[derive(Debug, Clone, Default)]
pub struct ExternalRecords(Arc<Mutex<BTreeMap<String, ExternalRecord>>>);

impl ExternalRecords {
    /// Writes the record of the Foo `key` (`namespace/name`).
    pub fn put(&self, key: &str, record: ExternalRecord) {
        self.0.lock().insert(key.to_owned(), record);
    }

    /// Deletes the record of the Foo `key`; deleting a record that is gone is fine.
    pub fn delete(&self, key: &str) {
        self.0.lock().remove(key);
    }

    /// The record of the Foo `key`.
    pub fn get(&self, key: &str) -> Option<ExternalRecord> {
        self.0.lock().get(key).cloned()
    }

    /// How many records there are.
    pub fn len(&self) -> usize {
        self.0.lock().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.lock().is_empty()
    }
}
