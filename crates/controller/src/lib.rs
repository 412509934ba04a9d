//! The controller loop on ctrlkit, as client-go's sample-controller runs it and
//! controller-runtime packages it.
//!
//! Event handlers put keys on a priority work queue (keys from an initial list behind real
//! changes); workers take a key, reconcile it, and on success forget its backoff, on failure
//! requeue it rate-limited; the queue guarantees that one key is never reconciled twice at once.
//! With leader election, only the leader reconciles while every replica keeps its caches warm.
//! The user writes a [`Reconciler`] and nothing else.

mod action;
mod apply;
mod controller;
mod endpoint;
mod event_correlator;
pub mod events;
pub mod finalizer;
mod manager;
mod mapper;
mod metrics;
pub mod predicate;
mod reason;
mod reconciler;

pub use action::{Action, BoxError, ReconcileError};
pub use apply::ApplyError;
pub use controller::{Controller, ControllerError, DeadLetter, Trigger};
pub use endpoint::{EndpointError, Health};
pub use manager::{DEFAULT_GRACEFUL_SHUTDOWN, Manager, ManagerError};
pub use mapper::controller_owner_key;
pub use metrics::{ControllerMetrics, ReconcileResult};
pub use reason::ReconcileReason;
pub use reconciler::{Context, Reconciler};
