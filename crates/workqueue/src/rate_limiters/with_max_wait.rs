//! Another limiter's wait, capped.

use std::time::Duration;

use super::RateLimiter;

/// Caps another limiter's wait at `max_wait`, as client-go's `WithMaxWaitRateLimiter`.
///
/// ```
/// use std::time::Duration;
/// use ctrlkit_workqueue::{ItemExponentialFailureRateLimiter, RateLimiter, WithMaxWaitRateLimiter};
///
/// let limiter = WithMaxWaitRateLimiter::new(
///     ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(1000)),
///     Duration::from_secs(5),
/// );
/// let waits: Vec<_> = (0..5).map(|_| limiter.when(&"one").as_secs()).collect();
/// assert_eq!(waits, [1, 2, 4, 5, 5]);
/// ```
#[derive(Debug)]
pub struct WithMaxWaitRateLimiter<L> {
    limiter: L,
    max_wait: Duration,
}

impl<L> WithMaxWaitRateLimiter<L> {
    /// `limiter`'s waits, never longer than `max_wait`.
    pub fn new(limiter: L, max_wait: Duration) -> Self {
        Self { limiter, max_wait }
    }
}

impl<T, L: RateLimiter<T>> RateLimiter<T> for WithMaxWaitRateLimiter<L> {
    fn when(&self, item: &T) -> Duration {
        self.limiter.when(item).min(self.max_wait)
    }

    fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::default_controller_rate_limiter;

    #[tokio::test(start_paused = true)]
    async fn caps_the_default_controller_limiter() {
        let limiter = WithMaxWaitRateLimiter::new(
            default_controller_rate_limiter::<u32>(),
            Duration::from_secs(500),
        );
        // The bucket's burst of 100: only the exponential backoff's first 5 ms.
        for item in 0..100 {
            assert_eq!(limiter.when(&item), Duration::from_millis(5));
        }
        // Then the bucket's debt grows by 100 ms per call; on a paused clock nothing refills.
        for item in 100..5100u32 {
            let expected = Duration::from_millis(100) * (item - 99);
            assert_eq!(limiter.when(&item), expected.min(Duration::from_secs(500)));
        }
        for item in 5100..5200 {
            assert_eq!(limiter.when(&item), Duration::from_secs(500));
        }
    }
}
