//! Server-side apply (a PATCH of `application/apply-patch+yaml`), as kube-apiserver's apply
//! patcher does it: the configuration read (YAML, or JSON which is YAML), applied by the
//! endpoint's field manager to the object (to nothing, which creates it, through the resource
//! itself), its name and namespace checked, decoded and defaulted, and written as any write.

use axum::response::Response;
use serde_json::{Value, json};

use super::App;
use super::status::ApiError;
use super::write::{Item, Write, guaranteed_update, written};
use crate::apply::field_manager::conflict_report;
use crate::apply::schema::Type;
use crate::apply::{ApplyError, FieldManager};
use crate::request::body::{ParsedBody, json_kind, parse_json, parse_yaml};
use crate::request::decode::{Origin, decode_object};
use crate::request::encode::Encoding;
use crate::request::options::{FieldValidation, WriteOptions};
use crate::resource::ResourceKind;

/// Applies the configuration `body` to the object `item` names.
pub(super) async fn apply(
    app: &App,
    encoding: &Encoding<'_>,
    item: Item<'_>,
    options: &WriteOptions,
    body: &[u8],
) -> Result<Response, ApiError> {
    let kind = encoding.kind;
    // Required by the options' checks.
    let manager = options.field_manager.as_deref().unwrap_or_default();
    let parsed = read_configuration(body)?;
    let retry = parsed.value["metadata"]["resourceVersion"].is_null();
    // The first attempt takes the configuration (it becomes the object); one retried after a
    // concurrent write reads the body again.
    let mut config = Some(parsed.value);
    let duplicates = parsed.duplicate_fields;
    let field_manager = FieldManager::new(kind, Type::of_resource(kind), item.subresource);
    let write = Write {
        item,
        options,
        manager,
        // Only the resource itself creates; a subresource of a missing object is a 404.
        allow_create: item.subresource.is_empty(),
        retry,
        apply: true,
    };
    let mut warnings = Vec::new();
    let (stored, created) = guaranteed_update(app, kind, &write, |current| {
        let config = match config.take() {
            Some(config) => config,
            None => read_configuration(body)?.value,
        };
        let applied = field_manager
            .apply(current, config, manager, options.force)
            .map_err(apply_error)?;
        let mut object = applied.object;
        if current.is_none()
            && let Some(uid) = object["metadata"]["uid"]
                .as_str()
                .filter(|uid| !uid.is_empty())
        {
            return Err(uid_mismatch(kind, item.name, uid));
        }
        place(kind, item, &mut object)?;
        warnings = duplicate_warnings(&duplicates, options.field_validation)?;
        if !applied.changed && current == Some(&object) {
            // Nothing changed: the stored object was decoded and defaulted when written.
            return Ok(object);
        }
        // The managed fields are the field manager's own, so well formed: they skip the typed
        // round trip, which would copy each entry's fieldsV1 tree twice.
        let managed_fields = object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .and_then(|metadata| metadata.remove("managedFields"));
        let mut decoded = decode_object(
            kind,
            ParsedBody {
                value: object,
                duplicate_fields: Vec::new(),
            },
            FieldValidation::Ignore,
            Origin::Patch,
        )?;
        if let Some(managed_fields) = managed_fields
            && let Some(metadata) = decoded
                .object
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
        {
            metadata.insert("managedFields".into(), managed_fields);
        }
        Ok(decoded.object)
    })
    .await?;
    written(
        encoding,
        if created { 201 } else { 200 },
        &stored,
        &warnings,
    )
    .await
}

/// Reads an apply's configuration: YAML, or JSON (which is YAML), a map.
fn read_configuration(body: &[u8]) -> Result<ParsedBody, ApiError> {
    // Most clients (kubectl, kube-client) send JSON, which its own parser reads faster.
    let looks_like_json = body
        .iter()
        .find(|byte| !byte.is_ascii_whitespace())
        .is_some_and(|byte| *byte == b'{');
    let parsed = if looks_like_json {
        parse_json(body)
    } else {
        parse_yaml(body)
    }
    .map_err(|error| ApiError::bad_request(format!("error decoding YAML: {error}")))?;
    if !parsed.value.is_object() {
        return Err(ApiError::bad_request(format!(
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&parsed.value)
        )));
    }
    Ok(parsed)
}

/// The answer to a failed apply.
fn apply_error(error: ApplyError) -> ApiError {
    match error {
        ApplyError::BadRequest(message) => ApiError::bad_request(message),
        ApplyError::Conflicts(conflicts) => {
            let (message, causes) = conflict_report(&conflicts);
            ApiError {
                code: 409,
                reason: "Conflict",
                message,
                details: Some(json!({
                    "causes": causes
                        .into_iter()
                        .map(|(message, field)| json!({
                            "reason": "FieldManagerConflict",
                            "message": message,
                            "field": field,
                        }))
                        .collect::<Vec<_>>(),
                })),
                retry_after: None,
            }
        }
        // Not an API error in kube-apiserver: a 500 without a reason.
        ApplyError::Failed(message) => ApiError {
            code: 500,
            reason: "",
            message,
            details: None,
            retry_after: None,
        },
    }
}

/// 409: a configuration that names a uid creates nothing.
fn uid_mismatch(kind: &ResourceKind, name: &str, uid: &str) -> ApiError {
    ApiError {
        code: 409,
        reason: "Conflict",
        message: format!(
            "Operation cannot be fulfilled on {} {name:?}: uid mismatch: the provided object specified uid {uid}, and no existing object was found",
            kind.qualified_name()
        ),
        details: Some(json!({"name": name, "group": kind.group, "kind": kind.plural})),
        retry_after: None,
    }
}

/// Gives the applied object the request's namespace (or none, for a cluster-scoped kind) and
/// checks its name is the URL's.
fn place(kind: &ResourceKind, item: Item<'_>, object: &mut Value) -> Result<(), ApiError> {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Err(ApiError::bad_request(format!(
            "the name of the object () does not match the name on the URL ({})",
            item.name
        )));
    };
    let namespace = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let wanted = if kind.namespaced { item.namespace } else { "" };
    if namespace.is_empty() || wanted.is_empty() {
        if wanted.is_empty() {
            metadata.remove("namespace");
        } else {
            metadata.insert("namespace".into(), json!(wanted));
        }
    } else if namespace != wanted {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let name = metadata.get("name").and_then(Value::as_str).unwrap_or("");
    if name != item.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            item.name
        )));
    }
    Ok(())
}

/// What `fieldValidation` makes of keys the configuration gives twice (the later wins): a
/// refusal (`Strict`), warnings (`Warn`), or nothing.
fn duplicate_warnings(
    duplicates: &[String],
    validation: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    let lines: Vec<String> = duplicates
        .iter()
        .map(|path| {
            let key = path.rsplit('.').next().unwrap_or(path);
            format!("key {key:?} already set in map")
        })
        .collect();
    match validation {
        _ if lines.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  {}",
            lines.join("\n  ")
        ))),
        FieldValidation::Warn => Ok(lines),
        FieldValidation::Ignore => Ok(Vec::new()),
    }
}
