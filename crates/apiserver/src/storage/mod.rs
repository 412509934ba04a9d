//! The server's storage: every object by resource, namespace and name; one global, strictly
//! increasing resourceVersion; and the recent history of changes that watches are served from.
//!
//! Objects are kept as JSON (`serde_json::Value`) behind `Arc`s, so a read never copies one, and
//! each stored state is serialized at most once ([`StoredObject`]): the write's response, every
//! list page and every watcher share the bytes. All writes go through one lock, which makes the
//! resourceVersion order the order watchers see.
//!
//! A store opened on a data directory ([`Store::open`]) is durable: each change is in its
//! write-ahead log, fsynced, before the write returns or a reader or watcher sees it, and a
//! restart recovers every object with its resourceVersion, and the recent history for watches.
//! Writes are logged under the lock and synced by one thread after it is let go, so that the
//! writes made meanwhile share the next fsync (group commit, [`group_commit`]); until then
//! they are pending: later writes build on them, reads see the state before them.

mod as_of;
mod crd_cleanup;
mod data_dir;
pub(crate) mod durability;
mod error;
mod event;
mod footprint;
mod gc;
mod group_commit;
mod history;
pub(crate) mod meta;
mod object_meta;
mod preconditions;
mod remaining_counts;
mod stored;
mod wal;
mod watch;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::{Condvar, Mutex, MutexGuard};
use serde_json::{Map, Value};

pub use self::crd_cleanup::{CRD_CLEANUP_FINALIZER, is_terminating};
pub use self::data_dir::{PersistError, Recovery, TruncatedTail};
pub use self::error::{Cause, StoreError, causes_text};
pub(crate) use self::event::watch_line;
pub use self::event::{EventType, WatchEvent};
pub use self::gc::{FOREGROUND_DELETION, Propagation};
pub(crate) use self::meta::{now_timestamp, random_suffix};
use self::object_meta::meta_causes;
pub(crate) use self::object_meta::{label_key_problems, label_value_problems};
pub use self::preconditions::Preconditions;
pub use self::stored::StoredObject;
use self::watch::Watchers;
pub use self::watch::{Watch, WatchError};

use self::data_dir::{AppendError, DataDir};
use self::footprint::Footprint;
use self::history::History;
pub use self::history::HistoryUsage;
use self::meta::{
    has_finalizers, mark_deleted, metadata_mut, name_causes, same_spec, set_status_from,
};
use self::remaining_counts::{RemainingCounts, Snapshot};
use crate::resource::{ResourceKey, ResourceKind, builtin_resources};

/// How much a store remembers.
///
/// The history that watches resume from keeps at least the newest `history` changes, and every
/// change made within `history_age` of the newest, but never more than `history_bytes` of
/// memory: a watch from an older resourceVersion gets 410 Expired.
///
/// ```
/// use std::time::Duration;
/// use ctrlkit_apiserver::storage::StoreConfig;
///
/// // A server whose objects are large and change often: 64 MiB of history at most.
/// let config = StoreConfig {
///     history_bytes: 64 << 20,
///     ..StoreConfig::default()
/// };
/// assert_eq!(config.history_age, Duration::from_secs(75));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct StoreConfig {
    /// How many changes are kept for watches to resume from, at least (while they fit in
    /// `history_bytes`). A durable store ([`Store::open`]) also snapshots its state every
    /// `history` changes, and keeps enough of its log to restore this many after a restart.
    pub history: usize,
    /// Beyond `history`, changes made within this long before the newest are kept too (while
    /// they fit in `history_bytes`), as kube-apiserver's watch cache keeps 75 s of them: a
    /// watcher that falls that far behind under a fast writer can still resume.
    pub history_age: std::time::Duration,
    /// The most memory the kept changes may take, the oldest let go first. A change is counted
    /// as its object's [`StoredObject::footprint`] (a tree weighs ten to fifteen times its
    /// JSON) and the event's few hundred bytes.
    pub history_bytes: usize,
    /// How many changes a watcher may fall behind before its watch is closed.
    pub watch_buffer: usize,
    /// How much memory of changes (counted as for `history_bytes`) a watcher may fall behind
    /// before its watch is closed. Watchers share the changes they hold, so this also bounds
    /// what all the watchers together hold beyond the history.
    pub watch_buffer_bytes: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            history: 10_000,
            history_age: std::time::Duration::from_secs(75),
            history_bytes: 128 << 20,
            watch_buffer: 10_000,
            watch_buffer_bytes: 64 << 20,
        }
    }
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// resourceVersion "" or "0": an `ADDED` event for every current object, then the changes.
    Current,
    /// resourceVersion R: every change after R, in order, nothing before.
    After(u64),
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// The object is gone; this was its last state.
    Gone(Arc<StoredObject>),
    /// The object has finalizers: it is marked for deletion and stays until they are removed.
    Finalizing(Arc<StoredObject>),
}

/// The objects of one resource by namespace and name.
pub(crate) type Objects = BTreeMap<(String, String), Arc<StoredObject>>;

struct State {
    /// The newest resourceVersion issued (pending changes included).
    issued: u64,
    objects: HashMap<ResourceKey, Objects>,
    history: History,
    /// Changes up to this resourceVersion are no longer in `history`.
    compacted: u64,
    /// The newest resourceVersion readers and watchers see: every change up to it is durable
    /// (in memory: every change). Changes after it are `pending`.
    visible: u64,
    /// The changes of the write holding the lock, not yet logged, each with its object's name;
    /// see [`Store::publish`].
    unlogged: Vec<(Arc<WatchEvent>, String)>,
    /// Changes logged but not yet durable, oldest first: in `objects` and `history` for the
    /// writes that follow, hidden from readers and watchers.
    pending: VecDeque<(Arc<WatchEvent>, String)>,
    /// The writers waiting for a resourceVersion to be durable.
    waiters: Vec<(u64, durability::Waiter)>,
    /// Set when the store is dropped: the group-commit thread ends.
    closing: bool,
    /// The live watchers, each with its buffer.
    watchers: Watchers,
    /// `visible`, for watchers to read without the lock.
    published: Arc<AtomicU64>,
    /// The data directory of a durable store.
    data: Option<DataDir>,
    /// Why the data directory stopped taking writes; the store is read-only from then on.
    failed: Option<String>,
}

impl State {
    fn empty() -> Self {
        Self {
            issued: 0,
            objects: HashMap::new(),
            history: History::default(),
            compacted: 0,
            visible: 0,
            unlogged: Vec::new(),
            pending: VecDeque::new(),
            waiters: Vec::new(),
            closing: false,
            watchers: Watchers::default(),
            published: Arc::new(AtomicU64::new(0)),
            data: None,
            failed: None,
        }
    }
}

/// The object store of the embedded API server.
///
/// ```
/// use ctrlkit_apiserver::resource::builtin_resources;
/// use ctrlkit_apiserver::storage::{EventType, Store, WatchStart};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let configmaps = builtin_resources().into_iter().find(|r| r.plural == "configmaps").unwrap();
/// let store = Store::default();
/// let from = store.resource_version();
/// let mut watch = store.watch(&configmaps, Some("default"), WatchStart::After(from)).unwrap();
///
/// let created = store
///     .create(&configmaps, "default", serde_json::json!({"metadata": {"name": "settings"}}))
///     .unwrap();
/// assert_eq!(created["metadata"]["resourceVersion"], (from + 1).to_string());
///
/// let event = watch.next().await.unwrap().unwrap();
/// assert_eq!(event.event_type, EventType::Added);
/// assert_eq!(event.resource_version, from + 1);
/// # }
/// ```
pub struct Store {
    /// Shared with the group-commit thread of a durable store.
    state: Arc<Mutex<State>>,
    /// Wakes the group-commit thread: changes were logged, or the store closes.
    logged: Arc<Condvar>,
    /// The group-commit thread of a durable store.
    syncer: Option<std::thread::JoinHandle<()>>,
    /// Set by every deletion: the garbage collector has work.
    gc_needed: std::sync::atomic::AtomicBool,
    config: StoreConfig,
    namespaces: ResourceKind,
    recovery: Option<Recovery>,
    /// How many objects followed the recent list pages.
    remaining_counts: RemainingCounts,
}

impl Store {
    /// An empty store with the namespaces every cluster starts with (`default`, `kube-system`,
    /// `kube-public`, `kube-node-lease`).
    pub fn new(config: StoreConfig) -> Self {
        let store = Self::with_state(config, State::empty(), None);
        store.create_default_namespaces();
        store
    }

    /// A durable store on the data directory `path` (created if need be): the state it holds is
    /// recovered (see [`Recovery`]), and every change from now on is in its write-ahead log,
    /// fsynced, before the write returns or a watcher sees it. A new directory starts with the
    /// namespaces of [`Store::new`].
    ///
    /// ```
    /// use ctrlkit_apiserver::resource::builtin_resources;
    /// use ctrlkit_apiserver::storage::{Store, StoreConfig};
    ///
    /// let dir = std::env::temp_dir().join(format!("ctrlkit-doc-{}", std::process::id()));
    /// let configmaps = builtin_resources().into_iter().find(|r| r.plural == "configmaps").unwrap();
    /// let written = {
    ///     let store = Store::open(StoreConfig::default(), &dir).unwrap();
    ///     let object = serde_json::json!({"metadata": {"name": "settings"}});
    ///     store.create(&configmaps, "default", object).unwrap()
    /// };
    /// let reopened = Store::open(StoreConfig::default(), &dir).unwrap();
    /// assert_eq!(reopened.get(&configmaps, "default", "settings").unwrap(), written);
    /// assert!(reopened.recovery().unwrap().truncated.is_none());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn open(config: StoreConfig, path: &Path) -> Result<Self, PersistError> {
        let (data, recovered) = DataDir::open(path, &config)?;
        let state = State {
            issued: recovered.resource_version,
            objects: recovered.objects,
            history: History::recovered(recovered.history),
            compacted: recovered.compacted,
            visible: recovered.resource_version,
            unlogged: Vec::new(),
            pending: VecDeque::new(),
            waiters: Vec::new(),
            closing: false,
            watchers: Watchers::default(),
            published: Arc::new(AtomicU64::new(recovered.resource_version)),
            data: Some(data),
            failed: None,
        };
        let fresh = state.issued == 0;
        let mut store = Self::with_state(config, state, Some(recovered.report));
        let syncer = group_commit::Syncer {
            state: Arc::clone(&store.state),
            logged: Arc::clone(&store.logged),
            config,
        };
        store.syncer = Some(
            std::thread::Builder::new()
                .name("ctrlkit-group-commit".to_string())
                .spawn(move || syncer.run())
                .map_err(|source| PersistError::Io {
                    action: "start the log's sync thread for",
                    path: path.to_path_buf(),
                    source,
                })?,
        );
        // Owners may have gone while their dependents stayed: let the collector look.
        store
            .gc_needed
            .store(true, std::sync::atomic::Ordering::Release);
        if fresh {
            store.create_default_namespaces();
        }
        Ok(store)
    }

    /// What opening the data directory found and did; `None` for a store in memory only.
    pub fn recovery(&self) -> Option<&Recovery> {
        self.recovery.as_ref()
    }

    fn with_state(config: StoreConfig, state: State, recovery: Option<Recovery>) -> Self {
        let namespaces = builtin_resources()
            .into_iter()
            .find(|kind| kind.group.is_empty() && kind.plural == "namespaces")
            .unwrap_or_else(|| unreachable!("the built-in resources include namespaces"));
        Self {
            gc_needed: std::sync::atomic::AtomicBool::new(false),
            state: Arc::new(Mutex::new(state)),
            logged: Arc::new(Condvar::new()),
            syncer: None,
            config,
            namespaces,
            recovery,
            remaining_counts: RemainingCounts::default(),
        }
    }

    fn create_default_namespaces(&self) {
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let namespace = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            });
            let kind = self.namespaces.clone();
            // A fixed, valid name in an empty store: this fails only if the data directory does,
            // and then every later write reports it.
            if let Err(error) = self.create(&kind, "", namespace) {
                tracing::error!(%error, namespace = name, "could not create a default namespace");
            }
        }
    }

    /// The newest resourceVersion readers see (of a durable store: the newest durable one).
    pub fn resource_version(&self) -> u64 {
        self.state.lock().visible
    }

    /// How many changes the history keeps for watches now, and their size (see
    /// [`StoreConfig`]).
    pub fn history_usage(&self) -> HistoryUsage {
        self.state.lock().history.usage()
    }

    /// Changes up to this resourceVersion are no longer kept: a watch or a continued list from an
    /// older one gets 410 Expired.
    pub fn compacted(&self) -> u64 {
        self.state.lock().compacted
    }

    /// Creates `object` (in `namespace` when the resource is namespaced).
    pub fn create(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        object: Value,
    ) -> Result<Arc<StoredObject>, StoreError> {
        self.create_as(kind, namespace, object, false)
    }

    /// What [`create`](Store::create) would store, checked as it checks (names, namespace,
    /// clashes), without storing it (`dryRun=All`): the object has its name, uid and
    /// creationTimestamp, and no resourceVersion.
    pub fn create_dry_run(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        object: Value,
    ) -> Result<Arc<StoredObject>, StoreError> {
        self.create_as(kind, namespace, object, true)
    }

    fn create_as(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        mut object: Value,
        dry_run: bool,
    ) -> Result<Arc<StoredObject>, StoreError> {
        let namespace = if kind.namespaced { namespace } else { "" };
        set_type(kind, &mut object);
        let metadata = metadata_mut(&mut object)?;
        if metadata
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| !rv.is_empty())
        {
            return Err(StoreError::BadRequest(
                "resourceVersion should not be set on objects to be created".to_string(),
            ));
        }
        let given_name = meta::string_field(metadata, "name")
            .unwrap_or("")
            .to_string();
        let generate_name = meta::string_field(metadata, "generateName")
            .unwrap_or("")
            .to_string();
        if given_name.is_empty() && generate_name.is_empty() {
            return Err(invalid(
                kind,
                "",
                vec![Cause {
                    reason: "FieldValueRequired",
                    field: "metadata.name".to_string(),
                    message: "Required value: name or generateName is required".to_string(),
                }],
            ));
        }
        let label_only = kind.plural == "namespaces" && kind.group.is_empty();
        let check_name = if given_name.is_empty() {
            format!("{generate_name}abcde")
        } else {
            given_name.clone()
        };
        let mut causes = name_causes(&check_name, label_only);
        causes.extend(meta_causes(metadata, core_finalizer_rule(kind)));
        if !causes.is_empty() {
            return Err(invalid(kind, &given_name, causes));
        }
        // A uid the caller set is kept (kube-apiserver's handler sets it before its strategies
        // run; the REST layer here does the same); one is made otherwise.
        if meta::string_field(metadata, "uid").is_none_or(str::is_empty) {
            metadata.insert(
                "uid".into(),
                Value::String(uuid::Uuid::new_v4().to_string()),
            );
        }
        metadata.insert("creationTimestamp".into(), Value::String(now_timestamp()));
        metadata.remove("deletionTimestamp");
        metadata.remove("deletionGracePeriodSeconds");
        if kind.tracks_generation {
            metadata.insert("generation".into(), Value::from(1));
        }
        if kind.namespaced {
            metadata.insert("namespace".into(), Value::String(namespace.to_string()));
        } else {
            metadata.remove("namespace");
        }
        if is_namespaces(kind) {
            // A `spec` that is not an object is refused, as kube-apiserver's decoding refuses it
            // (indexing into it to add the finalizer would panic).
            match &object["spec"] {
                Value::Null | Value::Object(_) => {}
                _ => {
                    return Err(StoreError::BadRequest(
                        "spec must be a JSON object".to_string(),
                    ));
                }
            }
            if object["spec"]["finalizers"].is_null() {
                object["spec"]["finalizers"] = serde_json::json!(["kubernetes"]);
            }
            object["status"] = serde_json::json!({"phase": "Active"});
        }

        let mut state = self.lock_for_write()?;
        if kind.namespaced {
            self.check_namespace(&state, kind, namespace, &given_name)?;
        }
        let objects = state.objects.entry(kind.key()).or_default();
        let name = if given_name.is_empty() {
            // Retry on a clash, as kube-apiserver does.
            let mut name = format!("{generate_name}{}", random_suffix());
            for _ in 0..8 {
                if !objects.contains_key(&(namespace.to_string(), name.clone())) {
                    break;
                }
                name = format!("{generate_name}{}", random_suffix());
            }
            name
        } else {
            given_name
        };
        if let Ok(metadata) = metadata_mut(&mut object) {
            metadata.insert("name".into(), Value::String(name.clone()));
        }
        // etcd refuses a request too large before its transaction finds the key taken.
        let estimate = fit_in_storage(&mut object)?;
        if objects.contains_key(&(namespace.to_string(), name.clone())) {
            return Err(StoreError::AlreadyExists {
                resource: kind.qualified_name(),
                name,
            });
        }
        if dry_run {
            return Ok(Arc::new(StoredObject::with_estimate(object, estimate)));
        }
        let created = self.commit_object(
            &mut state,
            &kind.key(),
            namespace,
            &name,
            object,
            Some(estimate),
            EventType::Added,
        );
        self.publish(state)?;
        Ok(created)
    }

    fn check_namespace(
        &self,
        state: &State,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
    ) -> Result<(), StoreError> {
        let found = state
            .objects
            .get(&self.namespaces.key())
            .and_then(|namespaces| namespaces.get(&(String::new(), namespace.to_string())));
        match found {
            None => Err(StoreError::NotFound {
                resource: "namespaces".to_string(),
                name: namespace.to_string(),
            }),
            Some(found) if found["metadata"].get("deletionTimestamp").is_some() => {
                Err(StoreError::NamespaceTerminating {
                    resource: kind.qualified_name(),
                    name: name.to_string(),
                    namespace: namespace.to_string(),
                })
            }
            Some(_) => Ok(()),
        }
    }

    /// The object `name` (in `namespace` when namespaced).
    pub fn get(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<StoredObject>, StoreError> {
        let namespace = if kind.namespaced { namespace } else { "" };
        let resource = kind.key();
        let state = self.state.lock();
        // A pending change hides what it changed: the object is as its oldest pending change
        // found it.
        let pending = state.pending.iter().find(|(event, event_name)| {
            event.resource == resource && event.namespace == namespace && event_name == name
        });
        let found = match pending {
            Some((event, _)) if event.event_type == EventType::Added => None,
            Some((event, _)) => event.previous.clone(),
            None => latest(&state, &resource, namespace, name),
        };
        found.ok_or_else(|| not_found(kind, name))
    }

    /// The object `name` with the pending changes of a durable store: what a write that
    /// computes its change from the current object starts from. Not for answers to readers:
    /// what it returns may not be durable yet (see [`durability`]).
    pub(crate) fn get_latest(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<StoredObject>, StoreError> {
        let namespace = if kind.namespaced { namespace } else { "" };
        latest(&self.state.lock(), &kind.key(), namespace, name)
            .ok_or_else(|| not_found(kind, name))
    }

    /// Every object of the resource (in `namespace`, if given), sorted by namespace and name,
    /// with the resourceVersion of the list.
    pub fn list(
        &self,
        kind: &ResourceKind,
        namespace: Option<&str>,
    ) -> (Vec<Arc<StoredObject>>, u64) {
        let page = self.list_page(kind, namespace, None, 0, false, |_| true);
        (page.items, page.resource_version)
    }

    /// [`list`](Store::list) with the pending changes of a durable store, for writes that
    /// decide by what is stored (names taken, addresses allocated); as
    /// [`get_latest`](Store::get_latest), not for answers to readers.
    pub(crate) fn list_latest(
        &self,
        kind: &ResourceKind,
        namespace: Option<&str>,
    ) -> Vec<Arc<StoredObject>> {
        let state = self.state.lock();
        state
            .objects
            .get(&kind.key())
            .zip(page_range(None, namespace.filter(|_| kind.namespaced)))
            .map(|(objects, range)| objects.range(range).map(|(_, o)| Arc::clone(o)).collect())
            .unwrap_or_default()
    }

    /// One page of a list: up to `limit` objects (0: no limit) that `select` accepts, in key
    /// order, starting after the key `after` (`namespace`, `name`); with `count_remaining`,
    /// also how many objects follow (all of them: only meaningful when `select` takes all).
    /// Finding the page's start costs O(log n); counting what follows walks the map without
    /// looking at the objects.
    pub fn list_page(
        &self,
        kind: &ResourceKind,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: usize,
        count_remaining: bool,
        select: impl FnMut(&Value) -> bool,
    ) -> ListPage {
        let state = self.state.lock();
        if !state.pending.is_empty() {
            // The pending changes are undone from the history, as for an older list.
            let visible = state.visible;
            let page = self.page_as_of(
                &state,
                kind,
                namespace,
                after,
                limit,
                count_remaining,
                visible,
                select,
            );
            // Pending changes are never let go from the history, so this cannot expire.
            return page.unwrap_or_else(|_| ListPage::empty(visible));
        }
        let namespace = namespace.filter(|_| kind.namespaced);
        let resource = kind.key();
        let (Some(objects), Some(range)) =
            (state.objects.get(&resource), page_range(after, namespace))
        else {
            let none = std::iter::empty();
            return ListPage::fill(state.issued, none, 0, false, select, |_, _| 0);
        };
        let end = range.1.clone();
        let list = Snapshot {
            resource: &resource,
            namespace,
            resource_version: state.issued,
        };
        ListPage::fill(
            state.issued,
            objects.range(range),
            limit,
            count_remaining,
            select,
            |last, taken| {
                self.count_remaining(list, after, last, taken, || {
                    objects.range((Bound::Excluded(last.clone()), end)).count()
                })
            },
        )
    }

    /// How many objects of `list` follow the page that ends at `last`, having handed out
    /// `taken` after `after`: the count of the page that ended at `after`, less `taken`, where
    /// that page was counted; otherwise `count()`. Either way it is kept for the page after
    /// this one.
    fn count_remaining(
        &self,
        list: Snapshot<'_>,
        after: Option<(&str, &str)>,
        last: &(String, String),
        taken: usize,
        count: impl FnOnce() -> usize,
    ) -> usize {
        let before = after.and_then(|after| self.remaining_counts.after(list, after));
        let remaining = match before {
            Some(before) => before.saturating_sub(taken),
            None => count(),
        };
        self.remaining_counts.record(list, last, remaining);
        remaining
    }

    /// Replaces the object `name` with `object` (PUT). With `status_only`, only its `status`
    /// changes (the `status` subresource). Returns the stored object and whether it was created
    /// (resources that create on update).
    pub fn update(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        object: Value,
        status_only: bool,
    ) -> Result<(Arc<StoredObject>, bool), StoreError> {
        self.update_as(kind, namespace, name, object, status_only, false)
    }

    /// What [`update`](Store::update) would store, checked as it checks, without storing it
    /// (`dryRun=All`): the object keeps the stored resourceVersion.
    pub fn update_dry_run(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        object: Value,
        status_only: bool,
    ) -> Result<(Arc<StoredObject>, bool), StoreError> {
        self.update_as(kind, namespace, name, object, status_only, true)
    }

    fn update_as(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        mut object: Value,
        status_only: bool,
        dry_run: bool,
    ) -> Result<(Arc<StoredObject>, bool), StoreError> {
        let namespace = if kind.namespaced { namespace } else { "" };
        set_type(kind, &mut object);
        let body_version = metadata_mut(&mut object)?
            .get("resourceVersion")
            .and_then(Value::as_str)
            .filter(|rv| !rv.is_empty())
            .map(str::to_string);

        let mut state = self.lock_for_write()?;
        let key = (namespace.to_string(), name.to_string());
        let Some(old) = state
            .objects
            .get(&kind.key())
            .and_then(|objects| objects.get(&key))
            .cloned()
        else {
            drop(state);
            if kind.create_on_update && !status_only {
                if let Ok(metadata) = metadata_mut(&mut object) {
                    metadata.insert("name".into(), Value::String(name.to_string()));
                    metadata.remove("resourceVersion");
                }
                return self
                    .create_as(kind, namespace, object, dry_run)
                    .map(|created| (created, true));
            }
            return Err(not_found(kind, name));
        };
        let old_version = old["metadata"]["resourceVersion"].as_str().unwrap_or("");
        match body_version.as_deref() {
            None if kind.requires_resource_version_on_update => {
                return Err(invalid(
                    kind,
                    name,
                    vec![Cause {
                        reason: "FieldValueInvalid",
                        field: "metadata.resourceVersion".to_string(),
                        message: "Invalid value: 0x0: must be specified for an update".to_string(),
                    }],
                ));
            }
            Some(version) if version != old_version => {
                return Err(StoreError::Conflict {
                    resource: kind.qualified_name(),
                    name: name.to_string(),
                });
            }
            _ => {}
        }

        let mut new = if status_only {
            // The old object with the new status; a body without one clears it, as
            // kube-apiserver's status strategies do.
            let mut new = (*old).clone();
            set_status_from(&mut new, &object);
            // The status write's managers are recorded too.
            let managed_fields = object["metadata"].get("managedFields").cloned();
            if let Ok(metadata) = metadata_mut(&mut new) {
                match managed_fields {
                    Some(entries) => metadata.insert("managedFields".into(), entries),
                    None => metadata.remove("managedFields"),
                };
            }
            new
        } else {
            if kind.status_subresource {
                set_status_from(&mut object, &old);
            }
            object
        };
        let no_metadata = Map::new();
        let old_metadata = old["metadata"].as_object().unwrap_or(&no_metadata);
        let metadata = metadata_mut(&mut new)?;
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old_metadata.get(field) {
                Some(value) => metadata.insert(field.into(), value.clone()),
                None => metadata.remove(field),
            };
        }
        metadata.insert("name".into(), Value::String(name.to_string()));
        if kind.namespaced {
            metadata.insert("namespace".into(), Value::String(namespace.to_string()));
        }
        metadata.insert(
            "resourceVersion".into(),
            Value::String(old_version.to_string()),
        );
        let causes = meta_causes(metadata, core_finalizer_rule(kind));
        if !causes.is_empty() {
            return Err(invalid(kind, name, causes));
        }
        if kind.tracks_generation && !same_spec(&new, &old, kind.status_subresource) {
            let generation = old_metadata
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if let Ok(metadata) = metadata_mut(&mut new) {
                metadata.insert(
                    "generation".into(),
                    Value::from(generation.saturating_add(1)),
                );
            }
        }
        if new == **old {
            // Nothing changed: no new resourceVersion, no event, as kube-apiserver.
            self.wait_durable(state, stored_version(&old))?;
            return Ok((old, false));
        }
        let estimate = fit_in_storage(&mut new)?;
        if dry_run {
            self.wait_durable(state, stored_version(&old))?;
            return Ok((Arc::new(StoredObject::with_estimate(new, estimate)), false));
        }
        let finalized = new["metadata"].get("deletionTimestamp").is_some() && !held(kind, &new);
        if finalized {
            let gone = self.commit(
                &mut state,
                &kind.key(),
                namespace,
                name,
                Some(new),
                EventType::Modified,
            );
            let removed = (*gone).clone();
            let deleted = self.commit(
                &mut state,
                &kind.key(),
                namespace,
                name,
                Some(removed),
                EventType::Deleted,
            );
            self.publish(state)?;
            return Ok((deleted, false));
        }
        let updated = self.commit_object(
            &mut state,
            &kind.key(),
            namespace,
            name,
            new,
            Some(estimate),
            EventType::Modified,
        );
        self.publish(state)?;
        Ok((updated, false))
    }

    /// Deletes the object `name`, only if `precondition` holds.
    /// An object with finalizers is only marked (`deletionTimestamp`) until they are removed.
    /// Its dependents go in the background ([`delete_with`](Store::delete_with) chooses).
    pub fn delete<'p>(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        precondition: impl Into<Preconditions<'p>>,
    ) -> Result<Deleted, StoreError> {
        self.delete_with(kind, namespace, name, precondition, Propagation::Background)
    }

    /// Deletes `name` as [`delete`](Store::delete) does, with a propagation policy for its
    /// dependents: in the foreground the object is held by the `foregroundDeletion` finalizer
    /// until they are gone; orphaning removes their references to it first.
    pub fn delete_with<'p>(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        precondition: impl Into<Preconditions<'p>>,
        propagation: Propagation,
    ) -> Result<Deleted, StoreError> {
        self.delete_as(
            kind,
            namespace,
            name,
            precondition.into(),
            propagation,
            false,
        )
    }

    /// What [`delete_with`](Store::delete_with) would do, checked as it checks, without doing
    /// it (`dryRun=All`): an object that would only be marked comes back marked; no dependent
    /// is touched.
    pub fn delete_dry_run<'p>(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        precondition: impl Into<Preconditions<'p>>,
        propagation: Propagation,
    ) -> Result<Deleted, StoreError> {
        self.delete_as(
            kind,
            namespace,
            name,
            precondition.into(),
            propagation,
            true,
        )
    }

    fn delete_as(
        &self,
        kind: &ResourceKind,
        namespace: &str,
        name: &str,
        precondition: Preconditions<'_>,
        propagation: Propagation,
        dry_run: bool,
    ) -> Result<Deleted, StoreError> {
        let namespace = if kind.namespaced { namespace } else { "" };
        let mut state = self.lock_for_write()?;
        let Some(old) = state
            .objects
            .get(&kind.key())
            .and_then(|objects| objects.get(&(namespace.to_string(), name.to_string())))
            .cloned()
        else {
            return Err(not_found(kind, name));
        };
        precondition.check(kind, name, &old)?;
        let foreground = propagation == Propagation::Foreground;
        // A CRD is only marked: its custom resources go first (see `crd_cleanup`).
        let crd_cleanup = kind.is_crd() && old["metadata"].get("deletionTimestamp").is_none();
        if held(kind, &old) || foreground || crd_cleanup {
            if old["metadata"].get("deletionTimestamp").is_some() {
                self.wait_durable(state, stored_version(&old))?;
                return Ok(Deleted::Finalizing(old));
            }
            let mut marked = (*old).clone();
            if is_namespaces(kind) {
                // The status subresource may have stored a status that is not an object.
                if !marked["status"].is_object() {
                    marked["status"] = Value::Object(Map::new());
                }
                marked["status"]["phase"] = Value::String("Terminating".into());
            }
            let metadata = metadata_mut(&mut marked)?;
            if foreground {
                gc::hold_for_dependents(metadata);
            }
            mark_deleted(metadata);
            if crd_cleanup {
                crd_cleanup::mark_terminating(&mut marked);
            }
            if dry_run {
                self.wait_durable(state, stored_version(&old))?;
                return Ok(Deleted::Finalizing(Arc::new(StoredObject::new(marked))));
            }
            let marked = self.commit(
                &mut state,
                &kind.key(),
                namespace,
                name,
                Some(marked),
                EventType::Modified,
            );
            if foreground {
                self.gc_needed
                    .store(true, std::sync::atomic::Ordering::Release);
            }
            self.publish(state)?;
            return Ok(Deleted::Finalizing(marked));
        }
        if dry_run {
            self.wait_durable(state, stored_version(&old))?;
            return Ok(Deleted::Gone(old));
        }
        if propagation == Propagation::Orphan
            && let Some(owner) = old["metadata"]["uid"].as_str()
        {
            self.orphan_dependents(&mut state, owner);
        }
        let last = (*old).clone();
        let gone = self.commit(
            &mut state,
            &kind.key(),
            namespace,
            name,
            Some(last),
            EventType::Deleted,
        );
        self.publish(state)?;
        Ok(Deleted::Gone(gone))
    }

    /// Records one change: a new resourceVersion on the object, the store updated, the event kept
    /// in the history and sent to watchers. For a deletion, `object` is the last state.
    fn commit(
        &self,
        state: &mut State,
        resource: &ResourceKey,
        namespace: &str,
        name: &str,
        object: Option<Value>,
        event_type: EventType,
    ) -> Arc<StoredObject> {
        let object = object.unwrap_or_else(|| Value::Object(Map::new()));
        self.commit_object(state, resource, namespace, name, object, None, event_type)
    }

    /// [`commit`](Self::commit) of `object`; `estimate`, if [`fit_in_storage`] made it, is kept
    /// (brought up to date for the new resourceVersion) rather than worked out again under the
    /// lock.
    #[allow(clippy::too_many_arguments)]
    fn commit_object(
        &self,
        state: &mut State,
        resource: &ResourceKey,
        namespace: &str,
        name: &str,
        mut object: Value,
        estimate: Option<Footprint>,
        event_type: EventType,
    ) -> Arc<StoredObject> {
        state.issued += 1;
        let version = state.issued;
        let mut estimate = estimate;
        if let Ok(metadata) = metadata_mut(&mut object) {
            let key = String::from("resourceVersion");
            let value = Value::String(version.to_string());
            let new = estimate.map(|_| footprint::entry(&key, &value));
            let replaced = metadata.insert(key.clone(), value);
            estimate = estimate.zip(new).map(|(estimate, new)| {
                let old = replaced.map(|old| footprint::entry(&key, &old));
                estimate.replacing(old, new)
            });
        }
        let object = Arc::new(match estimate {
            Some(estimate) => StoredObject::with_estimate(object, estimate),
            None => StoredObject::new(object),
        });
        let objects = state.objects.entry(resource.clone()).or_default();
        let key = (namespace.to_string(), name.to_string());
        let previous = if event_type == EventType::Deleted {
            objects.remove(&key)
        } else {
            objects.insert(key, Arc::clone(&object))
        };
        let previous = previous.filter(|_| event_type != EventType::Added);
        if event_type == EventType::Deleted {
            self.gc_needed
                .store(true, std::sync::atomic::Ordering::Release);
        }
        // The JSON is not made here, under the lock: the first reader makes it.
        let size = history::footprint(&object);
        let event = Arc::new(
            WatchEvent::new(
                event_type,
                resource.clone(),
                namespace.to_string(),
                version,
                Arc::clone(&object),
                previous,
            )
            .with_size(size),
        );
        // Older history is let go in `publish`, once the change is sure to stay.
        state.history.push(Arc::clone(&event));
        state.unlogged.push((event, name.to_string()));
        object
    }

    /// Locks the state for a write; refused once the data directory has failed.
    fn lock_for_write(&self) -> Result<parking_lot::MutexGuard<'_, State>, StoreError> {
        let state = self.state.lock();
        match &state.failed {
            Some(reason) => Err(StoreError::Storage(reason.clone())),
            None => Ok(state),
        }
    }

    /// Logs the changes the write made under the lock and lets the lock go; returns once they
    /// are durable (or, inside [`durability::deferring`], at once, the wait handed to it). In
    /// memory they are published at once. Every write ends here, so an acknowledged change is
    /// durable, and no reader or watcher sees a change that is not.
    ///
    /// If the log cannot be written the changes are taken back, in memory and in the log, and
    /// the write is answered with an error: nobody ever sees them, and the next write tries the
    /// disk again (a full disk that gets room takes writes again). Only if the log cannot be
    /// cut back either does the store turn read-only until it is restarted.
    fn publish(&self, mut state: MutexGuard<'_, State>) -> Result<(), StoreError> {
        let changes = std::mem::take(&mut state.unlogged);
        let Some(last) = changes.last().map(|(event, _)| event.resource_version) else {
            return Ok(());
        };
        let Some(data) = state.data.as_mut() else {
            state.pending.extend(changes);
            let let_go = group_commit::publish_through(&mut state, last, &self.config);
            drop(state);
            drop(let_go);
            return Ok(());
        };
        if let Err(error) = data.append(&changes) {
            let reason = format!("the write-ahead log cannot be written: {error}");
            if matches!(error, AppendError::Unknown(_)) {
                tracing::error!(%reason, "the store takes no more writes");
                state.failed = Some(reason.clone());
            } else {
                tracing::warn!(%reason, "a write was refused and taken back");
            }
            roll_back(&mut state, &changes);
            return Err(StoreError::Storage(reason));
        }
        state.pending.extend(changes);
        self.wait_durable(state, last)
    }

    /// Lets the lock go and waits until `resource_version` is durable: at once if it is, as
    /// [`publish`](Store::publish) waits otherwise. A write that changes nothing ends here, as
    /// the object it answers with may still be pending.
    fn wait_durable(
        &self,
        mut state: MutexGuard<'_, State>,
        resource_version: u64,
    ) -> Result<(), StoreError> {
        if resource_version <= state.visible {
            return Ok(());
        }
        let (waiter, wait) = durability::waiter();
        state.waiters.push((resource_version, waiter));
        self.logged.notify_one();
        drop(state);
        wait.finish()
    }

    /// The namespaces being deleted (marked, waiting for their contents to go).
    pub fn terminating_namespaces(&self) -> Vec<String> {
        let state = self.state.lock();
        state
            .objects
            .get(&self.namespaces.key())
            .into_iter()
            .flat_map(|namespaces| namespaces.values())
            .filter(|namespace| namespace["metadata"].get("deletionTimestamp").is_some())
            .filter_map(|namespace| namespace["metadata"]["name"].as_str().map(str::to_string))
            .collect()
    }

    /// Deletes everything in `namespace` (objects with finalizers are only marked); returns how
    /// many objects are still there.
    pub fn delete_namespace_contents(&self, namespace: &str) -> Result<usize, StoreError> {
        let mut state = self.lock_for_write()?;
        let namespaces = self.namespaces.key();
        let mut inside: Vec<(ResourceKey, String, Arc<StoredObject>)> = Vec::new();
        for (resource, objects) in &state.objects {
            if *resource == namespaces {
                continue;
            }
            let contents = objects
                .range((namespace.to_string(), String::new())..)
                .take_while(|((ns, _), _)| ns == namespace);
            for ((_, name), object) in contents {
                inside.push((resource.clone(), name.clone(), Arc::clone(object)));
            }
        }
        let mut remaining = 0;
        for (resource, name, object) in inside {
            let last = (*object).clone();
            if object["metadata"].as_object().is_some_and(has_finalizers) {
                remaining += 1;
                if object["metadata"].get("deletionTimestamp").is_none() {
                    let mut marked = last;
                    if let Ok(metadata) = metadata_mut(&mut marked) {
                        mark_deleted(metadata);
                    }
                    self.commit(
                        &mut state,
                        &resource,
                        namespace,
                        &name,
                        Some(marked),
                        EventType::Modified,
                    );
                }
            } else {
                self.commit(
                    &mut state,
                    &resource,
                    namespace,
                    &name,
                    Some(last),
                    EventType::Deleted,
                );
            }
        }
        self.publish(state)?;
        Ok(remaining)
    }

    /// Ends the deletion of an emptied namespace: its `kubernetes` finalizer is removed, and the
    /// namespace with it unless other finalizers hold it.
    pub fn finalize_namespace(&self, namespace: &str) -> Result<(), StoreError> {
        let kind = self.namespaces.clone();
        let current = self.get_latest(&kind, "", namespace)?;
        if current["metadata"].get("deletionTimestamp").is_none() {
            return Ok(());
        }
        let mut finalized = (*current).clone();
        // Looked up without indexing: an update may have left `spec` something other than an
        // object, and indexing into that would panic the namespace controller.
        if let Some(finalizers) = finalized
            .get_mut("spec")
            .and_then(|spec| spec.get_mut("finalizers"))
            .and_then(Value::as_array_mut)
        {
            finalizers.retain(|finalizer| finalizer != "kubernetes");
        }
        self.update(&kind, "", namespace, finalized, false)
            .map(|_| ())
    }

    /// Watches the resource (in `namespace`, if given) from `start`.
    pub fn watch(
        &self,
        kind: &ResourceKind,
        namespace: Option<&str>,
        start: WatchStart,
    ) -> Result<Watch, StoreError> {
        let namespace = namespace.filter(|_| kind.namespaced).map(str::to_string);
        let mut state = self.state.lock();
        let resource = kind.key();
        let current = state.visible;
        let owed = match start {
            WatchStart::Current => {
                // What readers see: with changes pending, the objects as of before them.
                let objects: Vec<Arc<StoredObject>> = if state.pending.is_empty() {
                    state
                        .objects
                        .get(&resource)
                        .into_iter()
                        .flat_map(|objects| objects.iter())
                        .filter(|((ns, _), _)| namespace.as_ref().is_none_or(|wanted| wanted == ns))
                        .map(|(_, object)| Arc::clone(object))
                        .collect()
                } else {
                    let everything = |_: &Value| true;
                    let page = self.page_as_of(
                        &state,
                        kind,
                        namespace.as_deref(),
                        None,
                        0,
                        false,
                        current,
                        everything,
                    );
                    page.map(|page| page.items).unwrap_or_default()
                };
                objects
                    .into_iter()
                    .map(|object| {
                        let ns = object["metadata"]["namespace"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string();
                        let version = object["metadata"]["resourceVersion"]
                            .as_str()
                            .and_then(|rv| rv.parse().ok())
                            .unwrap_or(current);
                        Arc::new(WatchEvent::new(
                            EventType::Added,
                            resource.clone(),
                            ns,
                            version,
                            object,
                            None,
                        ))
                    })
                    .collect()
            }
            WatchStart::After(from) => {
                if from > current {
                    return Err(StoreError::TooLargeResourceVersion {
                        requested: from,
                        current,
                    });
                }
                if from < state.compacted {
                    return Err(StoreError::Expired {
                        requested: from,
                        oldest: state.compacted + 1,
                    });
                }
                state
                    .history
                    .iter()
                    .filter(|event| {
                        event.resource_version > from
                            && event.resource_version <= current
                            && event.resource == resource
                            && namespace
                                .as_ref()
                                .is_none_or(|wanted| *wanted == event.namespace)
                    })
                    .cloned()
                    .collect()
            }
        };
        // Subscribed under the lock: every later change reaches this watcher, none earlier.
        let live = state.watchers.subscribe(&resource, namespace);
        Ok(Watch {
            owed,
            live,
            published: Arc::clone(&state.published),
            start: current,
        })
    }

    /// Forgets the history up to and including `resource_version`: watches from an older one get
    /// 410 Expired (the fault hook behind "compact history").
    pub fn compact(&self, resource_version: u64) {
        let mut state = self.state.lock();
        let up_to = resource_version.min(state.visible);
        let mut let_go = Vec::new();
        state.history.drop_through(up_to, &mut let_go);
        state.compacted = state.compacted.max(up_to);
        drop(state);
        drop(let_go);
    }
}

/// The keys a page may come from, in key order: after the key `after` (or from the first), and
/// within `namespace` when given. `None` when that is empty (a continue key outside the
/// namespace), which would otherwise be an inverted range.
type KeyRange = (Bound<(String, String)>, Bound<(String, String)>);

fn page_range(after: Option<(&str, &str)>, namespace: Option<&str>) -> Option<KeyRange> {
    let start = match (after, namespace) {
        (Some((ns, name)), _) => Bound::Excluded((ns.to_string(), name.to_string())),
        (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
        (None, None) => Bound::Unbounded,
    };
    // `ns` followed by NUL is the least string above `ns`, so keys below (`ns\0`, "") are
    // exactly the namespace's: no key is compared while walking it.
    let end = match namespace {
        Some(ns) => Bound::Excluded((format!("{ns}\0"), String::new())),
        None => Bound::Unbounded,
    };
    match (&start, &end) {
        (Bound::Excluded(first) | Bound::Included(first), Bound::Excluded(last))
            if first >= last =>
        {
            None
        }
        _ => Some((start, end)),
    }
}

/// One page of a list; see [`Store::list_page`].
#[derive(Debug)]
pub struct ListPage {
    /// The page's objects, in key order.
    pub items: Vec<Arc<StoredObject>>,
    /// The store's resourceVersion when the page was read.
    pub resource_version: u64,
    /// Whether selected objects follow the page.
    pub more: bool,
    /// How many objects follow the page (when asked to count).
    pub remaining: usize,
}

impl ListPage {
    fn empty(resource_version: u64) -> Self {
        ListPage {
            items: Vec::new(),
            resource_version,
            more: false,
            remaining: 0,
        }
    }

    /// Up to `limit` (0: no limit) of `objects` that `select` accepts. When more follow, the
    /// page records it and, with `count_remaining`, asks `remaining_after` how many objects
    /// follow its last key, given how many objects it took.
    fn fill<'a>(
        resource_version: u64,
        objects: impl Iterator<Item = (&'a (String, String), &'a Arc<StoredObject>)>,
        limit: usize,
        count_remaining: bool,
        mut select: impl FnMut(&Value) -> bool,
        remaining_after: impl FnOnce(&(String, String), usize) -> usize,
    ) -> Self {
        let mut page = ListPage {
            items: Vec::new(),
            resource_version,
            more: false,
            remaining: 0,
        };
        let mut last = None;
        for (key, object) in objects {
            if !select(object) {
                continue;
            }
            if limit > 0 && page.items.len() == limit {
                page.more = true;
                break;
            }
            page.items.push(Arc::clone(object));
            last = Some(key);
        }
        if let (true, true, Some(last)) = (page.more, count_remaining, last) {
            page.remaining = remaining_after(last, page.items.len());
        }
        page
    }
}

impl Default for Store {
    fn default() -> Self {
        Self::new(StoreConfig::default())
    }
}

impl Drop for Store {
    /// Ends the group-commit thread of a durable store once what is pending is durable, then
    /// every watch.
    fn drop(&mut self) {
        if let Some(syncer) = self.syncer.take() {
            self.state.lock().closing = true;
            self.logged.notify_one();
            let _ = syncer.join();
        }
        self.state.lock().watchers.close();
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("resource_version", &self.resource_version())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn is_namespaces(kind: &ResourceKind) -> bool {
    kind.group.is_empty() && kind.plural == "namespaces"
}

/// Whether deleting `object` must wait: it has finalizers (or, for a namespace, the
/// `spec.finalizers` its lifecycle controller removes once the namespace is empty).
/// Whether `kind` is validated by Kubernetes' core validation, whose finalizer rule (standard
/// or domain-qualified) custom resources, CRDs and APIServices, validated by apimachinery's
/// alone, do not have.
fn core_finalizer_rule(kind: &ResourceKind) -> bool {
    kind.is_builtin()
        && !matches!(
            kind.group.as_str(),
            "apiextensions.k8s.io" | "apiregistration.k8s.io"
        )
}

fn held(kind: &ResourceKind, object: &Value) -> bool {
    object["metadata"].as_object().is_some_and(has_finalizers)
        || (is_namespaces(kind)
            && object["spec"]["finalizers"]
                .as_array()
                .is_some_and(|finalizers| !finalizers.is_empty()))
}

/// Fills in `apiVersion` and `kind` where a body leaves them out: stored objects always carry
/// them, as watchers decode events by them.
fn set_type(kind: &ResourceKind, object: &mut Value) {
    if let Some(fields) = object.as_object_mut() {
        fields
            .entry("apiVersion")
            .or_insert_with(|| Value::String(kind.api_version()));
        fields
            .entry("kind")
            .or_insert_with(|| Value::String(kind.kind.clone()));
    }
}

/// Takes back `changes` (the newest last) that could not be logged: each object as it was
/// before, their events out of the history, and the resourceVersion to before the first of
/// them. Nothing of them was ever seen (no read, list, watch or answer carried their
/// resourceVersions), so the next write takes the first of those versions, and the log stays
/// gapless, which is what its recovery checks.
fn roll_back(state: &mut State, changes: &[(Arc<WatchEvent>, String)]) {
    if let Some((first, _)) = changes.first() {
        state.issued = first.resource_version.saturating_sub(1);
    }
    for (event, name) in changes.iter().rev() {
        let objects = state.objects.entry(event.resource.clone()).or_default();
        let key = (event.namespace.clone(), name.clone());
        match (&event.event_type, &event.previous) {
            (EventType::Added, _) | (_, None) => {
                objects.remove(&key);
            }
            (_, Some(previous)) => {
                objects.insert(key, Arc::clone(previous));
            }
        }
        state.history.take_back(event);
    }
}

/// 404 for the object `name` of `kind`.
fn not_found(kind: &ResourceKind, name: &str) -> StoreError {
    StoreError::NotFound {
        resource: kind.qualified_name(),
        name: name.to_string(),
    }
}

/// The object under `namespace`/`name` with every change made so far, pending ones included.
fn latest(
    state: &State,
    resource: &ResourceKey,
    namespace: &str,
    name: &str,
) -> Option<Arc<StoredObject>> {
    state
        .objects
        .get(resource)?
        .get(&(namespace.to_string(), name.to_string()))
        .cloned()
}

/// The most a stored object may take serialized: etcd's default request limit
/// (`--max-request-bytes`), which kube-apiserver's writes meet.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// Checks that `object` fits in [`MAX_OBJECT_BYTES`] as JSON; if it does not, its
/// `managedFields` are dropped and it is checked again, as kube-apiserver retries a write that
/// etcd found too large. (etcd holds built-in kinds as protobuf, a little smaller than JSON.)
/// Returns the object's estimate (see [`StoredObject::footprint`]), which the same walk makes.
fn fit_in_storage(object: &mut Value) -> Result<Footprint, StoreError> {
    let estimate = footprint::estimate(object);
    // Almost every object is far below the limit: the bound, which formats and escapes
    // nothing, settles those; only an object near the limit is counted exactly.
    if estimate.json_bound <= MAX_OBJECT_BYTES || json_len(object) <= MAX_OBJECT_BYTES {
        return Ok(estimate);
    }
    let dropped = object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|metadata| metadata.remove("managedFields"));
    if dropped.is_some() && json_len(object) <= MAX_OBJECT_BYTES {
        return Ok(footprint::estimate(object));
    }
    Err(StoreError::RequestTooLarge)
}

/// The length of `value` as compact JSON, counted without writing it out.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(bytes.len());
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Counting cannot fail: `Count` takes every byte and a `Value`'s keys are strings.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The resourceVersion a stored object was written at.
fn stored_version(object: &StoredObject) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|version| version.parse().ok())
        .unwrap_or(0)
}

fn invalid(kind: &ResourceKind, name: &str, causes: Vec<Cause>) -> StoreError {
    StoreError::Invalid {
        kind: kind.qualified_kind(),
        name: name.to_string(),
        causes,
    }
}

#[cfg(test)]
mod tests;
