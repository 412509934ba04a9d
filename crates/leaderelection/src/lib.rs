//! client-go's leader election for Rust.
//!
//! Candidates race for a resource lock; the leader renews it every retry period, the others
//! follow its record, and optimistic concurrency on resourceVersion decides every race. A
//! follower counts a holder's lease from the moment *it* observed the last change, on its own
//! clock, so no two clocks need agree. Beyond client-go, followers also watch the lock: a
//! released lock is taken within one round trip, and a crashed leader's lock the moment its
//! lease runs out.
//!
//! [`LeaderElector`] runs the election over any [`ResourceLock`]; [`LeaseLock`] is the lock to
//! use, and [`resource_lock::new`] picks one by client-go's names. Under coordinated leader
//! election ([`LeaderElectionConfig::coordinated`] with a [`LeaseCandidate`]) the API server
//! picks the leader instead.

mod callbacks;
mod clock;
mod config;
mod elector;
mod healthz;
mod lease_candidate;
mod metrics;
mod record;
pub mod resource_lock;
#[cfg(test)]
mod test_support;

pub use callbacks::LeaderCallbacks;
pub use config::{ConfigError, JITTER_FACTOR, LeaderElectionConfig};
pub use elector::{LeaderElector, run_or_die};
pub use healthz::{CheckError, HealthzAdaptor, LeaderCheck};
pub use lease_candidate::{CANDIDATE_RENEW_INTERVAL, LeaseCandidate, OLDEST_EMULATION_VERSION};
pub use metrics::LeaderElectionMetrics;
pub use record::{LEADER_ANNOTATION, LeaderElectionRecord, RecordError};
pub use resource_lock::{
    AnyLock, ConfigMapLock, EndpointsLock, LeaseLock, LockError, LockKind, MultiLock, ObjectLock,
    ResourceLock,
};
