//! The garbage collector: dependents go with their owners (`metadata.ownerReferences`), as
//! kube-controller-manager's garbage collector does, with the three propagation policies.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::StoredObject;
use super::meta::{has_finalizers, mark_deleted, metadata_mut};
use super::{EventType, ResourceKey, State, Store, StoreError};

/// The finalizer that holds an owner deleted in the foreground until its dependents are gone.
pub const FOREGROUND_DELETION: &str = "foregroundDeletion";

/// What happens to the dependents of a deleted object (`DeleteOptions.propagationPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Propagation {
    /// The owner goes at once; its dependents are deleted after (the default).
    #[default]
    Background,
    /// The owner stays (with the `foregroundDeletion` finalizer) until its dependents are gone.
    Foreground,
    /// The dependents stay, with their references to the owner removed.
    Orphan,
}

impl Propagation {
    /// Parses `Background`, `Foreground` or `Orphan`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "Background" => Some(Self::Background),
            "Foreground" => Some(Self::Foreground),
            "Orphan" => Some(Self::Orphan),
            _ => None,
        }
    }
}

/// Adds the `foregroundDeletion` finalizer to an owner deleted in the foreground.
pub(super) fn hold_for_dependents(metadata: &mut serde_json::Map<String, Value>) {
    let finalizers = metadata
        .entry("finalizers")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(finalizers) = finalizers.as_array_mut()
        && !finalizers.iter().any(|f| f == FOREGROUND_DELETION)
    {
        finalizers.push(Value::String(FOREGROUND_DELETION.to_string()));
    }
}

fn owner_uids(object: &Value) -> Vec<String> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .map(|owners| {
            owners
                .iter()
                .filter_map(|owner| owner["uid"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn uid(object: &Value) -> Option<&str> {
    object["metadata"]["uid"].as_str()
}

type Located = (ResourceKey, String, String, Arc<StoredObject>);

fn every_object(state: &State) -> Vec<Located> {
    state
        .objects
        .iter()
        .flat_map(|(resource, objects)| {
            objects.iter().map(move |((namespace, name), object)| {
                (
                    resource.clone(),
                    namespace.clone(),
                    name.clone(),
                    Arc::clone(object),
                )
            })
        })
        .collect()
}

impl Store {
    /// Removes every reference to `owner_uid` from the objects that hold one.
    pub(super) fn orphan_dependents(&self, state: &mut State, owner_uid: &str) {
        for (resource, namespace, name, object) in every_object(state) {
            if !owner_uids(&object).iter().any(|owner| owner == owner_uid) {
                continue;
            }
            let mut orphaned = (*object).clone();
            if let Some(owners) = orphaned["metadata"]["ownerReferences"].as_array_mut() {
                owners.retain(|owner| owner["uid"] != owner_uid);
            }
            self.commit(
                state,
                &resource,
                &namespace,
                &name,
                Some(orphaned),
                EventType::Modified,
            );
        }
    }

    /// One pass of the garbage collector, if a deletion since the last pass calls for one:
    /// dependents whose owners are all gone are deleted; references to gone owners are dropped
    /// from dependents that keep a live one; dependents of an owner deleted in the foreground are
    /// deleted, and the owner's `foregroundDeletion` finalizer is removed once none is left.
    pub fn collect_garbage(&self) -> Result<(), StoreError> {
        if !self.gc_needed.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let mut state = match self.lock_for_write() {
            Ok(state) => state,
            Err(error) => {
                self.gc_needed.store(true, Ordering::Release);
                return Err(error);
            }
        };
        let objects = every_object(&state);
        let live: HashSet<&str> = objects
            .iter()
            .filter_map(|(.., object)| uid(object))
            .collect();
        let foreground: HashSet<&str> = objects
            .iter()
            .filter(|(.., object)| {
                object["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|f| f == FOREGROUND_DELETION))
                    && object["metadata"].get("deletionTimestamp").is_some()
            })
            .filter_map(|(.., object)| uid(object))
            .collect();
        let mut still_owned: HashSet<String> = HashSet::new();
        let mut changes: Vec<(Located, Option<Value>, EventType)> = Vec::new();
        for located in &objects {
            let object = &located.3;
            let owners = owner_uids(object);
            if owners.is_empty() {
                continue;
            }
            let alive: Vec<&String> = owners
                .iter()
                .filter(|o| live.contains(o.as_str()))
                .collect();
            let cascade = alive.is_empty() || alive.iter().any(|o| foreground.contains(o.as_str()));
            if cascade {
                for owner in &alive {
                    still_owned.insert((*owner).clone());
                }
                if object["metadata"].get("deletionTimestamp").is_some() {
                    continue; // already on its way
                }
                if object["metadata"].as_object().is_some_and(has_finalizers) {
                    let mut marked = (**object).clone();
                    if let Ok(metadata) = metadata_mut(&mut marked) {
                        mark_deleted(metadata);
                    }
                    changes.push((located.clone(), Some(marked), EventType::Modified));
                } else {
                    changes.push((
                        located.clone(),
                        Some((**object).clone()),
                        EventType::Deleted,
                    ));
                }
            } else if alive.len() < owners.len() {
                let mut trimmed = (**object).clone();
                if let Some(refs) = trimmed["metadata"]["ownerReferences"].as_array_mut() {
                    refs.retain(|r| r["uid"].as_str().is_some_and(|u| live.contains(u)));
                }
                changes.push((located.clone(), Some(trimmed), EventType::Modified));
            }
        }
        for located in &objects {
            let object = &located.3;
            let Some(owner) = uid(object) else { continue };
            if !foreground.contains(owner) || still_owned.contains(owner) {
                continue;
            }
            let mut released = (**object).clone();
            if let Some(finalizers) = released["metadata"]["finalizers"].as_array_mut() {
                finalizers.retain(|f| f != FOREGROUND_DELETION);
            }
            let event = if released["metadata"].as_object().is_some_and(has_finalizers) {
                EventType::Modified
            } else {
                EventType::Deleted
            };
            changes.push((located.clone(), Some(released), event));
        }
        let changed = !changes.is_empty();
        for ((resource, namespace, name, _), object, event) in changes {
            self.commit(&mut state, &resource, &namespace, &name, object, event);
        }
        if changed || !foreground.is_empty() {
            // Cascades go one level a pass; come back for the next (and for foreground owners
            // whose dependents are still finalizing).
            self.gc_needed.store(true, Ordering::Release);
        }
        self.publish(state)
    }
}
