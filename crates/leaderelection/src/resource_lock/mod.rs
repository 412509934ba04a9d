//! The locks candidates race for, and what every lock does: read, create and conditionally
//! update the record.
//!
//! [`LeaseLock`] is the lock to use: a `coordination.k8s.io/v1` Lease exists for this, nothing
//! else reconciles it, and its updates are small. [`ConfigMapLock`] and [`EndpointsLock`] keep the
//! record in an annotation, as Kubernetes components did before Leases; they exist so a cluster
//! whose running candidates still use them can move to Leases through a [`MultiLock`] (first
//! `"configmapsleases"`, then `"leases"`) without ever having two leaders.

mod any;
mod events;
mod kind;
mod multi;
mod object;

use std::future::Future;

use futures::stream::BoxStream;

use crate::record::LeaderElectionRecord;

pub use any::{
    AnyLock, CONFIGMAPS_LEASES_RESOURCE_LOCK, CONFIGMAPS_RESOURCE_LOCK,
    ENDPOINTS_LEASES_RESOURCE_LOCK, ENDPOINTS_RESOURCE_LOCK, LEASES_RESOURCE_LOCK, new,
};
pub use kind::LockKind;
pub use multi::{MultiLock, UNKNOWN_LEADER};
pub use object::{ConfigMapLock, EndpointsLock, LeaseLock, ObjectLock};

/// Why a lock operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The lock object does not exist yet (the elector then creates it).
    #[error("{0} not found")]
    NotFound(String),
    /// Someone else created the lock first: this round is lost.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// Someone else wrote the lock since it was read: this round is lost.
    #[error("{0} was changed by someone else (conflict)")]
    Conflict(String),
    /// `update` before any `get` or `create`: there is no version to make it conditional on.
    #[error("{0} not initialized, call get or create first")]
    NotInitialized(String),
    /// [`new`] was given a kind of lock it does not know.
    #[error(
        "unknown resource lock kind {0:?} (expected one of leases, endpoints, configmaps, endpointsleases, configmapsleases)"
    )]
    UnknownKind(String),
    /// The API server refused or could not be reached.
    #[error("{lock}: {source}")]
    Api {
        /// The lock.
        lock: String,
        /// What the client reported.
        #[source]
        source: kube::Error,
    },
}

impl LockError {
    pub(crate) fn from_kube(lock: String, source: kube::Error) -> Self {
        match &source {
            kube::Error::Api(status) if status.code == 404 => Self::NotFound(lock),
            kube::Error::Api(status) if status.code == 409 && status.reason == "AlreadyExists" => {
                Self::AlreadyExists(lock)
            }
            kube::Error::Api(status) if status.code == 409 => Self::Conflict(lock),
            _ => Self::Api { lock, source },
        }
    }

    /// Whether the lock object does not exist (client-go's `IsNotFound`).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound(_))
    }

    /// Whether the write lost a race (client-go's `IsConflict`).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict(_))
    }
}

/// What a read of the lock gives: the record, and its raw form for telling whether it changed
/// since the last read.
pub type Observation = (LeaderElectionRecord, Vec<u8>);

/// The lock's record each time the lock object changes, as [`ResourceLock::watch`] streams it.
pub type RecordStream = BoxStream<'static, Result<Observation, LockError>>;

/// A lock candidates race for; client-go's `resourcelock.Interface`.
///
/// Updates are conditional on the version last read, written or watched, so of two candidates
/// that read the same record and both try to take it, exactly one wins.
pub trait ResourceLock: Send + Sync {
    /// Reads the record, and its raw form for comparing with what was last observed. A record
    /// that cannot be read (not JSON, wrong types) is logged and read as an empty record, so a
    /// damaged lock is taken over rather than blocking the election forever.
    fn get(&self) -> impl Future<Output = Result<Observation, LockError>> + Send;

    /// Creates the lock object holding `record`.
    fn create(
        &self,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<(), LockError>> + Send;

    /// Replaces the record, conditional on the version last read, written or watched.
    fn update(
        &self,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<(), LockError>> + Send;

    /// Records an event `"<identity> <action>"` on the lock object ("became leader", "stopped
    /// leading"), if this lock was given an event recorder. Never blocks and never fails: a
    /// lost event is logged.
    fn record_event(&self, action: &str);

    /// This candidate's identity.
    fn identity(&self) -> &str;

    /// The lock, for messages (`namespace/name`).
    fn describe(&self) -> String;

    /// Streams the record each time the lock object changes, starting with its current state,
    /// and remembers each version seen so that the next [`update`](Self::update) is conditional
    /// on it. `None` when this lock cannot be watched: followers then poll, as client-go does.
    fn watch(&self) -> impl Future<Output = Result<Option<RecordStream>, LockError>> + Send {
        std::future::ready(Ok(None))
    }
}
