//! Waiting for a durable store's writes to reach the disk.
//!
//! A write to a durable store is logged under the store's lock and made durable by the
//! group-commit thread ([`super::group_commit`]) after the lock is let go, so that writes made
//! meanwhile share the next fsync. The writer then waits for its changes' outcome. A write
//! called as a plain function blocks its thread until then; the API server's handlers run
//! theirs inside [`deferring`] instead and await the outcome ([`Durable::wait`]), so no async
//! thread waits for the disk.

use std::cell::RefCell;
use std::sync::mpsc;

use tokio::sync::oneshot;

use super::StoreError;

/// The disk's word on a write: `Ok` once its changes are durable, or why they were taken back.
pub(crate) type Outcome = Result<(), String>;

/// Where the group-commit thread sends a write's outcome.
pub(crate) enum Waiter {
    /// A write inside [`deferring`], awaited later.
    Deferred(oneshot::Sender<Outcome>),
    /// A write that blocks its thread until the outcome.
    Blocking(mpsc::SyncSender<Outcome>),
}

impl Waiter {
    /// Sends the outcome; a waiter that is gone (its request was dropped) is no error.
    pub(crate) fn resolve(self, outcome: Outcome) {
        match self {
            Self::Deferred(sender) => {
                let _ = sender.send(outcome);
            }
            Self::Blocking(sender) => {
                let _ = sender.send(outcome);
            }
        }
    }
}

/// What the writer keeps of its [`Waiter`] until the outcome arrives.
pub(crate) enum Wait {
    /// Handed to the enclosing [`deferring`].
    Deferred(oneshot::Receiver<Outcome>),
    /// Received here, blocking.
    Blocking(mpsc::Receiver<Outcome>),
}

/// A waiter for the calling thread's write, and what the writer keeps of it.
pub(crate) fn waiter() -> (Waiter, Wait) {
    if DEFERRED.with(|deferred| deferred.borrow().is_some()) {
        let (sender, receiver) = oneshot::channel();
        (Waiter::Deferred(sender), Wait::Deferred(receiver))
    } else {
        let (sender, receiver) = mpsc::sync_channel(1);
        (Waiter::Blocking(sender), Wait::Blocking(receiver))
    }
}

impl Wait {
    /// Called once the store's lock is let go: a deferred wait joins the enclosing
    /// [`deferring`]; a blocking one waits here for the outcome.
    pub(crate) fn finish(self) -> Result<(), StoreError> {
        match self {
            Self::Deferred(receiver) => {
                DEFERRED.with(|deferred| {
                    if let Some(waiting) = deferred.borrow_mut().as_mut() {
                        waiting.push(receiver);
                    }
                });
                Ok(())
            }
            Self::Blocking(receiver) => settled(receiver.recv().ok()),
        }
    }
}

fn settled(outcome: Option<Outcome>) -> Result<(), StoreError> {
    match outcome {
        Some(Ok(())) => Ok(()),
        Some(Err(reason)) => Err(StoreError::Storage(reason)),
        None => Err(StoreError::Storage(
            "the store closed before the write was durable".to_string(),
        )),
    }
}

thread_local! {
    /// The waits of the writes made inside [`deferring`] on this thread.
    static DEFERRED: RefCell<Option<Vec<oneshot::Receiver<Outcome>>>> = const { RefCell::new(None) };
}

/// The writes of a [`deferring`] call on their way to the disk.
#[must_use = "a write may be acknowledged only once it is durable"]
#[derive(Default)]
pub(crate) struct Durable {
    waiting: Vec<oneshot::Receiver<Outcome>>,
}

impl Durable {
    /// Waits until every write is durable; the first that was taken back is the error.
    pub(crate) async fn wait(self) -> Result<(), StoreError> {
        for receiver in self.waiting {
            settled(receiver.await.ok())?;
        }
        Ok(())
    }
}

/// Runs `write` (synchronous store calls) so that its writes to a durable store return as soon
/// as they are logged; the returned [`Durable`] waits for them to be durable. Nothing the writes
/// return may reach a client before that wait succeeds.
pub(crate) fn deferring<T>(write: impl FnOnce() -> T) -> (T, Durable) {
    /// Puts back the enclosing call's list, even if `write` panics.
    struct Restore(Option<Vec<oneshot::Receiver<Outcome>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            DEFERRED.with(|deferred| *deferred.borrow_mut() = outer);
        }
    }
    let outer = DEFERRED.with(|deferred| deferred.replace(Some(Vec::new())));
    let restore = Restore(outer);
    let result = write();
    let waiting = DEFERRED
        .with(|deferred| deferred.borrow_mut().take())
        .unwrap_or_default();
    drop(restore);
    (result, Durable { waiting })
}

/// The result of a write made inside [`deferring`], once it is durable.
pub(crate) async fn durably<T>(
    (result, durable): (Result<T, StoreError>, Durable),
) -> Result<T, StoreError> {
    let written = result?;
    durable.wait().await?;
    Ok(written)
}
