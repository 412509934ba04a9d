//! The timing of an election, checked as client-go checks it.

use std::time::Duration;

/// How much a candidate stretches its retry period at random, so candidates do not retry in
/// lock step; client-go's `JitterFactor`.
pub const JITTER_FACTOR: f64 = 1.2;

/// Why a configuration is refused; the messages are client-go's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `lease_duration` must exceed `renew_deadline`.
    #[error("leaseDuration must be greater than renewDeadline")]
    LeaseNotLongerThanRenewDeadline,
    /// `renew_deadline` must exceed `retry_period × JITTER_FACTOR`.
    #[error("renewDeadline must be greater than retryPeriod*JitterFactor")]
    RenewDeadlineNotLongerThanJitteredRetry,
    /// `lease_duration` must be positive.
    #[error("leaseDuration must be greater than zero")]
    ZeroLeaseDuration,
    /// `renew_deadline` must be positive.
    #[error("renewDeadline must be greater than zero")]
    ZeroRenewDeadline,
    /// `retry_period` must be positive.
    #[error("retryPeriod must be greater than zero")]
    ZeroRetryPeriod,
    /// The lock's identity is empty.
    #[error("Lock identity is empty")]
    EmptyIdentity,
}

/// The timing of an election and what happens on cancel; client-go's `LeaderElectionConfig`
/// without the parts Rust's types make impossible to leave out (the lock and the callbacks are
/// arguments of the elector, not optional fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// How long a holder's claim lasts after its last renewal, measured by each candidate on
    /// its own clock from the moment it saw the renewal. Default 15 s.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leadership. Default 10 s.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire, and the leader renews. Default 2 s.
    pub retry_period: Duration,
    /// On cancel, the leader writes an empty holder (with a 1 s lease) so another candidate
    /// takes over at once instead of after `lease_duration`.
    pub release_on_cancel: bool,
    /// The election's name, for metrics and logs.
    pub name: String,
    /// Followers also watch the lock, so a released lock is taken within one round trip and a
    /// crashed leader's lock the moment it expires; polling every retry period stays the
    /// fallback. `false` polls only, as client-go does. Default `true`.
    pub watch_lock: bool,
    /// Coordinated leader election (client-go's `Coordinated`): the API server elects the
    /// holder among the lock's [`LeaseCandidate`](crate::LeaseCandidate)s, and this candidate
    /// only renews the lease it is given, until the server prefers another. Needs a Lease lock
    /// and a `LeaseCandidate` running for this identity. Default `false`.
    pub coordinated: bool,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: false,
            name: String::new(),
            watch_lock: true,
            coordinated: false,
        }
    }
}

impl LeaderElectionConfig {
    /// Checks the timing and the candidate's identity in client-go's order, so the first
    /// problem reported is the one client-go would report.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ctrlkit_leaderelection::{ConfigError, LeaderElectionConfig};
    ///
    /// assert_eq!(LeaderElectionConfig::default().validate("pod-a"), Ok(()));
    /// let too_tight = LeaderElectionConfig {
    ///     renew_deadline: Duration::from_secs(2),
    ///     ..Default::default()
    /// };
    /// assert_eq!(
    ///     too_tight.validate("pod-a"),
    ///     Err(ConfigError::RenewDeadlineNotLongerThanJitteredRetry)
    /// );
    /// ```
    pub fn validate(&self, identity: &str) -> Result<(), ConfigError> {
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseNotLongerThanRenewDeadline);
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(ConfigError::RenewDeadlineNotLongerThanJitteredRetry);
        }
        if self.lease_duration.is_zero() {
            return Err(ConfigError::ZeroLeaseDuration);
        }
        if self.renew_deadline.is_zero() {
            return Err(ConfigError::ZeroRenewDeadline);
        }
        if self.retry_period.is_zero() {
            return Err(ConfigError::ZeroRetryPeriod);
        }
        if identity.is_empty() {
            return Err(ConfigError::EmptyIdentity);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(lease: u64, renew: u64, retry: u64) -> LeaderElectionConfig {
        LeaderElectionConfig {
            lease_duration: Duration::from_millis(lease),
            renew_deadline: Duration::from_millis(renew),
            retry_period: Duration::from_millis(retry),
            ..Default::default()
        }
    }

    #[test]
    fn checks_come_in_client_go_order() {
        use ConfigError::*;
        let cases = [
            (config(15_000, 10_000, 2_000), "id", Ok(())),
            (
                config(10_000, 10_000, 2_000),
                "id",
                Err(LeaseNotLongerThanRenewDeadline),
            ),
            (
                config(9_000, 10_000, 2_000),
                "id",
                Err(LeaseNotLongerThanRenewDeadline),
            ),
            // 2,400 ms is 1.2 × 2,000 ms: equal is not enough.
            (
                config(15_000, 2_400, 2_000),
                "id",
                Err(RenewDeadlineNotLongerThanJitteredRetry),
            ),
            (config(15_000, 2_401, 2_000), "id", Ok(())),
            // All zero fails the first comparison before any zero check, as in client-go.
            (config(0, 0, 0), "id", Err(LeaseNotLongerThanRenewDeadline)),
            // A zero retry period with a positive deadline reaches its own check.
            (config(15_000, 10_000, 0), "id", Err(ZeroRetryPeriod)),
            (config(15_000, 10_000, 2_000), "", Err(EmptyIdentity)),
        ];
        for (config, identity, expected) in cases {
            assert_eq!(config.validate(identity), expected, "{config:?}");
        }
    }

    #[test]
    fn messages_are_client_go_s() {
        assert_eq!(
            ConfigError::RenewDeadlineNotLongerThanJitteredRetry.to_string(),
            "renewDeadline must be greater than retryPeriod*JitterFactor"
        );
        assert_eq!(
            ConfigError::EmptyIdentity.to_string(),
            "Lock identity is empty"
        );
    }
}
