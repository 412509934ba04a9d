//! client-go's `RealFIFO`: every change queued on its own, in the order it arrived.
//!
//! Where the [`DeltaFifo`](crate::DeltaFifo) gathers a key's changes until it is popped (and
//! collapses repeated deletions), the RealFIFO keeps one entry per change, so handlers see the
//! exact sequence the reflector saw, interleaved across keys as it happened. A relist queues
//! each listed object as `Replaced` as its page arrives, then a `Deleted` tombstone for every
//! key that is queued or known but was not listed (unless its last queued change is already a
//! deletion): client-go, holding the whole list, queues the tombstones first; each key's own
//! sequence is the same either way, since a listed key gets no tombstone. A resync
//! queues `Sync` for every known key with nothing queued. client-go's informers use it by
//! default since 1.36; a [`SharedIndexInformer`](crate::SharedIndexInformer) uses it when
//! [`set_real_fifo`](crate::SharedIndexInformer::set_real_fifo) asks.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::delta::{DeletedFinalStateUnknown, Delta, DeltaType, Deltas, ObjectOrTombstone};
use crate::delta_fifo::{
    DeltaFifoOptions, FifoClosed, KnownObjects, ListedKeys, TransformFunc, prepare, wait_until,
};
use crate::key::{KeyError, KeyFunc};

struct Inner<K> {
    items: VecDeque<(String, Delta<K>)>,
    populated: bool,
    initial_population_count: usize,
    closed: bool,
}

/// client-go's `RealFIFO`; see the module docs.
///
/// ```
/// use ctrlkit_cache::{Delta, DeltaFifoOptions, DeltaType, RealFifo};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::ObjectMeta;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let fifo = RealFifo::new(DeltaFifoOptions::<ConfigMap>::default());
/// let cm = |name: &str| ConfigMap {
///     metadata: ObjectMeta { name: Some(name.into()), namespace: Some("ns".into()), ..Default::default() },
///     ..Default::default()
/// };
/// fifo.add(cm("a")).unwrap();
/// fifo.add(cm("b")).unwrap();
/// fifo.update(cm("a")).unwrap();
/// let mut seen = Vec::new();
/// for _ in 0..3 {
///     seen.push(fifo.pop(|key, deltas, _| (key.to_owned(), deltas.newest().map(Delta::delta_type))).await.unwrap());
/// }
/// assert_eq!(seen, [
///     ("ns/a".to_owned(), Some(DeltaType::Added)),
///     ("ns/b".to_owned(), Some(DeltaType::Added)),
///     ("ns/a".to_owned(), Some(DeltaType::Updated)),
/// ]);
/// # }
/// ```
pub struct RealFifo<K> {
    inner: Mutex<Inner<K>>,
    notify: Notify,
    synced: Notify,
    /// Set once, under the lock, when the FIFO becomes synced (it never becomes unsynced);
    /// read without the lock, so that code run by a pop (which holds it), such as a handler
    /// called inline, can ask.
    is_synced: AtomicBool,
    key_func: KeyFunc<K>,
    known_objects: Option<Arc<dyn KnownObjects<K>>>,
    transformer: Option<TransformFunc<K>>,
}

impl<K> std::fmt::Debug for RealFifo<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.lock();
        f.debug_struct("RealFifo")
            .field("queued", &inner.items.len())
            .field("populated", &inner.populated)
            .field("closed", &inner.closed)
            .finish()
    }
}

impl<K: Clone> RealFifo<K> {
    /// An empty FIFO. The options are the [`DeltaFifo`](crate::DeltaFifo)'s; a relist always
    /// queues `Replaced` (`emit_delta_type_replaced` is ignored), as client-go's RealFIFO does.
    pub fn new(options: DeltaFifoOptions<K>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                items: VecDeque::new(),
                populated: false,
                initial_population_count: 0,
                closed: false,
            }),
            notify: Notify::new(),
            synced: Notify::new(),
            is_synced: AtomicBool::new(false),
            key_func: options.key_func,
            known_objects: options.known_objects,
            transformer: options.transformer,
        }
    }

    /// Queues an `Added` change.
    pub fn add(&self, obj: impl Into<Arc<K>>) -> Result<(), KeyError> {
        self.queue_change(obj.into(), DeltaType::Added)
    }

    /// Queues an `Updated` change.
    pub fn update(&self, obj: impl Into<Arc<K>>) -> Result<(), KeyError> {
        self.queue_change(obj.into(), DeltaType::Updated)
    }

    /// Queues a `Deleted` change.
    pub fn delete(&self, obj: impl Into<Arc<K>>) -> Result<(), KeyError> {
        self.queue_change(obj.into(), DeltaType::Deleted)
    }

    fn queue_change(&self, obj: Arc<K>, action: DeltaType) -> Result<(), KeyError> {
        let obj = self.prepare(obj);
        let key = (self.key_func)(&obj)?;
        let mut inner = self.inner.lock();
        inner.populated = true;
        inner.items.push_back((key, Delta::of_type(action, obj)));
        self.notify.notify_waiters();
        self.wake_if_synced(&inner);
        Ok(())
    }

    /// How many changes are queued.
    pub fn len(&self) -> usize {
        self.inner.lock().items.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key of every queued change, in the order they will be popped (a key may appear more
    /// than once).
    pub fn list_keys(&self) -> Vec<String> {
        self.inner
            .lock()
            .items
            .iter()
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Queues one page of a relist as `Replaced` changes, remembering its keys in `listed`;
    /// [`replace_finish`](Self::replace_finish) then queues the deletions. Objects without a
    /// key are skipped; the first such error is returned after the rest are queued.
    pub fn replace_page(
        &self,
        page: impl IntoIterator<Item = Arc<K>>,
        listed: &mut ListedKeys,
    ) -> Result<(), KeyError> {
        let page: Vec<Arc<K>> = page.into_iter().map(|obj| self.prepare(obj)).collect();
        let mut first_error = None;
        let mut inner = self.inner.lock();
        inner.items.reserve(page.len());
        for obj in page {
            match (self.key_func)(&obj) {
                Ok(key) => {
                    listed.insert(key.clone());
                    inner
                        .items
                        .push_back((key, Delta::of_type(DeltaType::Replaced, obj)));
                }
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        self.notify.notify_waiters();
        first_error.map_or(Ok(()), Err)
    }

    /// Ends a relist: a `Deleted` tombstone for every key queued (whose last queued change is
    /// not a deletion already) or known that was not listed.
    pub fn replace_finish(&self, listed: ListedKeys) {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let mut last_queued: HashMap<&str, &Delta<K>> = HashMap::new();
        let mut queued_order: Vec<&str> = Vec::new();
        for (key, delta) in &inner.items {
            if last_queued.insert(key.as_str(), delta).is_none() {
                queued_order.push(key.as_str());
            }
        }
        let mut tombstones: Vec<(String, Option<Arc<K>>)> = Vec::new();
        for key in &queued_order {
            if listed.contains(key) {
                continue;
            }
            let Some(last) = last_queued.get(key) else {
                continue;
            };
            if last.delta_type() == DeltaType::Deleted {
                continue;
            }
            tombstones.push(((*key).to_owned(), last.object().cloned()));
        }
        if let Some(known) = &self.known_objects {
            for key in known.list_keys_not_in(&listed) {
                if last_queued.contains_key(key.as_str()) {
                    continue;
                }
                let obj = known.get_by_key(&key);
                tombstones.push((key, obj));
            }
        }
        drop(last_queued);
        drop(queued_order);
        for (key, obj) in tombstones {
            let tombstone = DeletedFinalStateUnknown {
                key: key.clone(),
                obj,
            };
            inner
                .items
                .push_back((key, Delta::Deleted(ObjectOrTombstone::Tombstone(tombstone))));
        }
        self.notify.notify_waiters();
        if !inner.populated {
            inner.populated = true;
            inner.initial_population_count = inner.items.len();
        }
        self.wake_if_synced(inner);
    }

    /// Queues `Sync` for every known key with nothing queued.
    pub fn resync(&self) {
        let Some(known) = &self.known_objects else {
            return;
        };
        let mut inner = self.inner.lock();
        let queued: std::collections::HashSet<String> =
            inner.items.iter().map(|(key, _)| key.clone()).collect();
        for key in known.list_keys() {
            if queued.contains(&key) {
                continue;
            }
            if let Some(obj) = known.get_by_key(&key) {
                inner
                    .items
                    .push_back((key, Delta::of_type(DeltaType::Sync, obj)));
            }
        }
        self.notify.notify_waiters();
    }

    /// Whether the first relist (or an earlier change) was queued and every change the first
    /// relist queued has been popped.
    pub fn has_synced(&self) -> bool {
        self.is_synced.load(Ordering::Acquire)
    }

    /// Waits until [`has_synced`](Self::has_synced).
    pub async fn wait_for_sync(&self) {
        wait_until(&self.synced, || self.has_synced()).await;
    }

    fn wake_if_synced(&self, inner: &Inner<K>) {
        if inner.populated && inner.initial_population_count == 0 {
            self.is_synced.store(true, Ordering::Release);
            self.synced.notify_waiters();
        }
    }

    /// Closes the FIFO: pops return [`FifoClosed`] once it is empty.
    pub fn close(&self) {
        self.inner.lock().closed = true;
        self.notify.notify_waiters();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.lock().closed
    }

    /// Waits for the oldest change and hands it to `process` (as one-element [`Deltas`]) with
    /// its key and whether the FIFO had not synced yet. `process` runs under the FIFO's lock,
    /// as with the [`DeltaFifo`](crate::DeltaFifo).
    pub async fn pop<R>(
        &self,
        process: impl FnOnce(&str, Deltas<K>, bool) -> R,
    ) -> Result<R, FifoClosed> {
        let mut process = process;
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            {
                let mut inner = self.inner.lock();
                match self.pop_queued(&mut inner, process) {
                    Ok(result) => return Ok(result),
                    Err(unused) => process = unused,
                }
                if inner.closed {
                    return Err(FifoClosed);
                }
                notified.as_mut().enable();
            }
            notified.await;
        }
    }

    /// As [`pop`](Self::pop), but without waiting: `None` when nothing is queued.
    pub(crate) fn try_pop<R>(&self, process: impl FnOnce(&str, Deltas<K>, bool) -> R) -> Option<R> {
        self.pop_queued(&mut self.inner.lock(), process).ok()
    }

    /// Pops the oldest change into `process` under the held lock; hands `process` back when
    /// nothing is queued.
    fn pop_queued<R, F: FnOnce(&str, Deltas<K>, bool) -> R>(
        &self,
        inner: &mut Inner<K>,
        process: F,
    ) -> Result<R, F> {
        let Some((key, delta)) = inner.items.pop_front() else {
            return Err(process);
        };
        let is_in_initial_list = !(inner.populated && inner.initial_population_count == 0);
        let result = process(&key, Deltas(vec![delta]), is_in_initial_list);
        if inner.initial_population_count > 0 {
            inner.initial_population_count -= 1;
            self.wake_if_synced(inner);
        }
        Ok(result)
    }

    fn prepare(&self, obj: Arc<K>) -> Arc<K> {
        prepare(self.transformer.as_ref(), obj)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;
    use crate::index::Indexer;

    fn cm(name: &str, rv: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    async fn drain(fifo: &RealFifo<ConfigMap>) -> Vec<(String, DeltaType, bool)> {
        let mut seen = Vec::new();
        while !fifo.is_empty() {
            seen.push(
                fifo.pop(|key, deltas, initial| {
                    let delta = &deltas.0[0];
                    (key.to_owned(), delta.delta_type(), initial)
                })
                .await
                .unwrap(),
            );
        }
        seen
    }

    #[tokio::test]
    async fn every_change_is_its_own_entry_in_arrival_order() {
        let fifo = RealFifo::new(DeltaFifoOptions::<ConfigMap>::default());
        fifo.add(cm("a", "1")).unwrap();
        fifo.update(cm("a", "2")).unwrap();
        fifo.delete(cm("a", "2")).unwrap();
        fifo.delete(cm("a", "2")).unwrap();
        let seen = drain(&fifo).await;
        let types: Vec<DeltaType> = seen.iter().map(|(_, t, _)| *t).collect();
        // Nothing collapsed, not even the second deletion.
        assert_eq!(
            types,
            [
                DeltaType::Added,
                DeltaType::Updated,
                DeltaType::Deleted,
                DeltaType::Deleted
            ]
        );
    }

    #[tokio::test]
    async fn a_relist_replaces_and_tombstones_the_unlisted_and_syncs_after_it() {
        let known = Indexer::with_key_func(
            crate::key::meta_namespace_key::<ConfigMap>,
            Default::default(),
        );
        known.add(cm("gone", "1")).unwrap();
        let fifo = RealFifo::new(DeltaFifoOptions {
            known_objects: Some(Arc::new(known) as Arc<dyn KnownObjects<ConfigMap>>),
            ..DeltaFifoOptions::<ConfigMap>::default()
        });
        fifo.delete(cm("deleted", "3")).unwrap();
        fifo.update(cm("queued", "4")).unwrap();
        let mut listed = ListedKeys::new();
        fifo.replace_page(vec![cm("a", "5")], &mut listed).unwrap();
        fifo.replace_finish(listed);
        let seen: Vec<(String, DeltaType)> = drain(&fifo)
            .await
            .into_iter()
            .map(|(key, delta_type, _)| (key, delta_type))
            .collect();
        let v = |key: &str, delta_type| (key.to_owned(), delta_type);
        assert_eq!(
            seen,
            [
                v("ns/deleted", DeltaType::Deleted),
                v("ns/queued", DeltaType::Updated),
                v("ns/a", DeltaType::Replaced),
                // The queued key not listed; not the one already deleted.
                v("ns/queued", DeltaType::Deleted),
                v("ns/gone", DeltaType::Deleted),
            ]
        );
    }

    #[tokio::test]
    async fn synced_once_the_first_relists_changes_are_popped() {
        let fifo = RealFifo::new(DeltaFifoOptions::<ConfigMap>::default());
        let mut listed = ListedKeys::new();
        fifo.replace_page(vec![cm("a", "1"), cm("b", "1")], &mut listed)
            .unwrap();
        fifo.replace_finish(listed);
        fifo.update(cm("a", "2")).unwrap();
        assert!(!fifo.has_synced());
        let seen = drain(&fifo).await;
        let initial: Vec<bool> = seen.iter().map(|(_, _, initial)| *initial).collect();
        assert_eq!(initial, [true, true, false]);
        assert!(fifo.has_synced());
    }
}
