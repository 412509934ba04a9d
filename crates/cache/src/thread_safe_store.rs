//! A map from key to object that many threads read at once, with secondary indexes.
//!
//! Objects are held as `Arc<K>`: a read hands out a reference count, never a deep copy, and the
//! same allocation is shared by the store, the DeltaFIFO and every event handler. Indexes map an
//! index value (say a namespace) to the set of keys whose object yields it; they are kept exact on
//! every add, update and delete, and a value whose set becomes empty is removed.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use foldhash::fast::RandomState;
use parking_lot::RwLock;

/// A function that computes the index values of an object (for example its namespace).
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Named index functions.
pub type Indexers<K> = HashMap<String, IndexFunc<K>>;

/// Why an index query or an index registration failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// No index of this name is registered.
    #[error("index with name {0} does not exist")]
    NoSuchIndex(String),
    /// An index of this name is registered already.
    #[error("indexer conflict: {0}")]
    Conflict(String),
}

type FastMap<V> = HashMap<String, V, RandomState>;
type KeySet = HashSet<String, RandomState>;

/// index value -> keys of the objects that yield it.
type Index = FastMap<KeySet>;

struct Inner<K> {
    items: FastMap<Arc<K>>,
    indexers: FastMap<IndexFunc<K>>,
    indices: FastMap<Index>,
}

/// A thread-safe key → object map with indexes; client-go's `ThreadSafeStore`.
///
/// It is keyed by the caller; [`Indexer`](crate::Indexer) is the object-keyed view most code
/// wants.
pub struct ThreadSafeStore<K> {
    inner: RwLock<Inner<K>>,
}

impl<K> std::fmt::Debug for ThreadSafeStore<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.read();
        f.debug_struct("ThreadSafeStore")
            .field("len", &inner.items.len())
            .field("indexers", &inner.indexers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<K> ThreadSafeStore<K> {
    /// An empty store with these indexes.
    pub fn new(indexers: Indexers<K>) -> Self {
        let indices = indexers
            .keys()
            .map(|name| (name.clone(), Index::default()))
            .collect();
        Self {
            inner: RwLock::new(Inner {
                items: FastMap::default(),
                indexers: indexers.into_iter().collect(),
                indices,
            }),
        }
    }

    /// Inserts or replaces the object under `key`, updating every index.
    pub fn add(&self, key: String, obj: Arc<K>) {
        self.update(key, obj);
    }

    /// Inserts or replaces the object under `key`, updating every index.
    pub fn update(&self, key: String, obj: Arc<K>) {
        self.swap(key, obj);
    }

    /// Inserts or replaces the object under `key` and hands back the one it replaced, under
    /// one lock (the informer needs both for an update notification).
    pub(crate) fn swap(&self, key: String, obj: Arc<K>) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let inner = &mut *inner;
        // One lookup of the key for both the old object and the insertion.
        match inner.items.entry(key) {
            Entry::Occupied(mut entry) => {
                let old = Arc::clone(entry.get());
                update_indices(
                    &inner.indexers,
                    &mut inner.indices,
                    Some(&*old),
                    Some(&*obj),
                    entry.key(),
                );
                entry.insert(obj);
                Some(old)
            }
            Entry::Vacant(entry) => {
                update_indices(
                    &inner.indexers,
                    &mut inner.indices,
                    None,
                    Some(&*obj),
                    entry.key(),
                );
                entry.insert(obj);
                None
            }
        }
    }

    /// Removes the object under `key`, if any, and its index entries.
    pub fn delete(&self, key: &str) {
        let mut inner = self.inner.write();
        let inner = &mut *inner;
        if let Some(old) = inner.items.remove(key) {
            update_indices(&inner.indexers, &mut inner.indices, Some(&*old), None, key);
        }
    }

    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().items.get(key).cloned()
    }

    /// Every object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().items.values().cloned().collect()
    }

    /// Every key, in no particular order.
    pub fn list_keys(&self) -> Vec<String> {
        self.list_keys_where(|_| true)
    }

    /// The keys for which `keep` says yes, in no particular order; only those are copied.
    pub(crate) fn list_keys_where(&self, mut keep: impl FnMut(&str) -> bool) -> Vec<String> {
        let inner = self.inner.read();
        inner
            .items
            .keys()
            .filter(|key| keep(key))
            .cloned()
            .collect()
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.inner.read().items.contains_key(key)
    }

    /// Replaces the whole content and rebuilds every index.
    pub fn replace(&self, items: impl IntoIterator<Item = (String, Arc<K>)>) {
        let items: FastMap<Arc<K>> = items.into_iter().collect();
        let mut inner = self.inner.write();
        let inner = &mut *inner;
        inner.items = items;
        for index in inner.indices.values_mut() {
            index.clear();
        }
        for (key, obj) in &inner.items {
            update_indices(&inner.indexers, &mut inner.indices, None, Some(&**obj), key);
        }
    }

    /// The objects that share at least one value of index `index_name` with `obj`.
    pub fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, IndexError> {
        let inner = self.inner.read();
        let func = inner
            .indexers
            .get(index_name)
            .ok_or_else(|| IndexError::NoSuchIndex(index_name.to_owned()))?;
        let values = func(obj);
        let index = inner.indices.get(index_name);
        let mut keys: Vec<&String> = Vec::new();
        if let Some(index) = index {
            if let [value] = values.as_slice() {
                keys.extend(index.get(value).into_iter().flatten());
            } else {
                let mut seen = HashSet::<&String, RandomState>::default();
                for value in &values {
                    for key in index.get(value).into_iter().flatten() {
                        if seen.insert(key) {
                            keys.push(key);
                        }
                    }
                }
            }
        }
        Ok(keys
            .into_iter()
            .filter_map(|key| inner.items.get(key).cloned())
            .collect())
    }

    /// The keys whose object yields `indexed_value` under index `index_name`.
    pub fn index_keys(
        &self,
        index_name: &str,
        indexed_value: &str,
    ) -> Result<Vec<String>, IndexError> {
        let inner = self.inner.read();
        if !inner.indexers.contains_key(index_name) {
            return Err(IndexError::NoSuchIndex(index_name.to_owned()));
        }
        Ok(inner
            .indices
            .get(index_name)
            .and_then(|index| index.get(indexed_value))
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default())
    }

    /// Every value index `index_name` holds at least one key for (empty for an unknown index).
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.inner
            .read()
            .indices
            .get(index_name)
            .map(|index| index.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The objects whose index `index_name` yields `indexed_value`.
    pub fn by_index(
        &self,
        index_name: &str,
        indexed_value: &str,
    ) -> Result<Vec<Arc<K>>, IndexError> {
        let inner = self.inner.read();
        if !inner.indexers.contains_key(index_name) {
            return Err(IndexError::NoSuchIndex(index_name.to_owned()));
        }
        Ok(inner
            .indices
            .get(index_name)
            .and_then(|index| index.get(indexed_value))
            .map(|keys| {
                keys.iter()
                    .filter_map(|key| inner.items.get(key).cloned())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The registered index functions.
    pub fn get_indexers(&self) -> Indexers<K> {
        self.inner
            .read()
            .indexers
            .iter()
            .map(|(name, func)| (name.clone(), Arc::clone(func)))
            .collect()
    }

    /// Registers more indexes; they are built at once over what is stored. A name that is
    /// registered already is an error, and then nothing is added.
    pub fn add_indexers(&self, new_indexers: Indexers<K>) -> Result<(), IndexError> {
        let mut inner = self.inner.write();
        let inner = &mut *inner;
        let mut clashes: Vec<&str> = new_indexers
            .keys()
            .filter(|name| inner.indexers.contains_key(name.as_str()))
            .map(String::as_str)
            .collect();
        if !clashes.is_empty() {
            clashes.sort_unstable();
            return Err(IndexError::Conflict(clashes.join(", ")));
        }
        for (name, func) in new_indexers {
            let mut index = Index::default();
            for (key, obj) in &inner.items {
                for value in func(obj) {
                    index.entry(value).or_default().insert(key.clone());
                }
            }
            inner.indices.insert(name.clone(), index);
            inner.indexers.insert(name, func);
        }
        Ok(())
    }
}

/// Moves `key` from the index sets `old` yields to those `new` yields, for every index.
fn update_indices<K>(
    indexers: &FastMap<IndexFunc<K>>,
    indices: &mut FastMap<Index>,
    old: Option<&K>,
    new: Option<&K>,
    key: &str,
) {
    for (name, func) in indexers {
        let old_values = old.map(|obj| func(obj)).unwrap_or_default();
        let new_values = new.map(|obj| func(obj)).unwrap_or_default();
        // Most updates leave the index values alone (a namespace never changes).
        if old_values == new_values {
            continue;
        }
        // The index's name is copied only the first time it is filled.
        let index = match indices.get_mut(name.as_str()) {
            Some(index) => index,
            None => indices.entry(name.clone()).or_default(),
        };
        for value in &old_values {
            if new_values.contains(value) {
                continue;
            }
            if let Some(keys) = index.get_mut(value) {
                keys.remove(key);
                if keys.is_empty() {
                    index.remove(value);
                }
            }
        }
        for value in new_values {
            if old_values.contains(&value) {
                continue;
            }
            index.entry(value).or_default().insert(key.to_owned());
        }
    }
}
