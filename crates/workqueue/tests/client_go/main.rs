//! client-go's workqueue tests, scenario by scenario: `queue_test.go`, `delaying_queue_test.go`,
//! `rate_limiting_queue_test.go` and `metrics_test.go`. (The limiters' own tests,
//! `default_rate_limiters_test.go`, sit beside each limiter.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod delaying;
mod metrics;
mod queue;
mod rate_limiting;
