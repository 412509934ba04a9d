//! What a [`Reflector`](crate::Reflector) writes into.

use std::sync::Arc;

use crate::delta_fifo::{DeltaFifo, ListedKeys};
use crate::index::Indexer;
use crate::key::KeyError;

/// The sink of a reflector: a [`DeltaFifo`] in an informer, or a plain [`Indexer`] when no
/// event handlers are wanted.
///
/// A relist arrives page by page through [`replace_page`](Self::replace_page) and ends with
/// [`replace_finish`](Self::replace_finish), so the whole list never sits in memory twice.
pub trait ReflectorStore<K>: Send + Sync {
    /// A watch saw the object created.
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError>;
    /// A watch saw the object changed.
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError>;
    /// A watch saw the object deleted.
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError>;
    /// One page of a relist. Objects without a key are skipped (the first error is returned
    /// after the rest are stored).
    fn replace_page(&self, page: Vec<Arc<K>>, listed: &mut ListedKeys) -> Result<(), KeyError>;
    /// The relist is complete: whatever was not listed is gone.
    fn replace_finish(&self, listed: ListedKeys, resource_version: &str);
}

impl<K: Clone + Send + Sync> ReflectorStore<K> for DeltaFifo<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        DeltaFifo::add(self, obj)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        DeltaFifo::update(self, obj)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError> {
        DeltaFifo::delete(self, obj)
    }
    fn replace_page(&self, page: Vec<Arc<K>>, listed: &mut ListedKeys) -> Result<(), KeyError> {
        DeltaFifo::replace_page(self, page, listed)
    }
    fn replace_finish(&self, listed: ListedKeys, _resource_version: &str) {
        DeltaFifo::replace_finish(self, listed);
    }
}

impl<K: Send + Sync> ReflectorStore<K> for Indexer<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        Indexer::add(self, obj)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        Indexer::update(self, obj)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError> {
        Indexer::delete(self, &obj)
    }
    fn replace_page(&self, page: Vec<Arc<K>>, listed: &mut ListedKeys) -> Result<(), KeyError> {
        let mut first_error = None;
        for obj in page {
            match self.key_of(&obj) {
                Ok(key) => {
                    listed.insert(key.clone());
                    self.thread_safe_store().update(key, obj);
                }
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
    fn replace_finish(&self, listed: ListedKeys, _resource_version: &str) {
        for key in self.list_keys_where(|key| !listed.contains(key)) {
            self.thread_safe_store().delete(&key);
        }
    }
}
