//! The admin endpoint of the fault hooks, for tests that drive a server in another process
//! (`ctrlkit apiserver --admin`). Off unless the configuration turns it on: anyone who can reach
//! it can break the server.
//!
//! - `POST /admin/faults/cut-watches`: end every open watch;
//! - `POST /admin/faults/compact[?resourceVersion=N]`: forget history up to N (default: all);
//! - `POST /admin/faults/fail?count=N[&verb=V][&resource=R]&status=429|500|503[&retryAfterSeconds=S]`
//!   or `…&delayMs=D`: fault the next N matching requests;
//! - `POST /admin/faults/hold-watches`, `POST /admin/faults/release-watches`: make new watches
//!   wait, then let them start;
//! - `POST /admin/faults/partition?seconds=S`: a partition of S seconds (fractions allowed), as
//!   [`ApiServer::partition`](crate::ApiServer::partition): every connection dropped and new
//!   ones refused, then the same address again with the state intact;
//! - `POST /admin/faults/restart-listener`: every connection dropped, new ones accepted at once;
//! - `POST /admin/faults/clear`: forget pending faults and release held watches.
//!
//! A partition or restart begins [`LINK_CHANGE_DELAY`] after its answer, so that the answer
//! reaches the caller before its own connection is dropped.

use std::time::Duration;

use axum::response::Response;
use serde_json::json;

use super::status::{ApiError, json_response};
use super::{App, Query};
use crate::faults::Fault;
use crate::link::Link;

/// How long after answering a partition or restart request it begins.
pub(crate) const LINK_CHANGE_DELAY: Duration = Duration::from_millis(100);

/// Partitions the server for `duration` (zero: a listener restart) once the answer is out.
fn change_link_soon(app: &App, duration: Duration) {
    let link = std::sync::Arc::clone(&app.link);
    tokio::spawn(async move {
        tokio::time::sleep(LINK_CHANGE_DELAY).await;
        link.send_modify(|link: &mut Link| link.partition(duration));
    });
}

fn number(query: &Query, name: &str) -> Result<Option<u64>, ApiError> {
    query
        .get(name)
        .map(|value| {
            value.parse().map_err(|_| {
                ApiError::bad_request(format!("{name} must be a number, not {value:?}"))
            })
        })
        .transpose()
}

pub(super) fn handle(app: &App, action: &str, query: &Query) -> Result<Response, ApiError> {
    match action {
        "cut-watches" => app.faults.cut_watches(),
        "compact" => {
            let up_to = number(query, "resourceVersion")?.unwrap_or(u64::MAX);
            app.store.compact(up_to);
        }
        "hold-watches" => app.faults.hold_watches(),
        "release-watches" => app.faults.release_watches(),
        "clear" => app.faults.clear(),
        "partition" => {
            let seconds = query
                .get("seconds")
                .map(|value| value.parse::<f64>())
                .transpose()
                .ok()
                .flatten()
                .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
                .ok_or_else(|| {
                    ApiError::bad_request("give seconds=S, a number of seconds (0 or more)")
                })?;
            change_link_soon(app, Duration::from_secs_f64(seconds.min(86_400.0 * 365.0)));
        }
        "restart-listener" => change_link_soon(app, Duration::ZERO),
        "fail" => {
            let count = number(query, "count")?.unwrap_or(1);
            let fault = match (number(query, "status")?, number(query, "delayMs")?) {
                (Some(429), None) => Fault::TooManyRequests {
                    retry_after_seconds: number(query, "retryAfterSeconds")?.unwrap_or(1),
                },
                (Some(500), None) => Fault::InternalError,
                (Some(503), None) => Fault::ServiceUnavailable,
                (None, Some(millis)) => Fault::Delay(Duration::from_millis(millis)),
                _ => {
                    return Err(ApiError::bad_request(
                        "give status=429, 500 or 503, or delayMs=N",
                    ));
                }
            };
            app.faults.fail_next(
                usize::try_from(count).unwrap_or(usize::MAX),
                query.get("verb").map(String::as_str),
                query.get("resource").map(String::as_str),
                fault,
            );
        }
        _ => return Err(ApiError::not_found_path()),
    }
    Ok(json_response(
        200,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
    ))
}
