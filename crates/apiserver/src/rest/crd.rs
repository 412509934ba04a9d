//! CustomResourceDefinitions: creating one serves its resource at once (under the names no
//! other CRD of its group holds); deleting one deletes its custom resources, then stops it.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::App;
use crate::custom::CustomVersion;
use crate::custom::conversion::{self, Conversion};
use crate::resource::ResourceKind;
use crate::storage::StoredObject;

/// The resources a CRD defines under its accepted `names`: one per served version. A version
/// whose schema is that of the same version already served (`served`) keeps its
/// `schema_since`; the others start theirs at the CRD's resourceVersion.
fn defined_kinds(crd: &Value, names: &Value, served: &[ResourceKind]) -> Vec<ResourceKind> {
    let spec = &crd["spec"];
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

/// Accepts the names `crd` asks for that no other CRD of its group holds, and serves what it
/// defines under them (replacing what an earlier version of it defined) once all of them
/// are accepted, as kube-apiserver's naming and establishing controllers do; returns the CRD
/// as stored with its new status (`None` when its status was already that, or it changed
/// meanwhile).
pub(super) fn serve(app: &App, crd: &Value) -> Option<Arc<StoredObject>> {
    let crds = crd_kind(app)?;
    let name = crd["metadata"]["name"].as_str()?;
    let group = crd["spec"]["group"].as_str()?;
    let others = app.store.list_latest(&crds, None);
    let in_use = NamesInUse::of(
        others
            .iter()
            .filter(|other| other["metadata"]["name"] != name && other["spec"]["group"] == group),
    );
    let naming = Naming::decide(crd, &in_use);
    let old_established = condition(crd, "Established");
    let established =
        naming.conflict.is_none() || old_established.is_some_and(|old| old["status"] == "True");
    // What an earlier version of the CRD served, under the names accepted then.
    let previous_plural = crd["status"]["acceptedNames"]["plural"].as_str();
    if let Some(plural) = previous_plural {
        app.registry.remove(group, plural);
    }
    if established {
        let plural = naming.accepted["plural"].as_str().unwrap_or_default();
        let served = app.registry.custom_versions(group, plural);
        app.registry.remove(group, plural);
        for kind in defined_kinds(crd, &naming.accepted, &served) {
            app.registry.add(kind);
        }
    }
    // The versions objects were ever stored in: those recorded, and the storage version.
    let mut stored_versions = string_list(&crd["status"]["storedVersions"]);
    if let Some(storage) = conversion::storage_version(crd)
        && !stored_versions.iter().any(|version| version == storage)
    {
        stored_versions.push(storage.to_string());
    }
    let names_accepted = match &naming.conflict {
        None => ("True", "NoConflicts", "no conflicts found".to_string()),
        Some((reason, message)) => ("False", *reason, message.clone()),
    };
    let established_condition = match (naming.conflict.is_none(), old_established) {
        (_, Some(old)) if old["status"] == "True" => old.clone(),
        (true, _) => new_condition(
            crd,
            "Established",
            (
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted".into(),
            ),
        ),
        (false, Some(old)) => old.clone(),
        (false, None) => new_condition(
            crd,
            "Established",
            ("False", "NotAccepted", "not all names are accepted".into()),
        ),
    };
    let mut conditions = vec![
        new_condition(crd, "NamesAccepted", names_accepted),
        established_condition,
    ];
    // A CRD of a Kubernetes community group says whether its API was approved.
    if let Some(approval) = crate::custom::api_approval::condition(crd) {
        conditions.push(new_condition(
            crd,
            "KubernetesAPIApprovalPolicyConformant",
            approval,
        ));
    }
    // A CRD being deleted keeps saying so.
    conditions.extend(condition(crd, "Terminating").cloned());
    let status = json!({
        "acceptedNames": naming.accepted,
        "storedVersions": stored_versions,
        "conditions": conditions,
    });
    if crd["status"] == status {
        return None;
    }
    let mut updated = crd.clone();
    updated["status"] = status;
    match app.store.update(&crds, "", name, updated, true) {
        Ok((stored, _)) => Some(stored),
        Err(error) => {
            // Someone updated it meanwhile; their write triggers another serve().
            tracing::debug!(%error, crd = name, "could not record the CRD's names");
            None
        }
    }
}

/// The condition of `type` in the CRD's status.
fn condition<'a>(crd: &'a Value, kind: &str) -> Option<&'a Value> {
    crd["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|condition| condition["type"] == kind)
}

/// A condition of `type` with `(status, reason, message)`; it keeps its transition time while
/// its status stays (a new CRD's first conditions take its creation time).
fn new_condition(
    crd: &Value,
    kind: &str,
    (status, reason, message): (&str, &str, String),
) -> Value {
    let since = match condition(crd, kind) {
        Some(old) if old["status"] == status => old["lastTransitionTime"].clone(),
        Some(_) => json!(crate::storage::meta::now_timestamp()),
        None => crd["metadata"]["creationTimestamp"].clone(),
    };
    json!({"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": since})
}

/// The names the other CRDs of a group were accepted under.
#[derive(Default)]
struct NamesInUse {
    /// Plurals, singulars and short names.
    resources: HashSet<String>,
    /// Kinds and list kinds.
    kinds: HashSet<String>,
}

impl NamesInUse {
    fn of<'a>(crds: impl Iterator<Item = &'a Arc<StoredObject>>) -> Self {
        let mut in_use = Self::default();
        for crd in crds {
            let accepted = &crd["status"]["acceptedNames"];
            for field in ["plural", "singular"] {
                in_use
                    .resources
                    .extend(accepted[field].as_str().map(str::to_string));
            }
            in_use
                .resources
                .extend(string_list(&accepted["shortNames"]));
            for field in ["kind", "listKind"] {
                in_use
                    .kinds
                    .extend(accepted[field].as_str().map(str::to_string));
            }
        }
        in_use
    }
}

/// The names a CRD is accepted under, and the last conflict that kept one it asked for.
struct Naming {
    accepted: Value,
    conflict: Option<(&'static str, String)>,
}

impl Naming {
    /// kube's naming controller: each requested name is accepted when it is the one already
    /// accepted or no other CRD of the group holds it; otherwise the accepted one stays, and
    /// the conflict is reported (the last one found, in kube's order).
    fn decide(crd: &Value, in_use: &NamesInUse) -> Self {
        let requested = &crd["spec"]["names"];
        let previous = &crd["status"]["acceptedNames"];
        let mut naming = Self {
            accepted: if previous.is_object() {
                previous.clone()
            } else {
                json!({})
            },
            conflict: None,
        };
        naming.accept(crd, "plural", "PluralConflict", &in_use.resources);
        naming.accept(crd, "singular", "SingularConflict", &in_use.resources);
        let short_names = string_list(&requested["shortNames"]);
        let previous_short = string_list(&previous["shortNames"]);
        if short_names != previous_short {
            let taken: Vec<String> = short_names
                .iter()
                .filter(|name| !previous_short.contains(name) && in_use.resources.contains(*name))
                .map(|name| format!("{name:?} is already in use"))
                .collect();
            match taken.as_slice() {
                [] => naming.accepted["shortNames"] = requested["shortNames"].clone(),
                [one] => naming.conflict = Some(("ShortNamesConflict", one.clone())),
                many => {
                    naming.conflict = Some(("ShortNamesConflict", format!("[{}]", many.join(", "))))
                }
            }
        }
        naming.accept(crd, "kind", "KindConflict", &in_use.kinds);
        naming.accept(crd, "listKind", "ListKindConflict", &in_use.kinds);
        if requested.get("categories").is_some() {
            naming.accepted["categories"] = requested["categories"].clone();
        }
        naming
    }

    /// Accepts the requested name `field`, or records why not.
    fn accept(&mut self, crd: &Value, field: &str, reason: &'static str, used: &HashSet<String>) {
        let Some(name) = crd["spec"]["names"][field].as_str() else {
            return;
        };
        let held = crd["status"]["acceptedNames"][field].as_str() == Some(name);
        if !held && used.contains(name) {
            self.conflict = Some((reason, format!("{name:?} is already in use")));
        } else {
            self.accepted[field] = json!(name);
        }
    }
}

/// Cleans up after the CRDs being deleted, as kube-apiserver's CRD finalizer does: their
/// custom resources are deleted (those held by finalizers of their own are marked and waited
/// for), and once none is left the CRD goes and its resources are no longer served.
pub(crate) fn clean_up_deleted(app: &App) {
    let Some(crds) = crd_kind(app) else {
        return;
    };
    for crd in app.store.crds_to_clean_up(&crds) {
        let (Some(name), Some(group), Some(plural)) = (
            crd["metadata"]["name"].as_str(),
            crd["spec"]["group"].as_str(),
            crd["status"]["acceptedNames"]["plural"]
                .as_str()
                .or(crd["spec"]["names"]["plural"].as_str()),
        ) else {
            continue;
        };
        let left = match app.registry.custom_versions(group, plural).first() {
            Some(kind) => app.store.delete_all_of(kind),
            None => Ok(0),
        };
        match left {
            Ok(0) => match app.store.finish_crd_cleanup(&crds, name) {
                Ok(Some(gone)) => stop_serving(app, &gone),
                Ok(None) => {}
                // Someone updated it meanwhile: the next round tries again.
                Err(error) => {
                    tracing::debug!(%error, crd = name, "could not finish deleting the CRD yet")
                }
            },
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%error, crd = name, "could not delete the custom resources yet")
            }
        }
    }
}

/// Whether the CRD that defines `kind` is being deleted: its custom resources may not be
/// created meanwhile.
pub(super) fn defining_crd_terminating(app: &App, kind: &ResourceKind) -> bool {
    app.store
        .is_crd_terminating(&format!("{}.{}", kind.plural, kind.group))
}

/// The CustomResourceDefinition resource itself.
fn crd_kind(app: &App) -> Option<ResourceKind> {
    app.registry
        .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

/// Every CRD in the store.
fn stored_crds(app: &App) -> Vec<Arc<StoredObject>> {
    crd_kind(app)
        .map(|crds| app.store.list_latest(&crds, None))
        .unwrap_or_default()
}

/// Serves every CRD already in the store (a durable store reopened): what a restarted
/// kube-apiserver's apiextensions controllers do.
pub(crate) fn serve_stored(app: &App) {
    // A CRD being deleted is served too, as kube-apiserver serves it: its custom resources must
    // be found to be deleted, and those held by finalizers read and released by their controllers.
    for crd in stored_crds(app) {
        serve(app, &crd);
    }
}

/// Stops serving what `crd` defined, and accepts the names of the CRDs of its group that
/// were waiting for one it held.
pub(super) fn stop_serving(app: &App, crd: &Value) {
    let Some(group) = crd["spec"]["group"].as_str() else {
        return;
    };
    if let Some(plural) = crd["status"]["acceptedNames"]["plural"].as_str() {
        app.registry.remove(group, plural);
    }
    for waiting in stored_crds(app).iter().filter(|other| {
        other["spec"]["group"] == group
            && condition(other, "NamesAccepted")
                .is_some_and(|accepted| accepted["status"] != "True")
    }) {
        serve(app, waiting);
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

    fn names() -> Value {
        json!({"plural": "widgets", "kind": "Widget"})
    }

    fn schema_since(kinds: &[ResourceKind]) -> Option<u64> {
        Some(kinds.first()?.custom.as_deref()?.schema_since)
    }

    #[test]
    fn a_version_keeps_its_schema_since_until_its_schema_changes() {
        let schema = json!({"type": "object"});
        let first = defined_kinds(&crd("10", schema.clone(), json!([])), &names(), &[]);
        assert_eq!(schema_since(&first), Some(10));
        let column = json!([{"name": "A", "type": "string", "jsonPath": ".a"}]);
        let columns_added = defined_kinds(&crd("20", schema, column.clone()), &names(), &first);
        assert_eq!(schema_since(&columns_added), Some(10));
        let defaulted =
            json!({"type": "object", "properties": {"a": {"type": "string", "default": "x"}}});
        let schema_changed = defined_kinds(&crd("30", defaulted, column), &names(), &columns_added);
        assert_eq!(schema_since(&schema_changed), Some(30));
    }
}
