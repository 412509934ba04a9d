//! A delete's preconditions (`DeleteOptions.preconditions`): the uid and the resourceVersion
//! the object must have for the delete to go ahead, so that a client never deletes an object
//! that was re-created or changed since it read it.

use serde_json::Value;

use super::StoreError;
use crate::resource::ResourceKind;

/// What the object must hold for a delete to go ahead; the default requires nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Preconditions<'a> {
    /// `metadata.uid` must be this.
    pub uid: Option<&'a str>,
    /// `metadata.resourceVersion` must be this.
    pub resource_version: Option<&'a str>,
}

/// A resourceVersion precondition alone (`None`: no precondition).
impl<'a> From<Option<&'a str>> for Preconditions<'a> {
    fn from(resource_version: Option<&'a str>) -> Self {
        Self {
            uid: None,
            resource_version,
        }
    }
}

impl<'a> Preconditions<'a> {
    /// The preconditions of a `DeleteOptions` body (`Value::Null` when there is none).
    pub fn of(options: &'a Value) -> Self {
        Self {
            uid: options["preconditions"]["uid"].as_str(),
            resource_version: options["preconditions"]["resourceVersion"].as_str(),
        }
    }

    /// Whether `object` (the `name` of `kind`) meets them: the refusal kube-apiserver's
    /// `BeforeDelete` gives when it does not (the uid is checked first).
    pub fn check(&self, kind: &ResourceKind, name: &str, object: &Value) -> Result<(), StoreError> {
        let metadata = &object["metadata"];
        let held = |field: &str| metadata[field].as_str().unwrap_or_default().to_string();
        let detail = if let Some(uid) = self.uid.filter(|uid| metadata["uid"] != *uid) {
            format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                held("uid")
            )
        } else if let Some(version) = self
            .resource_version
            .filter(|version| metadata["resourceVersion"] != *version)
        {
            format!(
                "the ResourceVersion in the precondition ({version}) does not match the ResourceVersion in record ({}). The object might have been modified",
                held("resourceVersion")
            )
        } else {
            return Ok(());
        };
        let resource = if kind.group.is_empty() {
            kind.kind.clone()
        } else {
            format!("{}.{}", kind.kind, kind.group)
        };
        Err(StoreError::PreconditionFailed {
            resource,
            name: name.to_string(),
            detail,
        })
    }
}
