//! A CustomResourceDefinition version's `openAPIV3Schema`, read once into a tree the server
//! walks per request: each node's type, its properties, the schema of its map values and list
//! items, and the Kubernetes extensions that say how it merges (`x-kubernetes-list-type`,
//! `x-kubernetes-map-type`, `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-int-or-string`).
//!
//! Children are shared (`Arc`), so a walker can hold a node of the tree without copying it.

mod checks;
pub mod field_references;
mod library;
pub mod literal_checks;
mod located_error;
pub mod rule_cost;
mod rules;
mod schema_lookup;
pub mod static_cost;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

pub use self::checks::{Bound, Checks, Pattern, go_regex};
pub use self::rules::{Compiled, Rule, environment};

/// The JSON type a node declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    /// `object`.
    Object,
    /// `array`.
    Array,
    /// `string`.
    String,
    /// `integer`.
    Integer,
    /// `number`.
    Number,
    /// `boolean`.
    Boolean,
}

impl JsonType {
    /// The type's name in a schema.
    pub fn name(self) -> &'static str {
        match self {
            Self::Object => "object",
            Self::Array => "array",
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
        }
    }
}

/// How a list merges (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ListType {
    /// Replaced whole (the default).
    #[default]
    Atomic,
    /// A set of scalars.
    Set,
    /// Objects merged by the key fields (`x-kubernetes-list-map-keys`).
    Map(Arc<[Arc<str>]>),
}

/// One node of a structural schema.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node {
    /// The declared type; `None` when the node leaves it open.
    pub json_type: Option<JsonType>,
    /// The declared properties of an object.
    pub properties: BTreeMap<Arc<str>, Arc<Node>>,
    /// The schema of an object's other values (`additionalProperties`).
    pub additional_properties: Option<Arc<Node>>,
    /// The schema of a list's items.
    pub items: Option<Arc<Node>>,
    /// How a list merges.
    pub list_type: ListType,
    /// Whether an object merges whole (`x-kubernetes-map-type: atomic`).
    pub atomic_map: bool,
    /// Whether fields the schema does not declare are kept.
    pub preserve_unknown_fields: bool,
    /// Whether the value may be an integer or a string.
    pub int_or_string: bool,
    /// Whether the value is a whole object of some kind (`apiVersion`, `kind`, `metadata`).
    pub embedded_resource: bool,
    /// Whether `null` is allowed.
    pub nullable: bool,
    /// The default value.
    pub default: Option<Value>,
    /// The value validations; `None` when the node has none.
    pub checks: Option<Box<Checks>>,
    /// The CEL validation rules (`x-kubernetes-validations`).
    pub rules: Vec<Arc<Rule>>,
    /// Whether this node or one below it has CEL rules.
    pub rules_below: bool,
}

impl Node {
    /// Reads a schema; parts that are not schemas (a `properties` that is not an object) are
    /// left out, as the server has already validated the CRD that holds it.
    pub fn compile(schema: &Value) -> Arc<Node> {
        Arc::new(Self::read(schema))
    }

    fn read(schema: &Value) -> Node {
        let json_type = match schema["type"].as_str() {
            Some("object") => Some(JsonType::Object),
            Some("array") => Some(JsonType::Array),
            Some("string") => Some(JsonType::String),
            Some("integer") => Some(JsonType::Integer),
            Some("number") => Some(JsonType::Number),
            Some("boolean") => Some(JsonType::Boolean),
            _ => None,
        };
        let properties: BTreeMap<Arc<str>, Arc<Node>> = schema["properties"]
            .as_object()
            .map(|properties| {
                properties
                    .iter()
                    .map(|(name, property)| (Arc::from(name.as_str()), Self::compile(property)))
                    .collect()
            })
            .unwrap_or_default();
        let additional_properties = match &schema["additionalProperties"] {
            Value::Object(values) => Some(Self::compile(&Value::Object(values.clone()))),
            // `additionalProperties: true` allows any value.
            Value::Bool(true) => Some(Arc::new(Node {
                preserve_unknown_fields: true,
                ..Node::default()
            })),
            _ => None,
        };
        let items = schema
            .get("items")
            .filter(|items| items.is_object())
            .map(Self::compile);
        let list_type = match schema["x-kubernetes-list-type"].as_str() {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(
                schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(Arc::from)
                    .collect(),
            ),
            _ => ListType::Atomic,
        };
        let rules = Rule::read_all(schema);
        let rules_below = !rules.is_empty()
            || properties
                .values()
                .any(|child: &Arc<Node>| child.rules_below)
            || additional_properties
                .as_ref()
                .is_some_and(|child| child.rules_below)
            || items.as_ref().is_some_and(|child| child.rules_below);
        Node {
            rules,
            rules_below,
            json_type,
            properties,
            additional_properties,
            items,
            list_type,
            atomic_map: schema["x-kubernetes-map-type"] == "atomic",
            preserve_unknown_fields: schema["x-kubernetes-preserve-unknown-fields"] == true,
            int_or_string: schema["x-kubernetes-int-or-string"] == true,
            embedded_resource: schema["x-kubernetes-embedded-resource"] == true,
            nullable: schema["nullable"] == true,
            default: schema.get("default").cloned(),
            checks: Checks::read(schema),
        }
    }

    /// The schema of field `name` of an object of this node, with the property's name when it
    /// is a declared property; `None` when the object may not hold it.
    pub fn field(&self, name: &str) -> Option<(&Arc<Node>, Option<&Arc<str>>)> {
        if let Some((name, property)) = self.properties.get_key_value(name) {
            return Some((property, Some(name)));
        }
        self.additional_properties
            .as_ref()
            .map(|values| (values, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_types_extensions_and_children() {
        let node = Node::compile(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {
                    "port": {"x-kubernetes-int-or-string": true},
                }},
                "items": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            },
        }));
        assert_eq!(node.json_type, Some(JsonType::Object));
        let (spec, declared) = node.field("spec").unwrap();
        assert!(declared.is_some() && spec.atomic_map);
        assert!(spec.properties["port"].int_or_string);
        let items = &node.properties["items"];
        assert_eq!(
            items.list_type,
            ListType::Map(vec![Arc::from("name")].into())
        );
        assert_eq!(
            items.items.as_ref().unwrap().properties["name"].json_type,
            Some(JsonType::String)
        );
        let (value, declared) = node.properties["labels"].field("anything").unwrap();
        assert!(declared.is_none());
        assert_eq!(value.json_type, Some(JsonType::String));
        assert!(node.properties["free"].preserve_unknown_fields);
        assert!(node.field("undeclared").is_none());
    }
}
