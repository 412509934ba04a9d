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
    /// Live events up to this resourceVersion were already owed (or are older than the start).
    pub(crate) seen_up_to: u64,
}

impl Watch {
    fn matches(&self, event: &WatchEvent) -> bool {
        event.resource == self.resource
            && self
                .namespace
                .as_ref()
                .is_none_or(|namespace| *namespace == event.namespace)
    }

    /// The next event; `Ok(None)` when the store is gone.
    pub async fn next(&mut self) -> Result<Option<Arc<WatchEvent>>, WatchError> {
        if let Some(event) = self.owed.pop_front() {
            return Ok(Some(event));
        }
        loop {
            match self.live.recv().await {
                Ok(event) => {
                    if event.resource_version > self.seen_up_to && self.matches(&event) {
                        self.seen_up_to = event.resource_version;
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
