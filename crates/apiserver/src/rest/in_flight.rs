//! The cap on requests served at once (kube-apiserver's `--max-requests-inflight` and
//! `--max-mutating-requests-inflight`): past it a request is answered 429 at once, with
//! `Retry-After`, instead of queueing without bound. Long-running requests (watches and the
//! like) and the health endpoints are not counted, so watchers and probes are never turned away.

use std::sync::Arc;

use axum::http::Method;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The two budgets of requests in flight; `None` is no cap.
#[derive(Debug)]
pub(crate) struct InFlight {
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
}

impl InFlight {
    /// Caps of `read_only` and `mutating` requests at once (0: no cap).
    pub(crate) fn new(read_only: usize, mutating: usize) -> Self {
        let cap = |count: usize| (count > 0).then(|| Arc::new(Semaphore::new(count)));
        Self {
            read_only: cap(read_only),
            mutating: cap(mutating),
        }
    }

    /// A place for a request of `method`, held until it is answered; `Err` when every place
    /// of its kind is taken.
    pub(crate) fn admit(&self, method: &Method) -> Result<Option<OwnedSemaphorePermit>, Full> {
        let mutating = matches!(
            *method,
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        );
        let budget = if mutating {
            &self.mutating
        } else {
            &self.read_only
        };
        match budget {
            None => Ok(None),
            Some(places) => Arc::clone(places)
                .try_acquire_owned()
                .map(Some)
                .map_err(|_| Full),
        }
    }
}

/// Every place is taken.
#[derive(Debug)]
pub(crate) struct Full;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_given_back_and_the_two_budgets_are_apart() {
        let in_flight = InFlight::new(1, 1);
        let read = in_flight.admit(&Method::GET).unwrap();
        assert!(in_flight.admit(&Method::GET).is_err());
        let write = in_flight.admit(&Method::POST).unwrap();
        assert!(in_flight.admit(&Method::DELETE).is_err());
        drop((read, write));
        assert!(in_flight.admit(&Method::GET).is_ok());
        let unlimited = InFlight::new(0, 0);
        let held: Vec<_> = (0..1000)
            .map(|_| unlimited.admit(&Method::GET).unwrap())
            .collect();
        assert_eq!(held.len(), 1000);
    }
}
