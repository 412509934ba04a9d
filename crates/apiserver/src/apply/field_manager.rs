//! The field manager of one endpoint (a resource, or one of its subresources), as
//! kube-apiserver runs it around every write: it records in `metadata.managedFields` which
//! manager owns which fields after an update, and performs a server-side apply.
//!
//! kube-apiserver stacks it as layers; here they are steps, in the same order:
//!
//! - the managed fields to start from: the request's (unless it is a subresource's), else the
//!   live object's; `[]` or `[{}]` clears them;
//! - an existing object nobody tracks stays untracked by updates; the first apply to it gives
//!   its existing fields to `before-first-apply`;
//! - the manager's identity (name, operation, API version of an update, subresource);
//! - the change itself (structured-merge-diff), without the fields the endpoint resets, and
//!   without the identity fields of `metadata` for the acting manager;
//! - the time of the manager that changed something;
//! - at most ten updaters: the oldest are folded into `ancient-changes`;
//! - for the manager `kubectl`, the `last-applied-configuration` annotation of client-side
//!   apply (see [`super::last_applied`]).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde_json::{Value, json};

use super::fields::Fields;
use super::last_applied;
use super::managed_fields::{Identity, ManagedFields, Operation, is_reset, unix_seconds};
use super::path::PathElement;
use super::reset_fields::reset_fields;
use super::same_fields::same_fields;
use super::schema::Type;
use super::set::Set;
use super::typed::{self, TypeError};
use super::updater::{self, ConfigFields, Owned, Scope, UpdateError};
use super::validate::checked_field_set;
use crate::resource::ResourceKind;

/// How many update entries an object keeps before the oldest are folded together.
const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager an update's changes are computed for, before they go to the real one.
const CURRENT_OPERATION: &str = "current-operation";

/// The manager that owns what an object held before its first apply.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The manager old updaters are folded into.
const ANCIENT_CHANGES: &str = "ancient-changes";

/// What an acting manager never owns: the object's identity and what the server sets.
static STRIPPED: LazyLock<Set> = LazyLock::new(|| {
    let mut set = Set::new();
    for path in [
        &["apiVersion"][..],
        &["kind"],
        &["metadata"],
        &["metadata", "name"],
        &["metadata", "namespace"],
        &["metadata", "creationTimestamp"],
        &["metadata", "selfLink"],
        &["metadata", "uid"],
        &["metadata", "clusterName"],
        &["metadata", "generation"],
        &["metadata", "managedFields"],
        &["metadata", "resourceVersion"],
    ] {
        let path: Vec<PathElement> = path.iter().map(|name| PathElement::field(name)).collect();
        set.insert(&path);
    }
    set
});

/// Why an apply failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    /// The request is wrong (400).
    #[error("{0}")]
    BadRequest(String),
    /// The configuration would change fields other managers own: per manager key, the fields
    /// (409).
    #[error("apply conflicts with other managers")]
    Conflicts(BTreeMap<String, Set>),
    /// The configuration does not fit the type, or the stored object could not be read
    /// (kube-apiserver answers 500 without a reason).
    #[error("{0}")]
    Failed(String),
}

/// The object an apply made.
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedObject {
    /// The object, with its managed fields.
    pub object: Value,
    /// Whether the apply changed its fields. When `false`, the object may still differ from
    /// the live one: in its managed fields, or in kubectl's last-applied annotation.
    pub changed: bool,
}

/// The field manager of one endpoint.
#[derive(Debug, Clone)]
pub struct FieldManager {
    ty: Type,
    group: String,
    version: String,
    kind: String,
    subresource: String,
    reset: Set,
}

impl FieldManager {
    /// The field manager of `kind`'s endpoint `subresource` (empty for the resource itself),
    /// its objects being of type `ty`.
    pub fn new(kind: &ResourceKind, ty: Type, subresource: &str) -> Self {
        Self {
            ty,
            group: kind.group.clone(),
            version: kind.version.clone(),
            kind: kind.kind.clone(),
            subresource: subresource.to_string(),
            reset: reset_fields(kind, subresource),
        }
    }

    fn scope<'a>(&'a self, api_version: &'a str) -> Scope<'a> {
        Scope {
            ty: &self.ty,
            api_version,
            ignored: &self.reset,
            stripped: &STRIPPED,
        }
    }

    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Records an update (a create when `live` is `None`) by `manager` in `new`'s
    /// `metadata.managedFields`. It never fails the write: an object whose fields cannot be
    /// computed is written without managed fields, as kube-apiserver does.
    pub fn update(&self, live: Option<&Value>, new: &mut Value, manager: &str) {
        let managed = self.starting_point(live, new);
        let creating =
            live.is_none_or(|live| live["metadata"]["uid"].as_str().is_none_or(str::is_empty));
        let managed = if managed.is_empty() && !creating {
            // An existing object nobody tracks: it stays so until an apply.
            Ok(managed)
        } else {
            let empty = json!({});
            self.record_update(live.unwrap_or(&empty), new, managed, manager)
        };
        match managed {
            Ok(managed) => set_managed_fields(new, managed.encode()),
            Err(error) => {
                tracing::warn!(%error, kind = %self.kind, "could not record the managed fields of an update");
                set_managed_fields(new, None);
            }
        }
    }

    /// The managed fields an update starts from.
    fn starting_point(&self, live: Option<&Value>, new: &Value) -> ManagedFields {
        let live_entries = live.and_then(managed_fields_of);
        let live_fields = || ManagedFields::decode(live_entries).unwrap_or_default();
        if !self.subresource.is_empty() {
            return live_fields();
        }
        let requested = managed_fields_of(new);
        if is_reset(requested) {
            return ManagedFields::default();
        }
        match ManagedFields::decode(requested) {
            // Sent back as read (an update of a read object): this server's own writing.
            Ok(managed) if !managed.is_empty() && requested == live_entries => managed,
            // The client's own: read into sets, so that what is written is this server's; as
            // in kube-apiserver, entries that do not read leave the live object's in force.
            Ok(managed) if !managed.is_empty() => {
                managed.read_into_sets().unwrap_or_else(live_fields)
            }
            _ => live_fields(),
        }
    }

    /// An update's ownership: what it changed goes to `manager` (taken from whoever had it),
    /// with the time, and old updaters are folded if there are too many.
    fn record_update(
        &self,
        live: &Value,
        new: &Value,
        mut managed: ManagedFields,
        manager: &str,
    ) -> Result<ManagedFields, TypeError> {
        let manager = if manager.is_empty() {
            "unknown"
        } else {
            manager
        };
        let key = Identity::new(
            manager,
            Operation::Update,
            &self.api_version(),
            &self.subresource,
        )
        .key();
        let api_version = self.api_version();
        let managers = updater::update(
            live,
            new,
            self.scope(&api_version),
            managed.managers,
            CURRENT_OPERATION,
        )
        .map_err(|error| match error {
            UpdateError::Type(error) => error,
            UpdateError::Conflicts(_) => TypeError {
                path: String::new(),
                message: "an update never conflicts".to_string(),
            },
        })?;
        managed.managers = managers;
        if let Some(current) = managed.managers.remove(CURRENT_OPERATION) {
            let changed = current.set.into_set();
            // What it changed now joins what it owned (kept as read: usually much more).
            let set = match managed.managers.remove(&key) {
                Some(previous) => {
                    let mut owned = previous.set;
                    owned.absorb(changed);
                    owned
                }
                None => changed.into(),
            };
            managed.managers.insert(
                key.clone(),
                Owned {
                    set,
                    api_version: current.api_version,
                    applied: false,
                },
            );
            managed.times.insert(key, crate::storage::now_timestamp());
        }
        cap_update_managers(&mut managed);
        Ok(managed)
    }

    /// Applies `config` as `manager` to `live` (`None`: the object does not exist yet) and
    /// returns the object with its managed fields. The caller defaults and validates it as
    /// any write. The configuration becomes the object: what it holds is not copied.
    pub fn apply(
        &self,
        live: Option<&Value>,
        config: Value,
        manager: &str,
        force: bool,
    ) -> Result<AppliedObject, ApplyError> {
        let empty = json!({});
        let live = live.unwrap_or(&empty);
        let managed = ManagedFields::decode(managed_fields_of(live)).map_err(|error| {
            ApplyError::Failed(format!("failed to decode managed fields: {error}"))
        })?;
        let (group, version) = split_api_version(config["apiVersion"].as_str().unwrap_or(""));
        let kind = config["kind"].as_str().unwrap_or("");
        if (group, version, kind)
            != (
                self.group.as_str(),
                self.version.as_str(),
                self.kind.as_str(),
            )
        {
            return Err(ApplyError::BadRequest(format!(
                "invalid object type: {group}/{version}, Kind={kind}"
            )));
        }
        // Only kubectl's apply may run twice, and it reads its configuration again afterwards
        // (see `last_applied`): only it needs copies.
        let kubectl = (manager == last_applied::KUBECTL).then(|| (config.clone(), managed.clone()));
        let (mut applied, managed) = match self.apply_tracked(live, config, managed, manager, force)
        {
            Err(ApplyError::Conflicts(conflicts)) if kubectl.is_some() => {
                let allowed = last_applied::allowed_conflicts(live, &self.ty, &self.api_version());
                let refused = last_applied::refused(&conflicts, allowed.as_ref());
                match &kubectl {
                    Some((config, managed)) if refused.is_empty() => {
                        self.apply_tracked(live, config.clone(), managed.clone(), manager, true)?
                    }
                    _ => return Err(ApplyError::Conflicts(refused)),
                }
            }
            other => other?,
        };
        if let Some((config, _)) = kubectl {
            last_applied::follow(&mut applied.object, config);
        }
        set_managed_fields(&mut applied.object, managed.encode());
        Ok(applied)
    }

    /// The apply itself, from the first apply's bookkeeping to the merge: the object (without
    /// managed fields) and the managed fields.
    fn apply_tracked(
        &self,
        live: &Value,
        config: Value,
        mut managed: ManagedFields,
        manager: &str,
        force: bool,
    ) -> Result<(AppliedObject, ManagedFields), ApplyError> {
        if managed.is_empty() {
            managed = self
                .record_update(
                    &json!({}),
                    &typed::without(live, updater::MANAGED_FIELDS),
                    managed,
                    BEFORE_FIRST_APPLY,
                )
                .map_err(|error| {
                    ApplyError::Failed(format!(
                        "failed to create manager for existing fields: {error}"
                    ))
                })?;
        }
        let key = Identity::new(manager, Operation::Apply, "", &self.subresource).key();
        if config["metadata"]
            .get("managedFields")
            .is_some_and(|fields| !fields.is_null())
        {
            return Err(ApplyError::BadRequest(
                "metadata.managedFields must be nil".into(),
            ));
        }
        // Applied again with the same fields (the usual apply), the entry is kept as it was,
        // and the configuration's field set is never built.
        let config_fields = match managed.managers.remove(&key) {
            Some(Owned {
                set: Fields::Encoded(json),
                ..
            }) if same_fields(&config, &self.ty, &json, &self.reset, &STRIPPED) == Some(true) => {
                ConfigFields::AsBefore(json)
            }
            last => {
                if let Some(last) = last {
                    managed.managers.insert(key.clone(), last);
                }
                let read = checked_field_set(&config, &self.ty).map_err(|error| {
                    ApplyError::Failed(format!(
                        "failed to create typed patch object ({}): {error}",
                        describe(&config)
                    ))
                })?;
                ConfigFields::Read(read)
            }
        };
        let api_version = self.api_version();
        let applied = updater::apply(
            live,
            config,
            config_fields,
            self.scope(&api_version),
            managed.managers,
            &key,
            force,
        )
        .map_err(|error| match error {
            UpdateError::Conflicts(conflicts) => ApplyError::Conflicts(conflicts),
            UpdateError::Type(error) => ApplyError::Failed(format!(
                "failed to create typed live object ({}): {error}",
                describe(live)
            )),
        })?;
        managed.managers = applied.managers;
        if applied.changed {
            managed.times.insert(key, crate::storage::now_timestamp());
        }
        Ok((
            AppliedObject {
                object: applied.object,
                changed: applied.changed,
            },
            managed,
        ))
    }
}

/// The message and causes of a conflict, as kube-apiserver writes them: per manager (in the
/// order of their keys) the fields it owns that the apply would change.
pub fn conflict_report(conflicts: &BTreeMap<String, Set>) -> (String, Vec<(String, String)>) {
    let mut causes = Vec::new();
    let mut lines = Vec::new();
    for (key, set) in conflicts {
        let manager = Identity::describe(key);
        lines.push(format!("conflicts with {manager}:"));
        for path in set.paths() {
            let path = super::path::path_text(&path);
            lines.push(format!("- {path}"));
            causes.push((format!("conflict with {manager}"), path));
        }
    }
    let message = match causes.as_slice() {
        [(manager, path)] => format!("Apply failed with 1 conflict: {manager}: {path}"),
        _ => format!(
            "Apply failed with {} conflicts: {}",
            causes.len(),
            lines.join("\n")
        ),
    };
    (message, causes)
}

/// `<namespace>/<name>; <group>/<version>, Kind=<kind>`: how the field manager's errors name
/// an object.
fn describe(object: &Value) -> String {
    let text = |value: &Value| value.as_str().unwrap_or("").to_string();
    let (group, version) = split_api_version(object["apiVersion"].as_str().unwrap_or(""));
    format!(
        "{}/{}; {group}/{version}, Kind={}",
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"]),
        text(&object["kind"]),
    )
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// Folds the oldest update entries into one `ancient-changes` entry per API version while
/// there are more than ten, as kube-apiserver does: the first entry of a version is folded
/// only once a second one of that version comes.
fn cap_update_managers(managed: &mut ManagedFields) {
    let mut updaters: Vec<String> = managed
        .managers
        .iter()
        .filter(|(_, owned)| !owned.applied)
        .map(|(key, _)| key.clone())
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort_by(|a, b| {
        unix_seconds(managed.times.get(a))
            .cmp(&unix_seconds(managed.times.get(b)))
            .then_with(|| a.cmp(b))
    });
    let mut first_of_version: BTreeMap<String, String> = BTreeMap::new();
    let mut length = updaters.len();
    for key in updaters {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(owned) = managed.managers.get(&key).cloned() else {
            continue;
        };
        let time = managed.times.get(&key).cloned();
        let bucket =
            Identity::new(ANCIENT_CHANGES, Operation::Update, &owned.api_version, "").key();
        let Some(first) = first_of_version.get(&owned.api_version) else {
            first_of_version.insert(owned.api_version.clone(), key);
            continue;
        };
        if !managed.managers.contains_key(&bucket)
            && let Some(first_owned) = managed.managers.remove(first)
        {
            managed.managers.insert(bucket.clone(), first_owned);
        }
        let bucket_set = managed
            .managers
            .get(&bucket)
            .map(|owned| owned.set.to_set().into_owned())
            .unwrap_or_default();
        managed.managers.insert(
            bucket.clone(),
            Owned {
                set: owned.set.to_set().union(&bucket_set).into(),
                ..owned
            },
        );
        managed.managers.remove(&key);
        length -= 1;
        match time {
            Some(time) => managed.times.insert(bucket, time),
            None => managed.times.remove(&bucket),
        };
    }
}

/// `metadata.managedFields` of `object`, if it has them (looked up field by field: a JSON
/// pointer is parsed, and its steps unescaped into new strings, at every use).
fn managed_fields_of(object: &Value) -> Option<&Value> {
    object.get("metadata")?.get("managedFields")
}

/// Sets (or, with `None`, removes) `metadata.managedFields`.
fn set_managed_fields(object: &mut Value, entries: Option<Value>) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        if let (Some(entries), Some(fields)) = (entries, object.as_object_mut()) {
            fields.insert("metadata".into(), json!({"managedFields": entries}));
        }
        return;
    };
    match entries {
        Some(entries) => metadata.insert("managedFields".into(), entries),
        None => metadata.remove("managedFields"),
    };
}
