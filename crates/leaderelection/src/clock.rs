//! Time for the election: a monotonic clock for every decision, and wall time derived from it
//! for the timestamps written into the record.

use std::sync::OnceLock;

use jiff::Timestamp;
use tokio::time::Instant;

/// Wall time that advances with Tokio's clock, anchored once per process so that every elector
/// in it writes timestamps on one timeline (on a paused clock, too: records written in virtual
/// time carry timestamps that agree with it).
///
/// One timeline matters because followers compare records as written: two writes by the same
/// identity are told apart by their renew time, so a restarted candidate must not write the
/// timestamp its previous incarnation wrote seconds of virtual time earlier.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WallClock {
    wall: Timestamp,
    instant: Instant,
}

static ANCHOR: OnceLock<WallClock> = OnceLock::new();

impl WallClock {
    pub(crate) fn new() -> Self {
        *ANCHOR.get_or_init(|| Self {
            wall: Timestamp::now(),
            instant: Instant::now(),
        })
    }

    /// The wall time now.
    pub(crate) fn now(&self) -> Timestamp {
        let elapsed = Instant::now().saturating_duration_since(self.instant);
        let nanos = i128::try_from(elapsed.as_nanos()).unwrap_or(i128::MAX);
        Timestamp::from_nanosecond(self.wall.as_nanosecond().saturating_add(nanos))
            .unwrap_or(self.wall)
    }
}
