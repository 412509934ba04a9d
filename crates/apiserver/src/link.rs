//! The state of the link between the server and its clients, shared by the TCP listener and the
//! in-process transport so that partitions, restarts and shutdown reach both the same way.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Whether clients can reach the server, and which "connection generation" they are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    /// Bumped at every partition or restart: whatever was opened under an older epoch (a
    /// connection, an in-flight call, a response body) is dropped.
    pub(crate) epoch: u64,
    /// While the clock is before this, new connections and calls are refused.
    pub(crate) down_until: Option<Instant>,
    /// The server has stopped: everything is refused and dropped for good.
    pub(crate) stopped: bool,
}

impl Link {
    /// A link that is up.
    pub(crate) fn up() -> Self {
        Self {
            epoch: 0,
            down_until: None,
            stopped: false,
        }
    }

    /// Drops everything open now and refuses for `duration` from now (a partition already under
    /// way lasts until the later of the two ends).
    pub(crate) fn partition(&mut self, duration: Duration) {
        self.epoch = self.epoch.wrapping_add(1);
        let until = Instant::now() + duration.min(FOR_EVER);
        self.down_until = Some(self.down_until.map_or(until, |current| current.max(until)));
    }

    /// Drops everything and refuses from now on.
    pub(crate) fn stop(&mut self) {
        self.stopped = true;
    }

    /// Whether a new connection or call is refused now.
    pub(crate) fn is_down(&self) -> bool {
        self.stopped || self.down_until.is_some_and(|until| Instant::now() < until)
    }
}

/// The longest partition: thirty years, "for ever" to a test, and far from overflowing the
/// monotonic clock (which counts from boot) when added to now.
const FOR_EVER: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Resolves once whatever was opened at `epoch` is dropped: a partition or restart began since,
/// or the server stopped (or is gone).
pub(crate) async fn cut(mut link: watch::Receiver<Link>, epoch: u64) {
    // An error means the server (the sender) is gone, which drops everything too.
    let _ = link
        .wait_for(|link| link.stopped || link.epoch != epoch)
        .await;
}
