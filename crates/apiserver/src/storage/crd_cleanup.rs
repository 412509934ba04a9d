//! Deleting a CustomResourceDefinition as kube-apiserver does: the delete only marks it
//! (`deletionTimestamp`, the `customresourcecleanup.apiextensions.k8s.io` finalizer and a
//! `Terminating` condition), its custom resources are deleted (those with finalizers of their
//! own are marked and waited for), and only when none is left does the finalizer go, and the
//! CRD with it.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::meta::now_timestamp;
use super::{Deleted, Store, StoreError, StoredObject};
use crate::resource::{ResourceKey, ResourceKind};

/// The finalizer that holds a deleted CRD until its custom resources are gone.
pub const CRD_CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Marks a CRD being deleted (its `metadata` already has its `deletionTimestamp`): the
/// cleanup finalizer, and the `Terminating` condition.
pub(crate) fn mark_terminating(crd: &mut Value) {
    if let Some(metadata) = crd.get_mut("metadata").and_then(Value::as_object_mut) {
        let finalizers = metadata
            .entry("finalizers")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(finalizers) = finalizers.as_array_mut()
            && !finalizers.iter().any(|f| f == CRD_CLEANUP_FINALIZER)
        {
            finalizers.push(json!(CRD_CLEANUP_FINALIZER));
        }
    }
    let Some(fields) = crd.as_object_mut() else {
        return;
    };
    let status = fields
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if !status.is_object() {
        *status = Value::Object(Map::new());
    }
    let conditions = status
        .as_object_mut()
        .map(|status| status.entry("conditions").or_insert_with(|| json!([])));
    if let Some(conditions) = conditions.and_then(Value::as_array_mut) {
        conditions.retain(|condition| condition["type"] != "Terminating");
        conditions.push(json!({
            "type": "Terminating", "status": "True", "reason": "InstanceDeletionPending",
            "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            "lastTransitionTime": now_timestamp(),
        }));
    }
}

/// Whether `crd` is being deleted (creating its custom resources is refused meanwhile).
pub fn is_terminating(crd: &Value) -> bool {
    crd["metadata"].get("deletionTimestamp").is_some()
}

impl Store {
    /// Whether the CRD `name` is being deleted: a lookup in the store alone, as every create
    /// of a custom resource asks it.
    pub fn is_crd_terminating(&self, name: &str) -> bool {
        let crds = ResourceKey {
            group: "apiextensions.k8s.io".to_string(),
            plural: "customresourcedefinitions".to_string(),
        };
        self.state
            .lock()
            .objects
            .get(&crds)
            .and_then(|crds| crds.get(&(String::new(), name.to_string())))
            .is_some_and(|crd| is_terminating(crd))
    }

    /// The CRDs being deleted whose custom resources are still to be cleaned up.
    pub fn crds_to_clean_up(&self, crds: &ResourceKind) -> Vec<Arc<StoredObject>> {
        let all = self.list_latest(crds, None);
        all.into_iter()
            .filter(|crd| {
                is_terminating(crd)
                    && crd["metadata"]["finalizers"]
                        .as_array()
                        .is_some_and(|finalizers| {
                            finalizers.iter().any(|f| f == CRD_CLEANUP_FINALIZER)
                        })
            })
            .collect()
    }

    /// Deletes every object of `kind` (those with finalizers are only marked); how many are
    /// left.
    pub fn delete_all_of(&self, kind: &ResourceKind) -> Result<usize, StoreError> {
        let objects = self.list_latest(kind, None);
        let mut left = 0;
        for object in objects {
            let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            match self.delete(kind, namespace, name, None) {
                Ok(Deleted::Finalizing(_)) => left += 1,
                Ok(Deleted::Gone(_)) | Err(StoreError::NotFound { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(left)
    }

    /// Takes the cleanup finalizer off the CRD `name`: it is gone then, unless another
    /// finalizer still holds it. Returns it if it is gone.
    pub fn finish_crd_cleanup(
        &self,
        crds: &ResourceKind,
        name: &str,
    ) -> Result<Option<Arc<StoredObject>>, StoreError> {
        let current = self.get_latest(crds, "", name)?;
        let mut released = (*current).clone();
        if let Some(finalizers) = released
            .get_mut("metadata")
            .and_then(|metadata| metadata.get_mut("finalizers"))
            .and_then(Value::as_array_mut)
        {
            finalizers.retain(|finalizer| finalizer != CRD_CLEANUP_FINALIZER);
        }
        self.update(crds, "", name, released, false)?;
        Ok(match self.get_latest(crds, "", name) {
            Err(StoreError::NotFound { .. }) => Some(current),
            _ => None,
        })
    }
}
