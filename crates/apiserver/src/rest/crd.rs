//! CustomResourceDefinitions: creating one serves its resource at once; deleting one stops it.

use std::sync::Arc;

use serde_json::{Value, json};

use super::App;
use crate::custom::CustomVersion;
use crate::custom::conversion::{self, Conversion};
use crate::resource::ResourceKind;
use crate::storage::StoredObject;

/// The resources a CRD defines: one per served version. A version whose schema is that of the
/// same version already served (`served`) keeps its `schema_since`; the others start theirs
/// at the CRD's resourceVersion.
fn defined_kinds(crd: &Value, served: &[ResourceKind]) -> Vec<ResourceKind> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let (Some(group), Some(plural), Some(kind)) = (
        spec["group"].as_str(),
        names["plural"].as_str(),
        names["kind"].as_str(),
    ) else {
        return Vec::new();
    };
    let singular = names["singular"]
        .as_str()
        .map_or_else(|| kind.to_ascii_lowercase(), str::to_string);
    let short_names = string_list(&names["shortNames"]);
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let conversion = Arc::new(Conversion::read(crd));
    let crd_version = crd["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|version| version.parse::<u64>().ok())
        .unwrap_or(0);
    spec["versions"]
        .as_array()
        .map(|versions| versions.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|version| version["served"].as_bool().unwrap_or(true))
        .filter_map(|version| {
            let read = CustomVersion::read(version);
            let schema_since = served
                .iter()
                .filter(|kind| kind.version == version["name"])
                .filter_map(|kind| kind.custom.as_deref())
                .find(|old| old.openapi == read.openapi)
                .map_or(crd_version, |old| old.schema_since);
            Some(ResourceKind {
                group: group.to_string(),
                version: version["name"].as_str()?.to_string(),
                plural: plural.to_string(),
                singular: singular.clone(),
                kind: kind.to_string(),
                namespaced,
                short_names: short_names.clone(),
                status_subresource: version["subresources"]["status"].is_object(),
                tracks_generation: true,
                requires_resource_version_on_update: true,
                create_on_update: false,
                categories: string_list(&names["categories"]),
                scale: version["subresources"]["scale"].is_object(),
                returns_deleted_object: false,
                selectable_fields: Vec::new(),
                builtin: None,
                create_only: false,
                custom: Some(Arc::new(CustomVersion {
                    conversion: conversion.clone(),
                    schema_since,
                    ..read
                })),
            })
        })
        .collect()
}

/// The strings of a JSON list (none when it is not one).
fn string_list(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item.as_str().map(str::to_string))
        .collect()
}

/// Serves what `crd` defines (replacing what an earlier version of it defined) and marks it
/// established, as the apiextensions controllers of kube-apiserver do; returns the CRD as
/// stored with its new status (`None` when its status was already that, or it changed
/// meanwhile).
pub(super) fn serve(app: &App, crd: &Value) -> Option<Arc<StoredObject>> {
    let served = match (
        crd["spec"]["group"].as_str(),
        crd["spec"]["names"]["plural"].as_str(),
    ) {
        (Some(group), Some(plural)) => app.registry.all_versions(group, plural),
        _ => Vec::new(),
    };
    let kinds = defined_kinds(crd, &served);
    if let Some(first) = kinds.first() {
        app.registry.remove(&first.group, &first.plural);
    }
    for kind in &kinds {
        app.registry.add(kind.clone());
    }
    let name = crd["metadata"]["name"].as_str()?;
    let names = crd["spec"]["names"].clone();
    // The versions objects were ever stored in: those recorded, and the storage version.
    let mut stored_versions = string_list(&crd["status"]["storedVersions"]);
    if let Some(storage) = conversion::storage_version(crd)
        && !stored_versions.iter().any(|version| version == storage)
    {
        stored_versions.push(storage.to_string());
    }
    let status = json!({
        "acceptedNames": names,
        "storedVersions": stored_versions,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": crd["metadata"]["creationTimestamp"]},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": crd["metadata"]["creationTimestamp"]},
        ],
    });
    if crd["status"] == status {
        return None;
    }
    let crds = app
        .registry
        .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
    let mut established = crd.clone();
    established["status"] = status;
    match app.store.update(&crds, "", name, established, true) {
        Ok((stored, _)) => Some(stored),
        Err(error) => {
            // Someone updated it meanwhile; their write triggers another serve().
            tracing::debug!(%error, crd = name, "could not mark the CRD established");
            None
        }
    }
}

/// Serves every CRD already in the store (a durable store reopened): what a restarted
/// kube-apiserver's apiextensions controllers do.
pub(crate) fn serve_stored(app: &App) {
    let Some(crds) = app
        .registry
        .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    else {
        return;
    };
    let (stored, _) = app.store.list(&crds, None);
    for crd in stored {
        if crd["metadata"].get("deletionTimestamp").is_none() {
            serve(app, &crd);
        }
    }
}

/// Stops serving what `crd` defined.
pub(super) fn stop_serving(app: &App, crd: &Value) {
    if let (Some(group), Some(plural)) = (
        crd["spec"]["group"].as_str(),
        crd["spec"]["names"]["plural"].as_str(),
    ) {
        app.registry.remove(group, plural);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(resource_version: &str, schema: Value, columns: Value) -> Value {
        json!({
            "metadata": {"name": "widgets.example.com", "resourceVersion": resource_version},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": schema},
                                   "additionalPrinterColumns": columns}]},
        })
    }

    fn schema_since(kinds: &[ResourceKind]) -> Option<u64> {
        Some(kinds.first()?.custom.as_deref()?.schema_since)
    }

    #[test]
    fn a_version_keeps_its_schema_since_until_its_schema_changes() {
        let schema = json!({"type": "object"});
        let first = defined_kinds(&crd("10", schema.clone(), json!([])), &[]);
        assert_eq!(schema_since(&first), Some(10));
        let column = json!([{"name": "A", "type": "string", "jsonPath": ".a"}]);
        let columns_added = defined_kinds(&crd("20", schema, column.clone()), &first);
        assert_eq!(schema_since(&columns_added), Some(10));
        let defaulted =
            json!({"type": "object", "properties": {"a": {"type": "string", "default": "x"}}});
        let schema_changed = defined_kinds(&crd("30", defaulted, column), &columns_added);
        assert_eq!(schema_since(&schema_changed), Some(30));
    }
}
