//! Group commit: the thread that makes a durable store's logged changes durable.
//!
//! Writers log their changes under the store's lock and wait ([`super::durability`]); this
//! thread takes everything logged so far, lets the lock go, syncs the log once, and takes the
//! lock again to publish what that sync made durable: watchers are sent it, readers see it,
//! and its writers are told. Writes logged during a sync share the next one, so under load one
//! fsync covers many writes, and no lock is held while the disk works.
//!
//! If a sync fails, nothing after the last durable change can be trusted to be on disk: the
//! log is cut back to it and every pending change is taken back, in memory and for its writer.
//!
//! Every snapshot interval the log starts a new segment, which must begin right after a
//! durable change: that one time, what was logged during the last sync is synced with the lock
//! held. The snapshot itself (a copy of the objects, taken under the lock) is written by a
//! thread of its own.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::data_dir::DataDir;
use super::watch::Bounds;
use super::{State, StoreConfig, WatchEvent, roll_back};

/// What the group-commit thread shares with its store.
pub(super) struct Syncer {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) logged: Arc<Condvar>,
    /// What the history keeps.
    pub(super) config: StoreConfig,
}

impl Syncer {
    /// Syncs what is logged until the store closes and nothing is pending.
    pub(super) fn run(self) {
        let mut snapshot: Option<JoinHandle<()>> = None;
        let mut let_go = Vec::new();
        let mut state = self.state.lock();
        loop {
            let Some(through) = newest_pending(&state) else {
                if state.closing {
                    break;
                }
                self.logged.wait(&mut state);
                continue;
            };
            let Some(data) = state.data.as_mut() else {
                break;
            };
            let job = data.sync_job();
            let length = job.length;
            match MutexGuard::unlocked(&mut state, || job.run()) {
                Ok(()) => {
                    self.made_durable(&mut state, through, length, &mut let_go);
                    if state.data.as_ref().is_some_and(DataDir::snapshot_due) {
                        // One snapshot at a time: the last, begun an interval ago, is
                        // normally done by now. Its writers are told after the rotation,
                        // so a lone writer's next change is in the new segment.
                        if let Some(last) = snapshot.take() {
                            let _ = MutexGuard::unlocked(&mut state, || last.join());
                        }
                        snapshot = self.rotate(&mut state, &mut let_go);
                    }
                    tell_writers(&mut state, through);
                    if !let_go.is_empty() {
                        let let_go = std::mem::take(&mut let_go);
                        MutexGuard::unlocked(&mut state, || drop(let_go));
                    }
                }
                Err(error) => take_back(&mut state, &error),
            }
        }
        drop(state);
        if let Some(snapshot) = snapshot {
            let _ = snapshot.join();
        }
    }

    /// Records that a sync made the log durable up to `length`, which ends with the change
    /// `through`, and publishes the changes it made durable. The changes the history lets go
    /// are added to `let_go`, to be dropped once the lock is released.
    fn made_durable(
        &self,
        state: &mut State,
        through: u64,
        length: u64,
        let_go: &mut Vec<Arc<WatchEvent>>,
    ) {
        if let Some(data) = state.data.as_mut() {
            data.synced(length);
        }
        let_go.extend(publish_through(state, through, &self.config));
    }

    /// Starts a new log segment after the newest change, once it is durable, and a thread that
    /// writes the snapshot of the state there.
    fn rotate(
        &self,
        state: &mut State,
        let_go: &mut Vec<Arc<WatchEvent>>,
    ) -> Option<JoinHandle<()>> {
        if let Some(through) = newest_pending(state) {
            let job = state.data.as_mut()?.sync_job();
            let length = job.length;
            if let Err(error) = job.run() {
                take_back(state, &error);
                return None;
            }
            self.made_durable(state, through, length, let_go);
            tell_writers(state, through);
        }
        let next = state.issued + 1;
        let State { data, objects, .. } = state;
        let job = match data.as_mut()?.rotate(next, objects) {
            Ok(job) => job,
            Err(error) => {
                tracing::warn!(%error, "could not start a new log segment; the log grows until the next snapshot");
                return None;
            }
        };
        let written = std::thread::Builder::new()
            .name("ctrlkit-snapshot".to_string())
            .spawn(move || {
                if let Err(error) = job.run() {
                    tracing::warn!(%error, "could not write a snapshot; the log grows until the next one");
                }
            });
        match written {
            Ok(thread) => Some(thread),
            Err(error) => {
                tracing::warn!(%error, "could not start the snapshot's thread; the log grows until the next one");
                None
            }
        }
    }
}

/// The resourceVersion of the newest pending change.
fn newest_pending(state: &State) -> Option<u64> {
    state
        .pending
        .back()
        .map(|(event, _)| event.resource_version)
}

/// Makes every pending change up to `through` visible: sent to watchers, seen by readers;
/// history beyond its limit is let go (never a pending change, which readers still need to see
/// past). Its writers are told by [`tell_writers`].
///
/// Returns the changes the history let go, for the caller to drop once it has released the
/// lock (see [`History::trim`](super::history::History::trim)).
#[must_use = "the changes let go are to be dropped after the lock is released"]
pub(super) fn publish_through(
    state: &mut State,
    through: u64,
    config: &StoreConfig,
) -> Vec<Arc<WatchEvent>> {
    let bounds = Bounds {
        events: config.watch_buffer.max(1),
        bytes: config.watch_buffer_bytes,
    };
    while state
        .pending
        .front()
        .is_some_and(|(event, _)| event.resource_version <= through)
    {
        if let Some((event, _)) = state.pending.pop_front() {
            state.watchers.publish(&event, bounds);
        }
    }
    state.visible = state.visible.max(through);
    // After the watchers' buffers are filled: a watcher that reads this finds every event up
    // to it in its buffer (see `Watch::progress`).
    state.published.store(state.visible, Ordering::Release);
    let mut let_go = Vec::new();
    if let Some(dropped) = state.history.trim(config, state.visible, &mut let_go) {
        state.compacted = dropped;
    }
    let_go
}

/// Tells the writers waiting for changes up to `through` that they are durable.
fn tell_writers(state: &mut State, through: u64) {
    let waiters = std::mem::take(&mut state.waiters);
    for (version, waiter) in waiters {
        if version <= through {
            waiter.resolve(Ok(()));
        } else {
            state.waiters.push((version, waiter));
        }
    }
}

/// After a failed sync: the log cut back to its last durable change, every pending change
/// taken back, and their writers told why. If the log cannot be cut back, the store takes no
/// more writes.
fn take_back(state: &mut State, error: &io::Error) {
    let mut reason = format!("the write-ahead log cannot be synced: {error}");
    match state.data.as_mut().map(DataDir::cut_to_synced) {
        Some(Err(cut)) => {
            reason = format!("{reason}, and cannot be cut back: {cut}");
            tracing::error!(%reason, "the store takes no more writes");
            state.failed = Some(reason.clone());
        }
        _ => tracing::warn!(%reason, "pending writes were refused and taken back"),
    }
    let pending: Vec<_> = state.pending.drain(..).collect();
    roll_back(state, &pending);
    // Writers of changes made durable before (not told yet, during a rotation) keep them.
    let visible = state.visible;
    for (version, waiter) in state.waiters.drain(..) {
        waiter.resolve(if version <= visible {
            Ok(())
        } else {
            Err(reason.clone())
        });
    }
}
