//! The ownership of fields among managers, as structured-merge-diff's updater keeps it: an
//! update takes the fields it changed from the managers that had them (never a conflict); an
//! apply merges its configuration in, owns exactly what it applies, drops what it applied
//! before and no longer applies (unless others own it), and conflicts with the managers whose
//! fields it would change, unless forced to take them.

use std::collections::BTreeMap;

use serde_json::Value;

use super::fields::Fields;
use super::schema::Type;
use super::set::Set;
use super::typed::{self, TypeError};

/// What one manager owns, at which API version, and whether by applying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    /// The fields.
    pub set: Fields,
    /// The API version they are of.
    pub api_version: String,
    /// Whether the manager applies (rather than updates).
    pub applied: bool,
}

/// What each manager owns, by manager key.
pub type Managers = BTreeMap<String, Owned>;

/// Why a write could not be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    /// The object does not fit its type.
    #[error(transparent)]
    Type(#[from] TypeError),
    /// The apply would change fields other managers own: per manager key, those fields.
    #[error("apply conflicts with other managers")]
    Conflicts(BTreeMap<String, Set>),
}

/// What the writes of one endpoint share: the type of its objects, its API version, and the
/// fields it resets (which never change hands).
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The type of the objects.
    pub ty: &'a Type,
    /// The API version the managers write at.
    pub api_version: &'a str,
    /// The fields the endpoint resets (with everything under them).
    pub ignored: &'a Set,
    /// The paths the acting manager never owns (the object's identity).
    pub stripped: &'a Set,
}

/// Ownership after a change from `old` to `new` by `writer` (not counted), and what changed:
/// the other managers lose the fields that were removed, and (with `force`) those the change
/// added or modified; without `force` such fields are conflicts. Fields under `ignored` (reset
/// by the endpoint) never change hands.
fn transfer(
    old: &Value,
    new: &Value,
    ty: &Type,
    mut managers: Managers,
    writer: &str,
    force: bool,
    ignored: &Set,
) -> Result<(Managers, typed::Comparison), UpdateError> {
    let mut comparison = typed::compare(Some(old), Some(new), ty)?;
    comparison.added.subtract_recursive(ignored);
    comparison.modified.subtract_recursive(ignored);
    comparison.removed.subtract_recursive(ignored);
    // Made only if another manager may lose fields (a create has none).
    let mut changed: Option<Set> = None;
    let mut conflicts = BTreeMap::new();
    for (manager, owned) in &mut managers {
        if manager == writer {
            continue;
        }
        let changed = changed.get_or_insert_with(|| {
            let mut changed = comparison.modified.clone();
            changed.absorb(comparison.added.clone());
            changed
        });
        let taken = owned.set.intersection(changed);
        if !taken.is_empty() {
            conflicts.insert(manager.clone(), taken);
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(UpdateError::Conflicts(conflicts));
    }
    for (manager, owned) in &mut managers {
        if manager == writer {
            continue;
        }
        if let Some(taken) = conflicts.get(manager) {
            owned.set.subtract(taken);
        }
        owned.set.subtract(&comparison.removed);
    }
    managers.retain(|_, owned| !owned.set.is_empty());
    Ok((managers, comparison))
}

/// An update (create, PUT, any patch but apply) from `old` to `new` by `manager`: it owns what it changed, on top of what it owned and still exists.
pub fn update(
    old: &Value,
    new: &Value,
    scope: Scope<'_>,
    managers: Managers,
    manager: &str,
) -> Result<Managers, UpdateError> {
    let Scope {
        ty,
        api_version,
        ignored,
        stripped,
    } = scope;
    let (mut managers, comparison) = transfer(old, new, ty, managers, manager, true, ignored)?;
    let previous = managers
        .remove(manager)
        .map(|owned| owned.set.into_set())
        .unwrap_or_default();
    let mut set = previous;
    set.subtract(&comparison.removed);
    set.absorb(comparison.modified);
    set.absorb(comparison.added);
    set.subtract_recursive(ignored);
    set.subtract(stripped);
    if !set.is_empty() {
        managers.insert(
            manager.to_string(),
            Owned {
                set: set.into(),
                api_version: api_version.to_string(),
                applied: false,
            },
        );
    }
    Ok(managers)
}

/// The outcome of an apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The object after the apply.
    pub object: Value,
    /// Whether the apply changed it.
    pub changed: bool,
    /// The ownership after it.
    pub managers: Managers,
}

/// The fields an applied configuration holds.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigFields {
    /// As read from it.
    Read(Set),
    /// Those the applier's entry holds, here as its `FieldsV1` (taken out of the managers;
    /// the entry is written anew): the configuration was found to state exactly those (see
    /// [`super::same_fields`]).
    AsBefore(Value),
}

/// What an apply writes anew, and so reads `live` without: its managed fields.
pub(super) const MANAGED_FIELDS: &[&str] = &["metadata", "managedFields"];

/// Applies `config`, which holds the fields `config_fields`, to `live` as `manager`. `live`'s
/// `metadata.managedFields` are not read: `managers` stands for them.
pub fn apply(
    live: &Value,
    config: Value,
    config_fields: ConfigFields,
    scope: Scope<'_>,
    mut managers: Managers,
    manager: &str,
    force: bool,
) -> Result<Applied, UpdateError> {
    let Scope {
        ty,
        api_version,
        ignored,
        stripped,
    } = scope;
    // Only other managers' fields can conflict or change hands.
    let others = managers
        .iter()
        .any(|(key, owned)| key != manager && !owned.set.is_empty());
    // What it applied before matters only if it drops some of it now: then fields may have to
    // be removed. Applied again with the same fields (the usual case), its entry is kept as it
    // was. `dropping` is its last apply, and what it states now.
    let (dropping, fields) = match config_fields {
        ConfigFields::AsBefore(json) => (None, json),
        ConfigFields::Read(set) => stated_fields(set, ignored, stripped, managers.remove(manager)),
    };
    managers.insert(
        manager.to_string(),
        Owned {
            set: Fields::Encoded(fields),
            api_version: api_version.to_string(),
            applied: true,
        },
    );
    // The configuration becomes the object: what it brings is kept, what only `live` holds is
    // copied in. `live` without its managed fields is copied whole only where the result must
    // be compared with it: to find what changes hands between managers, or whether pruning
    // changed it (the merge says itself whether it did).
    let before = (others || dropping.is_some()).then(|| typed::without(live, MANAGED_FIELDS));
    let mut object = config;
    let mut changed = typed::merge_in_place(&mut object, live, ty, MANAGED_FIELDS)?;
    if let Some((last, stated)) = &dropping {
        object = prune(&object, &managers, stated, last, ty)?;
        changed = before.as_ref() != Some(&object);
    }
    let managers = match &before {
        Some(before) if others => {
            transfer(before, &object, ty, managers, manager, force, ignored)?.0
        }
        _ => {
            managers.retain(|_, owned| !owned.set.is_empty());
            managers
        }
    };
    Ok(Applied {
        object,
        changed,
        managers,
    })
}

/// The applier's entry for the fields `set` it states (read from its configuration), given
/// its `last` entry: the `FieldsV1` to record, and, when it drops some of what it applied
/// last, that entry and what it states for pruning.
fn stated_fields(
    mut set: Set,
    ignored: &Set,
    stripped: &Set,
    last: Option<Owned>,
) -> (Option<(Owned, Set)>, Value) {
    // The applier owns what it states; the identity fields it states are not recorded, but
    // they count as its own while pruning (as structured-merge-diff sees them, before kube
    // strips them), so a dropped field never takes the object's name with it.
    set.subtract_recursive(ignored);
    // What it states of the identity fields, kept aside (for pruning) rather than copying
    // the whole set.
    let stated_identity = set.intersection(stripped);
    set.subtract(stripped);
    match last {
        Some(Owned {
            set: Fields::Encoded(json),
            ..
        }) if set.matches_fields_v1(&json) => (None, json),
        Some(last) => {
            let last_set = last.set.into_set();
            let dropping = (!last_set.difference(&set).is_empty()).then(|| {
                let stated = set.union(&stated_identity);
                (
                    Owned {
                        set: last_set.into(),
                        ..last
                    },
                    stated,
                )
            });
            (dropping, set.to_fields_v1())
        }
        None => (None, set.to_fields_v1()),
    }
}

/// Removes from `merged` what the applier (whose last apply is `last`, and which now states
/// `stated`) applied last time and no longer applies, unless another manager owns it (or it
/// is not from the last apply at all).
fn prune(
    merged: &Value,
    managers: &Managers,
    stated: &Set,
    last: &Owned,
    ty: &Type,
) -> Result<Value, UpdateError> {
    let last_set = typed::with_named_fields(&last.set.to_set(), ty);
    let pruned = typed::remove(merged, &last_set, ty)?.unwrap_or(Value::Null);
    // Add back what any manager (the applier included) owns.
    let owned = managers.values().fold(stated.clone(), |mut all, owned| {
        all.absorb(owned.set.to_set().into_owned());
        all
    });
    let merged_set = typed::with_named_fields(&typed::to_field_set(merged, ty)?, ty);
    let pruned_set = typed::with_named_fields(&typed::to_field_set(&pruned, ty)?, ty);
    let keep = pruned_set.union(&typed::with_named_fields(&owned, ty));
    let pruned = typed::remove(merged, &merged_set.difference(&keep), ty)?.unwrap_or(Value::Null);
    // Add back what was not from the last apply (fields it never owned that went with a parent).
    let pruned_set = typed::with_named_fields(&typed::to_field_set(&pruned, ty)?, ty);
    let dangling = merged_set.difference(&pruned_set).intersection(&last_set);
    Ok(typed::remove(merged, &dangling, ty)?.unwrap_or(Value::Null))
}
