//! A lock that is one Kubernetes object: a Lease, a ConfigMap or an Endpoints object.

use std::marker::PhantomData;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams, WatchEvent, WatchParams};
use parking_lot::Mutex;

use super::events::EventRecorder;
use super::kind::LockKind;
use super::{LockError, Observation, RecordStream, ResourceLock};
use crate::record::LeaderElectionRecord;

/// A Lease as a lock; client-go's `LeaseLock`. The lock to use.
pub type LeaseLock = ObjectLock<Lease>;

/// A ConfigMap's annotation as a lock; client-go's former `ConfigMapLock`, for migrations.
pub type ConfigMapLock = ObjectLock<ConfigMap>;

/// An Endpoints object's annotation as a lock; client-go's former `EndpointsLock`, for
/// migrations.
pub type EndpointsLock = ObjectLock<Endpoints>;

/// One object of kind `K` as a lock.
///
/// ```no_run
/// use ctrlkit_leaderelection::{LeaseLock, ResourceLock};
///
/// # async fn doc(client: kube::Client) -> Result<(), ctrlkit_leaderelection::LockError> {
/// let lock = LeaseLock::new(client, "default", "my-controller", "pod-a")
///     .with_event_recorder("my-controller");
/// let (record, _raw) = lock.get().await?;
/// println!("held by {:?}", record.holder_identity);
/// # Ok(()) }
/// ```
pub struct ObjectLock<K> {
    api: Api<DynamicObject>,
    resource: ApiResource,
    namespace: String,
    name: String,
    identity: String,
    /// The object as last read, written or watched: its resourceVersion makes updates
    /// conditional.
    last: Arc<Mutex<Option<DynamicObject>>>,
    events: Option<EventRecorder>,
    kind: PhantomData<fn() -> K>,
}

impl<K> std::fmt::Debug for ObjectLock<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectLock")
            .field("kind", &self.resource.kind)
            .field("object", &format_args!("{}/{}", self.namespace, self.name))
            .field("identity", &self.identity)
            .finish()
    }
}

impl<K: LockKind> ObjectLock<K> {
    /// The object `name` in `namespace`, contended for as `identity`.
    pub fn new(client: kube::Client, namespace: &str, name: &str, identity: &str) -> Self {
        let resource = ApiResource::erase::<K>(&());
        Self {
            api: Api::namespaced_with(client, namespace, &resource),
            resource,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            last: Arc::new(Mutex::new(None)),
            events: None,
            kind: PhantomData,
        }
    }

    /// Records "became leader" / "stopped leading" events on the lock object, reported by
    /// `component` (client-go's `ResourceLockConfig.EventRecorder`).
    #[must_use]
    pub fn with_event_recorder(mut self, component: &str) -> Self {
        self.events = Some(EventRecorder::new(
            self.api.clone().into_client(),
            &self.namespace,
            component,
            &self.identity,
        ));
        self
    }

    fn error(&self, source: kube::Error) -> LockError {
        LockError::from_kube(self.describe(), source)
    }
}

/// Reads the record of `object`; an unreadable one is logged and read as empty.
fn observe<K: LockKind>(object: &DynamicObject, lock: &str) -> Observation {
    match K::read_record(object) {
        Ok(Some(observed)) => observed,
        Ok(None) => (LeaderElectionRecord::default(), Vec::new()),
        Err(raw) => {
            tracing::warn!(
                lock,
                record = %String::from_utf8_lossy(&raw),
                "the leader election record cannot be read; treating it as empty"
            );
            (LeaderElectionRecord::default(), raw)
        }
    }
}

/// Keeps `object` as the last version seen unless a newer one is already kept (a watch event
/// can arrive after a read that saw a later version).
fn remember(last: &Mutex<Option<DynamicObject>>, object: DynamicObject) {
    let mut last = last.lock();
    let version = |object: &DynamicObject| {
        object
            .metadata
            .resource_version
            .as_deref()
            .and_then(|version| version.parse::<u64>().ok())
    };
    let newer = match (last.as_ref().and_then(version), version(&object)) {
        (Some(kept), Some(seen)) => seen >= kept,
        _ => true,
    };
    if newer {
        *last = Some(object);
    }
}

impl<K: LockKind> ResourceLock for ObjectLock<K> {
    async fn get(&self) -> Result<Observation, LockError> {
        let object = self
            .api
            .get(&self.name)
            .await
            .map_err(|err| self.error(err))?;
        let observed = observe::<K>(&object, &self.describe());
        remember(&self.last, object);
        Ok(observed)
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        let mut object = DynamicObject::new(&self.name, &self.resource).within(&self.namespace);
        K::write_record(&mut object, record);
        let created = self
            .api
            .create(&PostParams::default(), &object)
            .await
            .map_err(|err| self.error(err))?;
        remember(&self.last, created);
        Ok(())
    }

    async fn update(&self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        let Some(mut object) = self.last.lock().clone() else {
            return Err(LockError::NotInitialized(self.describe()));
        };
        K::write_record(&mut object, record);
        let updated = self
            .api
            .replace(&self.name, &PostParams::default(), &object)
            .await
            .map_err(|err| self.error(err))?;
        remember(&self.last, updated);
        Ok(())
    }

    fn record_event(&self, action: &str) {
        if let Some(events) = &self.events {
            let object = self.last.lock().clone();
            events.record(&self.resource, &self.name, object.as_ref(), action);
        }
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    async fn watch(&self) -> Result<Option<RecordStream>, LockError> {
        let params = WatchParams::default()
            .fields(&format!("metadata.name={}", self.name))
            .timeout(290);
        // "0": start with the current state, then every change.
        let events = self
            .api
            .watch(&params, "0")
            .await
            .map_err(|err| self.error(err))?;
        let lock = self.describe();
        let last = Arc::clone(&self.last);
        let records = events.filter_map(move |event| {
            let item = match event {
                Ok(WatchEvent::Added(object) | WatchEvent::Modified(object)) => {
                    let observed = observe::<K>(&object, &lock);
                    remember(&last, object);
                    Some(Ok(observed))
                }
                // A deleted lock reads as empty; the next create decides who holds it.
                Ok(WatchEvent::Deleted(_)) => {
                    Some(Ok((LeaderElectionRecord::default(), Vec::new())))
                }
                Ok(WatchEvent::Bookmark(_)) => None,
                Ok(WatchEvent::Error(status)) => Some(Err(LockError::from_kube(
                    lock.clone(),
                    kube::Error::Api(status),
                ))),
                Err(source) => Some(Err(LockError::from_kube(lock.clone(), source))),
            };
            std::future::ready(item)
        });
        Ok(Some(records.boxed()))
    }
}
