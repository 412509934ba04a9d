//! What kube-apiserver's registry does to an object of a built-in kind on create and update,
//! after decoding and defaults and before validation (`PrepareForCreate`, `PrepareForUpdate` of
//! `pkg/registry/*/strategy.go`, and the admission plugins every cluster runs): a Pod's initial
//! status, service account and token volume; a Service's cluster IP and node ports; a Job's
//! selector and labels; the empty `status` Go writes for every kind that has one.

mod job;
mod pod;
mod service;

use serde_json::{Map, Value};

pub(crate) use self::service::{KUBERNETES_SERVICE_IP, ServiceAllocations};
use crate::resource::ResourceKind;
use crate::rest::status::ApiError;
use crate::storage::Store;

/// What the strategies consult.
pub(crate) struct Context<'a> {
    /// The objects (a Pod's service account, the Services' cluster IPs). A Service's write
    /// runs under [`ServiceAllocations::serialized`], so what it reads here stays true until it
    /// is stored.
    pub store: &'a Store,
}

/// Prepares a new object of `kind` in `namespace` for storing.
pub(crate) fn prepare_for_create(
    kind: &ResourceKind,
    namespace: &str,
    object: &mut Value,
    context: &Context<'_>,
) -> Result<(), ApiError> {
    if kind.status_subresource
        && let Some(builtin) = kind.builtin
    {
        // A new object's status is empty.
        if let Some(fields) = object.as_object_mut() {
            fields.insert("status".to_string(), builtin.empty_status().clone());
        }
    }
    match (
        kind.group.as_str(),
        kind.plural.as_str(),
        kind.builtin.is_some(),
    ) {
        ("", "pods", true) => pod::prepare_for_create(namespace, object, context),
        ("", "services", true) => service::prepare_for_create(object, None, context),
        ("batch", "jobs", true) => {
            job::prepare_for_create(object);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Prepares an update of `old` to `new` of `kind` for storing.
pub(crate) fn prepare_for_update(
    kind: &ResourceKind,
    new: &mut Value,
    old: &Value,
    context: &Context<'_>,
) -> Result<(), ApiError> {
    match (
        kind.group.as_str(),
        kind.plural.as_str(),
        kind.builtin.is_some(),
    ) {
        ("", "services", true) => service::prepare_for_create(new, Some(old), context),
        _ => Ok(()),
    }
}

/// The map at `field` of `object`, made if absent or not a map.
fn map_at<'a>(object: &'a mut Value, field: &str) -> Option<&'a mut Map<String, Value>> {
    let fields = object.as_object_mut()?;
    let entry = fields
        .entry(field.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}
