//! Fan-out from an informer to its handlers, each through its own buffer and task, or called
//! on the informer's task for handlers registered inline.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::delta::ObjectOrTombstone;
use crate::handler::{Delivery, ResourceEventHandler};

/// One notification for one handler.
pub(crate) enum Notification<K> {
    Add {
        obj: Arc<K>,
        is_in_initial_list: bool,
    },
    Update {
        old: Arc<K>,
        new: Arc<K>,
    },
    Delete(ObjectOrTombstone<K>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add {
                obj,
                is_in_initial_list,
            } => Self::Add {
                obj: Arc::clone(obj),
                is_in_initial_list: *is_in_initial_list,
            },
            Self::Update { old, new } => Self::Update {
                old: Arc::clone(old),
                new: Arc::clone(new),
            },
            Self::Delete(obj) => Self::Delete(obj.clone()),
        }
    }
}

/// How far a handler is through its share of the initial list.
#[derive(Debug, Default)]
pub(crate) struct SyncTracker {
    /// Initial-list adds queued for the handler and not yet handled.
    pending_initial: AtomicUsize,
    /// The handler was removed or the informer stopped.
    pub(crate) stopped: AtomicBool,
}

impl SyncTracker {
    pub(crate) fn pending_initial(&self) -> usize {
        self.pending_initial.load(Ordering::Acquire)
    }
}

/// What a listener's task will run on: its buffer's receiving end and its handler.
type PendingTask<K> = (
    mpsc::UnboundedReceiver<Notification<K>>,
    Arc<dyn ResourceEventHandler<K>>,
);

/// How notifications reach a listener's handler.
enum Route<K> {
    /// Through the listener's own buffer to its own task, started with the informer.
    Buffered {
        sender: mpsc::UnboundedSender<Notification<K>>,
        /// Held until the informer starts, then moved into the listener's task.
        pending_task: Option<PendingTask<K>>,
    },
    /// Called by whoever distributes: the informer's task, or a late registration. Both hold
    /// the processor's lock, so calls to the handler are sequential and in order.
    Inline(Arc<dyn ResourceEventHandler<K>>),
}

/// A registered handler, as the processor sees it.
pub(crate) struct Listener<K> {
    pub(crate) id: u64,
    route: Route<K>,
    pub(crate) tracker: Arc<SyncTracker>,
    pub(crate) requested_resync_period: Duration,
    resync_period: Duration,
    next_resync: Instant,
}

impl<K: Send + Sync + 'static> Listener<K> {
    pub(crate) fn new(
        id: u64,
        handler: Arc<dyn ResourceEventHandler<K>>,
        delivery: Delivery,
        requested_resync_period: Duration,
        resync_period: Duration,
    ) -> Self {
        let route = match delivery {
            Delivery::Buffered => {
                let (sender, receiver) = mpsc::unbounded_channel();
                Route::Buffered {
                    sender,
                    pending_task: Some((receiver, handler)),
                }
            }
            Delivery::Inline => Route::Inline(handler),
        };
        Self {
            id,
            route,
            tracker: Arc::new(SyncTracker::default()),
            requested_resync_period,
            resync_period,
            next_resync: Instant::now() + resync_period,
        }
    }

    /// Starts the listener's task on `runtime` (once; an inline listener has none).
    pub(crate) fn start(&mut self, runtime: &tokio::runtime::Handle) {
        if let Route::Buffered { pending_task, .. } = &mut self.route
            && let Some((receiver, handler)) = pending_task.take()
        {
            runtime.spawn(run_listener(receiver, handler, Arc::clone(&self.tracker)));
        }
    }

    pub(crate) fn send(&self, notification: Notification<K>) {
        match &self.route {
            Route::Buffered { sender, .. } => {
                if let Notification::Add {
                    is_in_initial_list: true,
                    ..
                } = notification
                {
                    self.tracker.pending_initial.fetch_add(1, Ordering::AcqRel);
                }
                // A closed channel means the task ended; the listener is being removed.
                let _ = sender.send(notification);
            }
            // Handled before this returns: nothing is ever pending.
            Route::Inline(handler) => {
                if !self.tracker.stopped.load(Ordering::Acquire) {
                    deliver(handler.as_ref(), &notification);
                }
            }
        }
    }

    pub(crate) fn stop(&self) {
        self.tracker.stopped.store(true, Ordering::Release);
    }
}

/// Calls `handler` with `notification`. A panicking handler loses this one notification, not
/// its whole stream.
fn deliver<K: 'static>(handler: &dyn ResourceEventHandler<K>, notification: &Notification<K>) {
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| match notification {
        Notification::Add {
            obj,
            is_in_initial_list,
        } => handler.on_add(obj, *is_in_initial_list),
        Notification::Update { old, new } => handler.on_update(old, new),
        Notification::Delete(obj) => handler.on_delete(obj),
    }));
    if outcome.is_err() {
        tracing::error!("an event handler panicked; the notification is dropped");
    }
}

async fn run_listener<K: Send + Sync + 'static>(
    mut receiver: mpsc::UnboundedReceiver<Notification<K>>,
    handler: Arc<dyn ResourceEventHandler<K>>,
    tracker: Arc<SyncTracker>,
) {
    while let Some(notification) = receiver.recv().await {
        if tracker.stopped.load(Ordering::Acquire) {
            break;
        }
        deliver(handler.as_ref(), &notification);
        if matches!(
            notification,
            Notification::Add {
                is_in_initial_list: true,
                ..
            }
        ) {
            tracker.pending_initial.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Listener ids, unique in the process, so a registration presented to another informer than
/// its own matches nothing there.
static NEXT_LISTENER_ID: AtomicU64 = AtomicU64::new(1);

/// The handlers of one informer.
pub(crate) struct Processor<K> {
    pub(crate) listeners: Vec<Listener<K>>,
    /// Ids of the listeners due a resync in the current round.
    syncing: Vec<u64>,
    /// Ids of the listeners the informer's stop let go, still removable once.
    stopped: Vec<u64>,
}

impl<K: Send + Sync + 'static> Processor<K> {
    pub(crate) fn new() -> Self {
        Self {
            listeners: Vec::new(),
            syncing: Vec::new(),
            stopped: Vec::new(),
        }
    }

    pub(crate) fn next_id(&mut self) -> u64 {
        NEXT_LISTENER_ID.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends to every listener, or for a resync only to those due one.
    pub(crate) fn distribute(&self, notification: Notification<K>, sync: bool) {
        if sync {
            for listener in &self.listeners {
                if self.syncing.contains(&listener.id) {
                    listener.send(notification.clone());
                }
            }
        } else {
            for listener in &self.listeners {
                listener.send(notification.clone());
            }
        }
    }

    /// Marks the listeners whose resync is due, and schedules their next; whether any is due.
    pub(crate) fn should_resync(&mut self) -> bool {
        let now = Instant::now();
        self.syncing.clear();
        for listener in &mut self.listeners {
            if listener.resync_period.is_zero() || now < listener.next_resync {
                continue;
            }
            self.syncing.push(listener.id);
            listener.next_resync = now + listener.resync_period;
        }
        !self.syncing.is_empty()
    }

    /// The check period changed before start: recompute every listener's period.
    pub(crate) fn resync_check_period_changed(&mut self, check_period: Duration) {
        for listener in &mut self.listeners {
            listener.resync_period =
                determine_resync_period(listener.requested_resync_period, check_period);
            listener.next_resync = Instant::now() + listener.resync_period;
        }
    }

    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let Some(index) = self.listeners.iter().position(|l| l.id == id) else {
            // A handler the informer's stop let go is still registered until removed.
            let Some(index) = self.stopped.iter().position(|&stopped| stopped == id) else {
                return false;
            };
            self.stopped.swap_remove(index);
            return true;
        };
        let listener = self.listeners.remove(index);
        listener.stop();
        self.syncing.retain(|&syncing| syncing != id);
        true
    }

    pub(crate) fn stop_all(&mut self) {
        for listener in self.listeners.drain(..) {
            listener.stop();
            self.stopped.push(listener.id);
        }
        self.syncing.clear();
    }
}

/// A listener's effective resync period: none if it asked for none or the informer checks
/// never; else at least the informer's check period.
pub(crate) fn determine_resync_period(desired: Duration, check: Duration) -> Duration {
    if desired.is_zero() {
        return desired;
    }
    if check.is_zero() {
        tracing::warn!(
            ?desired,
            "resync requested but the informer does not resync; disabled"
        );
        return Duration::ZERO;
    }
    desired.max(check)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resync_period_rules() {
        let s = Duration::from_secs;
        assert_eq!(determine_resync_period(s(0), s(10)), s(0));
        assert_eq!(determine_resync_period(s(5), s(0)), s(0));
        assert_eq!(determine_resync_period(s(5), s(10)), s(10));
        assert_eq!(determine_resync_period(s(30), s(10)), s(30));
    }
}
