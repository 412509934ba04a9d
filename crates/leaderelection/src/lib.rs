//! client-go's leader election for Rust.
//!
//! Candidates race for a resource lock; the leader renews it every retry period, the others
//! watch its record, and optimistic concurrency on resourceVersion decides every race. This
//! crate holds the record every lock stores ([`LeaderElectionRecord`]), the election's timing
//! ([`LeaderElectionConfig`], validated as client-go validates it) and the [`LeaseLock`]; the
//! annotation locks and the elector build on them.

mod config;
mod lease_lock;
mod lock;
mod record;

pub use config::{ConfigError, JITTER_FACTOR, LeaderElectionConfig};
pub use lease_lock::LeaseLock;
pub use lock::{LockError, ResourceLock};
pub use record::{LEADER_ANNOTATION, LeaderElectionRecord, RecordError};
