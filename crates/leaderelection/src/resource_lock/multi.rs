//! Two locks held as one, for moving a running election from one kind of lock to another.

use super::{LockError, Observation, ResourceLock};
use crate::record::LeaderElectionRecord;

/// The holder reported when the two locks of a [`MultiLock`] name different holders; nobody
/// can take the lock until it expires.
pub const UNKNOWN_LEADER: &str = "leaderelection.k8s.io/unknown";

/// Holds `primary` and `secondary` together; client-go's `MultiLock`.
///
/// Candidates running the old lock and candidates running the `MultiLock` see one election:
/// every write goes to both, and when the two disagree on the holder the record reads as held by
/// [`UNKNOWN_LEADER`] until it expires. Once every candidate runs the `MultiLock`, the next
/// rollout switches to the secondary lock alone. A `MultiLock` is polled (no watch): it exists
/// for the length of a migration.
#[derive(Debug)]
pub struct MultiLock<P, S> {
    primary: P,
    secondary: S,
}

impl<P: ResourceLock, S: ResourceLock> MultiLock<P, S> {
    /// The old lock as `primary`, the new one as `secondary`.
    pub fn new(primary: P, secondary: S) -> Self {
        Self { primary, secondary }
    }

    /// The same pair, each lock changed by its function.
    #[must_use]
    pub fn map<P2, S2>(
        self,
        primary: impl FnOnce(P) -> P2,
        secondary: impl FnOnce(S) -> S2,
    ) -> MultiLock<P2, S2> {
        MultiLock {
            primary: primary(self.primary),
            secondary: secondary(self.secondary),
        }
    }
}

impl<P: ResourceLock, S: ResourceLock> ResourceLock for MultiLock<P, S> {
    async fn get(&self) -> Result<Observation, LockError> {
        let (mut primary, mut primary_raw) = self.primary.get().await?;
        let (secondary, secondary_raw) = match self.secondary.get().await {
            Ok(read) => read,
            // The secondary is created by the first write of a MultiLock candidate.
            Err(err) if err.is_not_found() && primary.holder_identity != self.identity() => {
                return Ok((primary, primary_raw));
            }
            Err(err) => return Err(err),
        };
        if primary.holder_identity != secondary.holder_identity {
            primary.holder_identity = UNKNOWN_LEADER.to_owned();
            primary_raw = primary.to_annotation().into_bytes();
        }
        let mut raw = primary_raw;
        raw.push(b',');
        raw.extend_from_slice(&secondary_raw);
        Ok((primary, raw))
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        match self.primary.create(record).await {
            Ok(()) => {}
            // An existing primary is this candidate's own when only its secondary is missing
            // (the one case `get` reports as not found with a primary), and the secondary is
            // created below. Anyone else's means another candidate created the pair first: the
            // round is lost, even if this candidate's secondary would be created before theirs
            // (client-go goes on, and then leads with a primary that names someone else, until
            // its renew deadline).
            Err(LockError::AlreadyExists(lock)) => {
                let (primary, _) = self.primary.get().await?;
                if primary.holder_identity != self.identity() {
                    return Err(LockError::AlreadyExists(lock));
                }
            }
            Err(err) => return Err(err),
        }
        self.secondary.create(record).await
    }

    async fn update(&self, record: &LeaderElectionRecord) -> Result<(), LockError> {
        self.primary.update(record).await?;
        match self.secondary.get().await {
            Err(err) if err.is_not_found() => self.secondary.create(record).await,
            // Any other read error: the update below reports it (or succeeds on the version
            // seen before), as client-go does.
            _ => self.secondary.update(record).await,
        }
    }

    fn record_event(&self, action: &str) {
        self.primary.record_event(action);
        self.secondary.record_event(action);
    }

    fn identity(&self) -> &str {
        self.primary.identity()
    }

    fn describe(&self) -> String {
        self.primary.describe()
    }
}
