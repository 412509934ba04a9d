//! The one thing a user writes: reconcile a key.

use std::future::Future;

use tokio_util::sync::CancellationToken;

use crate::action::{Action, ReconcileError};

/// What a reconcile knows besides its key.
#[derive(Debug, Clone)]
pub struct Context {
    /// The controller's name.
    pub controller: String,
    /// How many times this key has failed in a row (client-go's `NumRequeues`).
    pub retries: usize,
    /// Fires when the reconcile's time is up or the controller stops: long work should stop
    /// then (the reconcile is dropped shortly after anyway).
    pub cancel: CancellationToken,
}

/// Reconciles one key (`namespace/name`, or `name` for cluster-scoped objects) to its desired
/// state. It reads the object from a lister (it may be gone: then clean up), acts, and returns.
/// The controller guarantees that a key is never reconciled twice at once.
pub trait Reconciler: Send + Sync + 'static {
    /// Reconciles `key`.
    fn reconcile(
        &self,
        key: &str,
        ctx: &Context,
    ) -> impl Future<Output = Result<Action, ReconcileError>> + Send;
}
