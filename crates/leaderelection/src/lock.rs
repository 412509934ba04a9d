//! What every lock does: read, create and conditionally update the record.

use std::future::Future;

use crate::record::LeaderElectionRecord;

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
}

/// A lock candidates race for; client-go's `resourcelock.Interface`.
///
/// Updates are conditional on the version last read or written, so of two candidates that read
/// the same record and both try to take it, exactly one wins.
pub trait ResourceLock: Send + Sync {
    /// Reads the record, and its canonical JSON for comparing with what was last observed.
    fn get(
        &self,
    ) -> impl Future<Output = Result<(LeaderElectionRecord, Vec<u8>), LockError>> + Send;

    /// Creates the lock object holding `record`.
    fn create(
        &self,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<(), LockError>> + Send;

    /// Replaces the record, conditional on the version last read or written.
    fn update(
        &self,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<(), LockError>> + Send;

    /// This candidate's identity.
    fn identity(&self) -> &str;

    /// The lock, for messages (`namespace/name`).
    fn describe(&self) -> String;
}
