//! Per-item exponential backoff.

use std::hash::Hash;
use std::time::Duration;

use super::RateLimiter;
use super::failure_counts::FailureCounts;

/// Waits `base · 2^failures` for an item, capped at `max`, as client-go's
/// `ItemExponentialFailureRateLimiter`. The first `when` of an item returns `base`.
///
/// The computation cannot overflow: past the point where the doubling exceeds `max` (or any
/// representable duration) it returns `max`, for any number of failures.
///
/// ```
/// use std::time::Duration;
/// use ctrlkit_workqueue::{ItemExponentialFailureRateLimiter, RateLimiter};
///
/// let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1));
/// let waits: Vec<_> = (0..5).map(|_| limiter.when(&"one").as_millis()).collect();
/// assert_eq!(waits, [1, 2, 4, 8, 16]);
/// assert_eq!(limiter.num_requeues(&"one"), 5);
/// limiter.forget(&"one");
/// assert_eq!(limiter.when(&"one"), Duration::from_millis(1));
/// ```
#[derive(Debug)]
pub struct ItemExponentialFailureRateLimiter<T> {
    failures: FailureCounts<T>,
    base: Duration,
    max: Duration,
}

impl<T: Clone + Eq + Hash + Send> ItemExponentialFailureRateLimiter<T> {
    /// Backoff from `base`, doubling per failure, never over `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            failures: FailureCounts::new(),
            base,
            max,
        }
    }
}

/// `base · 2^exponent`, or `max` if that is larger (or not representable).
pub(crate) fn exponential(base: Duration, exponent: u32, max: Duration) -> Duration {
    if exponent >= 64 {
        return if base.is_zero() { base } else { max };
    }
    let nanos = base.as_nanos().saturating_mul(1u128 << exponent);
    if nanos >= max.as_nanos() {
        return max;
    }
    // `nanos < max.as_nanos()`, so the seconds fit in a u64 like max's do.
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    let subsec = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    Duration::new(secs, subsec)
}

impl<T: Clone + Eq + Hash + Send> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        exponential(self.base, self.failures.record(item), self.max)
    }

    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.failures.count(item) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn doubles_per_failure_and_forgets() {
        let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
        for expected in [1, 2, 4, 8, 16] {
            assert_eq!(limiter.when(&"one"), expected * MS);
        }
        assert_eq!(limiter.num_requeues(&"one"), 5);
        assert_eq!(limiter.when(&"two"), MS);
        assert_eq!(limiter.when(&"two"), 2 * MS);
        assert_eq!(limiter.num_requeues(&"two"), 2);
        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), MS);
    }

    #[test]
    fn never_overflows() {
        let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1000));
        for _ in 0..5 {
            limiter.when(&"one");
        }
        assert_eq!(limiter.when(&"one"), 32 * MS);
        for _ in 0..1000 {
            limiter.when(&"overflow1");
        }
        assert_eq!(limiter.when(&"overflow1"), Duration::from_secs(1000));

        let minute = Duration::from_secs(60);
        let limiter = ItemExponentialFailureRateLimiter::new(minute, 1000 * 60 * minute);
        for _ in 0..2 {
            limiter.when(&"two");
        }
        assert_eq!(limiter.when(&"two"), 4 * minute);
        for _ in 0..1000 {
            limiter.when(&"overflow2");
        }
        assert_eq!(limiter.when(&"overflow2"), 1000 * 60 * minute);
    }

    #[test]
    fn extreme_durations_behave() {
        assert_eq!(
            exponential(Duration::ZERO, 500, Duration::MAX),
            Duration::ZERO
        );
        assert_eq!(exponential(Duration::MAX, 0, Duration::MAX), Duration::MAX);
        assert_eq!(exponential(Duration::MAX, 63, Duration::MAX), Duration::MAX);
        assert_eq!(
            exponential(MS, u32::MAX, Duration::from_secs(7)),
            Duration::from_secs(7)
        );
        assert_eq!(exponential(MS, 3, Duration::ZERO), Duration::ZERO);
        // Just under and just over the cap.
        assert_eq!(exponential(MS, 9, Duration::from_millis(1000)), 512 * MS);
        assert_eq!(exponential(MS, 10, Duration::from_millis(1000)), 1000 * MS);
    }
}
