//! An overall token bucket, shared by every item.

use std::time::Duration;

use tokio::time::Instant;

use super::{RateLimiter, RateLimiterError};
use crate::delaying::MAX_DELAY;
use parking_lot::Mutex;

/// A token bucket over all items, as client-go's `BucketRateLimiter` over `rate.Limiter`.
///
/// The bucket holds up to `burst` tokens and refills at `qps` per second. Every `when` reserves
/// one token, even when none is left (the bucket goes into debt), and returns how long until
/// that token exists: `rate.Limiter.Reserve().Delay()`. So `burst` calls in a row return zero,
/// and each call after waits `1/qps` longer than the one before.
///
/// Edge cases: an infinite `qps` never waits; a zero `qps` lets `burst` calls through and then
/// returns [`MAX_DELAY`] (Go returns an infinite duration); `num_requeues` is always 0 and
/// `forget` does nothing, since the bucket does not track items. Time is Tokio's clock, so a
/// paused clock in tests freezes the refill.
///
/// ```
/// use std::time::Duration;
/// use ctrlkit_workqueue::{BucketRateLimiter, RateLimiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let limiter = BucketRateLimiter::new(10.0, 2).unwrap();
/// assert_eq!(limiter.when(&"a"), Duration::ZERO);
/// assert_eq!(limiter.when(&"b"), Duration::ZERO);
/// assert_eq!(limiter.when(&"c"), Duration::from_millis(100));
/// assert_eq!(limiter.when(&"d"), Duration::from_millis(200));
/// # }
/// ```
#[derive(Debug)]
pub struct BucketRateLimiter {
    qps: f64,
    burst: u32,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Option<Instant>,
    /// What is left of the burst under a zero rate (Go's `rate.Limiter` spends its burst then).
    zero_rate_burst: u32,
}

impl BucketRateLimiter {
    /// A bucket of `burst` tokens refilled at `qps` per second; starts full.
    pub fn new(qps: f64, burst: u32) -> Result<Self, RateLimiterError> {
        if qps.is_nan() || qps < 0.0 {
            return Err(RateLimiterError::InvalidRate(qps));
        }
        Ok(Self::unchecked(qps, burst))
    }

    /// For rates known to be valid.
    pub(crate) fn unchecked(qps: f64, burst: u32) -> Self {
        Self {
            qps,
            burst,
            state: Mutex::new(Bucket {
                tokens: f64::from(burst),
                last: None,
                zero_rate_burst: burst,
            }),
        }
    }

    /// Tokens per second.
    pub fn qps(&self) -> f64 {
        self.qps
    }

    /// The bucket's size.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Reserves one token at `now` and returns the wait until it exists.
    fn reserve(&self, now: Instant) -> Duration {
        if self.qps.is_infinite() {
            return Duration::ZERO;
        }
        let mut bucket = self.state.lock();
        if self.qps == 0.0 {
            if bucket.zero_rate_burst > 0 {
                bucket.zero_rate_burst -= 1;
                return Duration::ZERO;
            }
            return MAX_DELAY;
        }
        let elapsed = bucket
            .last
            .map_or(Duration::ZERO, |last| now.saturating_duration_since(last));
        let refilled =
            (bucket.tokens + elapsed.as_secs_f64() * self.qps).min(f64::from(self.burst));
        let tokens = refilled - 1.0;
        bucket.tokens = tokens;
        bucket.last = Some(match bucket.last {
            Some(last) if last > now => last,
            _ => now,
        });
        if tokens >= 0.0 {
            return Duration::ZERO;
        }
        // Rounded to the nanosecond (Go truncates, turning 0.3 s into 299.999999 ms).
        let nanos = (-tokens * 1e9 / self.qps).round();
        if nanos >= MAX_DELAY.as_nanos() as f64 {
            return MAX_DELAY;
        }
        Duration::from_nanos(nanos as u64)
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _: &T) -> Duration {
        self.reserve(Instant::now())
    }

    fn forget(&self, _: &T) {}

    fn num_requeues(&self, _: &T) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn reservations_go_into_debt_and_refill_with_time() {
        let limiter = BucketRateLimiter::new(10.0, 100).unwrap_or_else(|_| unreachable!());
        for _ in 0..100 {
            assert_eq!(limiter.when(&()), Duration::ZERO);
        }
        // Each reservation past the burst waits a tenth of a second more.
        assert_eq!(limiter.when(&()), Duration::from_millis(100));
        assert_eq!(limiter.when(&()), Duration::from_millis(200));
        tokio::time::sleep(Duration::from_millis(300)).await;
        // 0.3 s refilled 3 tokens: the debt of 2 is paid, one token is spare.
        assert_eq!(limiter.when(&()), Duration::ZERO);
        assert_eq!(limiter.when(&()), Duration::from_millis(100));
        assert_eq!(RateLimiter::<()>::num_requeues(&limiter, &()), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn refill_never_exceeds_the_burst() {
        let limiter = BucketRateLimiter::new(1.0, 2).unwrap_or_else(|_| unreachable!());
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(limiter.when(&()), Duration::ZERO);
        assert_eq!(limiter.when(&()), Duration::ZERO);
        assert_eq!(limiter.when(&()), Duration::from_secs(1));
    }

    #[test]
    fn rejects_invalid_rates_and_handles_the_extremes() {
        assert_eq!(
            BucketRateLimiter::new(f64::NAN, 1).map(|_| ()).map_err(|e| e.to_string()),
            Err("invalid token bucket rate NaN: it must be a number >= 0 (infinity means unlimited)".to_string())
        );
        assert!(BucketRateLimiter::new(-1.0, 1).is_err());

        let unlimited = BucketRateLimiter::new(f64::INFINITY, 0).unwrap_or_else(|_| unreachable!());
        for _ in 0..1000 {
            assert_eq!(unlimited.when(&()), Duration::ZERO);
        }

        let zero = BucketRateLimiter::new(0.0, 2).unwrap_or_else(|_| unreachable!());
        assert_eq!(zero.when(&()), Duration::ZERO);
        assert_eq!(zero.when(&()), Duration::ZERO);
        assert_eq!(zero.when(&()), MAX_DELAY);

        let tiny = BucketRateLimiter::new(1e-300, 0).unwrap_or_else(|_| unreachable!());
        assert_eq!(tiny.when(&()), MAX_DELAY);
    }
}
