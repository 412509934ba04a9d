//! A watch on the store: the events a watcher is owed, then the live ones.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::broadcast;

use super::event::WatchEvent;
use crate::resource::ResourceKey;

/// Why a watch ended before its watcher stopped it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// The watcher fell more than the store's buffer behind; kube-apiserver closes such a watch
    /// too, and the client resumes from its last resourceVersion.
    #[error(
        "the watcher fell {0} events behind and was closed; resume from the last resourceVersion seen"
    )]
    Lagged(u64),
}

/// The events of one resource (and namespace, if given) from a starting point on.
pub struct Watch {
    pub(crate) owed: VecDeque<Arc<WatchEvent>>,
    pub(crate) live: broadcast::Receiver<Arc<WatchEvent>>,
    pub(crate) resource: ResourceKey,
    pub(crate) namespace: Option<String>,
    /// Every change up to this resourceVersion has been handed out or skipped (as another
    /// resource's, or from before the start).
    pub(crate) seen_up_to: u64,
    /// The store's resourceVersion when the watch started.
    pub(crate) start: u64,
}

impl Watch {
    fn matches(&self, event: &WatchEvent) -> bool {
        event.resource == self.resource
            && self
                .namespace
                .as_ref()
                .is_none_or(|namespace| *namespace == event.namespace)
    }

    /// How many events of history (or initial events) are still to be handed out.
    pub fn owed_len(&self) -> usize {
        self.owed.len()
    }

    /// The store's resourceVersion when the watch started: the initial events (from
    /// [`WatchStart::Current`](super::WatchStart::Current)) are complete as of it.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// A resourceVersion this watch has fully caught up with: a client that resumes from it
    /// misses nothing of this watch (what a bookmark may carry).
    pub fn progress(&self) -> u64 {
        if self.owed.is_empty() {
            self.seen_up_to
        } else {
            // Still handing out history: only up to just before the next owed event.
            self.owed
                .front()
                .map_or(self.seen_up_to, |next| {
                    next.resource_version.saturating_sub(1)
                })
                .min(self.seen_up_to)
        }
    }

    /// A live event, if it is news for this watch (not already owed) and of its resource and
    /// namespace.
    fn accept(&mut self, event: Arc<WatchEvent>) -> Option<Arc<WatchEvent>> {
        if event.resource_version <= self.seen_up_to {
            return None;
        }
        self.seen_up_to = event.resource_version;
        self.matches(&event).then_some(event)
    }

    /// The next event if one is ready now, without waiting.
    pub fn try_next(&mut self) -> Result<Option<Arc<WatchEvent>>, WatchError> {
        if let Some(event) = self.owed.pop_front() {
            return Ok(Some(event));
        }
        loop {
            match self.live.try_recv() {
                Ok(event) => {
                    if let Some(event) = self.accept(event) {
                        return Ok(Some(event));
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(missed)) => {
                    return Err(WatchError::Lagged(missed));
                }
                Err(
                    broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed,
                ) => {
                    return Ok(None);
                }
            }
        }
    }

    /// The next event; `Ok(None)` when the store is gone.
    pub async fn next(&mut self) -> Result<Option<Arc<WatchEvent>>, WatchError> {
        if let Some(event) = self.owed.pop_front() {
            return Ok(Some(event));
        }
        loop {
            match self.live.recv().await {
                Ok(event) => {
                    if let Some(event) = self.accept(event) {
                        return Ok(Some(event));
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    return Err(WatchError::Lagged(missed));
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(None),
            }
        }
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("resource", &self.resource)
            .field("namespace", &self.namespace)
            .field("owed", &self.owed.len())
            .finish_non_exhaustive()
    }
}
