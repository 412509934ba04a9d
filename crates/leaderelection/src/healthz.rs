//! A health check that fails when the leader has stopped renewing: client-go's
//! `HealthzAdaptor`.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// Why the leader election health check fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// This process believes it leads but has not renewed for longer than the lease plus the
    /// tolerance: it is stuck, and should be restarted.
    #[error("failed election to renew leadership on lease {0}")]
    RenewalOverdue(String),
}

/// Something whose leadership can be checked; implemented by every
/// [`LeaderElector`](crate::LeaderElector).
pub trait LeaderCheck: Send + Sync {
    /// `Ok` when not leading, or leading and renewed within `lease_duration + tolerance`.
    fn check(&self, tolerance: Duration) -> Result<(), CheckError>;
}

/// A `/healthz` check for the leader election; client-go's `HealthzAdaptor`.
///
/// It passes until an elector is set (a process that has not started its election is healthy),
/// then passes unless the elector leads and is overdue with its renewal.
///
/// ```
/// use std::time::Duration;
/// use ctrlkit_leaderelection::HealthzAdaptor;
///
/// let healthz = HealthzAdaptor::new(Duration::from_secs(20));
/// assert_eq!(healthz.name(), "leaderElection");
/// assert_eq!(healthz.check(), Ok(()));
/// ```
#[derive(Clone, Default)]
pub struct HealthzAdaptor {
    elector: Arc<Mutex<Option<Arc<dyn LeaderCheck>>>>,
    tolerance: Duration,
}

impl std::fmt::Debug for HealthzAdaptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthzAdaptor")
            .field("tolerance", &self.tolerance)
            .field("elector_set", &self.elector.lock().is_some())
            .finish()
    }
}

impl HealthzAdaptor {
    /// A check that tolerates a renewal overdue by up to `tolerance` beyond the lease.
    pub fn new(tolerance: Duration) -> Self {
        Self {
            elector: Arc::default(),
            tolerance,
        }
    }

    /// The check's name on a healthz endpoint.
    pub fn name(&self) -> &'static str {
        "leaderElection"
    }

    /// Sets the elector to check (client-go's `SetLeaderElection`).
    pub fn set_leader_election(&self, elector: Arc<dyn LeaderCheck>) {
        *self.elector.lock() = Some(elector);
    }

    /// Runs the check.
    pub fn check(&self) -> Result<(), CheckError> {
        let elector = self.elector.lock().clone();
        match elector {
            Some(elector) => elector.check(self.tolerance),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::record::LeaderElectionRecord;
    use crate::resource_lock::{LockError, Observation, ResourceLock};
    use crate::{LeaderCallbacks, LeaderElectionConfig, LeaderElector};

    /// A lock that only has an identity: the health check never touches the lock.
    struct IdentityOnly;

    impl ResourceLock for IdentityOnly {
        async fn get(&self) -> Result<Observation, LockError> {
            Err(LockError::NotInitialized(self.describe()))
        }

        async fn create(&self, _: &LeaderElectionRecord) -> Result<(), LockError> {
            Err(LockError::NotInitialized(self.describe()))
        }

        async fn update(&self, _: &LeaderElectionRecord) -> Result<(), LockError> {
            Err(LockError::NotInitialized(self.describe()))
        }

        fn record_event(&self, _: &str) {}

        fn identity(&self) -> &str {
            "healthTest"
        }

        fn describe(&self) -> String {
            "no lock".to_owned()
        }
    }

    /// An elector for the election "foo" with a one-minute lease that has just observed
    /// `holder` hold the lock.
    fn elector_seeing(holder: &str) -> Arc<LeaderElector<IdentityOnly>> {
        let config = LeaderElectionConfig {
            lease_duration: Duration::from_secs(60),
            name: "foo".to_owned(),
            ..LeaderElectionConfig::default()
        };
        let callbacks = LeaderCallbacks::new(|_| async {}, || {});
        let elector = LeaderElector::new(IdentityOnly, config, callbacks).expect("valid");
        {
            let mut observed = elector.shared.observed.lock();
            observed.record.holder_identity = holder.to_owned();
            observed.time = Some(Instant::now());
        }
        Arc::new(elector)
    }

    fn overdue() -> Result<(), CheckError> {
        Err(CheckError::RenewalOverdue("foo".to_owned()))
    }

    #[tokio::test(start_paused = true)]
    async fn the_check_fails_only_for_a_leader_long_overdue_with_its_renewal() {
        let minute = Duration::from_secs(60);
        let hour = Duration::from_secs(3600);
        // (case, holder seen, time since, expected); no holder: no elector set.
        let cases = [
            ("no elector yet", None, Duration::ZERO, Ok(())),
            (
                "leader, lease far expired",
                Some("healthTest"),
                hour,
                overdue(),
            ),
            (
                "another server leads, lease far expired",
                Some("otherServer"),
                hour,
                Ok(()),
            ),
            (
                "leader, lease running",
                Some("healthTest"),
                Duration::ZERO,
                Ok(()),
            ),
            (
                "leader, lease expired within the tolerance",
                Some("healthTest"),
                minute + Duration::from_secs(1),
                Ok(()),
            ),
        ];
        for (case, holder, elapsed, expected) in cases {
            let adaptor = HealthzAdaptor::new(Duration::from_secs(20));
            assert!(
                format!("{adaptor:?}").contains("elector_set: false"),
                "{case}"
            );
            if let Some(holder) = holder {
                adaptor.set_leader_election(elector_seeing(holder));
                assert!(
                    format!("{adaptor:?}").contains("elector_set: true"),
                    "{case}"
                );
            }
            tokio::time::advance(elapsed).await;
            assert_eq!(adaptor.check(), expected, "{case}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_check_fails_once_lease_and_tolerance_have_both_passed() {
        let adaptor = HealthzAdaptor::new(Duration::from_secs(20));
        assert_eq!(adaptor.name(), "leaderElection");
        adaptor.set_leader_election(elector_seeing("healthTest"));

        tokio::time::advance(Duration::from_secs(80)).await;
        assert_eq!(adaptor.check(), Ok(()));
        tokio::time::advance(Duration::from_millis(1)).await;
        let error = adaptor.check().expect_err("overdue");
        assert_eq!(error, CheckError::RenewalOverdue("foo".to_owned()));
        assert_eq!(
            error.to_string(),
            "failed election to renew leadership on lease foo"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_never_renewed_is_overdue() {
        let elector = elector_seeing("healthTest");
        elector.shared.observed.lock().time = None;
        let adaptor = HealthzAdaptor::new(Duration::from_secs(20));
        adaptor.set_leader_election(elector);
        assert_eq!(adaptor.check(), overdue());
    }
}
