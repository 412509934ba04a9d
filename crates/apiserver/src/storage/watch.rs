//! A watch on the store: the events a watcher is owed, then the live ones.
//!
//! As kube-apiserver's watch cache does, every watcher has a buffer of its own, filled by the
//! store as it publishes changes: only the changes of its resource and namespace reach it, and a
//! watcher whose buffer passes its bound (in events or in bytes) is cut at once, its buffer let
//! go, rather than holding on to every change it has not read. Its client resumes from the last
//! resourceVersion it saw.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::event::WatchEvent;
use crate::resource::ResourceKey;

/// Why a watch ended before its watcher stopped it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// The watcher fell behind by more than its buffer holds (see
    /// [`StoreConfig::watch_buffer`](super::StoreConfig::watch_buffer)); kube-apiserver closes
    /// such a watch too, and the client resumes from its last resourceVersion.
    #[error(
        "the watcher fell {0} events behind and was closed; resume from the last resourceVersion seen"
    )]
    Lagged(u64),
}

/// The changes published to one watcher and not yet handed out.
struct Buffer {
    events: VecDeque<Arc<WatchEvent>>,
    /// The sum of the buffered events' sizes.
    bytes: usize,
    /// Set when the watcher was cut: how many events it had not read.
    lagged: Option<u64>,
    /// Set when the store is gone.
    closed: bool,
}

/// One watcher's buffer, shared by the store (which fills it) and the [`Watch`].
pub(super) struct Subscription {
    namespace: Option<String>,
    buffer: Mutex<Buffer>,
    /// Wakes the watcher: an event, a cut or the store's end.
    ready: Notify,
}

/// How far a watcher may fall behind.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    pub(super) events: usize,
    pub(super) bytes: usize,
}

/// The live watchers of a store, by resource.
#[derive(Default)]
pub(super) struct Watchers {
    by_resource: HashMap<ResourceKey, Vec<Weak<Subscription>>>,
}

impl Watchers {
    /// A buffer for a new watcher of `resource` (in `namespace`, if given).
    pub(super) fn subscribe(
        &mut self,
        resource: &ResourceKey,
        namespace: Option<String>,
    ) -> Arc<Subscription> {
        let subscription = Arc::new(Subscription {
            namespace,
            buffer: Mutex::new(Buffer {
                events: VecDeque::new(),
                bytes: 0,
                lagged: None,
                closed: false,
            }),
            ready: Notify::new(),
        });
        let watchers = self.by_resource.entry(resource.clone()).or_default();
        // Watches that ended are forgotten here too, for resources that rarely change.
        watchers.retain(|watcher| watcher.strong_count() > 0);
        watchers.push(Arc::downgrade(&subscription));
        subscription
    }

    /// Hands `event` to each watcher of its resource and namespace; a watcher that would fall
    /// behind by more than `bounds` is cut instead, and what it had not read is let go.
    pub(super) fn publish(&mut self, event: &Arc<WatchEvent>, bounds: Bounds) {
        let Some(watchers) = self.by_resource.get_mut(&event.resource) else {
            return;
        };
        watchers.retain(|watcher| {
            let Some(watcher) = watcher.upgrade() else {
                return false;
            };
            if watcher
                .namespace
                .as_ref()
                .is_some_and(|namespace| *namespace != event.namespace)
            {
                return true;
            }
            let mut buffer = watcher.buffer.lock();
            if buffer.lagged.is_some() {
                return false;
            }
            let bytes = buffer.bytes.saturating_add(event.size());
            if buffer.events.len() >= bounds.events || bytes > bounds.bytes {
                buffer.lagged = Some(buffer.events.len() as u64 + 1);
                buffer.events = VecDeque::new();
                buffer.bytes = 0;
                drop(buffer);
                watcher.ready.notify_one();
                return false;
            }
            buffer.bytes = bytes;
            buffer.events.push_back(Arc::clone(event));
            drop(buffer);
            watcher.ready.notify_one();
            true
        });
    }

    /// Ends every watch: the store is gone.
    pub(super) fn close(&mut self) {
        for watcher in self.by_resource.values().flatten() {
            if let Some(watcher) = watcher.upgrade() {
                watcher.buffer.lock().closed = true;
                watcher.ready.notify_one();
            }
        }
        self.by_resource.clear();
    }
}

/// The events of one resource (and namespace, if given) from a starting point on.
pub struct Watch {
    pub(super) owed: VecDeque<Arc<WatchEvent>>,
    pub(super) live: Arc<Subscription>,
    /// The store's newest published resourceVersion.
    pub(super) published: Arc<AtomicU64>,
    /// The store's resourceVersion when the watch started.
    pub(super) start: u64,
}

impl Watch {
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
        if let Some(next) = self.owed.front() {
            // Still handing out history: only up to just before the next owed event.
            return next.resource_version.saturating_sub(1).min(self.start);
        }
        // Read before the buffer: every event published up to it is in the buffer by then.
        let published = self.published.load(Ordering::Acquire).max(self.start);
        match self.live.buffer.lock().events.front() {
            Some(next) => next.resource_version.saturating_sub(1),
            None => published,
        }
    }

    /// The next event if one is ready now, without waiting.
    pub fn try_next(&mut self) -> Result<Option<Arc<WatchEvent>>, WatchError> {
        if let Some(event) = self.owed.pop_front() {
            return Ok(Some(event));
        }
        let mut buffer = self.live.buffer.lock();
        if let Some(event) = buffer.events.pop_front() {
            buffer.bytes = buffer.bytes.saturating_sub(event.size());
            return Ok(Some(event));
        }
        match buffer.lagged {
            Some(missed) => Err(WatchError::Lagged(missed)),
            None => Ok(None),
        }
    }

    /// The next event; `Ok(None)` when the store is gone. Cancel-safe: an event is only taken
    /// when it is returned.
    pub async fn next(&mut self) -> Result<Option<Arc<WatchEvent>>, WatchError> {
        loop {
            if let Some(event) = self.try_next()? {
                return Ok(Some(event));
            }
            if self.live.buffer.lock().closed {
                return Ok(None);
            }
            // A notification sent since the check above is kept for this wait.
            self.live.ready.notified().await;
        }
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("namespace", &self.live.namespace)
            .field("owed", &self.owed.len())
            .finish_non_exhaustive()
    }
}
