//! Writes: create, update, patch, delete and deletecollection, through kube-apiserver's
//! pipeline: options, body, decoding into the kind's type (defaults, field validation), the
//! kind's strategy, the store (or, with `dryRun=All`, everything but the store), the answer.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::header;
use axum::response::Response;
use serde_json::{Value, json};

use super::status::{ApiError, json_response, success};
use super::{App, Query, crd};
use crate::apply::FieldManager;
use crate::apply::schema::Type;
use crate::custom::conversion;
use crate::kinds::strategy::{self, Context};
use crate::patch::{PatchError, json_patch, merge_patch};
use crate::request::body::{ParsedBody, json_kind, parse_json, parse_yaml};
use crate::request::decode::{DecodedObject, Origin, decode_object};
use crate::request::encode::{Encoding, protobuf_capable};
use crate::request::options::{Verb, WriteOptions, int_param};
use crate::request::protobuf;
use crate::request::warnings::add_warnings;
use crate::resource::ResourceKind;
use crate::storage::durability::{deferring, durably};
use crate::storage::{
    Cause, Deleted, Preconditions, Propagation, StoreError, StoredObject, random_suffix,
};
use crate::strategic::strategic_merge_patch;

const JSON: &str = "application/json";
const YAML: &str = "application/yaml";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// How many names a create from `generateName` tries before it gives up on clashes.
const GENERATE_NAME_TRIES: usize = 8;

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

/// The media types an object body of `kind` may come in.
fn body_types(kind: &ResourceKind) -> Vec<&'static str> {
    if protobuf_capable(kind) {
        vec![JSON, YAML, PROTOBUF]
    } else {
        vec![JSON, YAML]
    }
}

/// Reads an object body of `kind` in its media type.
fn parse_object(
    kind: &ResourceKind,
    content_type: &str,
    bytes: &[u8],
) -> Result<ParsedBody, ApiError> {
    let parsed = match content_type {
        "" | JSON => parse_json(bytes),
        YAML => parse_yaml(bytes),
        PROTOBUF if protobuf_capable(kind) => {
            let message = kind
                .builtin
                .map(|builtin| builtin.schema_name().into_owned())
                .unwrap_or_default();
            return protobuf::decode_body(bytes, &message)
                .map(|value| ParsedBody {
                    value,
                    duplicate_fields: Vec::new(),
                })
                .map_err(|error| {
                    ApiError::bad_request(format!(
                        "the object provided is unrecognized (must be of type {}): {error}",
                        kind.kind
                    ))
                });
        }
        _ => return Err(ApiError::unsupported_media_type(&body_types(kind))),
    };
    parsed.map_err(|error| {
        ApiError::bad_request(format!(
            "{kind_name} in version {version:?} cannot be handled as a {kind_name}: {error}",
            kind_name = kind.kind,
            version = kind.version
        ))
    })
}

/// Checks that the body is an object of `kind` (its `apiVersion` and `kind`, when given, are the
/// URL's; its namespace, when given, the URL's) and fills in what it leaves out.
fn check_identity(
    kind: &ResourceKind,
    namespace: &str,
    object: &mut Value,
) -> Result<(), ApiError> {
    let Some(fields) = object.as_object_mut() else {
        return Err(ApiError::bad_request(format!(
            "{kind_name} in version {version:?} cannot be handled as a {kind_name}: the request body must be a JSON object",
            kind_name = kind.kind,
            version = kind.version
        )));
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
    if !fields
        .get("metadata")
        .is_none_or(|m| m.is_object() || m.is_null())
    {
        return Err(ApiError::bad_request(format!(
            "{kind_name} in version {version:?} cannot be handled as a {kind_name}: json: cannot unmarshal {found} into Go struct field {kind_name}.metadata of type v1.ObjectMeta",
            kind_name = kind.kind,
            version = kind.version,
            found = json_kind(&fields["metadata"]),
        )));
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
    Ok(())
}

/// Reads, checks and decodes the object body of a create or update.
async fn object_body(
    app: &App,
    kind: &ResourceKind,
    namespace: &str,
    options: &WriteOptions,
    request: Request,
) -> Result<DecodedObject, ApiError> {
    let content_type = media_type(&request);
    if !content_type.is_empty() && !body_types(kind).contains(&content_type.as_str()) {
        return Err(ApiError::unsupported_media_type(&body_types(kind)));
    }
    let bytes = body_bytes(app, request).await?;
    let mut parsed = parse_object(kind, &content_type, &bytes)?;
    check_identity(kind, namespace, &mut parsed.value)?;
    decode_object(kind, parsed, options.field_validation, Origin::Body)
}

fn strategy_context(app: &App) -> Context<'_> {
    Context { store: &app.store }
}

fn metadata_string<'a>(object: &'a Value, field: &str) -> &'a str {
    object["metadata"][field].as_str().unwrap_or("")
}

/// The object a PUT, PATCH or DELETE names.
#[derive(Debug, Clone, Copy)]
pub(super) struct Item<'a> {
    /// Its namespace (empty for a cluster-scoped resource).
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Whether the request is to its `status` subresource.
    pub status_only: bool,
    /// The subresource written through (empty for the object itself), as `managedFields`
    /// records it.
    pub subresource: &'a str,
}

/// The answer to a write: the object with `code` as the client asked for it (in the version
/// it asked through), and the warnings of its decoding.
pub(super) async fn written(
    encoding: &Encoding<'_>,
    code: u16,
    object: &StoredObject,
    warnings: &[String],
) -> Result<Response, ApiError> {
    let object = conversion::shown_one(encoding.kind, object).await?;
    let mut response = encoding.object(code, &object)?;
    add_warnings(&mut response, warnings);
    Ok(response)
}

pub(super) async fn create(
    app: &App,
    encoding: &Encoding<'_>,
    namespace: &str,
    query: &Query,
    request: Request,
) -> Result<Response, ApiError> {
    let kind = encoding.kind;
    let options = WriteOptions::parse(Verb::Create, query, None)?;
    let manager = manager_name(&options, &request);
    let mut decoded = object_body(app, kind, namespace, &options, request).await?;
    if kind.custom.is_some() && crd::defining_crd_terminating(app, kind) {
        let name = decoded.object["metadata"]["name"]
            .as_str()
            .unwrap_or_default();
        return Err(ApiError::crd_terminating(kind, name));
    }
    if kind.create_only {
        return super::review::create(app, kind, decoded.object);
    }
    FieldManager::new(kind, Type::of_resource(kind), "").update(
        None,
        &mut decoded.object,
        &manager,
    );
    let generated = metadata_string(&decoded.object, "name").is_empty()
        && !metadata_string(&decoded.object, "generateName").is_empty();
    let mut tries = 0;
    let created = loop {
        tries += 1;
        // Only a generated name can clash and be tried again.
        let mut object = if generated && tries < GENERATE_NAME_TRIES {
            decoded.object.clone()
        } else {
            std::mem::take(&mut decoded.object)
        };
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            // Set here, as kube-apiserver's handler does, so the strategies can use them.
            metadata.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            if generated {
                let prefix = metadata
                    .get("generateName")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let name = format!("{prefix}{}", random_suffix());
                metadata.insert("name".into(), json!(name));
            }
        }
        let stored = create_checked(app, kind, namespace, object, options.dry_run).await?;
        match stored {
            Err(StoreError::AlreadyExists { .. }) if generated && tries < GENERATE_NAME_TRIES => {}
            other => break other.map_err(|error| ApiError::from_store(&error, Some(kind)))?,
        }
    };
    let mut created = created;
    if !options.dry_run {
        if kind.is_crd()
            && let Some(established) = crd::serve(app, &created)
        {
            // kube's controllers accept the names and establish the CRD at once; the answer
            // shows it, so a client that reads the status from it sees them.
            created = established;
        }
        if kind.group.is_empty() && kind.plural == "namespaces" {
            let name = metadata_string(&created, "name");
            let ((), durable) = deferring(|| super::cluster::populate_namespace(app, name));
            if let Err(error) = durable.wait().await {
                tracing::warn!(%error, namespace = name, "could not populate the namespace");
            }
        }
    }
    written(encoding, 201, &created, &decoded.warnings).await
}

/// The strategy's preparation and checks of a new object, then the store's create (or its
/// dry run): alone among the writes of Services for a Service; a custom resource converted
/// to its storage version between.
async fn create_checked(
    app: &App,
    kind: &ResourceKind,
    namespace: &str,
    object: Value,
    dry_run: bool,
) -> Result<Result<Arc<StoredObject>, StoreError>, ApiError> {
    let context = strategy_context(app);
    let check = |object: &mut Value| {
        strategy::prepare_for_create(kind, namespace, object, &context)?;
        strategy::validate_create(kind, object)
    };
    let store = |object: Value| {
        deferring(|| {
            if dry_run {
                app.store.create_dry_run(kind, namespace, object)
            } else {
                app.store.create(kind, namespace, object)
            }
        })
    };
    Ok(durably(checked_write(app, kind, object, check, store).await?).await)
}

/// The strategy's preparation and checks of a change of `old` (as the request's version shows
/// it), then the store's update (or its dry run), as [`create_checked`].
async fn update_checked(
    app: &App,
    kind: &ResourceKind,
    item: Item<'_>,
    object: Value,
    old: &Value,
    dry_run: bool,
) -> Result<Result<(Arc<StoredObject>, bool), StoreError>, ApiError> {
    let Item {
        namespace,
        name,
        status_only,
        subresource,
    } = item;
    let context = strategy_context(app);
    let check = |object: &mut Value| {
        strategy::prepare_for_update(kind, object, old, subresource, &context)?;
        strategy::validate_update(kind, object, old, subresource)
    };
    let store = |object: Value| {
        deferring(|| {
            if dry_run {
                app.store
                    .update_dry_run(kind, namespace, name, object, status_only)
            } else {
                app.store.update(kind, namespace, name, object, status_only)
            }
        })
    };
    Ok(durably(checked_write(app, kind, object, check, store).await?).await)
}

/// `check` (the strategy), then `store`: a Service's alone among the writes of Services (its
/// allocations and their record together); a custom resource converted to its storage
/// version between.
async fn checked_write<T>(
    app: &App,
    kind: &ResourceKind,
    mut object: Value,
    check: impl FnOnce(&mut Value) -> Result<(), ApiError>,
    store: impl FnOnce(Value) -> T,
) -> Result<T, ApiError> {
    if kind.custom.is_some() {
        check(&mut object)?;
        let object = conversion::to_storage(&app.registry, kind, object).await?;
        return Ok(store(object));
    }
    app.services.serialized(kind, || {
        check(&mut object)?;
        Ok(store(object))
    })
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
    encoding: &Encoding<'_>,
    item: Item<'_>,
    query: &Query,
    request: Request,
) -> Result<Response, ApiError> {
    let kind = encoding.kind;
    let options = WriteOptions::parse(Verb::Update, query, None)?;
    let manager = manager_name(&options, &request);
    let decoded = object_body(app, kind, item.namespace, &options, request).await?;
    check_name(&decoded.object, item.name)?;
    let write = Write {
        item,
        options: &options,
        manager: &manager,
        allow_create: kind.create_on_update && !item.status_only,
        retry: !has_resource_version(&decoded.object) && !kind.requires_resource_version_on_update,
        apply: false,
    };
    let (stored, created) = guaranteed_update(app, kind, &write, |current| {
        if let Some(current) = current {
            uid_precondition(kind, item, &decoded.object, current)?;
        }
        Ok(decoded.object.clone())
    })
    .await?;
    let code = if created { 201 } else { 200 };
    written(encoding, code, &stored, &decoded.warnings).await
}

/// A PUT's uid is a precondition (kube-apiserver's `defaultUpdatedObjectInfo`): one that is
/// not the stored object's is refused as the storage layer refuses it, a 409.
fn uid_precondition(
    kind: &ResourceKind,
    item: Item<'_>,
    object: &Value,
    current: &Value,
) -> Result<(), ApiError> {
    let uid = object["metadata"]["uid"].as_str().unwrap_or_default();
    let held = current["metadata"]["uid"].as_str().unwrap_or_default();
    if uid.is_empty() || uid == held {
        return Ok(());
    }
    let detail = format!(
        "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: {held}",
        storage_key(kind, item.namespace, item.name)
    );
    Err(ApiError::from_store(
        &StoreError::PreconditionFailed {
            resource: kind.qualified_name(),
            name: item.name.to_string(),
            detail,
        },
        Some(kind),
    ))
}

/// The key kube-apiserver keeps an object under in etcd (what its storage errors name):
/// `/registry/<resource>/[<namespace>/]<name>`, with the group first for custom resources,
/// and the two historical prefixes of Services and Nodes.
fn storage_key(kind: &ResourceKind, namespace: &str, name: &str) -> String {
    let resource = match (kind.group.as_str(), kind.plural.as_str()) {
        ("", "services") => "services/specs".to_string(),
        ("", "nodes") => "minions".to_string(),
        (group, plural) if kind.is_builtin() || group.is_empty() => plural.to_string(),
        (group, plural) => format!("{group}/{plural}"),
    };
    if kind.namespaced {
        format!("/registry/{resource}/{namespace}/{name}")
    } else {
        format!("/registry/{resource}/{name}")
    }
}

/// A patch may not change the object's uid (kube-apiserver's `ValidateObjectMetaUpdate`).
fn uid_unchanged(
    kind: &ResourceKind,
    name: &str,
    patched: &Value,
    current: &Value,
) -> Result<(), ApiError> {
    let (uid, held) = (&patched["metadata"]["uid"], &current["metadata"]["uid"]);
    if uid == held || uid.is_null() {
        return Ok(());
    }
    let shown = serde_json::to_string(uid).unwrap_or_default();
    Err(ApiError::from_store(
        &StoreError::Invalid {
            kind: kind.qualified_kind(),
            name: name.to_string(),
            causes: vec![Cause {
                reason: "FieldValueInvalid",
                field: "metadata.uid".to_string(),
                message: format!("Invalid value: {shown}: field is immutable"),
            }],
        },
        Some(kind),
    ))
}

/// Whether `object` names a resourceVersion (a precondition of its write).
fn has_resource_version(object: &Value) -> bool {
    object["metadata"]["resourceVersion"]
        .as_str()
        .is_some_and(|version| !version.is_empty())
}

/// The manager a write is recorded for: its `fieldManager`, else the product of its
/// `User-Agent`, as kube-apiserver names it.
pub(super) fn manager_name(options: &WriteOptions, request: &Request) -> String {
    if let Some(manager) = options.field_manager.as_deref().filter(|m| !m.is_empty()) {
        return manager.to_string();
    }
    let agent = request
        .headers()
        .get(header::USER_AGENT)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
        .unwrap_or_default();
    user_agent_manager(&agent)
}

/// What precedes the first `/` of a `User-Agent`, without unprintable characters, at most
/// 128 bytes (kube-apiserver's `prefixFromUserAgent`).
fn user_agent_manager(agent: &str) -> String {
    const MAX_LEN: usize = 128;
    let product = agent.split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in product.chars() {
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            continue;
        }
        if out.len() + c.len_utf8() > MAX_LEN {
            break;
        }
        out.push(c);
    }
    out
}

/// What a write is: its object, options and manager, and how it treats a missing object and a
/// concurrent change.
pub(super) struct Write<'a> {
    /// The object written.
    pub item: Item<'a>,
    /// Its options.
    pub options: &'a WriteOptions,
    /// The manager it is recorded for.
    pub manager: &'a str,
    /// Whether a missing object is created (an apply, or a PUT of a kind that creates on
    /// update); otherwise it is a 404.
    pub allow_create: bool,
    /// Whether the write applies to whatever the object is now, so a concurrent change means
    /// computing it again (a patch or apply that names no resourceVersion, an unconditional
    /// PUT); otherwise the change is a 409.
    pub retry: bool,
    /// Whether it is an apply, whose object comes with its managers recorded.
    pub apply: bool,
}

/// How many times a write that applies to the current object is computed again when the
/// object changes under it.
const WRITE_ATTEMPTS: usize = 16;

/// Writes the object `make` makes from the current one (`None`: there is none), as
/// kube-apiserver's `GuaranteedUpdate` does: the managed fields recorded (unless `make` has,
/// for an apply), the kind's strategy, the store; computed again if the object changed
/// meanwhile and the write allows it. Returns the stored object and whether it was created.
pub(super) async fn guaranteed_update(
    app: &App,
    kind: &ResourceKind,
    write: &Write<'_>,
    mut make: impl FnMut(Option<&Value>) -> Result<Value, ApiError>,
) -> Result<(Arc<StoredObject>, bool), ApiError> {
    let Item {
        namespace,
        name,
        status_only,
        subresource,
    } = write.item;
    let dry_run = write.options.dry_run;
    // An apply records its managers itself (in `make`).
    let field_manager =
        (!write.apply).then(|| FieldManager::new(kind, Type::of_resource(kind), subresource));
    let mut attempt = 0;
    loop {
        attempt += 1;
        let retry = write.retry && attempt < WRITE_ATTEMPTS;
        let old = match app.store.get_latest(kind, namespace, name) {
            Ok(old) => Some(old),
            Err(StoreError::NotFound { .. }) if write.allow_create => None,
            Err(error) => return Err(ApiError::from_store(&error, Some(kind))),
        };
        // A custom resource is changed in the version the request names.
        let shown_old = match &old {
            Some(old) => Some(conversion::shown_one(kind, old).await?),
            None => None,
        };
        let old_value = shown_old.as_deref().map(StoredObject::value);
        let mut object = make(old_value)?;
        if let Some(field_manager) = &field_manager {
            field_manager.update(old_value, &mut object, write.manager);
        }
        let result = match old_value {
            Some(old) => {
                if write.retry && !has_resource_version(&object) {
                    // A precondition, so that a concurrent write is noticed.
                    object["metadata"]["resourceVersion"] =
                        old["metadata"]["resourceVersion"].clone();
                }
                update_checked(app, kind, write.item, object, old, dry_run).await?
            }
            None => {
                // As kube-apiserver's admission refuses every create of a custom resource of a
                // CRD being deleted, an apply's included.
                if kind.custom.is_some() && crd::defining_crd_terminating(app, kind) {
                    return Err(ApiError::crd_terminating(kind, name));
                }
                if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                    metadata.insert("name".into(), json!(name));
                    metadata.remove("resourceVersion");
                    metadata.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
                }
                create_checked(app, kind, namespace, object, dry_run)
                    .await?
                    .map(|created| (created, true))
            }
        };
        match result {
            Err(StoreError::Conflict { .. } | StoreError::AlreadyExists { .. }) if retry => {}
            Err(StoreError::NotFound { .. }) if retry && write.allow_create => {}
            Err(error) => return Err(ApiError::from_store(&error, Some(kind))),
            Ok((stored, created)) => {
                if kind.is_crd() && !dry_run {
                    // An update that took off a deleted CRD's last finalizer removed it.
                    if app.store.get_latest(kind, "", name).is_err() {
                        crd::stop_serving(app, &stored);
                        return Ok((stored, created));
                    }
                    if !status_only && let Some(established) = crd::serve(app, &stored) {
                        return Ok((established, created));
                    }
                }
                return Ok((stored, created));
            }
        }
    }
}

/// The patch types `kind` takes, in kube-apiserver's order.
fn patch_types(kind: &ResourceKind) -> Vec<&'static str> {
    if kind.is_builtin() {
        vec![JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH]
    } else {
        vec![JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
    }
}

pub(super) async fn patch(
    app: &App,
    encoding: &Encoding<'_>,
    item: Item<'_>,
    query: &Query,
    request: Request,
) -> Result<Response, ApiError> {
    let kind = encoding.kind;
    let content_type = media_type(&request);
    if !patch_types(kind).contains(&content_type.as_str()) {
        return Err(ApiError::unsupported_media_type(&patch_types(kind)));
    }
    let apply = content_type == APPLY_PATCH;
    let agent_manager = manager_name(&WriteOptions::default(), &request);
    let bytes = body_bytes(app, request).await?;
    let options = WriteOptions::parse(Verb::Patch { apply }, query, None)?;
    if apply {
        return super::apply::apply(app, encoding, item, &options, &bytes).await;
    }
    let manager = options.field_manager.clone().unwrap_or(agent_manager);
    let patch = parse_json(&bytes)
        .map_err(|error| ApiError::bad_request(format!("error decoding patch: {error}")))?;
    let duplicate_fields: Vec<String> = patch
        .duplicate_fields
        .iter()
        .map(|path| {
            if content_type == JSON_PATCH {
                format!("json patch {path}")
            } else {
                path.clone()
            }
        })
        .collect();
    let write = Write {
        item,
        options: &options,
        manager: &manager,
        allow_create: false,
        retry: !names_resource_version(&content_type, &patch.value),
        apply: false,
    };
    let mut warnings = Vec::new();
    let (stored, _) = guaranteed_update(app, kind, &write, |current| {
        let current = current.cloned().unwrap_or(Value::Null);
        let mut patched = current.clone();
        patch_value(&content_type, &mut patched, &patch.value)?;
        check_name(&patched, item.name)?;
        uid_unchanged(kind, item.name, &patched, &current)?;
        // A patch can leave something that is not an object at all (a merge patch `5`, a JSON
        // patch that replaces `/metadata`): that is a bad request, not something to index into.
        let Some(Value::Object(metadata)) = patched
            .as_object_mut()
            .map(|fields| fields.entry("metadata").or_insert_with(|| json!({})))
        else {
            return Err(ApiError::bad_request(
                "the patched object must be a JSON object whose metadata is an object",
            ));
        };
        // A patch applies to the current object unless it names a resourceVersion itself.
        metadata
            .entry("resourceVersion")
            .or_insert_with(|| current["metadata"]["resourceVersion"].clone());
        let decoded = decode_object(
            kind,
            ParsedBody {
                value: patched,
                duplicate_fields: duplicate_fields.clone(),
            },
            options.field_validation,
            Origin::Patch,
        )?;
        warnings = decoded.warnings;
        Ok(decoded.object)
    })
    .await?;
    written(encoding, 200, &stored, &warnings).await
}

/// Whether a patch sets `metadata.resourceVersion` (a precondition of its write).
fn names_resource_version(content_type: &str, patch: &Value) -> bool {
    if content_type == JSON_PATCH {
        patch.as_array().into_iter().flatten().any(|operation| {
            operation["path"].as_str().is_some_and(|path| {
                path.starts_with("/metadata/resourceVersion") || path == "/metadata"
            })
        })
    } else {
        !patch["metadata"]["resourceVersion"].is_null()
    }
}

/// Reads a delete's `DeleteOptions` body, if it has one.
fn delete_options(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    parse_json(bytes)
        .map(|parsed| parsed.value)
        .map_err(|error| {
            ApiError::bad_request(format!(
                "couldn't get version/kind; json parse error: {error}"
            ))
        })
}

pub(super) async fn delete(
    app: &App,
    encoding: &Encoding<'_>,
    item: Item<'_>,
    query: &Query,
    request: Request,
) -> Result<Response, ApiError> {
    let kind = encoding.kind;
    let (namespace, name) = (item.namespace, item.name);
    let body = delete_options(&body_bytes(app, request).await?)?;
    if body.is_null() {
        // Without a body the options come from the query, and must parse.
        int_param(query, "gracePeriodSeconds")?;
    }
    let options = WriteOptions::parse(Verb::Delete, query, Some(&body))?;
    let precondition = Preconditions::of(&body);
    let policy = body["propagationPolicy"]
        .as_str()
        .or(query.get("propagationPolicy").map(String::as_str))
        .unwrap_or("Background");
    let propagation = Propagation::parse(policy).ok_or_else(|| {
        ApiError::bad_request(format!(
            "propagationPolicy: Unsupported value: {policy:?}: supported values: \"Orphan\", \"Background\", \"Foreground\""
        ))
    })?;
    let deleted = durably(deferring(|| {
        if options.dry_run {
            app.store
                .delete_dry_run(kind, namespace, name, precondition, propagation)
        } else {
            app.store
                .delete_with(kind, namespace, name, precondition, propagation)
        }
    }))
    .await
    .map_err(|error| ApiError::from_store(&error, Some(kind)))?;
    if let (true, false, Deleted::Gone(crd)) = (kind.is_crd(), options.dry_run, &deleted) {
        crd::stop_serving(app, crd);
    }
    match deleted {
        Deleted::Finalizing(object) => written(encoding, 200, &object, &[]).await,
        Deleted::Gone(object) if kind.returns_deleted_object => {
            written(encoding, 200, &object, &[]).await
        }
        Deleted::Gone(object) => Ok(json_response(
            200,
            &success(kind, name, object["metadata"]["uid"].as_str()),
        )),
    }
}

pub(super) async fn delete_collection(
    app: &App,
    encoding: &Encoding<'_>,
    namespace: Option<&str>,
    query: &Query,
    request: Request,
) -> Result<Response, ApiError> {
    let kind = encoding.kind;
    let body = delete_options(&body_bytes(app, request).await?)?;
    let options = WriteOptions::parse(Verb::Delete, query, Some(&body))?;
    let (labels, fields) = super::read::selectors(kind, query)?;
    let items = app.store.list_latest(kind, namespace);
    let mut deleted = Vec::new();
    for item in items
        .iter()
        .filter(|item| labels.matches(item) && fields.matches(item))
    {
        let item_namespace = item["metadata"]["namespace"].as_str().unwrap_or("");
        let item_name = item["metadata"]["name"].as_str().unwrap_or("");
        let result = durably(deferring(|| {
            if options.dry_run {
                app.store.delete_dry_run(
                    kind,
                    item_namespace,
                    item_name,
                    None,
                    Propagation::Background,
                )
            } else {
                app.store.delete(kind, item_namespace, item_name, None)
            }
        }))
        .await;
        // An object deleted meanwhile by someone else is simply not in the answer.
        if let Ok(Deleted::Gone(last) | Deleted::Finalizing(last)) = result {
            deleted.push(last);
        }
    }
    let metadata = json!({"resourceVersion": app.store.resource_version().to_string()});
    super::read::shown_list(encoding, metadata, &deleted).await
}

/// Reads the body of a subresource's POST into a tree: JSON, YAML, or protobuf of the message
/// `message`; an empty body is an empty object.
pub(super) async fn json_body(
    app: &App,
    request: Request,
    message: &str,
) -> Result<Value, ApiError> {
    let declared = media_type(&request);
    let bytes = body_bytes(app, request).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    if declared == PROTOBUF {
        return protobuf::decode_body(&bytes, message).map_err(|error| {
            ApiError::bad_request(format!("the object provided is unrecognized: {error}"))
        });
    }
    let content_type = media_type_of(&bytes);
    let parsed = if content_type == YAML {
        parse_yaml(&bytes)
    } else {
        parse_json(&bytes)
    };
    parsed.map(|parsed| parsed.value).map_err(|error| {
        ApiError::bad_request(format!("the request body could not be decoded: {error}"))
    })
}

/// JSON when the body starts like JSON, YAML otherwise.
fn media_type_of(bytes: &[u8]) -> &'static str {
    match bytes.iter().find(|byte| !byte.is_ascii_whitespace()) {
        Some(b'{' | b'[') => JSON,
        _ => YAML,
    }
}

/// What a PUT or PATCH of a subresource asks for: the body of a PUT, or the patch applied to
/// `current` (the subresource as it is now), with the checked options of the write and the
/// manager it is recorded for.
pub(super) async fn patched_or_replaced(
    app: &App,
    request: Request,
    query: &Query,
    current: Value,
) -> Result<(Value, WriteOptions, String), ApiError> {
    let patching = request.method() == axum::http::Method::PATCH;
    let content_type = media_type(&request);
    if patching {
        let types = [JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH];
        if !types.contains(&content_type.as_str()) {
            return Err(ApiError::unsupported_media_type(&types));
        }
    } else if !content_type.is_empty() && content_type != JSON && content_type != YAML {
        return Err(ApiError::unsupported_media_type(&[JSON, YAML]));
    }
    let verb = if patching {
        Verb::Patch { apply: false }
    } else {
        Verb::Update
    };
    let options = WriteOptions::parse(verb, query, None)?;
    let manager = manager_name(&options, &request);
    let bytes = body_bytes(app, request).await?;
    if !patching {
        let parsed = if content_type == YAML {
            parse_yaml(&bytes)
        } else {
            parse_json(&bytes)
        };
        let value = parsed
            .map_err(|error| {
                ApiError::bad_request(format!("the request body could not be decoded: {error}"))
            })?
            .value;
        return Ok((value, options, manager));
    }
    let patch = parse_json(&bytes)
        .map_err(|error| ApiError::bad_request(format!("error decoding patch: {error}")))?
        .value;
    let mut patched = current;
    patch_value(&content_type, &mut patched, &patch)?;
    Ok((patched, options, manager))
}

/// Applies `patch` of `content_type` to `target`.
fn patch_value(content_type: &str, target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    match content_type {
        MERGE_PATCH => {
            merge_patch(target, patch);
            Ok(())
        }
        STRATEGIC_MERGE_PATCH => strategic_merge_patch(target, patch)
            .map_err(|error| ApiError::bad_request(error.to_string())),
        // As kube's patcher: a patch that does not decode is a bad request, one with too many
        // operations too large, one that does not apply unprocessable.
        _ => json_patch(target, patch).map_err(|error| match error {
            PatchError::TooManyOperations(_) => ApiError::entity_too_large(error),
            PatchError::Malformed(_) => ApiError::bad_request(error.to_string()),
            _ => ApiError::invalid_message(error.to_string()),
        }),
    }
}

/// A write of a subresource that changes one part of its object (`part`): the part is taken
/// from the body (PUT) or from the object patched (PATCH), the rest stays as stored.
pub(super) async fn replace_part(
    app: &App,
    encoding: &Encoding<'_>,
    item: Item<'_>,
    query: &Query,
    request: Request,
    part: super::subresource::Part,
) -> Result<Response, ApiError> {
    let kind = encoding.kind;
    let stored = app
        .store
        .get(kind, item.namespace, item.name)
        .map_err(|error| ApiError::from_store(&error, Some(kind)))?;
    let stored = conversion::shown_one(kind, &stored).await?;
    let (wanted, options, manager) =
        patched_or_replaced(app, request, query, stored.value().clone()).await?;
    let write = Write {
        item,
        options: &options,
        manager: &manager,
        allow_create: false,
        retry: false,
        apply: false,
    };
    let mut warnings = Vec::new();
    let (written_object, _) = guaranteed_update(app, kind, &write, |current| {
        let merged = part.merged(current.unwrap_or(&stored), &wanted);
        let decoded = decode_object(
            kind,
            ParsedBody {
                value: merged,
                duplicate_fields: Vec::new(),
            },
            options.field_validation,
            Origin::Patch,
        )?;
        warnings = decoded.warnings;
        Ok(decoded.object)
    })
    .await?;
    written(encoding, 200, &written_object, &warnings).await
}
