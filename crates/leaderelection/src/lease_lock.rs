//! The lock to use: a `coordination.k8s.io/v1` Lease.
//!
//! A Lease is made for this: its spec is the record, nothing else watches or reconciles it, and
//! its updates are small. The ConfigMap and Endpoints locks exist for clusters whose candidates
//! still use them; migrate through the Multi lock.

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use parking_lot::Mutex;

use crate::lock::{LockError, ResourceLock};
use crate::record::LeaderElectionRecord;

/// A Lease as a lock; client-go's `LeaseLock`.
pub struct LeaseLock {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    /// The Lease as last read or written: its resourceVersion makes updates conditional.
    last: Mutex<Option<Lease>>,
}

impl std::fmt::Debug for LeaseLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseLock")
            .field("lease", &self.describe())
            .field("identity", &self.identity)
            .finish()
    }
}

impl LeaseLock {
    /// The Lease `name` in `namespace`, contended for as `identity`.
    pub fn new(client: kube::Client, namespace: &str, name: &str, identity: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            last: Mutex::new(None),
        }
    }

    fn error(&self, source: kube::Error) -> LockError {
        LockError::from_kube(self.describe(), source)
    }
}

impl ResourceLock for LeaseLock {
    async fn get(&self) -> Result<(LeaderElectionRecord, Vec<u8>), LockError> {
        let lease = self
            .api
            .get(&self.name)
            .await
            .map_err(|err| self.error(err))?;
        let record = LeaderElectionRecord::from_lease_spec(&lease.spec.clone().unwrap_or_default());
        *self.last.lock() = Some(lease);
        let raw = record.to_annotation().into_bytes();
        Ok((record, raw))
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(record.to_lease_spec()),
        };
        let created = self
            .api
            .create(&PostParams::default(), &lease)
            .await
            .map_err(|err| self.error(err))?;
        *self.last.lock() = Some(created);
        Ok(())
    }

    async fn update(&self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        let Some(mut lease) = self.last.lock().clone() else {
            return Err(LockError::NotInitialized(self.describe()));
        };
        lease.spec = Some(record.to_lease_spec());
        let updated = self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map_err(|err| self.error(err))?;
        *self.last.lock() = Some(updated);
        Ok(())
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
