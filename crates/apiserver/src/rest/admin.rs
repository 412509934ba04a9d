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
//! - `POST /admin/faults/clear`: forget pending faults and release held watches.

use std::time::Duration;

use axum::response::Response;
use serde_json::json;

use super::status::{ApiError, json_response};
use super::{App, Query};
use crate::faults::Fault;

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
