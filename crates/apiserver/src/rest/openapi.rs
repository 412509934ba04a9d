//! Enough OpenAPI v3 for kubectl: an index of group versions, and per group version a document
//! whose operations say which kind they serve and that they take `fieldValidation`, so that
//! kubectl leaves validation to the server.
//!
//! The schemas are open (`x-kubernetes-preserve-unknown-fields`): they name each kind for kubectl
//! without describing its fields.

use serde_json::{Map, Value, json};

use crate::registry::Registry;
use crate::resource::ResourceKind;

fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
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

fn schema_name(kind: &ResourceKind) -> String {
    let group = if kind.group.is_empty() {
        "core"
    } else {
        &kind.group
    };
    format!("{group}.{}.{}", kind.version, kind.kind)
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
        schemas.insert(
            schema_name(kind),
            json!({
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "x-kubernetes-group-version-kind": [{"group": kind.group, "version": kind.version, "kind": kind.kind}],
            }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0-ctrlkit"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}
