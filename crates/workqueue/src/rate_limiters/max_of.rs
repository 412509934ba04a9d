//! The longest wait of several limiters.

use std::time::Duration;

use super::RateLimiter;

/// Asks every limiter and waits the longest, as client-go's `MaxOfRateLimiter`. Every limiter's
/// `when` is called each time (so each counts the failure); `num_requeues` is the largest count
/// and `forget` reaches them all.
///
/// ```
/// use std::time::Duration;
/// use ctrlkit_workqueue::{ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter, RateLimiter};
///
/// let limiter = MaxOfRateLimiter::new(vec![
///     Box::new(ItemFastSlowRateLimiter::new(Duration::from_millis(5), Duration::from_secs(3), 3)),
///     Box::new(ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1))),
/// ]);
/// let waits: Vec<_> = (0..5).map(|_| limiter.when(&"one").as_millis()).collect();
/// assert_eq!(waits, [5, 5, 5, 3000, 3000]);
/// ```
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// The longest of `limiters`' waits (zero when there are none).
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }
}

impl<T> std::fmt::Debug for MaxOfRateLimiter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|limiter| limiter.when(item))
            .fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter};

    #[test]
    fn longest_wait_max_count_and_forget_everywhere() {
        let fast = Duration::from_millis(5);
        let slow = Duration::from_secs(3);
        let limiter = MaxOfRateLimiter::new(vec![
            Box::new(ItemFastSlowRateLimiter::new(fast, slow, 3)),
            Box::new(ItemExponentialFailureRateLimiter::new(
                Duration::from_millis(1),
                Duration::from_secs(1),
            )),
        ]);
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
    fn no_limiters_means_no_wait() {
        let limiter = MaxOfRateLimiter::<u8>::new(Vec::new());
        assert_eq!(limiter.when(&1), Duration::ZERO);
        assert_eq!(limiter.num_requeues(&1), 0);
    }
}
