//! The one thing a user writes: reconcile a key.

use std::future::Future;

use tokio_util::sync::CancellationToken;

use crate::action::{Action, ReconcileError};
use crate::events::EventRecorder;
use crate::reason::ReconcileReason;

/// What a reconcile knows besides its key.
#[derive(Debug, Clone)]
pub struct Context {
    /// The controller's name.
    pub controller: String,
    /// How many times this key has failed in a row (client-go's `NumRequeues`).
    pub retries: usize,
    /// Fires when the controller stops (or loses leadership): long work should wind up. A
    /// reconcile that outlives its timeout is dropped at the deadline, without warning.
    pub cancel: CancellationToken,
    /// What queued the key (also the `object.reason` field of the reconcile's span).
    pub reason: ReconcileReason,
    /// The controller's event recorder, when it has one
    /// ([`Controller::event_recorder`](crate::Controller::event_recorder)).
    pub recorder: Option<EventRecorder>,
}

impl Context {
    /// The context of a reconcile of controller `controller`, as a test calls a reconciler
    /// directly: no retries yet, not cancelled, reason unknown.
    pub fn new(controller: &str) -> Self {
        Self {
            controller: controller.to_owned(),
            retries: 0,
            cancel: CancellationToken::new(),
            reason: ReconcileReason::Unknown,
            recorder: None,
        }
    }
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
