//! The changes a store keeps for watches, and lists at an older resourceVersion, to start from.
//!
//! Kept, oldest first, are at least the newest [`StoreConfig::history`] changes, and beyond them
//! every change made within [`StoreConfig::history_age`] of the newest, as kube-apiserver's watch
//! cache grows to keep 75 s of changes; but never more than [`StoreConfig::history_bytes`] of
//! memory ([`footprint`]), so that large objects changing often, or many small ones, cannot
//! take the server's memory. Changes not yet durable are never let go: readers still look past
//! them.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::time::Instant;

use super::{StoreConfig, StoredObject, WatchEvent};

/// The memory a change takes: its object's, and the event's own. The object it replaced is not
/// counted again: it is the object of the change before it, counted there while that change is
/// kept; once that change is let go, this change's own object is mostly still in the store,
/// counted here though the history does not add it. So a history of changes to many objects
/// and one of many changes to few both take about what they count.
pub(super) fn footprint(object: &StoredObject) -> usize {
    const EVENT: usize = 256;
    object.footprint().saturating_add(EVENT)
}

/// One kept change.
struct Entry {
    event: Arc<WatchEvent>,
    /// When it was made (on the runtime's clock where there is one).
    at: Instant,
    /// Its [`footprint`].
    bytes: usize,
}

/// How much history a store keeps: see [`Store::history_usage`](super::Store::history_usage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryUsage {
    /// How many changes.
    pub changes: usize,
    /// The memory they take, as [`StoreConfig::history_bytes`] counts it.
    pub bytes: usize,
}

/// The kept changes, oldest first.
#[derive(Default)]
pub(super) struct History {
    entries: VecDeque<Entry>,
    /// The sum of the entries' `bytes`.
    bytes: usize,
}

impl History {
    /// The changes replayed from a data directory, as if made now.
    pub(super) fn recovered(events: VecDeque<Arc<WatchEvent>>) -> Self {
        let mut history = Self::default();
        for event in events {
            history.push(event);
        }
        history
    }

    /// Keeps `event`.
    pub(super) fn push(&mut self, event: Arc<WatchEvent>) {
        let bytes = event.size();
        self.bytes = self.bytes.saturating_add(bytes);
        self.entries.push_back(Entry {
            event,
            at: Instant::now(),
            bytes,
        });
    }

    /// Takes back `event` if it is the newest kept (a change that could not be logged).
    pub(super) fn take_back(&mut self, event: &Arc<WatchEvent>) {
        if self
            .entries
            .back()
            .is_some_and(|newest| Arc::ptr_eq(&newest.event, event))
            && let Some(newest) = self.entries.pop_back()
        {
            self.bytes = self.bytes.saturating_sub(newest.bytes);
        }
    }

    /// The kept changes, oldest first.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = &Arc<WatchEvent>> {
        self.entries.iter().map(|entry| &entry.event)
    }

    /// The resourceVersion of the oldest kept change.
    pub(super) fn oldest(&self) -> Option<u64> {
        self.entries
            .front()
            .map(|entry| entry.event.resource_version)
    }

    /// How many changes are kept, and the memory they take.
    pub(super) fn usage(&self) -> HistoryUsage {
        HistoryUsage {
            changes: self.entries.len(),
            bytes: self.bytes,
        }
    }

    /// Lets go of the oldest changes `config` does not keep, none newer than `visible`, into
    /// `let_go`; returns the resourceVersion of the newest let go. The caller drops `let_go`
    /// once it has released the store's lock: the last change holding a replaced object frees
    /// its whole tree, a thousand blocks for a Pod, which no other writer should wait for.
    pub(super) fn trim(
        &mut self,
        config: &StoreConfig,
        visible: u64,
        let_go: &mut Vec<Arc<WatchEvent>>,
    ) -> Option<u64> {
        let newest_at = self.entries.back()?.at;
        let mut dropped = None;
        while let Some(oldest) = self.entries.front() {
            if oldest.event.resource_version > visible {
                break;
            }
            let too_many = self.entries.len() > config.history
                && newest_at.saturating_duration_since(oldest.at) > config.history_age;
            if !too_many && self.bytes <= config.history_bytes {
                break;
            }
            dropped = self.drop_oldest(let_go);
        }
        dropped
    }

    /// Lets go of every change up to `resource_version` into `let_go`, as
    /// [`trim`](Self::trim); returns the newest let go.
    pub(super) fn drop_through(
        &mut self,
        resource_version: u64,
        let_go: &mut Vec<Arc<WatchEvent>>,
    ) -> Option<u64> {
        let mut dropped = None;
        while self
            .oldest()
            .is_some_and(|oldest| oldest <= resource_version)
        {
            dropped = self.drop_oldest(let_go);
        }
        dropped
    }

    fn drop_oldest(&mut self, let_go: &mut Vec<Arc<WatchEvent>>) -> Option<u64> {
        let oldest = self.entries.pop_front()?;
        self.bytes = self.bytes.saturating_sub(oldest.bytes);
        let version = oldest.event.resource_version;
        let_go.push(oldest.event);
        Some(version)
    }
}
