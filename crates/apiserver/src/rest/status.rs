//! Errors as kube-apiserver reports them: a `Status` object with the HTTP code.

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::faults::Fault;
use crate::resource::ResourceKind;
use crate::storage::{Cause, StoreError, StoredObject, causes_text};

/// An error answer of the REST layer.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status code.
    pub code: u16,
    /// `Status.reason`; empty for errors that are not API errors (500).
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, if any.
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized: the request does not carry the bearer token. The message is
    /// kube-apiserver's, and says nothing of what was presented.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 404 NotFound for a path the server does not serve.
    pub fn not_found_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({verb})"),
        )
    }

    /// 403 Forbidden: custom resources of a CRD being deleted may not be created (kube-apiserver
    /// 1.34 and later; earlier ones answered 405).
    pub fn crd_terminating(kind: &ResourceKind, name: &str) -> Self {
        let mut error = Self::new(
            403,
            "Forbidden",
            format!(
                "{} {name:?} is forbidden: create not allowed while custom resource definition is terminating",
                kind.qualified_name()
            ),
        );
        error.details = Some(json!({"name": name, "group": kind.group, "kind": kind.plural}));
        error
    }

    /// 413 RequestEntityTooLarge: a body over `limit` bytes.
    pub fn too_large(limit: usize) -> Self {
        Self::entity_too_large(format_args!("limit is {limit}"))
    }

    /// 413 RequestEntityTooLarge, saying why.
    pub fn entity_too_large(why: impl std::fmt::Display) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: {why}"),
        )
    }

    /// 415 UnsupportedMediaType: a body in a media type the resource does not take.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 406 NotAcceptable: no media type of the `Accept` header can be given.
    pub fn not_acceptable(accepted: &[&str]) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 429 TooManyRequests with `message`.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message)
    }

    /// This error with another message.
    #[must_use]
    pub fn with_message(self, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            ..self
        }
    }

    /// 403 Forbidden: `<resource> "<name>" is forbidden: <why>`.
    pub fn forbidden(plural: &str, group: &str, name: &str, why: impl std::fmt::Display) -> Self {
        let resource = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        Self {
            details: Some(json!({"name": name, "group": group, "kind": plural})),
            ..Self::new(
                403,
                "Forbidden",
                format!("{resource} {name:?} is forbidden: {why}"),
            )
        }
    }

    /// 500 InternalError: `Internal error occurred: <why>`.
    pub fn internal(why: impl std::fmt::Display) -> Self {
        Self {
            details: Some(json!({"causes": [{"message": why.to_string()}]})),
            ..Self::new(
                500,
                "InternalError",
                format!("Internal error occurred: {why}"),
            )
        }
    }

    /// 500 with no reason: an error kube-apiserver's handlers answer as it is, not made an API
    /// error first (a conversion webhook's failure).
    pub fn unknown(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// 422 Invalid with only a message (a JSON patch that cannot be applied).
    pub fn invalid_message(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// 422 Invalid for request options (`ListOptions`), with one cause.
    pub fn invalid_options(field: &str, message: &str) -> Self {
        let cause = Cause {
            reason: "FieldValueForbidden",
            field: field.to_string(),
            message: message.to_string(),
        };
        Self::invalid("meta.k8s.io", "ListOptions", "", vec![cause])
    }

    /// 422 Invalid: `<Kind>[.<group>] "<name>" is invalid: <causes>`, one cause per field error,
    /// as kube-apiserver's `NewInvalid`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        Self {
            code: 422,
            reason: "Invalid",
            message: format!("{qualified} {name:?} is invalid: {}", causes_text(&causes)),
            details: Some(json!({
                "name": name,
                "group": group,
                "kind": kind,
                "causes": causes.iter().map(|cause| json!({
                    "reason": cause.reason,
                    "message": cause.message,
                    "field": cause.field,
                })).collect::<Vec<_>>(),
            })),
            retry_after: None,
        }
    }

    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// 504 Timeout: a request that ran past the server's request timeout, as kube-apiserver's
    /// timeout filter answers it.
    pub fn request_timeout() -> Self {
        let mut error = Self::new(
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
        );
        error.details = Some(json!({}));
        error
    }

    /// The answer of an injected fault (anything but a delay).
    pub fn injected(fault: Fault) -> Self {
        match fault {
            Fault::TooManyRequests {
                retry_after_seconds,
            } => Self {
                details: Some(json!({"retryAfterSeconds": retry_after_seconds})),
                retry_after: Some(retry_after_seconds),
                ..Self::new(
                    429,
                    "TooManyRequests",
                    "Too many requests, please try again later.",
                )
            },
            Fault::ServiceUnavailable => Self::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            Fault::InternalError | Fault::Delay(_) => Self::new(
                500,
                "InternalError",
                "Internal error occurred: injected fault",
            ),
        }
    }

    /// The error of a store operation on `kind`.
    pub fn from_store(error: &StoreError, kind: Option<&ResourceKind>) -> Self {
        let group = kind.map_or(String::new(), |kind| kind.group.clone());
        let details = match error {
            StoreError::NotFound { resource, name }
            | StoreError::AlreadyExists { resource, name }
            | StoreError::Conflict { resource, name } => {
                let plural = resource.split('.').next().unwrap_or(resource);
                let group = resource.split_once('.').map_or("", |(_, group)| group);
                Some(json!({"name": name, "group": group, "kind": plural}))
            }
            StoreError::PreconditionFailed { resource, name, .. } => {
                let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
                Some(json!({"name": name, "group": group, "kind": kind}))
            }
            StoreError::NamespaceTerminating { name, .. } => {
                kind.map(|kind| json!({"name": name, "group": group, "kind": kind.plural}))
            }
            StoreError::Invalid { name, causes, .. } => Some(json!({
                "name": name,
                "group": group,
                "kind": kind.map_or("", |kind| kind.kind.as_str()),
                "causes": causes.iter().map(|cause| json!({
                    "reason": cause.reason,
                    "message": cause.message,
                    "field": cause.field,
                })).collect::<Vec<_>>(),
            })),
            StoreError::TooLargeResourceVersion { .. } => Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            })),
            StoreError::Expired { .. }
            | StoreError::BadRequest(_)
            | StoreError::Storage(_)
            | StoreError::RequestTooLarge => None,
        };
        Self {
            code: error.code(),
            reason: error.reason(),
            message: error.to_string(),
            details,
            retry_after: None,
        }
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }

    /// The HTTP response: the `Status` written as kube-apiserver writes it (its fields in Go's
    /// order, empty ones left out, a newline after).
    pub fn response(&self) -> Response {
        let mut response = bytes_response(self.code, Bytes::from(status_json(&self.status())));
        if let Some(seconds) = self.retry_after
            && let Ok(value) = header::HeaderValue::from_str(&seconds.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        Self::from_store(&error, None)
    }
}

/// A JSON response with `code`, ending in a newline as Go's encoder writes it. A `Status`
/// has its fields in kube-apiserver's order.
pub fn json_response(code: u16, body: &Value) -> Response {
    if body["kind"] == "Status" {
        return bytes_response(code, Bytes::from(status_json(body)));
    }
    let mut bytes = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
    bytes.push(b'\n');
    bytes_response(code, Bytes::from(bytes))
}

/// A `Status` as kube-apiserver's JSON encoder writes it: `metav1.Status`'s fields in order,
/// those that are empty left out, then a newline.
fn status_json(status: &Value) -> Vec<u8> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Body<'a> {
        kind: &'a str,
        api_version: &'a str,
        metadata: &'a Value,
        #[serde(skip_serializing_if = "str::is_empty")]
        status: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        message: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        reason: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        details: Option<Details<'a>>,
        #[serde(skip_serializing_if = "is_zero")]
        code: u64,
    }
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Details<'a> {
        #[serde(skip_serializing_if = "str::is_empty")]
        name: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        group: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        kind: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        uid: &'a str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        causes: Vec<Cause<'a>>,
        #[serde(skip_serializing_if = "is_zero")]
        retry_after_seconds: u64,
    }
    #[derive(serde::Serialize)]
    struct Cause<'a> {
        #[serde(skip_serializing_if = "str::is_empty")]
        reason: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        message: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        field: &'a str,
    }
    fn is_zero(value: &u64) -> bool {
        *value == 0
    }
    fn text(value: &Value) -> &str {
        value.as_str().unwrap_or_default()
    }
    let empty = Value::Object(serde_json::Map::new());
    let details = status
        .get("details")
        .filter(|d| d.is_object())
        .map(|details| Details {
            name: text(&details["name"]),
            group: text(&details["group"]),
            kind: text(&details["kind"]),
            uid: text(&details["uid"]),
            causes: details["causes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|cause| Cause {
                    reason: text(&cause["reason"]),
                    message: text(&cause["message"]),
                    field: text(&cause["field"]),
                })
                .collect(),
            retry_after_seconds: details["retryAfterSeconds"].as_u64().unwrap_or(0),
        });
    let body = Body {
        kind: "Status",
        api_version: "v1",
        metadata: status.get("metadata").unwrap_or(&empty),
        status: text(&status["status"]),
        message: text(&status["message"]),
        reason: text(&status["reason"]),
        details,
        code: status["code"].as_u64().unwrap_or(0),
    };
    let mut bytes = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
    bytes.push(b'\n');
    bytes
}

/// A stored object as the response, with `code`: its serialization is shared with list pages
/// and watch events.
pub fn object_response(code: u16, object: &StoredObject) -> Response {
    bytes_response(code, object.json())
}

fn bytes_response(code: u16, json: Bytes) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = Response::new(Body::from(json));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// A `Status` of success, as a delete without a returned object answers.
pub fn success(kind: &ResourceKind, name: &str, uid: Option<&str>) -> Value {
    let mut details = json!({"name": name, "group": kind.group, "kind": kind.plural});
    if let Some(uid) = uid {
        details["uid"] = Value::String(uid.to_string());
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}
