//! The object-keyed view of a [`ThreadSafeStore`]: client-go's `Indexer`.

use std::sync::Arc;

use kube::Resource;

use crate::delta::ObjectOrTombstone;
use crate::key::{KeyError, KeyFunc, meta_namespace_key};
use crate::thread_safe_store::{IndexError, IndexFunc, Indexers, ThreadSafeStore};

/// The name of the namespace index ([`meta_namespace_index_func`]).
pub const NAMESPACE_INDEX: &str = "namespace";

/// Indexes an object by its namespace (nothing for cluster-scoped objects).
pub fn meta_namespace_index_func<K: Resource>(obj: &K) -> Vec<String> {
    match obj.meta().namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => vec![namespace.to_owned()],
        _ => Vec::new(),
    }
}

/// The namespace index, ready to pass to [`Indexer::new`].
pub fn namespace_indexers<K: Resource + 'static>() -> Indexers<K> {
    let func: IndexFunc<K> = Arc::new(meta_namespace_index_func::<K>);
    Indexers::from([(NAMESPACE_INDEX.to_owned(), func)])
}

/// A store of objects filed under their key, with indexes; cheap to clone (clones share it).
///
/// ```
/// use ctrlkit_cache::{Indexer, NAMESPACE_INDEX, namespace_indexers};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::ObjectMeta;
///
/// let indexer = Indexer::new(namespace_indexers::<ConfigMap>());
/// for (namespace, name) in [("a", "one"), ("a", "two"), ("b", "three")] {
///     let meta = ObjectMeta {
///         name: Some(name.into()),
///         namespace: Some(namespace.into()),
///         ..Default::default()
///     };
///     indexer.add(ConfigMap { metadata: meta, ..Default::default() }).unwrap();
/// }
/// assert_eq!(indexer.by_index(NAMESPACE_INDEX, "a").unwrap().len(), 2);
/// assert!(indexer.get_by_key("b/three").is_some());
/// ```
pub struct Indexer<K> {
    store: Arc<ThreadSafeStore<K>>,
    key_func: KeyFunc<K>,
}

impl<K> Clone for Indexer<K> {
    fn clone(&self) -> Self {
        Self {
            store: Arc::clone(&self.store),
            key_func: self.key_func,
        }
    }
}

impl<K> std::fmt::Debug for Indexer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Indexer").field(&self.store).finish()
    }
}

impl<K: Resource> Indexer<K> {
    /// An empty indexer keyed by [`meta_namespace_key`], with these indexes.
    pub fn new(indexers: Indexers<K>) -> Self {
        Self::with_key_func(meta_namespace_key::<K>, indexers)
    }
}

impl<K> Indexer<K> {
    /// An empty indexer with its own key function.
    pub fn with_key_func(key_func: KeyFunc<K>, indexers: Indexers<K>) -> Self {
        Self {
            store: Arc::new(ThreadSafeStore::new(indexers)),
            key_func,
        }
    }

    /// The key this indexer files `obj` under.
    pub fn key_of(&self, obj: &K) -> Result<String, KeyError> {
        (self.key_func)(obj)
    }

    /// The keyed store underneath.
    pub fn thread_safe_store(&self) -> &ThreadSafeStore<K> {
        &self.store
    }

    /// Inserts or replaces `obj`.
    pub fn add(&self, obj: impl Into<Arc<K>>) -> Result<(), KeyError> {
        let obj = obj.into();
        let key = self.key_of(&obj)?;
        self.store.add(key, obj);
        Ok(())
    }

    /// Inserts or replaces `obj`.
    pub fn update(&self, obj: impl Into<Arc<K>>) -> Result<(), KeyError> {
        self.add(obj)
    }

    /// Removes the object with `obj`'s key.
    pub fn delete(&self, obj: &K) -> Result<(), KeyError> {
        let key = self.key_of(obj)?;
        self.store.delete(&key);
        Ok(())
    }

    /// Removes a deleted object, filed under the tombstone's key when it is one.
    pub fn delete_object_or_tombstone(&self, obj: &ObjectOrTombstone<K>) -> Result<(), KeyError> {
        match obj {
            ObjectOrTombstone::Object(obj) => self.delete(obj),
            ObjectOrTombstone::Tombstone(tombstone) => {
                self.store.delete(&tombstone.key);
                Ok(())
            }
        }
    }

    /// The stored object with `obj`'s key.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, KeyError> {
        Ok(self.store.get(&self.key_of(obj)?))
    }

    /// The object under `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.store.get(key)
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.store.list()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<String> {
        self.store.list_keys()
    }

    /// The keys for which `keep` says yes, in no particular order; only those are copied.
    pub(crate) fn list_keys_where(&self, keep: impl FnMut(&str) -> bool) -> Vec<String> {
        self.store.list_keys_where(keep)
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the indexer is empty.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// Replaces the whole content with `list`. An object without a key fails the call and
    /// leaves the content as it was.
    pub fn replace(&self, list: impl IntoIterator<Item = Arc<K>>) -> Result<(), KeyError> {
        let items = list
            .into_iter()
            .map(|obj| Ok((self.key_of(&obj)?, obj)))
            .collect::<Result<Vec<_>, KeyError>>()?;
        self.store.replace(items);
        Ok(())
    }

    /// The objects that share at least one value of index `index_name` with `obj`.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, IndexError> {
        self.store.index(index_name, obj)
    }

    /// The keys whose object yields `indexed_value` under index `index_name`.
    pub fn index_keys(
        &self,
        index_name: &str,
        indexed_value: &str,
    ) -> Result<Vec<String>, IndexError> {
        self.store.index_keys(index_name, indexed_value)
    }

    /// Every value index `index_name` holds at least one key for.
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.store.list_index_func_values(index_name)
    }

    /// The objects whose index `index_name` yields `indexed_value`.
    pub fn by_index(
        &self,
        index_name: &str,
        indexed_value: &str,
    ) -> Result<Vec<Arc<K>>, IndexError> {
        self.store.by_index(index_name, indexed_value)
    }

    /// The registered index functions.
    pub fn get_indexers(&self) -> Indexers<K> {
        self.store.get_indexers()
    }

    /// Registers more indexes, built at once over what is stored; a name clash is an error.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), IndexError> {
        self.store.add_indexers(indexers)
    }
}
