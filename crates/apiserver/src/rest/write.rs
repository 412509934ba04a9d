//! Writes: create, update, patch, delete and deletecollection.

use axum::extract::Request;
use axum::http::header;
use axum::response::Response;
use serde_json::{Value, json};

use super::status::{ApiError, json_response, object_response, success};
use super::{App, Query, crd};
use crate::patch::{json_patch, merge_patch};
use crate::resource::ResourceKind;
use crate::storage::{Deleted, Propagation};
use crate::strategic::strategic_merge_patch;

/// Reads the request body: 413 for one over the size limit, 400 for one that could not be
/// read (the client went away, the chunked encoding was broken).
async fn body_bytes(app: &App, request: Request) -> Result<bytes::Bytes, ApiError> {
    let limit = app.config.max_body_bytes;
    axum::body::to_bytes(request.into_body(), limit)
        .await
        .map_err(|error| {
            let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
            while let Some(current) = cause {
                if current.is::<http_body_util::LengthLimitError>() {
                    return ApiError::too_large(limit);
                }
                cause = current.source();
            }
            ApiError::bad_request(format!("the request body could not be read: {error}"))
        })
}

fn decode(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes).map_err(|error| {
        ApiError::bad_request(format!(
            "the body of the request could not be decoded as JSON: {error}"
        ))
    })
}

/// Reads the body as an object of `kind`: it must be a JSON object whose `apiVersion`, `kind`
/// and namespace, when given, are the URL's.
async fn object_body(
    app: &App,
    kind: &ResourceKind,
    namespace: &str,
    request: Request,
) -> Result<Value, ApiError> {
    // JSON only: a protobuf or CBOR body gets 415, on which client-go (kubectl) retries in JSON.
    let content_type = media_type(&request);
    if !content_type.is_empty() && content_type != "application/json" {
        return Err(ApiError::unsupported_body(&content_type));
    }
    let mut object = decode(&body_bytes(app, request).await?)?;
    let Some(fields) = object.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let expected_version = kind.api_version();
    match fields.get("apiVersion").and_then(Value::as_str) {
        Some(version) if version != expected_version => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({version}) does not match the expected API version ({expected_version})"
            )));
        }
        Some(_) => {}
        None => {
            fields.insert("apiVersion".into(), json!(expected_version));
        }
    }
    match fields.get("kind").and_then(Value::as_str) {
        Some(found) if found != kind.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({found}) does not match the expected kind ({})",
                kind.kind
            )));
        }
        Some(_) => {}
        None => {
            fields.insert("kind".into(), json!(kind.kind));
        }
    }
    if kind.namespaced
        && let Some(found) = object["metadata"]["namespace"].as_str()
        && !found.is_empty()
        && found != namespace
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(object)
}

pub(super) async fn create(
    app: &App,
    kind: &ResourceKind,
    namespace: &str,
    request: Request,
) -> Result<Response, ApiError> {
    let object = object_body(app, kind, namespace, request).await?;
    let created = app
        .store
        .create(kind, namespace, object)
        .map_err(|error| ApiError::from_store(&error, Some(kind)))?;
    if crd::is_crd(kind) {
        crd::serve(app, &created);
    }
    Ok(object_response(201, &created))
}

fn check_name(object: &Value, name: &str) -> Result<(), ApiError> {
    match object["metadata"]["name"].as_str() {
        Some(found) if found != name => Err(ApiError::bad_request(format!(
            "the name of the object ({found}) does not match the name on the URL ({name})"
        ))),
        _ => Ok(()),
    }
}

pub(super) async fn update(
    app: &App,
    kind: &ResourceKind,
    namespace: &str,
    name: &str,
    status_only: bool,
    request: Request,
) -> Result<Response, ApiError> {
    let object = object_body(app, kind, namespace, request).await?;
    check_name(&object, name)?;
    let (stored, created) = store_update(app, kind, namespace, name, object, status_only)?;
    Ok(object_response(if created { 201 } else { 200 }, &stored))
}

/// Writes an update (of a PUT or a PATCH) and, for a CRD, serves what it now defines.
fn store_update(
    app: &App,
    kind: &ResourceKind,
    namespace: &str,
    name: &str,
    object: Value,
    status_only: bool,
) -> Result<(std::sync::Arc<crate::storage::StoredObject>, bool), ApiError> {
    let (stored, created) = app
        .store
        .update(kind, namespace, name, object, status_only)
        .map_err(|error| ApiError::from_store(&error, Some(kind)))?;
    if crd::is_crd(kind) && !status_only {
        crd::serve(app, &stored);
    }
    Ok((stored, created))
}

/// The media type of the request's body, without parameters.
fn media_type(request: &Request) -> String {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

pub(super) async fn patch(
    app: &App,
    kind: &ResourceKind,
    namespace: &str,
    name: &str,
    status_only: bool,
    request: Request,
) -> Result<Response, ApiError> {
    let content_type = media_type(&request);
    let patch = decode(&body_bytes(app, request).await?)?;
    let current = app
        .store
        .get(kind, namespace, name)
        .map_err(|error| ApiError::from_store(&error, Some(kind)))?;
    let mut patched = (*current).clone();
    let builtin = kind.is_builtin();
    match content_type.as_str() {
        "application/merge-patch+json" => merge_patch(&mut patched, &patch),
        "application/strategic-merge-patch+json" if builtin => {
            strategic_merge_patch(&mut patched, &patch)
                .map_err(|error| ApiError::bad_request(error.to_string()))?;
        }
        "application/json-patch+json" => {
            json_patch(&mut patched, &patch).map_err(|error| ApiError {
                code: 422,
                reason: "Invalid",
                message: error.to_string(),
                details: None,
                retry_after: None,
            })?;
        }
        other => return Err(ApiError::unsupported_media_type(other, builtin)),
    }
    check_name(&patched, name)?;
    // A patch applies to the current object unless it names a resourceVersion itself. A patch
    // can leave something that is not an object at all (a merge patch `5`, a JSON patch that
    // replaces `/metadata`): that is a bad request, not something to index into.
    let Some(Value::Object(metadata)) = patched
        .as_object_mut()
        .map(|fields| fields.entry("metadata").or_insert_with(|| json!({})))
    else {
        return Err(ApiError::bad_request(
            "the patched object must be a JSON object whose metadata is an object",
        ));
    };
    metadata
        .entry("resourceVersion")
        .or_insert_with(|| current["metadata"]["resourceVersion"].clone());
    let (stored, _) = store_update(app, kind, namespace, name, patched, status_only)?;
    Ok(object_response(200, &stored))
}

pub(super) async fn delete(
    app: &App,
    kind: &ResourceKind,
    namespace: &str,
    name: &str,
    query: &Query,
    request: Request,
) -> Result<Response, ApiError> {
    let body = body_bytes(app, request).await?;
    let options = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        decode(&body)?
    };
    let precondition = options["preconditions"]["resourceVersion"].as_str();
    let policy = options["propagationPolicy"]
        .as_str()
        .or(query.get("propagationPolicy").map(String::as_str))
        .unwrap_or("Background");
    let propagation = Propagation::parse(policy).ok_or_else(|| {
        ApiError::bad_request(format!(
            "propagationPolicy: Unsupported value: {policy:?}: supported values: \"Orphan\", \"Background\", \"Foreground\""
        ))
    })?;
    let deleted = app
        .store
        .delete_with(kind, namespace, name, precondition, propagation)
        .map_err(|error| ApiError::from_store(&error, Some(kind)))?;
    if let (true, Deleted::Gone(crd)) = (crd::is_crd(kind), &deleted) {
        crd::stop_serving(app, crd);
    }
    match deleted {
        Deleted::Finalizing(object) => Ok(object_response(200, &object)),
        Deleted::Gone(object) if kind.group.is_empty() && kind.plural == "pods" => {
            Ok(object_response(200, &object))
        }
        Deleted::Gone(object) => Ok(json_response(
            200,
            &success(kind, name, object["metadata"]["uid"].as_str()),
        )),
    }
}

pub(super) fn delete_collection(
    app: &App,
    kind: &ResourceKind,
    namespace: Option<&str>,
    query: &Query,
) -> Result<Response, ApiError> {
    let (labels, fields) = super::read::selectors(query)?;
    let (items, _) = app.store.list(kind, namespace);
    let mut deleted = Vec::new();
    for item in items
        .iter()
        .filter(|item| labels.matches(item) && fields.matches(item))
    {
        let item_namespace = item["metadata"]["namespace"].as_str().unwrap_or("");
        let item_name = item["metadata"]["name"].as_str().unwrap_or("");
        // An object deleted meanwhile by someone else is simply not in the answer.
        if let Ok(Deleted::Gone(last) | Deleted::Finalizing(last)) =
            app.store.delete(kind, item_namespace, item_name, None)
        {
            deleted.push((*last).clone());
        }
    }
    Ok(json_response(
        200,
        &json!({
            "kind": format!("{}List", kind.kind),
            "apiVersion": kind.api_version(),
            "metadata": {"resourceVersion": app.store.resource_version().to_string()},
            "items": deleted,
        }),
    ))
}
