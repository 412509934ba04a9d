//! Cleanup before deletion: a finalizer the controller adds, honours and removes
//! (kube-runtime's `finalizer()`, controller-runtime's `pkg/finalizer`).
//!
//! The API server does not delete an object that carries finalizers: it sets
//! `metadata.deletionTimestamp` and waits until each is removed. [`finalizer`] puts the
//! controller's finalizer on every live object, calls the reconcile with
//! [`FinalizerEvent::Apply`] while the object lives and with [`FinalizerEvent::Cleanup`] once it
//! is being deleted, and removes the finalizer only after a cleanup succeeded. A crash between
//! the cleanup and the removal leaves the finalizer in place, so the cleanup runs again: it must
//! be idempotent (deleting what is already gone is success).
//!
//! Both writes are JSON patches guarded by a `test` of the finalizer list the controller saw,
//! so a concurrent change of the list is a conflict (and a retry), never a lost finalizer.

use std::future::Future;
use std::sync::Arc;

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::action::{Action, ReconcileError};

/// What [`finalizer`] asks the reconcile to do.
#[derive(Debug)]
pub enum FinalizerEvent<K> {
    /// The object lives and carries the finalizer: bring the world to its desired state.
    Apply(Arc<K>),
    /// The object is being deleted: release what it holds outside the API server. The
    /// finalizer is removed once this succeeds.
    Cleanup(Arc<K>),
}

/// Why [`finalizer`] itself failed, inside the [`ReconcileError`] it returns (the reconcile's
/// own errors are passed through as they are): invalid names are terminal, refused writes are
/// retried.
#[derive(Debug, thiserror::Error)]
pub enum FinalizerError {
    /// Adding the finalizer was refused (a conflict with another writer is retried).
    #[error("failed to add finalizer: {0}")]
    AddFinalizer(#[source] kube::Error),
    /// Removing the finalizer after a successful cleanup was refused; the cleanup runs again.
    #[error("failed to remove finalizer: {0}")]
    RemoveFinalizer(#[source] kube::Error),
    /// The object has no `metadata.name`.
    #[error("object has no name")]
    UnnamedObject,
    /// The finalizer name is not `<domain>/<name>`, which the API server requires of
    /// finalizers it does not define itself.
    #[error("invalid finalizer {0:?}: want a domain-qualified name such as example.com/cleanup")]
    InvalidFinalizer(String),
}

impl FinalizerError {
    /// Retried, except what retrying cannot fix (the name of the finalizer or the object).
    fn into_reconcile_error(self) -> ReconcileError {
        let error = self;
        match error {
            // Retrying cannot fix the name or the object.
            FinalizerError::UnnamedObject | FinalizerError::InvalidFinalizer(_) => {
                ReconcileError::terminal(error)
            }
            FinalizerError::AddFinalizer(_) | FinalizerError::RemoveFinalizer(_) => {
                ReconcileError::retry(error)
            }
        }
    }
}

fn is_valid_finalizer(name: &str) -> bool {
    let Some((domain, rest)) = name.split_once('/') else {
        return false;
    };
    let part = |text: &str, extra: &[char]| {
        !text.is_empty()
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(&c))
            && text.starts_with(|c: char| c.is_ascii_alphanumeric())
            && text.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    domain.len() <= 253
        && rest.len() <= 63
        && part(domain, &['-', '.'])
        && part(rest, &['-', '.', '_'])
}

/// Runs `reconcile` for `object` under the finalizer `finalizer_name` (see the module docs):
///
/// - live, without the finalizer: adds it, then `reconcile(Apply)` with the object as the
///   server returned it (kube-runtime returns here and waits for the next event, which a
///   [`GenerationChanged`](crate::predicate::GenerationChanged) filter would drop);
/// - live, with it: `reconcile(Apply)`;
/// - being deleted, with it: `reconcile(Cleanup)`, then removes it;
/// - being deleted, without it: nothing.
///
/// ```no_run
/// use std::sync::Arc;
/// use ctrlkit_controller::{Action, ReconcileError};
/// use ctrlkit_controller::finalizer::{FinalizerEvent, finalizer};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::Api;
///
/// async fn reconcile(api: &Api<ConfigMap>, object: Arc<ConfigMap>) -> Result<Action, ReconcileError> {
///     finalizer(api, "example.com/external-record", object, |event| async move {
///         match event {
///             FinalizerEvent::Apply(_object) => { /* create or update the record */ }
///             FinalizerEvent::Cleanup(_object) => { /* delete the record; gone already is fine */ }
///         }
///         Ok(Action::done())
///     })
///     .await
/// }
/// ```
pub async fn finalizer<K, F, Fut>(
    api: &Api<K>,
    finalizer_name: &str,
    object: Arc<K>,
    reconcile: F,
) -> Result<Action, ReconcileError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<Action, ReconcileError>>,
{
    if !is_valid_finalizer(finalizer_name) {
        return Err(
            FinalizerError::InvalidFinalizer(finalizer_name.to_owned()).into_reconcile_error()
        );
    }
    let meta = object.meta().clone();
    let finalizers = meta.finalizers.clone().unwrap_or_default();
    let ours = finalizers.iter().position(|name| name == finalizer_name);
    let deleting = meta.deletion_timestamp.is_some();
    let name = meta
        .name
        .clone()
        .ok_or_else(|| FinalizerError::UnnamedObject.into_reconcile_error())?;
    match (ours, deleting) {
        (Some(_), false) => reconcile(FinalizerEvent::Apply(object)).await,
        (Some(index), true) => {
            let action = reconcile(FinalizerEvent::Cleanup(object)).await?;
            let path = format!("/metadata/finalizers/{index}");
            let patch = json!([
                {"op": "test", "path": path, "value": finalizer_name},
                {"op": "remove", "path": path},
            ]);
            json_patch(api, &name, patch)
                .await
                .map_err(|error| FinalizerError::RemoveFinalizer(error).into_reconcile_error())?;
            Ok(action)
        }
        (None, false) => {
            let patch = if finalizers.is_empty() {
                // No list to test against (a `test` of an absent field fails): the object's
                // version guards the write instead.
                let add =
                    json!({"op": "add", "path": "/metadata/finalizers", "value": [finalizer_name]});
                match &meta.resource_version {
                    Some(version) => json!([
                        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
                        add,
                    ]),
                    None => json!([add]),
                }
            } else {
                json!([
                    {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                    {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer_name},
                ])
            };
            let added = json_patch(api, &name, patch)
                .await
                .map_err(|error| FinalizerError::AddFinalizer(error).into_reconcile_error())?;
            // Go on at once with the object as it now is: a controller filtering its events by
            // generation would never hear of the finalizer's addition.
            reconcile(FinalizerEvent::Apply(Arc::new(added))).await
        }
        (None, true) => Ok(Action::done()),
    }
}

async fn json_patch<K>(api: &Api<K>, name: &str, patch: serde_json::Value) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizer_names_need_a_domain() {
        assert!(is_valid_finalizer("example.com/cleanup"));
        assert!(is_valid_finalizer("foos.sample.io/external_record"));
        assert!(!is_valid_finalizer("cleanup"));
        assert!(!is_valid_finalizer("example.com/"));
        assert!(!is_valid_finalizer("/cleanup"));
        assert!(!is_valid_finalizer("Example .com/x"));
    }
}
