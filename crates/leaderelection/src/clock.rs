//! Time for the election: a monotonic clock for every decision, and wall time derived from it
//! for the timestamps written into the record.

use jiff::Timestamp;
use tokio::time::Instant;

/// Wall time that advances with Tokio's clock, so records written on a paused clock carry
/// timestamps that agree with the test's virtual time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WallClock {
    wall: Timestamp,
    instant: Instant,
}

impl WallClock {
    pub(crate) fn new() -> Self {
        Self {
            wall: Timestamp::now(),
            instant: Instant::now(),
        }
    }

    /// The wall time now.
    pub(crate) fn now(&self) -> Timestamp {
        let elapsed = Instant::now().saturating_duration_since(self.instant);
        let nanos = i128::try_from(elapsed.as_nanos()).unwrap_or(i128::MAX);
        Timestamp::from_nanosecond(self.wall.as_nanosecond().saturating_add(nanos))
            .unwrap_or(self.wall)
    }
}
