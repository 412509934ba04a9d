//! The uniqueness a list's `x-kubernetes-list-type` promises, checked as kube-apiserver checks it
//! (apiextensions-apiserver's `schema/listtype`): a `set` holds no value twice, a `map` no two
//! items with the same keys; each repeat is a `Duplicate value` on the item that repeats first.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::field_error::{FieldError, FieldErrorKind};
use crate::structural::{ListType, Node};

/// The duplicates in the `set` and `map` lists of `object` under `node`.
pub fn validate(node: &Node, object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Value::Object(fields) = object {
        let mut path = String::new();
        object_fields(node, fields, &mut path, &mut errors);
    }
    errors
}

fn object_fields(
    node: &Node,
    fields: &Map<String, Value>,
    path: &mut String,
    errors: &mut Vec<FieldError>,
) {
    let length = path.len();
    if let Some(values) = node.additional_properties.as_deref() {
        for (key, value) in fields {
            let _ = write!(path, "[{key}]");
            value_of(values, value, path, errors);
            path.truncate(length);
        }
    }
    for (name, value) in fields {
        if let Some(property) = node.properties.get(name.as_str()) {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(name);
            value_of(property, value, path, errors);
            path.truncate(length);
        }
    }
}

fn value_of(node: &Node, value: &Value, path: &mut String, errors: &mut Vec<FieldError>) {
    match value {
        Value::Array(items) => list(node, items, path, errors),
        Value::Object(fields) => object_fields(node, fields, path, errors),
        _ => {}
    }
}

fn list(node: &Node, items: &[Value], path: &mut String, errors: &mut Vec<FieldError>) {
    match &node.list_type {
        ListType::Set => {
            for index in repeats(items.iter()) {
                errors.push(duplicate(path, index, items[index].clone()));
            }
        }
        ListType::Map(keys) => {
            if let Some(index) = items
                .iter()
                .position(|item| !item.is_object() && !item.is_null())
            {
                errors.push(FieldError::invalid(
                    format!("{path}[{index}]"),
                    items[index].clone(),
                    "must be an object for an array of list-type map",
                ));
            } else {
                let key_of = |item: &Value| -> Value {
                    let mut key = Map::new();
                    for name in keys.iter() {
                        if let Some(value) = item.get(name.as_ref()) {
                            key.insert(name.to_string(), value.clone());
                        }
                    }
                    Value::Object(key)
                };
                let item_keys: Vec<Value> = items.iter().map(key_of).collect();
                for index in repeats(item_keys.iter()) {
                    errors.push(duplicate(path, index, item_keys[index].clone()));
                }
            }
        }
        ListType::Atomic => {}
    }
    if let Some(items_node) = node.items.as_deref() {
        let length = path.len();
        for (index, item) in items.iter().enumerate() {
            let _ = write!(path, "[{index}]");
            value_of(items_node, item, path, errors);
            path.truncate(length);
        }
    }
}

fn duplicate(path: &str, index: usize, value: Value) -> FieldError {
    FieldError::new(
        FieldErrorKind::Duplicate,
        format!("{path}[{index}]"),
        value,
        "",
    )
}

/// The indexes at which a value is seen for the second time.
fn repeats<'a>(values: impl Iterator<Item = &'a Value>) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut repeated = Vec::new();
    for (index, value) in values.enumerate() {
        // Go compares scalars by type and value, compounds by their JSON: the JSON of both
        // (with the integer/float distinction serde_json keeps) does the same.
        let times = seen.entry(value.to_string()).or_insert(0);
        *times += 1;
        if *times == 2 {
            repeated.push(index);
        }
    }
    repeated
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repeats_in_sets_and_maps_are_duplicates() {
        let node = Node::compile(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object"}},
            }}},
        }));
        let object = json!({"spec": {
            "tags": ["a", "b", "a", "a"],
            "ports": [{"name": "x", "port": 1}, {"name": "x", "port": 2}],
        }});
        let errors: Vec<String> = validate(&node, &object)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errors,
            [
                "spec.ports[1]: Duplicate value: {\"name\":\"x\"}",
                "spec.tags[2]: Duplicate value: \"a\"",
            ]
        );
    }
}
