//! The strict reading of an applied configuration against its type, as structured-merge-diff
//! reads one before it merges it: every field declared (the first undeclared one of each map
//! is reported), every scalar of its kind, maps and lists where the type has them, and no two
//! items of an associative list with the same key. The messages are structured-merge-diff's,
//! values printed as Go prints them.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

use super::path::PathElement;
use super::schema::{Expected, Node, ScalarKind, Type};
use super::typed::{TypeError, item_step};
use crate::custom::go_type;

/// What is wrong with a configuration: one or more errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationErrors(pub Vec<TypeError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            errors => {
                f.write_str("errors:")?;
                for error in errors {
                    write!(f, "\n  {error}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ValidationErrors {}

/// Checks `value` against `ty`.
pub fn validate(value: &Value, ty: &Type) -> Result<(), ValidationErrors> {
    let mut errors = Vec::new();
    walk(value, ty, &mut Vec::new(), &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors(errors))
    }
}

/// One step of the path to a value, written out only when it has an error.
enum Segment<'a> {
    Field(&'a str),
    Item(PathElement),
}

fn report(errors: &mut Vec<TypeError>, path: &[Segment<'_>], message: String) {
    let mut text = String::new();
    for segment in path {
        match segment {
            Segment::Field(name) => {
                text.push('.');
                text.push_str(name);
            }
            Segment::Item(step) => text.push_str(&step.to_string()),
        }
    }
    errors.push(TypeError {
        path: text,
        message,
    });
}

fn walk<'a>(value: &'a Value, ty: &Type, path: &mut Vec<Segment<'a>>, errors: &mut Vec<TypeError>) {
    if value.is_null() {
        return;
    }
    match ty.expected() {
        Expected::Any => {}
        Expected::Scalar(kind) => {
            if let Some(message) = scalar_error(kind, value) {
                report(errors, path, message);
            }
        }
        Expected::Map => {
            let Value::Object(fields) = value else {
                report(
                    errors,
                    path,
                    format!("expected map, got {}", go_value(value)),
                );
                return;
            };
            for (name, child) in fields {
                path.push(Segment::Field(name));
                match ty.allowed_field(name) {
                    Some((child_type, _)) => walk(child, &child_type, path, errors),
                    None => {
                        report(errors, path, "field not declared in schema".to_string());
                        path.pop();
                        return;
                    }
                }
                path.pop();
            }
        }
        Expected::List => {
            let Value::Array(items) = value else {
                report(
                    errors,
                    path,
                    format!("expected list, got {}", go_value(value)),
                );
                return;
            };
            let item_type = ty.item();
            let associative = match ty.node(value) {
                Node::Associative(kind) => Some(kind),
                _ => None,
            };
            let mut seen = BTreeSet::new();
            for (index, item) in items.iter().enumerate() {
                let step = match &associative {
                    Some(kind) => match item_step(kind, &item_type, item) {
                        Ok(step) => step,
                        Err(error) => {
                            report(errors, path, format!("element {index}: {}", error.message));
                            return;
                        }
                    },
                    None => PathElement::Index(index),
                };
                if associative.is_some() && !seen.insert(step.clone()) {
                    report(errors, path, format!("duplicate entries for key {step}"));
                }
                path.push(Segment::Item(step));
                walk(item, &item_type, path, errors);
                path.pop();
            }
        }
    }
}

fn scalar_error(kind: ScalarKind, value: &Value) -> Option<String> {
    match kind {
        ScalarKind::Numeric if !value.is_number() => Some(format!(
            "expected numeric (int or float), got {}",
            go_type(value)
        )),
        ScalarKind::String if !value.is_string() => {
            Some(format!("expected string, got {}", go_value_verbose(value)))
        }
        ScalarKind::Boolean if !value.is_boolean() => {
            Some(format!("expected boolean, got {}", go_value(value)))
        }
        ScalarKind::Untyped if value.is_object() || value.is_array() => {
            Some(format!("expected any scalar, got {}", go_value(value)))
        }
        _ => None,
    }
}

/// How Go prints structured-merge-diff's wrapper of a decoded value with `%v`.
fn go_value(value: &Value) -> String {
    format!("&{{{}}}", go_plain(value))
}

/// How Go prints it with `%#v`.
fn go_value_verbose(value: &Value) -> String {
    format!("&value.valueUnstructured{{Value:{}}}", go_syntax(value))
}

fn go_plain(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_string(),
        Value::String(text) => text.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_plain).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(fields) => format!(
            "map[{}]",
            fields
                .iter()
                .map(|(name, child)| format!("{name}:{}", go_plain(child)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        other => other.to_string(),
    }
}

fn go_syntax(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Array(items) => format!(
            "[]interface {{}}{{{}}}",
            items.iter().map(go_syntax).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(fields) => format!(
            "map[string]interface {{}}{{{}}}",
            fields
                .iter()
                .map(|(name, child)| format!("{name:?}:{}", go_syntax(child)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Type {
        Type::of_kind_message("io.k8s.api.apps.v1.Deployment").unwrap()
    }

    fn message(value: Value) -> String {
        validate(&value, &deployment()).unwrap_err().to_string()
    }

    #[test]
    fn a_valid_configuration_passes() {
        let config = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "web", "image": "nginx", "resources": {"limits": {"cpu": 1}},
                 "ports": [{"containerPort": 80}]},
            ]}}},
        });
        assert_eq!(validate(&config, &deployment()), Ok(()));
    }

    #[test]
    fn undeclared_fields_wrong_scalars_and_duplicates_are_reported_as_kube_does() {
        assert_eq!(
            message(json!({"spec": {"replicaz": 2}})),
            ".spec.replicaz: field not declared in schema"
        );
        assert_eq!(
            message(json!({"spec": {"replicas": "two"}})),
            ".spec.replicas: expected numeric (int or float), got string"
        );
        assert_eq!(
            message(json!({"spec": {"paused": "yes"}})),
            ".spec.paused: expected boolean, got &{yes}"
        );
        assert_eq!(
            message(json!({"metadata": {"name": 5}})),
            ".metadata.name: expected string, got &value.valueUnstructured{Value:5}"
        );
        assert_eq!(
            message(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "a"}, {"name": "a"},
            ]}}}})),
            ".spec.template.spec.containers: duplicate entries for key [name=\"a\"]"
        );
        assert_eq!(
            message(json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}})),
            ".spec.template.spec.containers: element 0: associative list with keys has an element that omits all key fields [\"name\"] (and doesn't have default values for any key fields)"
        );
        assert_eq!(
            message(json!({"spec": 5, "status": []})),
            "errors:\n  .spec: expected map, got &{5}\n  .status: expected map, got &{[]}"
        );
    }
}
