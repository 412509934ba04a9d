//! Which changes of a watched object are worth a reconcile: controller-runtime's predicates.
//!
//! A controller that writes its own object's status is told of that write like of any other
//! change, and without a filter reconciles itself forever. A [`Predicate`] decides, per add,
//! update and delete, whether the event reaches the queue; [`GenerationChanged`] is the usual
//! cure (the API server bumps `metadata.generation` on spec changes only).

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Resource;

/// Decides whether an event of an object of kind `K` puts a key on the queue. Each method
/// defaults to `true`: a predicate states only what it filters.
///
/// ```
/// use ctrlkit_controller::predicate::{GenerationChanged, LabelsChanged, Predicate, or};
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kube::api::ObjectMeta;
///
/// let old = Deployment { metadata: ObjectMeta { generation: Some(1), ..Default::default() }, ..Default::default() };
/// let mut status_only = old.clone();
/// status_only.status = Some(Default::default());
/// let mut relabelled = old.clone();
/// relabelled.metadata.labels = Some([("tier".to_string(), "web".to_string())].into());
///
/// let filter = or(GenerationChanged, LabelsChanged);
/// assert!(!filter.update(&old, &status_only));
/// assert!(filter.update(&old, &relabelled));
/// ```
pub trait Predicate<K>: Send + Sync + 'static {
    /// Whether an added object (also one of the initial list) is reconciled.
    fn create(&self, object: &K) -> bool {
        let _ = object;
        true
    }

    /// Whether a change from `old` to `new` is reconciled.
    fn update(&self, old: &K, new: &K) -> bool {
        let _ = (old, new);
        true
    }

    /// Whether a deleted object is reconciled.
    fn delete(&self, object: &K) -> bool {
        let _ = object;
        true
    }
}

impl<K, P: Predicate<K> + ?Sized> Predicate<K> for Arc<P> {
    fn create(&self, object: &K) -> bool {
        (**self).create(object)
    }
    fn update(&self, old: &K, new: &K) -> bool {
        (**self).update(old, new)
    }
    fn delete(&self, object: &K) -> bool {
        (**self).delete(object)
    }
}

/// Updates pass only when `metadata.generation` changed: spec changes, not status or metadata
/// writes. Adds and deletes pass. Kinds the server does not generation-count (a ConfigMap's
/// generation stays unset) never pass an update.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenerationChanged;

impl<K: Resource> Predicate<K> for GenerationChanged {
    fn update(&self, old: &K, new: &K) -> bool {
        old.meta().generation != new.meta().generation
    }
}

/// Updates pass only when `metadata.labels` changed (no labels equals empty labels).
#[derive(Debug, Clone, Copy, Default)]
pub struct LabelsChanged;

fn same_map(a: Option<&BTreeMap<String, String>>, b: Option<&BTreeMap<String, String>>) -> bool {
    a.filter(|map| !map.is_empty()) == b.filter(|map| !map.is_empty())
}

impl<K: Resource> Predicate<K> for LabelsChanged {
    fn update(&self, old: &K, new: &K) -> bool {
        !same_map(old.meta().labels.as_ref(), new.meta().labels.as_ref())
    }
}

/// Updates pass only when `metadata.annotations` changed (none equals empty).
#[derive(Debug, Clone, Copy, Default)]
pub struct AnnotationsChanged;

impl<K: Resource> Predicate<K> for AnnotationsChanged {
    fn update(&self, old: &K, new: &K) -> bool {
        !same_map(
            old.meta().annotations.as_ref(),
            new.meta().annotations.as_ref(),
        )
    }
}

/// Updates pass only when `metadata.resourceVersion` changed: periodic resyncs, which redeliver
/// the cached object unchanged, are dropped.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResourceVersionChanged;

impl<K: Resource> Predicate<K> for ResourceVersionChanged {
    fn update(&self, old: &K, new: &K) -> bool {
        old.meta().resource_version != new.meta().resource_version
    }
}

/// A predicate on updates only, from a closure; adds and deletes pass.
///
/// ```
/// use ctrlkit_controller::predicate::{Predicate, update_fn};
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// let data_changed = update_fn(|old: &ConfigMap, new: &ConfigMap| old.data != new.data);
/// assert!(!data_changed.update(&ConfigMap::default(), &ConfigMap::default()));
/// ```
pub fn update_fn<K, F>(update: F) -> impl Predicate<K>
where
    K: 'static,
    F: Fn(&K, &K) -> bool + Send + Sync + 'static,
{
    UpdateFn(update)
}

struct UpdateFn<F>(F);

impl<K, F: Fn(&K, &K) -> bool + Send + Sync + 'static> Predicate<K> for UpdateFn<F> {
    fn update(&self, old: &K, new: &K) -> bool {
        (self.0)(old, new)
    }
}

/// A predicate that lets through only the objects `keep` accepts, whatever the event (on an
/// update, when the old or the new object is accepted).
///
/// ```
/// use ctrlkit_controller::predicate::{Predicate, object_fn};
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::ResourceExt;
///
/// let managed = object_fn(|pod: &Pod| pod.labels().contains_key("app"));
/// assert!(!managed.create(&Pod::default()));
/// ```
pub fn object_fn<K, F>(keep: F) -> impl Predicate<K>
where
    K: 'static,
    F: Fn(&K) -> bool + Send + Sync + 'static,
{
    ObjectFn(keep)
}

struct ObjectFn<F>(F);

impl<K, F: Fn(&K) -> bool + Send + Sync + 'static> Predicate<K> for ObjectFn<F> {
    fn create(&self, object: &K) -> bool {
        (self.0)(object)
    }
    fn update(&self, old: &K, new: &K) -> bool {
        (self.0)(old) || (self.0)(new)
    }
    fn delete(&self, object: &K) -> bool {
        (self.0)(object)
    }
}

/// Passes what either predicate passes.
pub fn or<K, A: Predicate<K>, B: Predicate<K>>(a: A, b: B) -> impl Predicate<K> {
    Or(a, b)
}

/// Passes what both predicates pass.
pub fn and<K, A: Predicate<K>, B: Predicate<K>>(a: A, b: B) -> impl Predicate<K> {
    And(a, b)
}

/// Passes what the predicate refuses.
pub fn not<K, A: Predicate<K>>(a: A) -> impl Predicate<K> {
    Not(a)
}

struct Or<A, B>(A, B);
struct And<A, B>(A, B);
struct Not<A>(A);

impl<K, A: Predicate<K>, B: Predicate<K>> Predicate<K> for Or<A, B> {
    fn create(&self, object: &K) -> bool {
        self.0.create(object) || self.1.create(object)
    }
    fn update(&self, old: &K, new: &K) -> bool {
        self.0.update(old, new) || self.1.update(old, new)
    }
    fn delete(&self, object: &K) -> bool {
        self.0.delete(object) || self.1.delete(object)
    }
}

impl<K, A: Predicate<K>, B: Predicate<K>> Predicate<K> for And<A, B> {
    fn create(&self, object: &K) -> bool {
        self.0.create(object) && self.1.create(object)
    }
    fn update(&self, old: &K, new: &K) -> bool {
        self.0.update(old, new) && self.1.update(old, new)
    }
    fn delete(&self, object: &K) -> bool {
        self.0.delete(object) && self.1.delete(object)
    }
}

impl<K, A: Predicate<K>> Predicate<K> for Not<A> {
    fn create(&self, object: &K) -> bool {
        !self.0.create(object)
    }
    fn update(&self, old: &K, new: &K) -> bool {
        !self.0.update(old, new)
    }
    fn delete(&self, object: &K) -> bool {
        !self.0.delete(object)
    }
}

/// The predicates of one watch, all of which must pass (controller-runtime's
/// `WithPredicates`); empty, everything passes.
///
/// ```
/// use ctrlkit_controller::predicate::{GenerationChanged, LabelsChanged, Predicates, or};
/// use k8s_openapi::api::apps::v1::Deployment;
///
/// let spec_or_labels: Predicates<Deployment> = Predicates::new().with(or(GenerationChanged, LabelsChanged));
/// # let _ = spec_or_labels;
/// ```
pub struct Predicates<K>(Vec<Box<dyn Predicate<K>>>);

impl<K> std::fmt::Debug for Predicates<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Predicates({})", self.0.len())
    }
}

impl<K> Default for Predicates<K> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<K: 'static> Predicates<K> {
    /// No predicates: every event passes.
    pub fn new() -> Self {
        Self::default()
    }

    /// These predicates and `predicate`.
    #[must_use]
    pub fn with(mut self, predicate: impl Predicate<K>) -> Self {
        self.push(predicate);
        self
    }

    pub(crate) fn push(&mut self, predicate: impl Predicate<K>) {
        self.0.push(Box::new(predicate));
    }

    pub(crate) fn create(&self, object: &K) -> bool {
        self.0.iter().all(|p| p.create(object))
    }

    pub(crate) fn update(&self, old: &K, new: &K) -> bool {
        self.0.iter().all(|p| p.update(old, new))
    }

    pub(crate) fn delete(&self, object: &K) -> bool {
        self.0.iter().all(|p| p.delete(object))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn cm(generation: Option<i64>, rv: &str, labels: Option<&[(&str, &str)]>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                generation,
                resource_version: Some(rv.to_owned()),
                labels: labels.map(|pairs| {
                    pairs
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect()
                }),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn the_ready_predicates_filter_updates_only() {
        let a = cm(Some(1), "1", None);
        let b = cm(Some(1), "2", Some(&[]));
        let c = cm(Some(2), "2", Some(&[("x", "y")]));
        assert!(!GenerationChanged.update(&a, &b));
        assert!(GenerationChanged.update(&b, &c));
        assert!(Predicate::<ConfigMap>::create(&GenerationChanged, &a));
        assert!(Predicate::<ConfigMap>::delete(&GenerationChanged, &a));
        // No labels and empty labels are the same labels.
        assert!(!LabelsChanged.update(&a, &b));
        assert!(LabelsChanged.update(&b, &c));
        assert!(!AnnotationsChanged.update(&a, &c));
        assert!(ResourceVersionChanged.update(&a, &b));
        assert!(!ResourceVersionChanged.update(&b, &c));
    }

    #[test]
    fn combinators_and_the_list_of_a_watch() {
        let a = cm(Some(1), "1", None);
        let b = cm(Some(1), "2", None);
        assert!(or(GenerationChanged, ResourceVersionChanged).update(&a, &b));
        assert!(!and(GenerationChanged, ResourceVersionChanged).update(&a, &b));
        assert!(not(GenerationChanged).update(&a, &b));
        let mut all = Predicates::default();
        assert!(all.update(&a, &b));
        all.push(ResourceVersionChanged);
        assert!(all.update(&a, &b));
        all.push(GenerationChanged);
        assert!(!all.update(&a, &b));
    }
}
