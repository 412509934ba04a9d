//! Rate limiters: how long an item waits before it is retried.
//!
//! Every limiter implements [`RateLimiter`], which is object-safe, so limiters compose
//! ([`MaxOfRateLimiter`], [`WithMaxWaitRateLimiter`]) and users can write their own. The built-ins
//! are client-go's:
//!
//! | limiter | `when` returns |
//! |---|---|
//! | [`ItemExponentialFailureRateLimiter`] | `base · 2^failures`, capped at `max` (never overflows) |
//! | [`ItemFastSlowRateLimiter`] | `fast` for the first `max_fast_attempts` failures, then `slow` |
//! | [`BucketRateLimiter`] | the wait of a token-bucket reservation (every call takes a token) |
//! | [`MaxOfRateLimiter`] | the longest of several limiters' waits |
//! | [`WithMaxWaitRateLimiter`] | another limiter's wait, capped |
//!
//! [`default_controller_rate_limiter`] is what client-go's controllers use:
//! max(exponential 5 ms … 1000 s, bucket 10 qps with a burst of 100).
//!
//! A limiter never panics: zero durations give zero waits, huge ones are capped
//! ([`MAX_DELAY`](crate::MAX_DELAY) at most once a queue uses them), and a
//! bucket refuses a rate that is negative or not a number when it is built.

mod bucket;
mod exponential;
mod failure_counts;
mod fast_slow;
mod max_of;
mod with_max_wait;

use std::hash::Hash;
use std::time::Duration;

pub use self::bucket::BucketRateLimiter;
pub use self::exponential::ItemExponentialFailureRateLimiter;
pub use self::fast_slow::ItemFastSlowRateLimiter;
pub use self::max_of::MaxOfRateLimiter;
pub use self::with_max_wait::WithMaxWaitRateLimiter;

/// Decides how long an item waits before it is retried, as client-go's `TypedRateLimiter`.
///
/// Implementations keep their own per-item state behind `&self` (they are shared by a queue and
/// its workers). Object-safe: queues hold a `Box<dyn RateLimiter<T>>`.
///
/// A limiter of your own, choosing the wait by the kind of the last error (record the error
/// before requeueing, forget it on success):
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Mutex;
/// use std::time::Duration;
/// use ctrlkit_workqueue::{ItemExponentialFailureRateLimiter, RateLimiter};
///
/// #[derive(Clone, Copy)]
/// enum Failure { Conflict, TooManyRequests, Other }
///
/// struct ByFailure {
///     last: Mutex<HashMap<String, Failure>>,
///     other: ItemExponentialFailureRateLimiter<String>,
/// }
///
/// impl RateLimiter<String> for ByFailure {
///     fn when(&self, item: &String) -> Duration {
///         let last = self.last.lock().unwrap().get(item).copied();
///         match last {
///             Some(Failure::Conflict) => Duration::from_millis(100),
///             Some(Failure::TooManyRequests) => Duration::from_secs(30),
///             _ => self.other.when(item),
///         }
///     }
///     fn forget(&self, item: &String) {
///         self.last.lock().unwrap().remove(item);
///         self.other.forget(item);
///     }
///     fn num_requeues(&self, item: &String) -> usize {
///         self.other.num_requeues(item)
///     }
/// }
///
/// let limiter = ByFailure {
///     last: Mutex::new(HashMap::new()),
///     other: ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(60)),
/// };
/// let key = "default/foo".to_string();
/// limiter.last.lock().unwrap().insert(key.clone(), Failure::TooManyRequests);
/// assert_eq!(limiter.when(&key), Duration::from_secs(30));
/// ```
pub trait RateLimiter<T>: Send + Sync {
    /// How long `item` should wait before its next try; counts a failure where the limiter
    /// counts failures.
    fn when(&self, item: &T) -> Duration;
    /// Stops tracking `item` (it succeeded): its next failure starts from scratch.
    fn forget(&self, item: &T);
    /// How many failures of `item` the limiter has counted.
    fn num_requeues(&self, item: &T) -> usize;
}

impl<T, L: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<L> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

impl<T, L: RateLimiter<T> + ?Sized> RateLimiter<T> for std::sync::Arc<L> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

/// Errors building a rate limiter.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RateLimiterError {
    /// A token bucket's rate must be a number of at least zero (infinity means no limit).
    #[error("invalid token bucket rate {0}: it must be a number >= 0 (infinity means unlimited)")]
    InvalidRate(f64),
}

/// client-go's `DefaultControllerRateLimiter`: the longer of a per-item exponential backoff
/// (5 ms, doubling up to 1000 s) and an overall token bucket (10 per second, bursts of 100).
pub fn default_controller_rate_limiter<T>() -> MaxOfRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::unchecked(10.0, 100)),
    ])
}

/// client-go's `DefaultItemBasedRateLimiter`: per-item exponential backoff from 1 ms up to
/// 1000 s.
pub fn default_item_based_rate_limiter<T>() -> ItemExponentialFailureRateLimiter<T>
where
    T: Clone + Eq + Hash + Send,
{
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1000))
}
