//! The reflector's retry delays: exponential with jitter, reset after a quiet spell.

use std::time::Duration;

use tokio::time::Instant;

/// Exponential backoff as client-go's reflector uses it: 800 ms doubling to a 30 s cap, each
/// delay stretched by a random jitter of up to 100 % (so a delay at the cap lies in [30 s, 60 s)),
/// and back to the start once no delay was asked for during 2 minutes.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    cap: Duration,
    factor: f64,
    jitter: f64,
    reset_after: Duration,
    next: Duration,
    last_asked: Option<Instant>,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(
            Duration::from_millis(800),
            Duration::from_secs(30),
            2.0,
            1.0,
            Duration::from_secs(120),
        )
    }
}

impl Backoff {
    /// A backoff starting at `initial`, multiplied by `factor` up to `cap`, with `jitter` (a
    /// fraction: a delay `d` becomes `d + random·jitter·d`), reset after `reset_after` quiet.
    pub fn new(
        initial: Duration,
        cap: Duration,
        factor: f64,
        jitter: f64,
        reset_after: Duration,
    ) -> Self {
        Self {
            initial,
            cap,
            factor: if factor.is_finite() && factor >= 1.0 {
                factor
            } else {
                1.0
            },
            jitter: if jitter.is_finite() && jitter >= 0.0 {
                jitter
            } else {
                0.0
            },
            reset_after,
            next: initial,
            last_asked: None,
        }
    }

    /// The next delay to wait.
    pub fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if let Some(last) = self.last_asked
            && now.saturating_duration_since(last) >= self.reset_after
        {
            self.next = self.initial;
        }
        self.last_asked = Some(now);
        let base = self.next;
        self.next = base.mul_f64(self.factor).min(self.cap);
        if self.jitter > 0.0 {
            base + base.mul_f64(fastrand::f64() * self.jitter)
        } else {
            base
        }
    }

    /// Starts over from the initial delay.
    pub fn reset(&mut self) {
        self.next = self.initial;
        self.last_asked = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn doubles_to_the_cap_with_jitter_and_resets_after_quiet() {
        let mut backoff = Backoff::default();
        let bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0];
        for base in bases {
            let delay = backoff.next_delay().as_secs_f64();
            assert!(
                delay >= base && delay < 2.0 * base,
                "{delay} outside [{base}, {})",
                2.0 * base
            );
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        tokio::time::advance(Duration::from_secs(120)).await;
        let delay = backoff.next_delay().as_secs_f64();
        assert!((0.8..1.6).contains(&delay), "not reset: {delay}");
    }

    #[tokio::test(start_paused = true)]
    async fn without_jitter_the_delays_are_exact() {
        let mut backoff = Backoff::new(
            Duration::from_millis(100),
            Duration::from_millis(350),
            2.0,
            0.0,
            Duration::from_secs(60),
        );
        let delays: Vec<u128> = (0..4).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(delays, [100, 200, 350, 350]);
    }
}
