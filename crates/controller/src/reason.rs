//! Why a key is being reconciled: what the reconcile's tracing span and its [`Context`] say.
//!
//! [`Context`]: crate::Context

use std::collections::HashMap;
use std::fmt;

use kube::Resource;
use parking_lot::Mutex;

/// What put a key on the queue (kube-runtime's `ReconcileReason`, with its wording).
///
/// A reconcile reads it from [`Context::reason`](crate::Context::reason); its text is the
/// `object.reason` field of the reconcile's tracing span.
///
/// ```
/// use ctrlkit_controller::ReconcileReason;
///
/// let reason = ReconcileReason::RelatedObjectUpdated("Deployment.v1.apps/web.default".into());
/// assert_eq!(reason.to_string(), "related object updated: Deployment.v1.apps/web.default");
/// assert_eq!(ReconcileReason::BulkReconcile.to_string(), "bulk reconcile requested");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ReconcileReason {
    /// Not known (a key queued before reasons were kept).
    #[default]
    Unknown,
    /// The object itself was added, changed or deleted.
    ObjectUpdated,
    /// An object it owns or watches changed; the reference names that object
    /// (`Kind.version.group/name.namespace`).
    RelatedObjectUpdated(String),
    /// The previous reconcile asked to come back ([`Action::requeue_after`]).
    ///
    /// [`Action::requeue_after`]: crate::Action::requeue_after
    ReconcilerRequestedRetry,
    /// The previous reconcile failed and the key is retried with backoff.
    ErrorPolicyRequestedRetry,
    /// Every object was requeued ([`Controller::reconcile_all_on`]).
    ///
    /// [`Controller::reconcile_all_on`]: crate::Controller::reconcile_all_on
    BulkReconcile,
    /// Queued from outside with this reason ([`Trigger`], [`Controller::watches_stream`]).
    ///
    /// [`Trigger`]: crate::Trigger
    /// [`Controller::watches_stream`]: crate::Controller::watches_stream
    Custom(String),
}

impl fmt::Display for ReconcileReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown => f.write_str("unknown"),
            Self::ObjectUpdated => f.write_str("object updated"),
            Self::RelatedObjectUpdated(object) => write!(f, "related object updated: {object}"),
            Self::ReconcilerRequestedRetry => f.write_str("reconciler requested retry"),
            Self::ErrorPolicyRequestedRetry => f.write_str("error policy requested retry"),
            Self::BulkReconcile => f.write_str("bulk reconcile requested"),
            Self::Custom(reason) => f.write_str(reason),
        }
    }
}

/// `Kind.version.group/name[.namespace]`, kube-runtime's object reference text.
pub(crate) fn object_ref<K: Resource>(
    types: &K::DynamicType,
    name: &str,
    namespace: Option<&str>,
) -> String {
    let mut text = format!(
        "{}.{}.{}/{name}",
        K::kind(types),
        K::version(types),
        K::group(types)
    );
    if let Some(namespace) = namespace.filter(|namespace| !namespace.is_empty()) {
        text.push('.');
        text.push_str(namespace);
    }
    text
}

/// The reference text of a queue key (`namespace/name` or `name`) of kind `K`.
pub(crate) fn key_ref<K: Resource>(types: &K::DynamicType, key: &str) -> String {
    match key.split_once('/') {
        Some((namespace, name)) => object_ref::<K>(types, name, Some(namespace)),
        None => object_ref::<K>(types, key, None),
    }
}

/// The reason of each queued key, from the event that queued it until a worker takes it. The
/// first reason stays: later events for a key already waiting join its reconcile.
#[derive(Debug, Default)]
pub(crate) struct PendingReasons(Mutex<HashMap<String, ReconcileReason>>);

impl PendingReasons {
    /// Records why `key` is queued, unless it is already waiting with a reason.
    pub(crate) fn note(&self, key: &str, reason: impl FnOnce() -> ReconcileReason) {
        let mut pending = self.0.lock();
        if !pending.contains_key(key) {
            pending.insert(key.to_owned(), reason());
        }
    }

    /// The reason `key` was queued, forgotten so the next event starts afresh.
    pub(crate) fn take(&self, key: &str) -> ReconcileReason {
        self.0.lock().remove(key).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Namespace;

    use super::*;

    #[test]
    fn references_and_reasons_read_as_kube_runtime_writes_them() {
        assert_eq!(
            key_ref::<Deployment>(&(), "ns/web"),
            "Deployment.v1.apps/web.ns"
        );
        assert_eq!(key_ref::<Namespace>(&(), "prod"), "Namespace.v1./prod");
        assert_eq!(
            ReconcileReason::RelatedObjectUpdated("Pod.v1./p.ns".into()).to_string(),
            "related object updated: Pod.v1./p.ns"
        );
        let pending = PendingReasons::default();
        pending.note("a", || ReconcileReason::ObjectUpdated);
        pending.note("a", || ReconcileReason::BulkReconcile);
        assert_eq!(pending.take("a"), ReconcileReason::ObjectUpdated);
        assert_eq!(pending.take("a"), ReconcileReason::Unknown);
    }
}
