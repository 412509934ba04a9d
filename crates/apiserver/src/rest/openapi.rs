//! OpenAPI, as kubectl reads it: v3 has an index of group versions and per group version a
//! document with the real schema of every kind it serves (from k8s-openapi's, descriptions
//! included: `kubectl explain` walks them) and operations that say which kind they serve and
//! that they take `fieldValidation`, so that kubectl leaves validation to the server. Custom
//! resources' schemas are open (`x-kubernetes-preserve-unknown-fields`).
//!
//! OpenAPI v2 in JSON carries every built-in definition too. In gnostic's protobuf encoding, as
//! kubectl before 1.28 asks for it first, it is an empty document: such kubectl refuses to
//! validate without a v2 document it can decode, then learns from v3 that the server
//! validates.

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::kinds::schema::{V3_REF_PREFIX, definitions};
use crate::registry::Registry;
use crate::resource::ResourceKind;

fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The media type kube-apiserver answers protobuf OpenAPI v2 with (a dot where the request's
/// has `@`, which Go's media type parser refuses).
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The title the documents' `info` carries.
const V2_TITLE: &str = "Kubernetes";
/// The version the protobuf v2 document's `info` carries (fixed: kubectl only checks it parses).
const V2_VERSION: &str = "v1.33.0-ctrlkit";

/// `/openapi/v2`: protobuf when the request accepts it, JSON otherwise.
pub fn v2(headers: &HeaderMap) -> Response {
    let protobuf = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|accept| accept.contains("protobuf"));
    if protobuf {
        let mut response = Response::new(axum::body::Body::from(v2_protobuf()));
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(V2_PROTOBUF));
        response
    } else {
        let document = json!({
            "swagger": "2.0",
            "info": {"title": V2_TITLE, "version": v2_version()},
            "paths": {},
            "definitions": definitions(),
        });
        // v2 keeps definitions under another name: every reference moves with them.
        let text = serde_json::to_string(&document)
            .unwrap_or_default()
            .replace(V3_REF_PREFIX, "#/definitions/");
        let mut response = Response::new(axum::body::Body::from(text));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// The version the documents' `info` carries.
fn v2_version() -> String {
    format!("v1.{}.0-ctrlkit", crate::kinds::kubernetes_minor())
}

/// gnostic's `openapi.v2.Document` with `swagger` (field 1) and `info` (field 2: `title` 1,
/// `version` 2) set, in protobuf's wire format.
fn v2_protobuf() -> Vec<u8> {
    let mut info = Vec::new();
    length_delimited(1, V2_TITLE.as_bytes(), &mut info);
    length_delimited(2, V2_VERSION.as_bytes(), &mut info);
    let mut document = Vec::new();
    length_delimited(1, b"2.0", &mut document);
    length_delimited(2, &info, &mut document);
    document
}

/// One length-delimited field (wire type 2): key, length, bytes.
fn length_delimited(field: u32, bytes: &[u8], out: &mut Vec<u8>) {
    varint(u64::from(field << 3 | 2), out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// `/openapi/v3`: where each group version's document is.
pub fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    let mut add = |group: &str, version: &str| {
        let path = group_version_path(group, version);
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}")}),
        );
    };
    if !registry.resources("", "v1").is_empty() {
        add("", "v1");
    }
    for (group, versions) in registry.groups() {
        for version in versions {
            add(&group, &version);
        }
    }
    json!({"paths": paths})
}

/// The name of a kind's definition: its type's for a built-in kind (`io.k8s.api.core.v1.Pod`),
/// the reversed group's for a custom resource (`dev.clux.v1.Foo`), as kube-apiserver names them.
fn schema_name(kind: &ResourceKind) -> String {
    if let Some(builtin) = kind.builtin {
        return builtin.schema_name().into_owned();
    }
    let group: Vec<&str> = kind.group.rsplit('.').collect();
    format!("{}.{}.{}", group.join("."), kind.version, kind.kind)
}

fn operation(kind: &ResourceKind, id: &str) -> Value {
    json!({
        "operationId": id,
        "parameters": [
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ],
        "x-kubernetes-group-version-kind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{}", schema_name(kind))}}}}},
    })
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`, if served.
pub fn group_version(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let kinds = registry.resources(group, version);
    if kinds.is_empty() {
        return None;
    }
    let prefix = group_version_path(group, version);
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for kind in &kinds {
        let collection = if kind.namespaced {
            format!("/{prefix}/namespaces/{{namespace}}/{}", kind.plural)
        } else {
            format!("/{prefix}/{}", kind.plural)
        };
        paths.insert(
            collection.clone(),
            json!({"post": operation(kind, &format!("create{}", kind.kind))}),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "put": operation(kind, &format!("replace{}", kind.kind)),
                "patch": operation(kind, &format!("patch{}", kind.kind)),
            }),
        );
        match kind.builtin {
            Some(builtin) => add_reachable(&builtin.schema_name(), &mut schemas),
            None => {
                let definition = custom_definition(kind);
                if definition["properties"].get("metadata").is_some() {
                    add_reachable(OBJECT_META, &mut schemas);
                }
                schemas.insert(schema_name(kind), definition);
            }
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": V2_TITLE, "version": v2_version()},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// A custom resource's definition, as kube-apiserver's CRD OpenAPI builder makes it: the
/// version's schema with `apiVersion`, `kind` and `metadata` (ObjectMeta) added; without a
/// schema, anything.
fn custom_definition(kind: &ResourceKind) -> Value {
    let gvk = json!([{"group": kind.group, "version": kind.version, "kind": kind.kind}]);
    let Some(mut definition) = kind
        .custom
        .as_ref()
        .and_then(|custom| custom.openapi.clone())
        .filter(Value::is_object)
    else {
        return json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-group-version-kind": gvk,
        });
    };
    let properties = &mut definition["properties"];
    if !properties.is_object() {
        *properties = json!({});
    }
    properties["apiVersion"] = json!({
        "type": "string",
        "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
    });
    properties["kind"] = json!({
        "type": "string",
        "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
    });
    properties["metadata"] = json!({
        "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
        "allOf": [{"$ref": format!("{V3_REF_PREFIX}{OBJECT_META}")}],
    });
    definition["x-kubernetes-group-version-kind"] = gvk;
    definition
}

/// Adds the definition `name` and every definition it refers to, directly or not.
fn add_reachable(name: &str, schemas: &mut Map<String, Value>) {
    let all = definitions();
    let mut pending = vec![name.to_string()];
    while let Some(next) = pending.pop() {
        if schemas.contains_key(&next) {
            continue;
        }
        let Some(definition) = all.get(&next) else {
            continue;
        };
        collect_refs(definition, &mut pending);
        schemas.insert(next, definition.clone());
    }
}

/// The definitions `schema` refers to.
fn collect_refs(schema: &Value, found: &mut Vec<String>) {
    match schema {
        Value::Object(fields) => {
            for (key, value) in fields {
                match (key.as_str(), value.as_str()) {
                    ("$ref", Some(reference)) => {
                        if let Some(name) = reference.strip_prefix(V3_REF_PREFIX) {
                            found.push(name.to_string());
                        }
                    }
                    _ => collect_refs(value, found),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                collect_refs(item, found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v2_protobuf_document_is_swagger_and_info() {
        let mut expected = vec![0x0a, 3];
        expected.extend_from_slice(b"2.0");
        expected.extend_from_slice(&[0x12, 29, 0x0a, 10]);
        expected.extend_from_slice(b"Kubernetes");
        expected.extend_from_slice(&[0x12, 15]);
        expected.extend_from_slice(b"v1.33.0-ctrlkit");
        assert_eq!(v2_protobuf(), expected);
    }

    #[test]
    fn varints_take_seven_bits_a_byte() {
        let encoded = |value| {
            let mut out = Vec::new();
            varint(value, &mut out);
            out
        };
        assert_eq!(encoded(1), [1]);
        assert_eq!(encoded(127), [127]);
        assert_eq!(encoded(128), [0x80, 1]);
        assert_eq!(encoded(300), [0xac, 0x02]);
    }

    #[test]
    fn v2_answers_protobuf_only_to_who_asks_for_it() {
        let mut headers = HeaderMap::new();
        let json = v2(&headers);
        assert_eq!(json.headers()[header::CONTENT_TYPE], "application/json");
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static(
                "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json",
            ),
        );
        assert_eq!(v2(&headers).headers()[header::CONTENT_TYPE], V2_PROTOBUF);
    }
}
