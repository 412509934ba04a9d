//! The CEL validation rules of a custom resource's schema (`x-kubernetes-validations`), run on
//! a write as kube-apiserver runs them (apiextensions-apiserver's `schema/cel`): each rule sees
//! its node's value as `self` and, on an update, the value it replaces as `oldSelf`; a
//! transition rule (one that reads `oldSelf`) runs only when there is an old value, unless it
//! has `optionalOldSelf` (then `oldSelf` is an optional, `optional.none()` on a create); a value
//! equal to the one it replaces is not checked again (ratcheting). A rule that does not hold is
//! an error on its node (or its `fieldPath`) with its `message`, `messageExpression` or
//! `failed rule: <rule>`, of its `reason`'s type.

use std::fmt::Write as _;

use cel::common::types::CelOptional;
use cel::{Context, Program, Value as CelValue};

use super::property_names::escape;
use serde_json::Value;

use super::NIL_PATH;
use super::field_error::{FieldError, FieldErrorKind, go_quoted};
use super::old_items::OldItems;
use crate::structural::rule_cost::{self, Cost, PER_CALL_LIMIT, RUNTIME_BUDGET};
use crate::structural::{JsonType, Node, Rule, environment};

/// The errors of the rules under `node` for `value` (replacing `old`, on an update).
///
/// The rules together may cost [`RUNTIME_BUDGET`], and each run of one [`PER_CALL_LIMIT`]
/// (counted before it runs, [`rule_cost`]): past either, the error says so and no further
/// rule runs, as kube-apiserver's.
pub fn validate(node: &Node, value: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut run = Run {
        errors: Vec::new(),
        budget: RUNTIME_BUDGET,
        stopped: false,
    };
    let mut path = String::new();
    run.walk(node, value, old, &mut path);
    run.errors
}

/// One validation of an object's rules.
struct Run {
    errors: Vec<FieldError>,
    /// What the rules may still cost.
    budget: u64,
    /// A rule went over a limit: no further rule runs.
    stopped: bool,
}

impl Run {
    fn walk(&mut self, node: &Node, value: &Value, old: Option<&Value>, path: &mut String) {
        if !node.rules_below || self.stopped {
            return;
        }
        if !node.rules.is_empty() {
            self.check_all(node, value, old, path);
        }
        let length = path.len();
        match value {
            Value::Object(fields) => {
                for (name, child) in &node.properties {
                    let Some(field) = fields.get(name.as_ref()) else {
                        continue;
                    };
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(name);
                    self.walk(
                        child,
                        field,
                        old.and_then(|old| old.get(name.as_ref())),
                        path,
                    );
                    path.truncate(length);
                }
                if let Some(values) = node.additional_properties.as_deref() {
                    for (key, field) in fields {
                        if node.properties.contains_key(key.as_str()) {
                            continue;
                        }
                        let _ = write!(path, "[{key}]");
                        self.walk(values, field, old.and_then(|old| old.get(key)), path);
                        path.truncate(length);
                    }
                }
            }
            Value::Array(items) => {
                let Some(items_node) = node.items.as_deref() else {
                    return;
                };
                // Only a map list's items have an old counterpart: the item with the same keys.
                let old_items = OldItems::new(node, old);
                for (index, item) in items.iter().enumerate() {
                    let old_item = old_items.of(item);
                    let _ = write!(path, "[{index}]");
                    self.walk(items_node, item, old_item, path);
                    path.truncate(length);
                }
            }
            _ => {}
        }
    }

    /// Runs the rules of `node` on `value`, with one context for them all (reading `value`
    /// into CEL once).
    fn check_all(&mut self, node: &Node, value: &Value, old: Option<&Value>, path: &str) {
        // Ratcheting: an unchanged value is held only to the transition rules.
        let unchanged = old == Some(value);
        let runs = |rule: &Rule| {
            if rule.uses_old_self {
                old.is_some() || rule.optional_old_self
            } else {
                !unchanged
            }
        };
        if !node.rules.iter().any(|rule| runs(rule)) {
            return;
        }
        let new_context = || {
            let mut context = Context::with_env(environment().clone());
            context.add_variable_from_value("self", cel_value(value, Some(node)));
            context
        };
        let mut context = new_context();
        // The old value is read into CEL only for the rules that read it.
        let reads_old = |optional: bool| {
            node.rules
                .iter()
                .any(|rule| rule.reads_old_self && rule.optional_old_self == optional && runs(rule))
        };
        if let Some(old) = old
            && reads_old(false)
        {
            context.add_variable_from_value("oldSelf", cel_value(old, Some(node)));
        }
        // Rules with `optionalOldSelf` see it as an optional, in a context of their own.
        let optional_context = reads_old(true).then(|| {
            let mut context = new_context();
            let old_self = match old.map(|old| cel_value(old, Some(node)).try_into()) {
                Some(Ok(old)) => CelOptional::of(old),
                _ => CelOptional::none(),
            };
            context.add_variable_as_val("oldSelf", Box::new(old_self));
            context
        });
        for rule in node.rules.iter().filter(|rule| runs(rule)) {
            if self.stopped {
                return;
            }
            let context = match &optional_context {
                Some(optional) if rule.optional_old_self => optional,
                _ => &context,
            };
            self.check(node, rule, value, context, path);
        }
    }

    /// Charges what running `program` costs, counted before it runs; the detail of the error
    /// when it may not run (and no further rule will), in kube's words for a rule
    /// (`expression` `None`) or a message expression.
    fn charge(
        &mut self,
        program: &Program,
        cost: Cost,
        context: &Context<'_, '_>,
        rule: &Rule,
        expression: Option<&str>,
    ) -> Result<(), String> {
        let refusal = match (rule_cost::cost_in(program, cost, context, PER_CALL_LIMIT), expression) {
            (Some(cost), _) if cost <= self.budget => {
                self.budget -= cost;
                return Ok(());
            }
            (None, None) => format!(
                "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                rule.error_string()
            ),
            (None, Some(source)) => format!(
                "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                go_quoted(source)
            ),
            (Some(_), None) => {
                "validation failed due to running out of cost budget, no further validation rules will be run".into()
            }
            (Some(_), Some(_)) => {
                "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".into()
            }
        };
        self.stopped = true;
        Err(refusal)
    }

    /// Runs `rule` on `value` in `context`; records the error when it does not hold.
    fn check(
        &mut self,
        node: &Node,
        rule: &Rule,
        value: &Value,
        context: &Context<'_, '_>,
        path: &str,
    ) {
        let type_name = Value::from(node.json_type.map_or("", JsonType::name));
        // kube names the root by a nil path, which prints as `<nil>`.
        let path = if path.is_empty() { NIL_PATH } else { path };
        let program = match &rule.program {
            Ok(program) => program,
            Err(error) => {
                self.errors.push(FieldError::invalid(
                    path,
                    type_name,
                    format!("rule compile error: {error}"),
                ));
                return;
            }
        };
        if let Err(detail) = self.charge(program, rule.cost, context, rule, None) {
            self.errors
                .push(FieldError::invalid(path, type_name, detail));
            return;
        }
        match program.execute(context) {
            Ok(CelValue::Bool(true)) => return,
            Ok(CelValue::Bool(false)) => {}
            Ok(other) => {
                self.errors.push(FieldError::invalid(
                    path,
                    type_name,
                    format!(
                        "rule evaluated to {other:?}, not a bool: {}",
                        rule.error_string()
                    ),
                ));
                return;
            }
            Err(error) => {
                self.errors.push(FieldError::invalid(
                    path,
                    type_name,
                    format!("{error} evaluating rule: {}", rule.error_string()),
                ));
                return;
            }
        }
        let field = match (path == NIL_PATH, rule.field_path.is_empty()) {
            (_, true) => path.to_string(),
            (true, false) => rule.field_path.clone(),
            (false, false) => format!("{path}.{}", rule.field_path),
        };
        let computed = match self.message(rule, context) {
            Ok(computed) => computed,
            Err(detail) => {
                self.errors
                    .push(FieldError::invalid(field, type_name, detail));
                return;
            }
        };
        let detail = computed.unwrap_or_else(|| {
            if rule.message.trim().is_empty() {
                format!("failed rule: {}", rule.error_string())
            } else {
                rule.message.trim().to_string()
            }
        });
        let error = match rule.reason.as_deref() {
            Some("FieldValueForbidden") => {
                FieldError::new(FieldErrorKind::Forbidden, field, Value::Null, detail)
            }
            Some("FieldValueRequired") => FieldError::required(field, detail),
            Some("FieldValueDuplicate") => {
                FieldError::new(FieldErrorKind::Duplicate, field, value.clone(), "")
            }
            _ => FieldError::invalid(field, value.clone(), detail),
        };
        // An object's or list's value is left out of the message.
        self.errors.push(
            if matches!(node.json_type, Some(JsonType::Object | JsonType::Array)) {
                error.omitting_value()
            } else {
                error
            },
        );
    }

    /// The detail a rule's `messageExpression` computes: a non-empty string on one line, else
    /// nothing (kube then falls back to the message); the error's detail when it may not run.
    fn message(
        &mut self,
        rule: &Rule,
        context: &Context<'_, '_>,
    ) -> Result<Option<String>, String> {
        let Some((source, Ok(program))) = rule.message_expression.as_ref() else {
            return Ok(None);
        };
        self.charge(program, rule.message_cost, context, rule, Some(source))?;
        Ok(match program.execute(context) {
            Ok(CelValue::String(text)) if !text.trim().is_empty() && !text.contains('\n') => {
                Some(text.to_string())
            }
            _ => None,
        })
    }
}

/// `value` as a CEL value, typed by its schema `node` as kube types it: objects as maps with
/// string keys, integers as `int` (`uint` past its range), numbers as `double` (an integral
/// value of a `number` field too), strings of the `date-time`, `date`, `duration` and `byte`
/// formats as `timestamp`, `duration` and `bytes`.
fn cel_value(value: &Value, node: Option<&Node>) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(flag) => CelValue::Bool(*flag),
        Value::Number(number) => {
            let double = node.is_some_and(|node| node.json_type == Some(JsonType::Number));
            match (number.as_i64(), number.as_u64()) {
                (Some(integer), _) if !double => CelValue::Int(integer),
                (None, Some(unsigned)) if !double => CelValue::UInt(unsigned),
                _ => CelValue::Float(number.as_f64().unwrap_or(0.0)),
            }
        }
        Value::String(text) => node
            .and_then(|node| node.checks.as_ref()?.format.as_deref())
            .and_then(|format| super::typed_strings::typed(format, text))
            .unwrap_or_else(|| CelValue::String(std::sync::Arc::new(text.clone()))),
        Value::Array(items) => {
            let items_node = node.and_then(|node| node.items.as_deref());
            CelValue::List(std::sync::Arc::new(
                items
                    .iter()
                    .map(|item| cel_value(item, items_node))
                    .collect(),
            ))
        }
        Value::Object(fields) => {
            // An object's declared properties are selected by their escaped names; a map's
            // keys (`additionalProperties`) are used as they are.
            let has_properties = node.is_some_and(|node| !node.properties.is_empty());
            let map: std::collections::HashMap<String, CelValue> = fields
                .iter()
                .map(|(name, field)| {
                    let child = node
                        .and_then(|node| node.field(name))
                        .map(|(child, _)| &**child);
                    let key = match escape(name) {
                        Some(escaped) if has_properties => escaped.into_owned(),
                        _ => name.clone(),
                    };
                    (key, cel_value(field, child))
                })
                .collect();
            CelValue::from(map)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> std::sync::Arc<Node> {
        Node::compile(&json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                    {"rule": "self.max <= oldSelf.max", "messageExpression": "'max may only shrink, not grow to ' + string(self.max)"},
                    {"rule": "!has(self.secret)", "reason": "FieldValueForbidden", "fieldPath": ".secret", "message": "is not allowed"},
                ],
                "properties": {
                    "min": {"type": "integer"},
                    "max": {"type": "integer"},
                    "secret": {"type": "string"},
                    "ratio": {"type": "number", "x-kubernetes-validations": [{"rule": "self * 0.5 < 1.0"}]},
                    "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('w-')"}]},
                },
            }},
        }))
    }

    fn messages(value: &Value, old: Option<&Value>) -> Vec<String> {
        validate(&schema(), value, old)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn rules_report_their_messages_reasons_and_paths() {
        let value = json!({"spec": {"min": 5, "max": 2, "secret": "x", "name": "bad"}});
        assert_eq!(
            messages(&value, None),
            [
                "spec: Invalid value: min must not exceed max",
                "spec.secret: Forbidden: is not allowed",
                r#"spec.name: Invalid value: "bad": failed rule: self.startsWith('w-')"#,
            ]
        );
    }

    #[test]
    fn date_times_durations_and_bytes_are_typed_by_their_format() {
        let schema = Node::compile(&json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "properties": {
                    "since": {"type": "string", "format": "date-time"},
                    "until": {"type": "string", "format": "date"},
                    "timeout": {"type": "string", "format": "duration"},
                    "payload": {"type": "string", "format": "byte"},
                },
                "x-kubernetes-validations": [
                    {"rule": "self.since < self.until", "message": "since must come before until"},
                    {"rule": "self.since + self.timeout <= self.until"},
                    {"rule": "self.timeout <= duration('1h')", "messageExpression": "'timeout ' + string(self.timeout) + ' is over an hour'"},
                    {"rule": "size(self.payload) <= 4"},
                    {"rule": "self.since > timestamp('2020-01-01T00:00:00Z')"},
                ],
            }},
        }));
        let errors = |spec: Value| -> Vec<String> {
            validate(&schema, &json!({"spec": spec}), None)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        // "aGk=" is two bytes: "hi".
        let good = json!({"since": "2024-01-02T03:04:05Z", "until": "2024-01-03",
                          "timeout": "30m", "payload": "aGk="});
        assert!(errors(good).is_empty());
        let bad = json!({"since": "2024-01-02T23:30:00+00:00", "until": "2024-01-02",
                         "timeout": "90m", "payload": "aGVsbG8="});
        assert_eq!(
            errors(bad),
            [
                "spec: Invalid value: since must come before until",
                "spec: Invalid value: failed rule: self.since + self.timeout <= self.until",
                "spec: Invalid value: timeout 5400s is over an hour",
                "spec: Invalid value: failed rule: size(self.payload) <= 4",
            ]
        );
    }

    #[test]
    fn a_number_field_is_a_double_even_when_integral() {
        let value = json!({"spec": {"min": 1, "max": 2, "ratio": 1}});
        assert!(messages(&value, None).is_empty());
        let value = json!({"spec": {"min": 1, "max": 2, "ratio": 4}});
        assert_eq!(
            messages(&value, None),
            ["spec.ratio: Invalid value: 4: failed rule: self * 0.5 < 1.0"]
        );
    }

    #[test]
    fn transition_rules_run_on_updates_and_unchanged_values_are_not_checked_again() {
        let old = json!({"spec": {"min": 1, "max": 2, "name": "bad"}});
        let grown = json!({"spec": {"min": 1, "max": 3, "name": "bad"}});
        assert_eq!(
            messages(&grown, Some(&old)),
            ["spec: Invalid value: max may only shrink, not grow to 3"]
        );
        assert!(messages(&old, Some(&old)).is_empty());
    }

    #[test]
    fn an_optional_old_self_rule_runs_on_creates_too_with_old_self_an_optional() {
        let schema = Node::compile(&json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "properties": {"size": {"type": "integer"}},
                "x-kubernetes-validations": [
                    // Starts at most 10; may then only grow.
                    {"rule": "oldSelf.hasValue() ? self.size >= oldSelf.value().size : self.size <= 10",
                     "optionalOldSelf": true, "message": "size starts at most 10 and only grows"},
                    // A plain transition rule beside it still sees oldSelf as the value.
                    {"rule": "self.size != oldSelf.size + 100", "message": "no jumps of 100"},
                ],
            }},
        }));
        let spec = |size: i64| json!({"spec": {"size": size}});
        let errors = |value: &Value, old: Option<&Value>| -> Vec<String> {
            validate(&schema, value, old)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert!(errors(&spec(5), None).is_empty());
        assert_eq!(
            errors(&spec(50), None),
            ["spec: Invalid value: size starts at most 10 and only grows"]
        );
        assert!(errors(&spec(7), Some(&spec(5))).is_empty());
        assert_eq!(
            errors(&spec(4), Some(&spec(5))),
            ["spec: Invalid value: size starts at most 10 and only grows"]
        );
        assert_eq!(
            errors(&spec(105), Some(&spec(5))),
            ["spec: Invalid value: no jumps of 100"]
        );
    }

    #[test]
    fn properties_are_selected_by_escaped_names_and_map_keys_as_they_are() {
        let schema = Node::compile(&json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.__namespace__ == 'prod'"},
                    {"rule": "self.max__dash__size > 0"},
                    {"rule": "self.labels['app-name'] == 'web'"},
                    {"rule": "quantity(self.memory).isLessThan(quantity('1Gi'))"},
                ],
                "properties": {
                    "namespace": {"type": "string"},
                    "max-size": {"type": "integer"},
                    "memory": {"type": "string"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            }},
        }));
        let valid = json!({"spec": {
            "namespace": "prod", "max-size": 1, "memory": "512Mi", "labels": {"app-name": "web"},
        }});
        assert!(validate(&schema, &valid, None).is_empty());
        let invalid = json!({"spec": {
            "namespace": "dev", "max-size": 0, "memory": "2Gi", "labels": {"app-name": "db"},
        }});
        assert_eq!(validate(&schema, &invalid, None).len(), 4);
    }
}
