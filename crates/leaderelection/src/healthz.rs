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
