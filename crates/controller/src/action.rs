//! What a reconcile returns: done, come back later, or an error (retried or terminal).

use std::time::Duration;

/// A boxed error, what reconcile errors carry.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What to do with a key after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Nothing more to do until the next change (the key's backoff is reset).
    pub fn done() -> Self {
        Self::default()
    }

    /// Reconcile the key again after `delay` even if nothing changes (its backoff is reset).
    pub fn requeue_after(delay: Duration) -> Self {
        Self {
            requeue_after: Some(delay),
        }
    }

    /// The delay asked for, if any.
    pub fn requeue_delay(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// Why a reconcile failed.
///
/// `?` turns any error into a [`ReconcileError::Retry`]: the key comes back after its
/// rate-limited backoff. [`ReconcileError::terminal`] marks an error that retrying cannot fix
/// (an invalid spec): the key is not requeued until the object changes.
#[derive(Debug)]
pub enum ReconcileError {
    /// Retry with the rate limiter's backoff.
    Retry(BoxError),
    /// Do not retry; wait for the next change.
    Terminal(BoxError),
}

impl ReconcileError {
    /// A terminal error.
    pub fn terminal(error: impl Into<BoxError>) -> Self {
        Self::Terminal(error.into())
    }

    /// A retried error from a message or any error.
    pub fn retry(error: impl Into<BoxError>) -> Self {
        Self::Retry(error.into())
    }

    /// Whether it is terminal.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Terminal(_))
    }
}

impl std::fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Retry(error) => write!(f, "{error}"),
            Self::Terminal(error) => write!(f, "terminal: {error}"),
        }
    }
}

// Not `std::error::Error` itself, so that every error converts into it with `?`.
impl<E: std::error::Error + Send + Sync + 'static> From<E> for ReconcileError {
    fn from(error: E) -> Self {
        Self::Retry(Box::new(error))
    }
}
