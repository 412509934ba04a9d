//! The subresources other than `status`, as kube-apiserver's registry serves them: `scale` (of
//! Deployments, ReplicaSets, StatefulSets, ReplicationControllers and custom resources that
//! declare it), a Pod's `ephemeralcontainers`, `eviction` and `binding`, a ServiceAccount's
//! `token`, a CertificateSigningRequest's `approval`, and a Namespace's `finalize`.

use std::sync::OnceLock;

use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;
use serde_json::{Value, json};

use super::status::{ApiError, json_response};
use super::write::{self, Item};
use super::{App, Query};
use crate::custom::{self, ScalePaths, conversion};
use crate::request::encode::Encoding;
use crate::request::options::{Verb, WriteOptions};
use crate::resource::ResourceKind;
use crate::storage::durability::{deferring, durably};
use crate::storage::{Cause, Deleted, Propagation, StoreError};

/// Serves `subresource` of the object `item` names, `kind` being its resource.
pub(super) async fn serve(
    app: &App,
    encoding: &Encoding<'_>,
    item: Item<'_>,
    subresource: &str,
    query: &Query,
    request: Request,
) -> Result<Response, ApiError> {
    let kind = encoding.kind;
    let method = request.method().clone();
    match (subresource, method) {
        ("scale", Method::GET) => {
            let object = get(app, kind, item).await?;
            Ok(json_response(200, &scale_of(kind, &object)?))
        }
        ("scale", Method::PUT | Method::PATCH) => scale(app, kind, item, query, request).await,
        ("ephemeralcontainers", Method::GET) | ("approval", Method::GET) => {
            super::read::get(app, encoding, item.namespace, item.name).await
        }
        ("ephemeralcontainers", Method::PUT | Method::PATCH) => {
            write::replace_part(
                app,
                encoding,
                item,
                query,
                request,
                Part::EphemeralContainers,
            )
            .await
        }
        ("approval", Method::PUT | Method::PATCH) => {
            // The conditions are the status's: written as a status write.
            let item = Item {
                status_only: true,
                ..item
            };
            write::replace_part(app, encoding, item, query, request, Part::Conditions).await
        }
        ("finalize", Method::PUT) => {
            write::replace_part(app, encoding, item, query, request, Part::Finalizers).await
        }
        ("token", Method::POST) => token(app, kind, item, request).await,
        ("eviction", Method::POST) => eviction(app, kind, item, query, request).await,
        ("binding", Method::POST) => binding(app, kind, item, request).await,
        (_, other) => Err(ApiError::method_not_allowed(other.as_str())),
    }
}

/// Which part of an object a subresource writes; the rest stays as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// `spec.ephemeralContainers` (a Pod's `ephemeralcontainers`).
    EphemeralContainers,
    /// `status.conditions` (a CSR's `approval`).
    Conditions,
    /// `spec.finalizers` (a Namespace's `finalize`).
    Finalizers,
}

impl Part {
    /// `new` with this part taken from `from`, everything else from `stored`.
    pub(super) fn merged(self, stored: &Value, from: &Value) -> Value {
        let mut merged = stored.clone();
        let (section, field) = match self {
            Self::EphemeralContainers => ("spec", "ephemeralContainers"),
            Self::Conditions => ("status", "conditions"),
            Self::Finalizers => ("spec", "finalizers"),
        };
        if !merged[section].is_object() {
            merged[section] = json!({});
        }
        match from[section].get(field) {
            Some(value) => merged[section][field] = value.clone(),
            None => {
                if let Some(fields) = merged[section].as_object_mut() {
                    fields.remove(field);
                }
            }
        }
        if self == Self::Conditions {
            stamp_conditions(&mut merged["status"]["conditions"]);
        }
        if let Some(version) = from["metadata"]["resourceVersion"].as_str() {
            merged["metadata"]["resourceVersion"] = json!(version);
        }
        merged
    }
}

/// Sets the times a CSR condition leaves out, as the approval subresource does.
fn stamp_conditions(conditions: &mut Value) {
    let now = crate::storage::now_timestamp();
    for condition in conditions.as_array_mut().into_iter().flatten() {
        for field in ["lastUpdateTime", "lastTransitionTime"] {
            if condition[field].is_null() {
                condition[field] = json!(now);
            }
        }
    }
}

/// The object `item` names, in `kind`'s version.
async fn get(app: &App, kind: &ResourceKind, item: Item<'_>) -> Result<Value, ApiError> {
    let stored = app
        .store
        .get(kind, item.namespace, item.name)
        .map_err(|error| ApiError::from_store(&error, Some(kind)))?;
    Ok(conversion::shown_one(kind, &stored).await?.value().clone())
}

/// Where a resource keeps what its `scale` shows: a custom resource where its CRD says (the
/// selector a string), a built-in kind in `spec.replicas`, `status.replicas` and `spec.selector`
/// (a label selector object, or a map for a ReplicationController).
fn scale_paths(kind: &ResourceKind) -> Result<&ScalePaths, ApiError> {
    static BUILTIN: OnceLock<ScalePaths> = OnceLock::new();
    if kind.builtin.is_some() {
        return Ok(BUILTIN.get_or_init(|| ScalePaths {
            spec_replicas: "spec.replicas".into(),
            status_replicas: "status.replicas".into(),
            label_selector: Some("spec.selector".into()),
        }));
    }
    kind.custom
        .as_ref()
        .and_then(|custom| custom.scale.as_ref())
        .ok_or_else(ApiError::not_found_path)
}

/// The value at a dotted path, `null` when there is none.
fn at<'a>(object: &'a Value, path: &str) -> &'a Value {
    custom::at(object, path).unwrap_or(&Value::Null)
}

fn at_mut<'a>(object: &'a mut Value, path: &str) -> &'a mut Value {
    path.split('.')
        .filter(|segment| !segment.is_empty())
        .fold(object, |value, segment| {
            if !value.is_object() {
                *value = json!({});
            }
            &mut value[segment]
        })
}

/// The `autoscaling/v1` Scale of `object`.
fn scale_of(kind: &ResourceKind, object: &Value) -> Result<Value, ApiError> {
    let paths = scale_paths(kind)?;
    let spec_replicas = at(object, &paths.spec_replicas);
    if kind.builtin.is_none() && spec_replicas.is_null() {
        return Err(ApiError::internal(format!(
            "the spec replicas field \".{}\" does not exist",
            paths.spec_replicas
        )));
    }
    let selector = match &paths.label_selector {
        None => String::new(),
        Some(path) if kind.builtin.is_none() => {
            at(object, path).as_str().unwrap_or_default().to_string()
        }
        Some(path) => selector_text(at(object, path)),
    };
    let metadata = &object["metadata"];
    let mut scale_metadata = json!({});
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = metadata.get(field) {
            scale_metadata[field] = value.clone();
        }
    }
    let mut status = json!({"replicas": at(object, &paths.status_replicas).as_i64().unwrap_or(0)});
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_metadata,
        "spec": {"replicas": spec_replicas.as_i64().unwrap_or(0)},
        "status": status,
    }))
}

/// A label selector (object or map) as text: `app=web,tier in (a,b)`.
fn selector_text(selector: &Value) -> String {
    let labels = selector.get("matchLabels").or_else(|| {
        selector
            .as_object()
            .filter(|s| !s.contains_key("matchExpressions"))
            .map(|_| selector)
    });
    let mut parts: Vec<String> = labels
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(key, value)| value.as_str().map(|value| format!("{key}={value}")))
        .collect();
    for expression in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = expression["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match expression["operator"].as_str().unwrap_or_default() {
            "In" => parts.push(format!("{key} in ({})", values.join(","))),
            "NotIn" => parts.push(format!("{key} notin ({})", values.join(","))),
            "Exists" => parts.push(key.to_string()),
            "DoesNotExist" => parts.push(format!("!{key}")),
            _ => {}
        }
    }
    parts.join(",")
}

/// A write of `scale`: the Scale given (PUT) or patched (PATCH) sets the replicas.
async fn scale(
    app: &App,
    kind: &ResourceKind,
    item: Item<'_>,
    query: &Query,
    request: Request,
) -> Result<Response, ApiError> {
    let object = get(app, kind, item).await?;
    let current = scale_of(kind, &object)?;
    let (wanted, options, manager) =
        write::patched_or_replaced(app, request, query, current).await?;
    let replicas = wanted["spec"]["replicas"].as_i64().unwrap_or(0);
    if replicas < 0 {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            item.name,
            vec![Cause {
                reason: "FieldValueInvalid",
                field: "spec.replicas".to_string(),
                message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            }],
        ));
    }
    let paths = scale_paths(kind)?;
    let mut updated = object;
    *at_mut(&mut updated, &paths.spec_replicas) = json!(replicas);
    // The Scale's resourceVersion, when it has one, is a precondition on the object.
    if let Some(version) = wanted["metadata"]["resourceVersion"].as_str() {
        updated["metadata"]["resourceVersion"] = json!(version);
    }
    let write = write::Write {
        item: Item {
            status_only: false,
            ..item
        },
        options: &options,
        manager: &manager,
        allow_create: false,
        retry: false,
        apply: false,
    };
    let (stored, _) = write::guaranteed_update(app, kind, &write, |_| Ok(updated.clone())).await?;
    let stored = conversion::shown_one(kind, &stored).await?;
    Ok(json_response(200, &scale_of(kind, &stored)?))
}

/// A ServiceAccount's token: a TokenRequest answered with a token for it, nothing stored.
async fn token(
    app: &App,
    kind: &ResourceKind,
    item: Item<'_>,
    request: Request,
) -> Result<Response, ApiError> {
    let body = write::json_body(app, request, "io.k8s.api.authentication.v1.TokenRequest").await?;
    let invalid = |field: &str, message: String| {
        ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            "",
            vec![Cause {
                reason: "FieldValueInvalid",
                field: field.to_string(),
                message,
            }],
        )
    };
    if let Some(name) = body["metadata"]["name"].as_str().filter(|n| !n.is_empty())
        && name != item.name
    {
        return Err(invalid(
            "metadata.name",
            format!("Invalid value: {name:?}: must match the service account name if specified"),
        ));
    }
    let account = app
        .store
        .get(kind, item.namespace, item.name)
        .map_err(|error| ApiError::from_store(&error, Some(kind)))?;
    let expiration = match &body["spec"]["expirationSeconds"] {
        Value::Null => 3600,
        value => value.as_i64().ok_or_else(|| {
            ApiError::bad_request(
                "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: json: cannot unmarshal into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64",
            )
        })?,
    };
    if expiration < 600 {
        return Err(invalid(
            "spec.expirationSeconds",
            format!("Invalid value: {expiration}: may not specify a duration less than 10 minutes"),
        ));
    }
    if expiration > 1 << 32 {
        return Err(invalid(
            "spec.expirationSeconds",
            format!(
                "Invalid value: {expiration}: may not specify a duration larger than 2^32 seconds"
            ),
        ));
    }
    let audiences = match body["spec"]["audiences"].as_array() {
        Some(audiences) if !audiences.is_empty() => Value::Array(audiences.clone()),
        _ => json!([super::review::API_AUDIENCE]),
    };
    let now = jiff::Timestamp::now();
    let expires = now
        .checked_add(jiff::SignedDuration::from_secs(expiration))
        .unwrap_or(now);
    let uid = account["metadata"]["uid"].as_str().unwrap_or_default();
    let claims = json!({
        "aud": audiences,
        "exp": expires.as_second(),
        "iat": now.as_second(),
        "nbf": now.as_second(),
        "iss": super::review::API_AUDIENCE,
        "sub": format!("system:serviceaccount:{}:{}", item.namespace, item.name),
        "kubernetes.io": {
            "namespace": item.namespace,
            "serviceaccount": {"name": item.name, "uid": uid},
        },
    });
    let token = app
        .tokens
        .sign(&json!({"alg": "HS256", "kid": "ctrlkit"}), &claims);
    let seconds = |time: jiff::Timestamp| {
        time.round(jiff::Unit::Second)
            .map(|time| time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default()
    };
    let answer = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {
            "name": item.name,
            "namespace": item.namespace,
            "uid": uid,
            "creationTimestamp": seconds(now),
        },
        "spec": {
            "audiences": audiences,
            "expirationSeconds": expiration,
            "boundObjectRef": body["spec"]["boundObjectRef"].clone(),
        },
        "status": {"token": token, "expirationTimestamp": seconds(expires)},
    });
    Ok(json_response(201, &answer))
}

/// A Pod's eviction: the pod is deleted unless a PodDisruptionBudget that selects it allows no
/// disruption (429, as kube-apiserver answers).
async fn eviction(
    app: &App,
    kind: &ResourceKind,
    item: Item<'_>,
    query: &Query,
    request: Request,
) -> Result<Response, ApiError> {
    let body = write::json_body(app, request, "io.k8s.api.policy.v1.Eviction").await?;
    if let Some(name) = body["metadata"]["name"].as_str()
        && name != item.name
    {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let options = WriteOptions::parse(Verb::Create, query, None)?;
    let pod = get(app, kind, item).await?;
    let phase = pod["status"]["phase"].as_str().unwrap_or_default();
    let guarded = !matches!(phase, "Succeeded" | "Failed" | "Pending")
        && pod["metadata"]["deletionTimestamp"].is_null();
    if guarded && let Some(budget) = blocking_budget(app, item.namespace, &pod) {
        return Err(ApiError {
            details: Some(json!({"causes": [{
                "reason": "DisruptionBudget",
                "message": format!("The disruption budget {budget} does not allow evicting pods currently"),
            }]})),
            ..ApiError::too_many_requests(
                "Cannot evict pod as it would violate the pod's disruption budget.",
            )
        });
    }
    let deleted = durably(deferring(|| {
        if options.dry_run {
            app.store.delete_dry_run(
                kind,
                item.namespace,
                item.name,
                None,
                Propagation::Background,
            )
        } else {
            app.store.delete(kind, item.namespace, item.name, None)
        }
    }))
    .await;
    match deleted {
        Ok(Deleted::Gone(_) | Deleted::Finalizing(_)) => Ok(json_response(
            201,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )),
        Err(error) => Err(ApiError::from_store(&error, Some(kind))),
    }
}

/// The name of a PodDisruptionBudget of `namespace` that selects `pod` and allows no
/// disruption now.
fn blocking_budget(app: &App, namespace: &str, pod: &Value) -> Option<String> {
    let budgets = app
        .registry
        .find_in_group("policy", "poddisruptionbudgets")?;
    let stored = app.store.list_latest(&budgets, Some(namespace));
    let labels = pod["metadata"]["labels"].as_object();
    stored
        .iter()
        .filter(|budget| {
            let selector = &budget["spec"]["selector"];
            if selector.is_null() {
                return false;
            }
            let wanted = selector["matchLabels"].as_object();
            wanted
                .into_iter()
                .flatten()
                .all(|(key, value)| labels.and_then(|labels| labels.get(key)) == Some(value))
        })
        .find(|budget| budget["status"]["disruptionsAllowed"].as_i64().unwrap_or(0) <= 0)
        .and_then(|budget| budget["metadata"]["name"].as_str().map(str::to_string))
}

/// A Pod's binding to a node (what a scheduler writes): sets `spec.nodeName` once.
async fn binding(
    app: &App,
    kind: &ResourceKind,
    item: Item<'_>,
    request: Request,
) -> Result<Response, ApiError> {
    let body = write::json_body(app, request, "io.k8s.api.core.v1.Binding").await?;
    let Some(node) = body["target"]["name"].as_str().filter(|n| !n.is_empty()) else {
        return Err(ApiError::invalid(
            "",
            "Binding",
            item.name,
            vec![Cause {
                reason: "FieldValueRequired",
                field: "target.name".to_string(),
                message: "Required value".to_string(),
            }],
        ));
    };
    let mut pod = get(app, kind, item).await?;
    if let Some(assigned) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return Err(ApiError::from_store(
            &StoreError::Conflict {
                resource: kind.qualified_name(),
                name: item.name.to_string(),
            },
            Some(kind),
        )
        .with_message(format!(
            "Operation cannot be fulfilled on pods/binding \"{}\": pod {} is already assigned to node \"{assigned}\"",
            item.name, item.name
        )));
    }
    pod["spec"]["nodeName"] = json!(node);
    durably(deferring(|| {
        app.store
            .update(kind, item.namespace, item.name, pod, false)
    }))
    .await
    .map_err(|error| ApiError::from_store(&error, Some(kind)))?;
    Ok(json_response(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}
