//! Typed reads of an informer's cache: client-go's generated listers, for any kind.

use std::sync::Arc;

use kube::Resource;
use kube::core::{Selector, SelectorExt};

use crate::index::{Indexer, NAMESPACE_INDEX};

/// Reads a cache by namespace, name and label selector. Reads are cheap (reference counts,
/// never copies) and never touch the API server.
///
/// ```
/// use ctrlkit_cache::{Indexer, Lister, namespace_indexers};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::ObjectMeta;
/// use kube::core::{Expression, Selector};
///
/// let indexer = Indexer::new(namespace_indexers::<ConfigMap>());
/// let cm = |namespace: &str, name: &str, app: &str| ConfigMap {
///     metadata: ObjectMeta {
///         name: Some(name.into()),
///         namespace: Some(namespace.into()),
///         labels: Some([("app".to_string(), app.to_string())].into()),
///         ..Default::default()
///     },
///     ..Default::default()
/// };
/// indexer.add(cm("a", "one", "web")).unwrap();
/// indexer.add(cm("a", "two", "db")).unwrap();
/// indexer.add(cm("b", "three", "web")).unwrap();
///
/// let lister = Lister::new(indexer);
/// let web: Selector = Expression::Equal("app".into(), "web".into()).into();
/// assert_eq!(lister.list(&web).len(), 2);
/// assert_eq!(lister.namespaced("a").list(&web).len(), 1);
/// assert!(lister.get(Some("b"), "three").is_some());
/// ```
#[derive(Debug)]
pub struct Lister<K> {
    indexer: Indexer<K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
        }
    }
}

impl<K: Resource> Lister<K> {
    /// A lister over `indexer` (which should carry the namespace index).
    pub fn new(indexer: Indexer<K>) -> Self {
        Self { indexer }
    }

    /// The object named `name` in `namespace` (`None` for cluster-scoped kinds).
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        match namespace {
            Some(namespace) if !namespace.is_empty() => {
                self.indexer.get_by_key(&format!("{namespace}/{name}"))
            }
            _ => self.indexer.get_by_key(name),
        }
    }

    /// Every cached object the selector matches, in every namespace.
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        let mut objects = self.indexer.list();
        if !selector.selects_all() {
            objects.retain(|obj| matches(selector, &**obj));
        }
        objects
    }

    /// A view of one namespace.
    pub fn namespaced(&self, namespace: &str) -> NamespaceLister<'_, K> {
        NamespaceLister {
            lister: self,
            namespace: namespace.to_owned(),
        }
    }
}

fn matches<K: Resource>(selector: &Selector, obj: &K) -> bool {
    match &obj.meta().labels {
        Some(labels) => selector.matches(labels),
        None => selector.matches(&Default::default()),
    }
}

/// The objects of one namespace; from [`Lister::namespaced`].
#[derive(Debug)]
pub struct NamespaceLister<'a, K> {
    lister: &'a Lister<K>,
    namespace: String,
}

impl<K: Resource> NamespaceLister<'_, K> {
    /// The object named `name` in this namespace.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.lister.get(Some(&self.namespace), name)
    }

    /// The namespace's objects the selector matches, found through the namespace index (or a
    /// scan when the cache has none).
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        let mut objects = match self
            .lister
            .indexer
            .by_index(NAMESPACE_INDEX, &self.namespace)
        {
            Ok(objects) => objects,
            Err(_) => self
                .lister
                .indexer
                .list()
                .into_iter()
                .filter(|obj| obj.meta().namespace.as_deref() == Some(self.namespace.as_str()))
                .collect(),
        };
        if !selector.selects_all() {
            objects.retain(|obj| matches(selector, &**obj));
        }
        objects
    }
}
