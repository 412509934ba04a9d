//! A custom resource made to fit its schema as kube-apiserver's decoder makes it fit
//! (apiextensions-apiserver's `schema/pruning` and `schema/defaulting`): fields the schema does
//! not declare removed (and named, for the field validation policy), `null` removed where the
//! schema allows none and has no default, and defaults filled in.

use serde_json::{Map, Value};

use crate::structural::Node;

/// The fields every object has, kept at the root of a resource and of an embedded one.
fn is_type_meta_or_metadata(field: &str) -> bool {
    matches!(field, "apiVersion" | "kind" | "metadata")
}

/// Removes from `object`, a whole resource, what `schema` does not declare (but its
/// `apiVersion`, `kind` and `metadata`); returns the removed fields' paths, sorted.
pub fn prune(object: &mut Value, schema: &Node) -> Vec<String> {
    let mut pruning = Pruning {
        path: String::new(),
        removed: Vec::new(),
    };
    pruning.value(object, Some(schema), true);
    pruning.removed.sort();
    pruning.removed
}

struct Pruning {
    path: String,
    removed: Vec<String>,
}

impl Pruning {
    fn record(&mut self, field: &str) {
        if self.path.is_empty() {
            self.removed.push(field.to_string());
        } else {
            self.removed.push(format!("{}.{field}", self.path));
        }
    }

    fn child(&mut self, field: &str) -> usize {
        let length = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(field);
        length
    }

    /// Prunes `value` under `node` (`None`: nothing of it is declared). `embedded` says the
    /// value is a whole object (the resource, or an `x-kubernetes-embedded-resource`).
    fn value(&mut self, value: &mut Value, node: Option<&Node>, embedded: bool) {
        if let Some(node) = node
            && node.preserve_unknown_fields
        {
            self.keep_unknown(value, node, embedded);
            return;
        }
        match value {
            Value::Object(fields) => {
                let Some(node) = node else {
                    let names: Vec<String> = fields.keys().cloned().collect();
                    for name in names {
                        self.record(&name);
                    }
                    fields.clear();
                    return;
                };
                let embedded = embedded || node.embedded_resource;
                let at_root = self.path.is_empty();
                fields.retain(|name, field| {
                    if embedded && is_type_meta_or_metadata(name) {
                        return true;
                    }
                    if let Some((child, _)) = node.field(name) {
                        let length = self.child(name);
                        self.value(field, Some(child), child.embedded_resource);
                        self.path.truncate(length);
                        return true;
                    }
                    if !is_type_meta_or_metadata(name) || !at_root {
                        self.record(name);
                    }
                    false
                });
            }
            Value::Array(items) => {
                let items_node = node.and_then(|node| node.items.as_deref());
                let length = self.path.len();
                for (index, item) in items.iter_mut().enumerate() {
                    use std::fmt::Write as _;
                    let _ = write!(self.path, "[{index}]");
                    self.value(
                        item,
                        items_node,
                        items_node.is_some_and(|n| n.embedded_resource),
                    );
                    self.path.truncate(length);
                }
            }
            _ => {}
        }
    }

    /// Under `x-kubernetes-preserve-unknown-fields`: undeclared fields stay, declared ones are
    /// pruned by their own schema.
    fn keep_unknown(&mut self, value: &mut Value, node: &Node, embedded: bool) {
        match value {
            Value::Object(fields) => {
                let embedded = embedded || node.embedded_resource;
                for (name, field) in fields.iter_mut() {
                    if embedded && is_type_meta_or_metadata(name) {
                        continue;
                    }
                    if let Some((child, _)) = node.field(name) {
                        let length = self.child(name);
                        self.value(field, Some(child), child.embedded_resource);
                        self.path.truncate(length);
                    }
                }
            }
            Value::Array(items) => {
                let Some(items_node) = node.items.as_deref() else {
                    return;
                };
                let length = self.path.len();
                for (index, item) in items.iter_mut().enumerate() {
                    use std::fmt::Write as _;
                    let _ = write!(self.path, "[{index}]");
                    self.keep_unknown(item, items_node, items_node.embedded_resource);
                    self.path.truncate(length);
                }
            }
            _ => {}
        }
    }
}

/// Removes `null` values the schema does not allow and gives no default for.
pub fn prune_nulls(value: &mut Value, node: Option<&Node>) {
    match value {
        Value::Object(fields) => {
            fields.retain(|name, field| {
                let child = node
                    .and_then(|node| node.field(name))
                    .map(|(child, _)| &**child);
                if field.is_null()
                    && child.is_some_and(|child| !child.nullable && child.default.is_none())
                {
                    return false;
                }
                prune_nulls(field, child);
                true
            });
        }
        Value::Array(items) => {
            let items_node = node.and_then(|node| node.items.as_deref());
            for item in items {
                prune_nulls(item, items_node);
            }
        }
        _ => {}
    }
}

/// Fills in the defaults of `node` where `value` leaves them out (or has a `null` the schema
/// does not allow).
pub fn apply_defaults(value: &mut Value, node: &Node) {
    match value {
        Value::Object(fields) => {
            for (name, property) in &node.properties {
                let Some(default) = &property.default else {
                    continue;
                };
                match fields.get_mut(name.as_ref()) {
                    None => {
                        fields.insert(name.to_string(), default.clone());
                    }
                    Some(field) => default_null(field, property),
                }
            }
            default_fields(fields, node);
        }
        Value::Array(items) => {
            let Some(items_node) = node.items.as_deref() else {
                return;
            };
            for item in items {
                default_null(item, items_node);
                apply_defaults(item, items_node);
            }
        }
        _ => {}
    }
}

fn default_fields(fields: &mut Map<String, Value>, node: &Node) {
    for (name, field) in fields.iter_mut() {
        if let Some(property) = node.properties.get(name.as_str()) {
            apply_defaults(field, property);
        } else if let Some(values) = node.additional_properties.as_deref() {
            default_null(field, values);
            apply_defaults(field, values);
        }
    }
}

/// A `null` that `node` does not allow becomes its default, if it has one.
fn default_null(value: &mut Value, node: &Node) {
    if value.is_null()
        && !node.nullable
        && let Some(default) = &node.default
    {
        *value = default.clone();
    }
}

/// Whether `node`, or anything under it, has a default.
pub fn has_defaults(node: &Node) -> bool {
    node.default.is_some()
        || node.properties.values().any(|child| has_defaults(child))
        || node
            .additional_properties
            .as_deref()
            .is_some_and(has_defaults)
        || node.items.as_deref().is_some_and(has_defaults)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> std::sync::Arc<Node> {
        Node::compile(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "size": {"type": "integer", "default": 3},
                    "mode": {"type": "string", "default": "fast"},
                    "note": {"type": "string"},
                    "maybe": {"type": "string", "nullable": true},
                    "items": {"type": "array", "items": {"type": "object", "properties": {
                        "name": {"type": "string"},
                    }}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                             "properties": {"known": {"type": "object", "properties": {}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                 "properties": {"spec": {"type": "object"}}},
                }},
            },
        }))
    }

    #[test]
    fn prunes_what_the_schema_does_not_declare_and_names_it() {
        let mut object = json!({
            "apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "a"},
            "extra": 1,
            "spec": {
                "bogus": true,
                "items": [{"name": "a", "age": 3}],
                "free": {"anything": 1, "known": {"gone": 1}},
                "labels": {"a": "b"},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                             "spec": {"x": 1}, "status": {}},
            },
        });
        let removed = prune(&mut object, &schema());
        assert_eq!(
            removed,
            [
                "extra",
                "spec.bogus",
                "spec.free.known.gone",
                "spec.items[0].age",
                "spec.template.spec.x",
                "spec.template.status",
            ]
        );
        assert_eq!(object["spec"]["free"], json!({"anything": 1, "known": {}}));
        assert_eq!(object["spec"]["template"]["metadata"], json!({"name": "p"}));
        assert_eq!(object["spec"]["template"]["spec"], json!({}));
        assert_eq!(object["metadata"], json!({"name": "a"}));
    }

    #[test]
    fn nulls_go_unless_allowed_and_defaults_fill_in() {
        let mut object = json!({"spec": {"note": null, "maybe": null, "mode": null}});
        prune_nulls(&mut object, Some(&schema()));
        assert_eq!(object, json!({"spec": {"maybe": null, "mode": null}}));
        apply_defaults(&mut object, &schema());
        assert_eq!(
            object,
            json!({"spec": {"maybe": null, "mode": "fast", "size": 3}})
        );
        assert!(has_defaults(&schema()));
    }
}
