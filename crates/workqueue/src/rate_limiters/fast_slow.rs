//! A fixed short wait for the first attempts, then a long one.

use std::hash::Hash;
use std::time::Duration;

use super::RateLimiter;
use super::failure_counts::FailureCounts;

/// Waits `fast` for an item's first `max_fast_attempts` failures and `slow` after, as client-go's
/// `ItemFastSlowRateLimiter`.
///
/// ```
/// use std::time::Duration;
/// use ctrlkit_workqueue::{ItemFastSlowRateLimiter, RateLimiter};
///
/// let limiter = ItemFastSlowRateLimiter::new(Duration::from_millis(5), Duration::from_secs(10), 3);
/// let waits: Vec<_> = (0..5).map(|_| limiter.when(&"one").as_millis()).collect();
/// assert_eq!(waits, [5, 5, 5, 10_000, 10_000]);
/// ```
#[derive(Debug)]
pub struct ItemFastSlowRateLimiter<T> {
    failures: FailureCounts<T>,
    fast: Duration,
    slow: Duration,
    max_fast_attempts: usize,
}

impl<T: Clone + Eq + Hash + Send> ItemFastSlowRateLimiter<T> {
    /// `fast` for the first `max_fast_attempts` failures of an item, `slow` afterwards.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: usize) -> Self {
        Self {
            failures: FailureCounts::new(),
            fast,
            slow,
            max_fast_attempts,
        }
    }
}

impl<T: Clone + Eq + Hash + Send> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        // This failure is number `before + 1`.
        let before = self.failures.record(item) as usize;
        if before < self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
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

    #[test]
    fn fast_then_slow_and_forget() {
        let fast = Duration::from_millis(5);
        let slow = Duration::from_secs(10);
        let limiter = ItemFastSlowRateLimiter::new(fast, slow, 3);
        for expected in [fast, fast, fast, slow, slow] {
            assert_eq!(limiter.when(&"one"), expected);
        }
        assert_eq!(limiter.num_requeues(&"one"), 5);
        assert_eq!(limiter.when(&"two"), fast);
        assert_eq!(limiter.when(&"two"), fast);
        assert_eq!(limiter.num_requeues(&"two"), 2);
        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), fast);
    }

    #[test]
    fn zero_fast_attempts_is_always_slow() {
        let limiter = ItemFastSlowRateLimiter::new(Duration::ZERO, Duration::from_secs(1), 0);
        assert_eq!(limiter.when(&1), Duration::from_secs(1));
    }
}
