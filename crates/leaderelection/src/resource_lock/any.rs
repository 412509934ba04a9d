//! Locks chosen by name, as client-go's `resourcelock.New` and `--leader-elect-resource-lock`
//! choose them.

use super::multi::MultiLock;
use super::object::{ConfigMapLock, EndpointsLock, LeaseLock};
use super::{LockError, Observation, RecordStream, ResourceLock};
use crate::record::LeaderElectionRecord;

/// `"leases"`: a Lease (the default, and the lock to use).
pub const LEASES_RESOURCE_LOCK: &str = "leases";
/// `"endpoints"`: an Endpoints object's annotation.
pub const ENDPOINTS_RESOURCE_LOCK: &str = "endpoints";
/// `"configmaps"`: a ConfigMap's annotation.
pub const CONFIGMAPS_RESOURCE_LOCK: &str = "configmaps";
/// `"endpointsleases"`: Endpoints then Lease, for migrating from Endpoints.
pub const ENDPOINTS_LEASES_RESOURCE_LOCK: &str = "endpointsleases";
/// `"configmapsleases"`: ConfigMap then Lease, for migrating from ConfigMaps.
pub const CONFIGMAPS_LEASES_RESOURCE_LOCK: &str = "configmapsleases";

/// Any lock [`new`] can make.
#[derive(Debug)]
pub enum AnyLock {
    /// `"leases"`.
    Lease(LeaseLock),
    /// `"endpoints"`.
    Endpoints(EndpointsLock),
    /// `"configmaps"`.
    ConfigMap(ConfigMapLock),
    /// `"endpointsleases"`.
    EndpointsLease(MultiLock<EndpointsLock, LeaseLock>),
    /// `"configmapsleases"`.
    ConfigMapLease(MultiLock<ConfigMapLock, LeaseLock>),
}

/// Makes the lock named `kind` on the object `namespace/name`, contended for as `identity`.
///
/// ```
/// use ctrlkit_leaderelection::resource_lock::{self, AnyLock, LockError};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), LockError> {
/// # let config = kube::Config::new("http://127.0.0.1:6443".parse().unwrap());
/// # let client = kube::Client::try_from(config).unwrap();
/// let lock = resource_lock::new("configmapsleases", client.clone(), "kube-system", "my-controller", "pod-a")?;
/// assert!(matches!(lock, AnyLock::ConfigMapLease(_)));
/// assert!(matches!(
///     resource_lock::new("secrets", client, "kube-system", "my-controller", "pod-a"),
///     Err(LockError::UnknownKind(_))
/// ));
/// # Ok(()) }
/// ```
pub fn new(
    kind: &str,
    client: kube::Client,
    namespace: &str,
    name: &str,
    identity: &str,
) -> Result<AnyLock, LockError> {
    let lease = || LeaseLock::new(client.clone(), namespace, name, identity);
    let endpoints = || EndpointsLock::new(client.clone(), namespace, name, identity);
    let config_map = || ConfigMapLock::new(client.clone(), namespace, name, identity);
    Ok(match kind {
        LEASES_RESOURCE_LOCK => AnyLock::Lease(lease()),
        ENDPOINTS_RESOURCE_LOCK => AnyLock::Endpoints(endpoints()),
        CONFIGMAPS_RESOURCE_LOCK => AnyLock::ConfigMap(config_map()),
        ENDPOINTS_LEASES_RESOURCE_LOCK => {
            AnyLock::EndpointsLease(MultiLock::new(endpoints(), lease()))
        }
        CONFIGMAPS_LEASES_RESOURCE_LOCK => {
            AnyLock::ConfigMapLease(MultiLock::new(config_map(), lease()))
        }
        other => return Err(LockError::UnknownKind(other.to_owned())),
    })
}

impl AnyLock {
    /// Records events on the lock object(s), reported by `component`.
    #[must_use]
    pub fn with_event_recorder(self, component: &str) -> Self {
        match self {
            Self::Lease(lock) => Self::Lease(lock.with_event_recorder(component)),
            Self::Endpoints(lock) => Self::Endpoints(lock.with_event_recorder(component)),
            Self::ConfigMap(lock) => Self::ConfigMap(lock.with_event_recorder(component)),
            Self::EndpointsLease(lock) => Self::EndpointsLease(lock.map(
                |primary| primary.with_event_recorder(component),
                |secondary| secondary.with_event_recorder(component),
            )),
            Self::ConfigMapLease(lock) => Self::ConfigMapLease(lock.map(
                |primary| primary.with_event_recorder(component),
                |secondary| secondary.with_event_recorder(component),
            )),
        }
    }
}

/// Calls `$call` on whichever lock `$lock` is.
macro_rules! each {
    ($lock:expr, $inner:ident => $call:expr) => {
        match $lock {
            AnyLock::Lease($inner) => $call,
            AnyLock::Endpoints($inner) => $call,
            AnyLock::ConfigMap($inner) => $call,
            AnyLock::EndpointsLease($inner) => $call,
            AnyLock::ConfigMapLease($inner) => $call,
        }
    };
}

impl ResourceLock for AnyLock {
    async fn get(&self) -> Result<Observation, LockError> {
        each!(self, lock => lock.get().await)
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        each!(self, lock => lock.create(record).await)
    }

    async fn update(&self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        each!(self, lock => lock.update(record).await)
    }

    fn record_event(&self, action: &str) {
        each!(self, lock => lock.record_event(action))
    }

    fn identity(&self) -> &str {
        each!(self, lock => lock.identity())
    }

    fn describe(&self) -> String {
        each!(self, lock => lock.describe())
    }

    async fn watch(&self) -> Result<Option<RecordStream>, LockError> {
        each!(self, lock => lock.watch().await)
    }
}
