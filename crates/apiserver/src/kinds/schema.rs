//! The schemas of the built-in kinds, from k8s-openapi's `JsonSchema` impls: every definition
//! under its Kubernetes name (`io.k8s.api.core.v1.Pod`), in OpenAPI v3's form (`$ref`s to
//! `#/components/schemas/…`, a `$ref` with a description wrapped in `allOf`), each kind's
//! definition marked with `x-kubernetes-group-version-kind` as kube-apiserver marks it.
//!
//! They serve the OpenAPI documents, and they name the Go types in a type error as
//! kube-apiserver's decoder does (`json: cannot unmarshal number into Go struct field
//! ConfigMap.data of type string`).

use std::sync::LazyLock;

use k8s_openapi::schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::builtin::{BuiltinType, builtin_types};
use super::typed::{PathSegment, TypeError};

/// Where OpenAPI v3 keeps definitions, as `$ref`s name them.
pub const V3_REF_PREFIX: &str = "#/components/schemas/";

/// Every definition the built-in kinds need, by name.
pub fn definitions() -> &'static Map<String, Value> {
    static DEFINITIONS: LazyLock<Map<String, Value>> = LazyLock::new(generate);
    &DEFINITIONS
}

fn generate() -> Map<String, Value> {
    let mut generator = SchemaSettings::openapi3().into_generator();
    for builtin in builtin_types() {
        builtin.schema(&mut generator);
    }
    // What subresources take and answer, and the metadata-only forms.
    {
        use k8s_openapi::api;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
        generator.subschema_for::<api::autoscaling::v1::Scale>();
        generator.subschema_for::<api::authentication::v1::TokenRequest>();
        generator.subschema_for::<api::policy::v1::Eviction>();
        generator.subschema_for::<api::core::v1::Binding>();
        generator.subschema_for::<meta::Status>();
        generator.subschema_for::<meta::APIResourceList>();
    }
    let mut definitions = generator.take_definitions(true);
    for builtin in builtin_types() {
        if let Some(Value::Object(definition)) = definitions.get_mut(&*builtin.schema_name()) {
            definition.insert(
                "x-kubernetes-group-version-kind".to_string(),
                json!([{"group": builtin.group, "kind": builtin.kind, "version": builtin.version}]),
            );
        }
    }
    definitions
}

/// kube-apiserver's message for a value of the wrong type in an object of `builtin`:
/// `json: cannot unmarshal <found> into Go struct field <Struct>.<path> of type <type>`, where
/// `<Struct>` is the innermost struct and `<path>` the field names from the root.
pub fn type_error_message(builtin: &BuiltinType, error: &TypeError) -> String {
    let definitions = definitions();
    let mut schema = definitions.get(&*builtin.schema_name());
    let mut owner = builtin.kind.to_string();
    let mut fields: Vec<&str> = Vec::new();
    for segment in &error.path {
        let Some((definition, current)) = schema.map(|schema| resolve(definitions, schema)) else {
            break;
        };
        schema = match segment {
            PathSegment::Field(name) => match current.get("properties").and_then(|p| p.get(name)) {
                Some(property) => {
                    if let Some(struct_name) = definition.and_then(|d| d.rsplit('.').next()) {
                        owner = struct_name.to_string();
                    }
                    fields.push(name);
                    Some(property)
                }
                None => current.get("additionalProperties"),
            },
            PathSegment::Index(_) => current.get("items"),
        };
    }
    let leaf = schema.map_or_else(|| "interface {}".to_string(), go_type);
    match error.found {
        "" => format!(
            "json: cannot unmarshal into Go struct field {owner}.{} of type {leaf}: {}",
            fields.join("."),
            error.detail
        ),
        found => format!(
            "json: cannot unmarshal {found} into Go struct field {owner}.{} of type {leaf}",
            fields.join(".")
        ),
    }
}

/// The definition a schema refers to (through `$ref` or `allOf: [{$ref}]`) with its name, or
/// the schema itself.
fn resolve<'a>(
    definitions: &'a Map<String, Value>,
    schema: &'a Value,
) -> (Option<&'a str>, &'a Value) {
    match ref_name(schema).and_then(|name| definitions.get_key_value(name)) {
        Some((name, definition)) => (Some(name.as_str()), definition),
        None => (None, schema),
    }
}

fn ref_name(schema: &Value) -> Option<&str> {
    let reference = schema.get("$ref").or_else(|| {
        schema
            .get("allOf")
            .and_then(|all| all.get(0))
            .and_then(|first| first.get("$ref"))
    })?;
    reference.as_str()?.strip_prefix(V3_REF_PREFIX)
}

/// How Go names the type of a schema: `int32`, `[]string`, `map[string]string`, `v1.PodSpec`.
fn go_type(schema: &Value) -> String {
    if let Some(name) = ref_name(schema) {
        let mut parts = name.rsplit('.');
        let type_name = parts.next().unwrap_or(name);
        let package = parts.next().unwrap_or_default();
        return format!("{package}.{type_name}");
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") if schema.get("format").and_then(Value::as_str) == Some("byte") => {
            "[]uint8".to_string()
        }
        Some("string") => "string".to_string(),
        Some("boolean") => "bool".to_string(),
        Some("number") => "float64".to_string(),
        Some("integer") => match schema.get("format").and_then(Value::as_str) {
            Some("int32") => "int32".to_string(),
            Some("int64") => "int64".to_string(),
            _ => "int".to_string(),
        },
        Some("array") => format!(
            "[]{}",
            schema
                .get("items")
                .map_or_else(|| "interface {}".to_string(), go_type)
        ),
        Some("object") => match schema.get("additionalProperties") {
            Some(values) if values.is_object() => {
                format!("map[string]{}", go_type(values))
            }
            _ => "map[string]interface {}".to_string(),
        },
        _ => "interface {}".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::builtin_types;
    use crate::kinds::typed::UnknownFields;
    use serde_json::json;

    fn builtin(kind: &str) -> &'static BuiltinType {
        builtin_types()
            .iter()
            .find(|b| b.kind == kind && matches!(b.group, "" | "apps"))
            .unwrap()
    }

    #[test]
    fn every_kind_has_its_definition_with_its_group_version_kind() {
        let definitions = definitions();
        for builtin in builtin_types() {
            let definition = &definitions[&*builtin.schema_name()];
            assert_eq!(
                definition["x-kubernetes-group-version-kind"][0]["kind"],
                builtin.kind
            );
        }
        assert!(definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"].is_object());
    }

    #[test]
    fn type_errors_name_go_types_as_kube_does() {
        let config_map = builtin("ConfigMap");
        let error = config_map
            .decode(
                &mut json!({"metadata": {"name": "c"}, "data": {"k": 1}}),
                UnknownFields::Report,
            )
            .unwrap_err();
        assert_eq!(
            type_error_message(config_map, &error),
            "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
        );
        let deployment = builtin("Deployment");
        let error = deployment
            .decode(&mut json!({"metadata": {"name": "d"}, "spec": {"replicas": "3", "selector": {}, "template": {}}}), UnknownFields::Report)
            .unwrap_err();
        assert_eq!(
            type_error_message(deployment, &error),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        let pod = builtin("Pod");
        let error = pod
            .decode(&mut json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "ports": 5}]}}), UnknownFields::Report)
            .unwrap_err();
        assert_eq!(
            type_error_message(pod, &error),
            "json: cannot unmarshal number into Go struct field Container.spec.containers.ports of type []v1.ContainerPort"
        );
    }
}
