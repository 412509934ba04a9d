//! What the elector calls when leadership starts, stops, or passes to someone else.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

type StartedLeading = Box<dyn Fn(CancellationToken) -> BoxFuture<'static, ()> + Send + Sync>;
type StoppedLeading = Box<dyn Fn() + Send + Sync>;
type NewLeader = Arc<dyn Fn(&str) + Send + Sync>;

/// client-go's `LeaderCallbacks`. The two that client-go requires are arguments of
/// [`new`](Self::new), so a configuration without them cannot be written.
///
/// ```
/// use ctrlkit_leaderelection::LeaderCallbacks;
///
/// let callbacks = LeaderCallbacks::new(
///     |leading| async move {
///         // Work as the leader until `leading` is cancelled.
///         leading.cancelled().await;
///     },
///     || println!("stopped leading"),
/// )
/// .on_new_leader(|identity| println!("{identity} leads"));
/// # drop(callbacks);
/// ```
pub struct LeaderCallbacks {
    pub(crate) on_started_leading: StartedLeading,
    pub(crate) on_stopped_leading: StoppedLeading,
    pub(crate) on_new_leader: Option<NewLeader>,
}

impl std::fmt::Debug for LeaderCallbacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderCallbacks")
            .field("on_new_leader", &self.on_new_leader.is_some())
            .finish_non_exhaustive()
    }
}

impl LeaderCallbacks {
    /// `on_started_leading` runs as its own task when this candidate becomes the leader; its
    /// token is cancelled the moment leadership is lost or the elector is cancelled, and the task
    /// is aborted (and awaited) if it has not finished when the lease of the leader's last write
    /// runs out, counted from the moment that write started: before any follower can take the
    /// lock. Tasks it spawned itself are its own to stop.
    /// `on_stopped_leading` runs once when the elector stops, whether or not it ever led.
    pub fn new<S, F, T>(on_started_leading: S, on_stopped_leading: T) -> Self
    where
        S: Fn(CancellationToken) -> F + Send + Sync + 'static,
        F: Future<Output = ()> + Send + 'static,
        T: Fn() + Send + Sync + 'static,
    {
        Self {
            on_started_leading: Box::new(move |token| Box::pin(on_started_leading(token))),
            on_stopped_leading: Box::new(on_stopped_leading),
            on_new_leader: None,
        }
    }

    /// Called with the holder's identity each time this candidate observes a different holder
    /// (including itself, and `""` after a release). It runs on the elector's tasks (the
    /// election and, while following, the lock's watch): keep it short.
    #[must_use]
    pub fn on_new_leader(mut self, on_new_leader: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_new_leader = Some(Arc::new(on_new_leader));
        self
    }
}
