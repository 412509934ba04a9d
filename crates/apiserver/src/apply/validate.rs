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
use super::set::Set;
use super::typed::{TypeError, add_field, item_step, to_field_set};
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
#[cfg(test)]
pub fn validate(value: &Value, ty: &Type) -> Result<(), ValidationErrors> {
    checked_field_set(value, ty).map(drop)
}

/// Checks `value` against `ty` and, when it passes, gives the fields it holds (what
/// [`to_field_set`](super::typed::to_field_set) gives): one walk does both, where the two
/// would walk the configuration twice and make each list item's key twice.
///
/// A value the check does not look into (of a type that takes anything) is only read for its
/// fields; one whose fields cannot be read (an item of an associative list without its key)
/// is reported as the check reports it.
pub fn checked_field_set(value: &Value, ty: &Type) -> Result<Set, ValidationErrors> {
    let mut errors = Vec::new();
    let set = check_and_collect(value, ty, &mut Vec::new(), &mut errors);
    if errors.is_empty() {
        Ok(set)
    } else {
        Err(ValidationErrors(errors))
    }
}

/// Whether a part of a configuration whose fields are not collected (a leaf, or a value of
/// another shape than its type's) passes the check [`checked_field_set`] makes of it.
pub(super) fn passes_check(value: &Value, ty: &Type) -> bool {
    let mut errors = Vec::new();
    walk(value, ty, &mut Vec::new(), &mut errors);
    errors.is_empty()
}

/// One step of the path to a value, written out only when it has an error.
enum Segment<'a> {
    Field(&'a str),
    Item(PathElement),
}

fn report(errors: &mut Vec<TypeError>, path: &[Segment<'_>], message: String) {
    let mut text = String::new();
    write_path(&mut text, path);
    errors.push(TypeError {
        path: text,
        message,
    });
}

/// The walk where `value` is both checked and collected. Where only one of the two goes on
/// below it (an atomic part is checked, not collected; a part of any type is collected, not
/// checked), that one takes over. The set is only meaningful when no error was reported.
fn check_and_collect<'a>(
    value: &'a Value,
    ty: &Type,
    path: &mut Vec<Segment<'a>>,
    errors: &mut Vec<TypeError>,
) -> Set {
    let mut set = Set::new();
    if value.is_null() {
        return set;
    }
    match (ty.expected(), ty.node(value), value) {
        (Expected::Map, Node::Granular, Value::Object(fields)) => {
            for (name, child) in fields {
                path.push(Segment::Field(name));
                let Some((child_type, shared)) = ty.allowed_field(name) else {
                    report(errors, path, "field not declared in schema".to_string());
                    path.pop();
                    return set;
                };
                let inner = check_and_collect(child, &child_type, path, errors);
                path.pop();
                let declared = shared.is_some();
                let step = match shared {
                    Some(shared) => PathElement::Field(shared.clone()),
                    None => PathElement::field(name),
                };
                add_field(&mut set, step, declared, child, &child_type, inner);
            }
        }
        (Expected::List, Node::Associative(kind), Value::Array(items)) => {
            let item_type = ty.item();
            for (index, item) in items.iter().enumerate() {
                let step = match item_step(&kind, &item_type, item) {
                    Ok(step) => step,
                    Err(error) => {
                        report(errors, path, format!("element {index}: {}", error.message));
                        return set;
                    }
                };
                // Each item is a member: one that is already is a duplicate. That is an error,
                // so the set it makes does not matter.
                if !set.insert_new_member(step.clone()) {
                    report(errors, path, format!("duplicate entries for key {step}"));
                }
                path.push(Segment::Item(step.clone()));
                let inner = check_and_collect(item, &item_type, path, errors);
                path.pop();
                set.insert_child(step, inner);
            }
        }
        // Not checked below: collected only.
        (Expected::Any, Node::Granular | Node::Associative(_), _) => {
            match to_field_set(value, ty) {
                Ok(fields) => set = fields,
                Err(error) => {
                    let mut text = String::new();
                    write_path(&mut text, path);
                    text.push_str(&error.path);
                    errors.push(TypeError {
                        path: text,
                        message: error.message,
                    });
                }
            }
        }
        // Not collected below (a leaf: its parent owns it whole): checked only.
        _ => walk(value, ty, path, errors),
    }
    set
}

/// Writes `path` as conflict messages write paths (`.spec.containers[name="a"]`).
fn write_path(text: &mut String, path: &[Segment<'_>]) {
    for segment in path {
        match segment {
            Segment::Field(name) => {
                text.push('.');
                text.push_str(name);
            }
            Segment::Item(step) => text.push_str(&step.to_string()),
        }
    }
}

/// The check alone, below a part that is not collected.
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
    use serde_json::Map;
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

    /// Values built from the words of [`open_type`] and a few more, of any shape, nested: most
    /// are wrong somewhere, some are right.
    fn wild_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let key = prop::sample::select(vec![
            "set",
            "atomic",
            "labels",
            "spec",
            "containers",
            "name",
            "image",
            "ports",
            "port",
            "protocol",
            "replicas",
            "paused",
            "template",
            "args",
            "extra",
            "maps",
            "x",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0..3i64).prop_map(Value::from),
            prop::sample::select(vec!["a", "b", "TCP"]).prop_map(Value::from),
        ];
        leaf.prop_recursive(5, 48, 4, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(key.clone(), inner, 0..5).prop_map(|fields| {
                    Value::Object(
                        fields
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), v))
                            .collect(),
                    )
                }),
            ]
        })
    }

    /// Objects of [`open_type`]'s shape, now and then with a part of any shape instead (see
    /// [`wild_value`]) or a field it does not declare, list items sometimes repeated.
    fn shaped_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        fn or_wild(shaped: impl Strategy<Value = Value> + 'static) -> impl Strategy<Value = Value> {
            prop_oneof![9 => shaped, 1 => wild_value()]
        }
        fn optional(
            fields: Vec<(&'static str, BoxedStrategy<Value>)>,
        ) -> impl Strategy<Value = Value> {
            let (names, values): (Vec<_>, Vec<_>) = fields.into_iter().unzip();
            values
                .into_iter()
                .map(proptest::option::of)
                .collect::<Vec<_>>()
                .prop_map(move |values| {
                    let mut object = Map::new();
                    for (name, value) in names.iter().zip(values) {
                        if let Some(value) = value {
                            object.insert((*name).to_string(), value);
                        }
                    }
                    Value::Object(object)
                })
        }
        let word = || {
            prop::sample::select(vec!["a", "b", "c"])
                .prop_map(Value::from)
                .boxed()
        };
        let port = optional(vec![
            (
                "port",
                prop::sample::select(vec![80, 443])
                    .prop_map(Value::from)
                    .boxed(),
            ),
            (
                "protocol",
                prop::sample::select(vec!["TCP", "UDP"])
                    .prop_map(Value::from)
                    .boxed(),
            ),
        ]);
        let container = optional(vec![
            ("name", word()),
            ("image", or_wild(word()).boxed()),
            (
                "ports",
                or_wild(prop::collection::vec(or_wild(port), 0..3).prop_map(Value::from)).boxed(),
            ),
        ]);
        let strings = || {
            prop::collection::vec(word(), 0..3)
                .prop_map(Value::from)
                .boxed()
        };
        let map_of = |value: BoxedStrategy<Value>| {
            prop::collection::btree_map("[xy]", value, 0..3)
                .prop_map(|entries| Value::Object(entries.into_iter().collect()))
                .boxed()
        };
        let spec = optional(vec![
            ("replicas", (0..3i64).prop_map(Value::from).boxed()),
            (
                "paused",
                or_wild(any::<bool>().prop_map(Value::from)).boxed(),
            ),
            (
                "template",
                or_wild(optional(vec![("image", word()), ("args", strings())])).boxed(),
            ),
            ("x", wild_value().boxed()),
        ]);
        optional(vec![
            ("set", or_wild(strings()).boxed()),
            ("atomic", strings()),
            ("labels", or_wild(map_of(word())).boxed()),
            (
                "maps",
                or_wild(map_of(or_wild(optional(vec![("x", word())])).boxed())).boxed(),
            ),
            ("extra", wild_value().boxed()),
            ("spec", or_wild(spec).boxed()),
            (
                "containers",
                or_wild(prop::collection::vec(or_wild(container), 0..4).prop_map(Value::from))
                    .boxed(),
            ),
        ])
    }

    /// The scenarios' schema (sets, atomic lists, maps, map lists keyed by one and by two
    /// fields) with a map of structs, an atomic struct, and a field of any type.
    fn open_type() -> Type {
        let mut schema = super::super::tests::object_schema();
        let properties = &mut schema["properties"];
        properties["extra"] = json!({"x-kubernetes-preserve-unknown-fields": true});
        properties["maps"] = json!({"type": "object", "additionalProperties": {
            "type": "object", "properties": {"x": {"type": "string"}},
        }});
        properties["spec"]["properties"]["template"]["x-kubernetes-map-type"] = json!("atomic");
        Type::Schema(crate::structural::Node::compile(&schema))
    }

    /// What the check alone, then the field set alone, make of `value`.
    fn in_two_walks(value: &Value, ty: &Type) -> Result<Result<Set, TypeError>, ValidationErrors> {
        let mut errors = Vec::new();
        walk(value, ty, &mut Vec::new(), &mut errors);
        if errors.is_empty() {
            Ok(to_field_set(value, ty))
        } else {
            Err(ValidationErrors(errors))
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]
        #[test]
        fn one_walk_checks_and_collects_what_two_walks_do(
            value in proptest::prop_oneof![shaped_value(), wild_value()],
        ) {
            for ty in [open_type(), deployment()] {
                let one = checked_field_set(&value, &ty);
                match in_two_walks(&value, &ty) {
                    Ok(Ok(set)) => proptest::prop_assert_eq!(one, Ok(set)),
                    Err(errors) => proptest::prop_assert_eq!(one, Err(errors)),
                    // Fields the set cannot read where nothing is checked: refused all the same.
                    Ok(Err(_)) => proptest::prop_assert!(one.is_err()),
                }
            }
        }
    }

    #[test]
    fn a_pod_is_checked_and_collected_in_one_walk() {
        let ty = Type::of_kind_message("io.k8s.api.core.v1.Pod").unwrap();
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "x"}, "annotations": {"a": "b"}},
            "spec": {
                "containers": [{
                    "name": "app", "image": "app:1", "args": ["--x"],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": "1", "memory": 5}},
                    "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
                }],
                "volumes": [{"name": "c", "configMap": {"name": "c"}}, {"name": "e", "emptyDir": {}}],
                "tolerations": [{"key": "k", "operator": "Exists"}],
                "nodeSelector": {"os": "linux"},
            },
        });
        let one = checked_field_set(&pod, &ty).unwrap();
        assert_eq!(Ok(Ok(one.clone())), in_two_walks(&pod, &ty));
        assert!(
            one.to_fields_v1()
                .to_string()
                .contains(r#""k:{\"name\":\"app\"}""#)
        );
    }
}
