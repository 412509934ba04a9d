//! What kube-apiserver's registry does to an object of a built-in kind on create and update,
//! after decoding and defaults and before validation (`PrepareForCreate`, `PrepareForUpdate` of
//! `pkg/registry/*/strategy.go`, and the admission plugins every cluster runs): a Pod's initial
//! status, service account and token volume; a Service's cluster IP and node ports; a Job's
//! selector and labels; the empty `status` Go writes for every kind that has one.

mod data;
mod job;
mod pod;
mod pod_update;
mod service;

use serde_json::{Map, Value};

use self::data::DataKind;
pub(crate) use self::service::{KUBERNETES_SERVICE_IP, ServiceAllocations};
use crate::custom::{self, FieldError};
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
    if kind.custom.is_some() {
        custom::prepare_for_create(kind.status_subresource, object);
        return Ok(());
    }
    if kind.is_crd() {
        custom::definition::default(object);
    }
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

/// Prepares an update of `old` to `new` of `kind` for storing, written through `subresource`
/// (empty for the object itself; `status` for its status).
pub(crate) fn prepare_for_update(
    kind: &ResourceKind,
    new: &mut Value,
    old: &Value,
    subresource: &str,
    context: &Context<'_>,
) -> Result<(), ApiError> {
    if subresource == "status" {
        return Ok(());
    }
    if kind.custom.is_some() {
        custom::prepare_for_update(kind.status_subresource, new, old);
        return Ok(());
    }
    if kind.is_crd() {
        custom::definition::default(new);
    }
    match (
        kind.group.as_str(),
        kind.plural.as_str(),
        kind.builtin.is_some(),
    ) {
        ("", "services", true) => service::prepare_for_create(new, Some(old), context),
        // Admission plugins skip subresources (a Pod's `ephemeralcontainers`).
        ("", "pods", true) if subresource.is_empty() => {
            pod::prepare_for_update(new);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Checks a new object of `kind` as its strategy's `Validate` does (custom resources against
/// their schema, ConfigMaps' and Secrets' data; other built-in kinds are checked by their
/// decoding and the store).
pub(crate) fn validate_create(kind: &ResourceKind, object: &Value) -> Result<(), ApiError> {
    if kind.is_crd() {
        return refuse(kind, object, custom::definition::validate(object));
    }
    if let Some(data) = DataKind::of(kind) {
        return refuse(kind, object, data.errors(object));
    }
    let Some(version) = &kind.custom else {
        return Ok(());
    };
    refuse(kind, object, custom::validate_create(version, object))
}

/// Checks an update of `old` to `new` of `kind` as its strategy's `ValidateUpdate` does (custom
/// resources, CRDs, ConfigMaps' and Secrets' data, and what an update may change of a Pod);
/// `subresource` as for [`prepare_for_update`].
pub(crate) fn validate_update(
    kind: &ResourceKind,
    new: &Value,
    old: &Value,
    subresource: &str,
) -> Result<(), ApiError> {
    let status_only = subresource == "status";
    if kind.is_crd() && !status_only {
        return refuse(kind, new, custom::definition::validate_update(new, old));
    }
    if let Some(data) = DataKind::of(kind) {
        let mut errors = data.update_errors(new, old);
        errors.extend(data.errors(new));
        return refuse(kind, new, errors);
    }
    // A Pod's subresources (`status`, `ephemeralcontainers`) have checks of their own.
    if is_pods(kind) && subresource.is_empty() {
        return refuse(kind, new, pod_update::update_errors(new, old));
    }
    let Some(version) = &kind.custom else {
        return Ok(());
    };
    refuse(
        kind,
        new,
        custom::validate_update(version, new, old, status_only),
    )
}

/// Whether `kind` is the built-in Pod.
fn is_pods(kind: &ResourceKind) -> bool {
    kind.group.is_empty() && kind.plural == "pods" && kind.builtin.is_some()
}

/// The 422 of an object with field errors.
fn refuse(kind: &ResourceKind, object: &Value, errors: Vec<FieldError>) -> Result<(), ApiError> {
    if errors.is_empty() {
        return Ok(());
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let causes = errors.iter().map(FieldError::cause).collect();
    Err(ApiError::invalid(&kind.group, &kind.kind, name, causes))
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
