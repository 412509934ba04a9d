//! The queue between the reflector and the informer: client-go's `DeltaFIFO`.
//!
//! Each key is queued once, in the order it first changed, with every change (delta) that
//! arrived since it was last popped. A pop hands out all of one key's deltas, oldest first, so a
//! consumer sees every state an object went through and never two keys' changes interleaved.
//! Two deletions in a row collapse into one (keeping the one that is not a tombstone), a relist
//! turns keys that vanished into [`DeletedFinalStateUnknown`] tombstones, and a resync queues a
//! `Sync` only for keys with nothing queued.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use foldhash::fast::RandomState;
use kube::Resource;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::delta::{DeletedFinalStateUnknown, Delta, DeltaType, Deltas, ObjectOrTombstone};
use crate::index::Indexer;
use crate::key::{KeyError, KeyFunc, meta_namespace_key};

/// A function applied to every object before it is queued (for example, to drop
/// `managedFields`); it is not applied to tombstones or resyncs, which carry stored objects.
pub type TransformFunc<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// What the FIFO needs from the store its consumer keeps: the keys it holds, and their objects.
/// A relist uses it to find deletions; a resync to find what to sync.
pub trait KnownObjects<K>: Send + Sync {
    /// Every key held.
    fn list_keys(&self) -> Vec<String>;
    /// The object under `key`.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;
    /// The keys held that `listed` does not hold: what a relist deletes. The default filters
    /// [`list_keys`](Self::list_keys); a store that can walk its keys in place should, so that
    /// a relist of many objects does not copy every key.
    fn list_keys_not_in(&self, listed: &ListedKeys) -> Vec<String> {
        let mut keys = self.list_keys();
        keys.retain(|key| !listed.contains(key));
        keys
    }
}

impl<K: Send + Sync> KnownObjects<K> for Indexer<K> {
    fn list_keys(&self) -> Vec<String> {
        Indexer::list_keys(self)
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        Indexer::get_by_key(self, key)
    }
    fn list_keys_not_in(&self, listed: &ListedKeys) -> Vec<String> {
        self.list_keys_where(|key| !listed.contains(key))
    }
}

/// The FIFO was closed; nothing more will be popped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("DeltaFIFO: manipulating with closed queue")]
pub struct FifoClosed;

/// The keys a relist has listed so far; see [`DeltaFifo::replace_page`].
#[derive(Debug, Default)]
pub struct ListedKeys(HashSet<String, RandomState>);

impl ListedKeys {
    /// No keys yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many keys were listed.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing was listed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Records a listed key; `false` if it was listed already.
    pub fn insert(&mut self, key: String) -> bool {
        self.0.insert(key)
    }

    /// Whether `key` was listed.
    pub fn contains(&self, key: &str) -> bool {
        self.0.contains(key)
    }
}

/// How to build a [`DeltaFifo`].
pub struct DeltaFifoOptions<K> {
    /// The key function; [`meta_namespace_key`] by default.
    pub key_func: KeyFunc<K>,
    /// The consumer's store, used by relists to find deletions and by resyncs.
    pub known_objects: Option<Arc<dyn KnownObjects<K>>>,
    /// Queue `Replaced` rather than `Sync` for objects a relist lists (client-go's default is
    /// `false` for compatibility; informers set it).
    pub emit_delta_type_replaced: bool,
    /// Applied to objects before they are queued.
    pub transformer: Option<TransformFunc<K>>,
}

impl<K: Resource> Default for DeltaFifoOptions<K> {
    fn default() -> Self {
        Self {
            key_func: meta_namespace_key::<K>,
            known_objects: None,
            emit_delta_type_replaced: false,
            transformer: None,
        }
    }
}

struct Inner<K> {
    items: HashMap<String, Vec<Delta<K>>, RandomState>,
    queue: VecDeque<String>,
    /// Set by the first replace or any add, update or delete.
    populated: bool,
    /// How many queued keys of the first replace are still to be popped.
    initial_population_count: usize,
    closed: bool,
}

/// client-go's `DeltaFIFO`; see the module docs.
///
/// ```
/// use ctrlkit_cache::{Delta, DeltaFifo, DeltaFifoOptions};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::ObjectMeta;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let fifo = DeltaFifo::new(DeltaFifoOptions::<ConfigMap>::default());
/// let cm = |rv: &str| ConfigMap {
///     metadata: ObjectMeta {
///         name: Some("a".into()),
///         namespace: Some("ns".into()),
///         resource_version: Some(rv.into()),
///         ..Default::default()
///     },
///     ..Default::default()
/// };
/// fifo.add(cm("1")).unwrap();
/// fifo.update(cm("2")).unwrap();
/// let types = fifo
///     .pop(|key, deltas, _initial| {
///         assert_eq!(key, "ns/a");
///         deltas.iter().map(Delta::delta_type).collect::<Vec<_>>()
///     })
///     .await
///     .unwrap();
/// assert_eq!(types.len(), 2);
/// # }
/// ```
pub struct DeltaFifo<K> {
    inner: Mutex<Inner<K>>,
    notify: Notify,
    /// Woken when the FIFO becomes synced.
    synced: Notify,
    /// Set once, under the lock, when the FIFO becomes synced (it never becomes unsynced);
    /// read without the lock, so that code run by a pop (which holds it), such as a handler
    /// called inline, can ask.
    is_synced: AtomicBool,
    key_func: KeyFunc<K>,
    known_objects: Option<Arc<dyn KnownObjects<K>>>,
    emit_delta_type_replaced: bool,
    transformer: Option<TransformFunc<K>>,
}

impl<K> std::fmt::Debug for DeltaFifo<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.lock();
        f.debug_struct("DeltaFifo")
            .field("queued", &inner.queue.len())
            .field("populated", &inner.populated)
            .field("closed", &inner.closed)
            .finish()
    }
}

impl<K: Clone> DeltaFifo<K> {
    /// An empty FIFO.
    pub fn new(options: DeltaFifoOptions<K>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                items: HashMap::default(),
                queue: VecDeque::new(),
                populated: false,
                initial_population_count: 0,
                closed: false,
            }),
            notify: Notify::new(),
            synced: Notify::new(),
            is_synced: AtomicBool::new(false),
            key_func: options.key_func,
            known_objects: options.known_objects,
            emit_delta_type_replaced: options.emit_delta_type_replaced,
            transformer: options.transformer,
        }
    }

    /// The key of an object.
    pub fn key_of(&self, obj: &K) -> Result<String, KeyError> {
        (self.key_func)(obj)
    }

    /// Queues an `Added` delta.
    pub fn add(&self, obj: impl Into<Arc<K>>) -> Result<(), KeyError> {
        self.queue_change(obj.into(), DeltaType::Added)
    }

    /// Queues an `Updated` delta.
    pub fn update(&self, obj: impl Into<Arc<K>>) -> Result<(), KeyError> {
        self.queue_change(obj.into(), DeltaType::Updated)
    }

    fn queue_change(&self, obj: Arc<K>, action: DeltaType) -> Result<(), KeyError> {
        let obj = self.prepare(obj);
        let key = self.key_of(&obj)?;
        let mut inner = self.inner.lock();
        inner.populated = true;
        self.queue_action(&mut inner, key, action, obj);
        self.notify.notify_waiters();
        self.wake_if_synced(&inner);
        Ok(())
    }

    /// Queues a `Deleted` delta, unless the key is neither queued nor known (then the object
    /// is taken to be deleted already and nothing is queued).
    pub fn delete(&self, obj: impl Into<Arc<K>>) -> Result<(), KeyError> {
        let obj = self.prepare(obj.into());
        let key = self.key_of(&obj)?;
        let mut inner = self.inner.lock();
        inner.populated = true;
        self.wake_if_synced(&inner);
        let queued = inner.items.contains_key(&key);
        let known = match &self.known_objects {
            Some(known) => known.get_by_key(&key).is_some(),
            None => false,
        };
        if !queued && !known {
            return Ok(());
        }
        self.queue_action(&mut inner, key, DeltaType::Deleted, obj);
        self.notify.notify_waiters();
        Ok(())
    }

    /// Every queued key's newest object (a tombstone's last known state for inferred deletions).
    pub fn list(&self) -> Vec<Arc<K>> {
        let inner = self.inner.lock();
        inner
            .items
            .values()
            .filter_map(|deltas| deltas.last().and_then(Delta::object).cloned())
            .collect()
    }

    /// Every queued key, in the order they will be popped.
    pub fn list_keys(&self) -> Vec<String> {
        self.inner.lock().queue.iter().cloned().collect()
    }

    /// A copy of the deltas queued for `obj`'s key.
    pub fn get(&self, obj: &K) -> Result<Option<Deltas<K>>, KeyError> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(&key))
    }

    /// A copy of the deltas queued for `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        let inner = self.inner.lock();
        inner.items.get(key).map(|deltas| Deltas(deltas.clone()))
    }

    /// The number of queued keys.
    pub fn len(&self) -> usize {
        self.inner.lock().queue.len()
    }

    /// Whether no key is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replaces the content with `list`, as a relist does: each object is queued as `Replaced`
    /// (or `Sync`), and every key queued or known but not listed gets a `Deleted` tombstone.
    /// Objects without a key are skipped; the first such error is returned after the rest are
    /// queued.
    pub fn replace(&self, list: impl IntoIterator<Item = Arc<K>>) -> Result<(), KeyError> {
        let mut listed = ListedKeys::new();
        let result = self.replace_page(list, &mut listed);
        self.replace_finish(listed);
        result
    }

    /// Queues one page of a relist, remembering its keys in `listed`. Pages may be queued as
    /// they arrive, so a large list never sits in memory twice;
    /// [`replace_finish`](Self::replace_finish) then queues the deletions. Objects without a key are skipped; the
    /// first such error is returned after the rest are queued.
    pub fn replace_page(
        &self,
        page: impl IntoIterator<Item = Arc<K>>,
        listed: &mut ListedKeys,
    ) -> Result<(), KeyError> {
        let action = if self.emit_delta_type_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        };
        let mut first_error = None;
        // Transform outside the lock: pops go on meanwhile.
        let page: Vec<Arc<K>> = page.into_iter().map(|obj| self.prepare(obj)).collect();
        // Room for the page at once, rather than tables rehashed as they double.
        listed.0.reserve(page.len());
        let mut inner = self.inner.lock();
        inner.items.reserve(page.len());
        inner.queue.reserve(page.len());
        for obj in page {
            let key = match self.key_of(&obj) {
                Ok(key) => key,
                Err(err) => {
                    first_error.get_or_insert(err);
                    continue;
                }
            };
            listed.0.insert(key.clone());
            self.queue_action(&mut inner, key, action, obj);
        }
        // Once for the page: a popper wakes to a queue of its keys.
        self.notify.notify_waiters();
        match first_error {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Ends a relist whose pages went through [`replace_page`](Self::replace_page): every key
    /// queued or known that was not listed gets a `Deleted` tombstone carrying the newest
    /// queued object, or else the known one.
    pub fn replace_finish(&self, listed: ListedKeys) {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let unlisted_queued: Vec<(String, Option<Arc<K>>)> = inner
            .items
            .iter()
            .filter(|(key, _)| !listed.0.contains(key.as_str()))
            .map(|(key, deltas)| (key.clone(), deltas.last().and_then(Delta::object).cloned()))
            .collect();
        for (key, obj) in unlisted_queued {
            self.push_tombstone(inner, key, obj);
        }
        if let Some(known) = &self.known_objects {
            for key in known.list_keys_not_in(&listed) {
                if inner.items.get(&key).is_some_and(|d| !d.is_empty()) {
                    continue;
                }
                let obj = known.get_by_key(&key);
                if obj.is_none() {
                    tracing::info!(
                        key,
                        "key vanished from the known objects; tombstone without object"
                    );
                }
                self.push_tombstone(inner, key, obj);
            }
        }
        self.notify.notify_waiters();
        if !inner.populated {
            inner.populated = true;
            // Everything queued now belongs to the first relist: before it only a resync can
            // queue, and the relist lists or tombstones each such key. Counting the queue rather
            // than the listed keys stays right when keys were popped between pages and listed
            // again, or when an abandoned relist queued pages before this one.
            inner.initial_population_count = inner.queue.len();
        }
        self.wake_if_synced(inner);
    }

    /// Queues a `Sync` delta for every known key that has nothing queued.
    pub fn resync(&self) {
        let Some(known) = &self.known_objects else {
            return;
        };
        let mut inner = self.inner.lock();
        for key in known.list_keys() {
            let Some(obj) = known.get_by_key(&key) else {
                continue;
            };
            let key = match self.key_of(&obj) {
                Ok(key) => key,
                Err(err) => {
                    tracing::warn!(key, %err, "cannot resync an object without a key");
                    continue;
                }
            };
            if inner.items.get(&key).is_some_and(|d| !d.is_empty()) {
                continue;
            }
            // A resync carries the stored object: already transformed.
            self.queue_action(&mut inner, key, DeltaType::Sync, obj);
        }
        self.notify.notify_waiters();
    }

    /// Whether the first relist (or an earlier add, update or delete) has been queued and every
    /// key the first relist queued has been popped.
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

    /// Closes the FIFO: pending and future pops return [`FifoClosed`] once it is empty.
    pub fn close(&self) {
        self.inner.lock().closed = true;
        self.notify.notify_waiters();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.lock().closed
    }

    /// Waits for a key, takes all its deltas off the queue and hands them to `process`, with
    /// the key and whether the FIFO had not synced yet (the deltas belong to the initial list).
    ///
    /// `process` runs under the FIFO's lock, like client-go's: nothing is queued meanwhile,
    /// and [`has_synced`](Self::has_synced) turns true only once the last key of the first
    /// relist has been processed. Keep it short.
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

    /// As [`pop`](Self::pop), but without waiting: `None` when no key is queued.
    pub(crate) fn try_pop<R>(&self, process: impl FnOnce(&str, Deltas<K>, bool) -> R) -> Option<R> {
        self.pop_queued(&mut self.inner.lock(), process).ok()
    }

    /// Pops the first queued key into `process` under the held lock; hands `process` back when
    /// nothing is queued.
    fn pop_queued<R, F: FnOnce(&str, Deltas<K>, bool) -> R>(
        &self,
        inner: &mut Inner<K>,
        process: F,
    ) -> Result<R, F> {
        while let Some(key) = inner.queue.pop_front() {
            let is_in_initial_list = !(inner.populated && inner.initial_population_count == 0);
            if inner.initial_population_count > 0 {
                inner.initial_population_count -= 1;
            }
            let Some(deltas) = inner.items.remove(&key) else {
                tracing::error!(key, "queued key without deltas; skipped");
                continue;
            };
            let result = process(&key, Deltas(deltas), is_in_initial_list);
            if is_in_initial_list {
                self.wake_if_synced(inner);
            }
            return Ok(result);
        }
        Err(process)
    }

    fn prepare(&self, obj: Arc<K>) -> Arc<K> {
        prepare(self.transformer.as_ref(), obj)
    }

    fn queue_action(&self, inner: &mut Inner<K>, key: String, action: DeltaType, obj: Arc<K>) {
        self.push_delta(inner, key, Delta::of_type(action, obj));
    }

    /// Queues an inferred deletion of `key`, carrying its last known state.
    fn push_tombstone(&self, inner: &mut Inner<K>, key: String, obj: Option<Arc<K>>) {
        let tombstone = DeletedFinalStateUnknown {
            key: key.clone(),
            obj,
        };
        self.push_delta(
            inner,
            key,
            Delta::Deleted(ObjectOrTombstone::Tombstone(tombstone)),
        );
    }

    /// Queues `delta` under `key`. The caller wakes the poppers once it has queued everything it
    /// queues under this lock: one wake-up per page of a relist, not per object.
    fn push_delta(&self, inner: &mut Inner<K>, key: String, delta: Delta<K>) {
        match inner.items.get_mut(&key) {
            Some(deltas) => {
                deltas.push(delta);
                dedup_deltas(deltas);
            }
            None => {
                inner.queue.push_back(key.clone());
                inner.items.insert(key, vec![delta]);
            }
        }
    }
}

/// Applies the transformer, if there is one: both FIFOs prepare what they queue this way.
pub(crate) fn prepare<K: Clone>(transformer: Option<&TransformFunc<K>>, obj: Arc<K>) -> Arc<K> {
    match transformer {
        None => obj,
        Some(transform) => Arc::new(transform(Arc::unwrap_or_clone(obj))),
    }
}

/// Waits until `done` holds, woken by `notify` (registered before each check, so a wake
/// between the check and the wait is not lost).
pub(crate) async fn wait_until(notify: &Notify, done: impl Fn() -> bool) {
    loop {
        let woken = notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if done() {
            return;
        }
        woken.await;
    }
}

/// Collapses the last two deltas when both are deletions, keeping the newer unless it is a
/// tombstone (the observed deletion carries the better final state).
fn dedup_deltas<K>(deltas: &mut Vec<Delta<K>>) {
    let n = deltas.len();
    if n < 2 {
        return;
    }
    if let (Delta::Deleted(_), Delta::Deleted(newer)) = (&deltas[n - 2], &deltas[n - 1]) {
        if newer.is_tombstone() {
            deltas.pop();
        } else {
            deltas.swap_remove(n - 2);
        }
    }
}
