//! A custom resource checked against its version's OpenAPI v3 schema, as kube-apiserver checks
//! it (kube-openapi's `validate.SchemaValidator`, its errors turned into field errors by
//! apiextensions-apiserver's `kubeOpenAPIResultToFieldErrors`), with validation ratcheting on
//! update: a value equal to the one it replaces keeps its errors to itself.
//!
//! Per node the checks run in kube-openapi's order: type, `allOf`/`anyOf`/`oneOf`/`not`,
//! string (`maxLength`, `minLength`, `pattern`: the first that fails), format, number
//! (`multipleOf`, `minimum`, `maximum`), list (items, `minItems`, `maxItems`, `uniqueItems`),
//! `enum`, object (`minProperties`, `maxProperties`, values of `additionalProperties`,
//! properties, `required`). kube-openapi walks Go maps, in no fixed order; here properties and
//! keys go in sorted order.

use serde_json::{Number, Value};

use super::NIL_PATH;
use super::field_error::{FieldError, FieldErrorKind, go_float, go_quoted};
use super::formats;
use super::old_items::OldItems;
use crate::structural::{Bound, Checks, JsonType, Node};

/// The errors of `value` against `node`; with `old`, the value it replaces (an update), whose
/// unchanged parts are not held against it. `prefix` is the field path the schema's root is at
/// (`status` for a status update checked against the status schema; empty for a whole object):
/// fields are named from it, messages from the schema's root as kube-openapi names them.
pub fn validate(node: &Node, value: &Value, old: Option<&Value>, prefix: &str) -> Vec<FieldError> {
    walked(node, value, old, String::new(), prefix)
}

/// The errors of `value` against `node` alone, without ratcheting (for `anyOf`, `oneOf`,
/// `allOf` and `not`).
fn errors_of(node: &Node, value: &Value, path: &str, prefix: &str) -> Vec<FieldError> {
    walked(node, value, None, path.to_string(), prefix)
}

/// The errors a walk from `path` finds.
fn walked(
    node: &Node,
    value: &Value,
    old: Option<&Value>,
    path: String,
    prefix: &str,
) -> Vec<FieldError> {
    let mut walk = Walk {
        prefix,
        path,
        errors: Vec::new(),
    };
    walk.node(node, value, old);
    walk.errors
}

struct Walk<'a> {
    /// Where the schema's root is, as a field path.
    prefix: &'a str,
    /// The path kube-openapi names the current value by (`spec.items[0].name`).
    path: String,
    errors: Vec<FieldError>,
}

/// The JSON type of a value, as kube-openapi names it.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether a float holds an integer (Go's `swag.IsFloat64AJSONInteger`).
fn is_integral(value: f64) -> bool {
    value.is_finite() && value.fract() == 0.0
}

impl Walk<'_> {
    /// The field a kube-openapi name stands for.
    fn field(&self, name: &str) -> String {
        let name = name.strip_prefix('.').unwrap_or(name);
        match (self.prefix.is_empty(), name.is_empty()) {
            // kube names the root by a nil path, which prints as `<nil>`.
            (true, true) => NIL_PATH.to_string(),
            (false, true) => self.prefix.to_string(),
            (true, false) => name.to_string(),
            (false, false) => format!("{}.{name}", self.prefix),
        }
    }

    fn push(&mut self, kind: FieldErrorKind, name: &str, value: Value, detail: String) {
        let field = self.field(name);
        self.errors
            .push(FieldError::new(kind, field, value, detail));
    }

    /// An error that is not about one field (kube-openapi's plain errors): on the root.
    fn push_general(&mut self, detail: String) {
        let field = self.field("");
        self.errors.push(FieldError::invalid(
            field,
            Value::String(String::new()),
            detail,
        ));
    }

    fn node(&mut self, node: &Node, value: &Value, old: Option<&Value>) {
        let start = self.errors.len();
        self.type_check(node, value);
        if !value.is_null() {
            let checks = node.checks.as_deref();
            if let Some(checks) = checks {
                self.combinations(checks, value);
            }
            match value {
                Value::String(text) => {
                    if let Some(checks) = checks {
                        self.string(checks, text);
                        self.format(node, checks, text);
                    }
                }
                Value::Number(number) => self.number(node, checks, number),
                Value::Array(items) => self.list(node, checks, items, old),
                _ => {}
            }
            if let Some(checks) = checks {
                self.enumeration(checks, value);
            }
            if let Value::Object(fields) = value {
                self.object(node, checks, fields, old);
            }
        } else if let Some(checks) = node.checks.as_deref() {
            self.enumeration(checks, value);
        }
        // Ratcheting: an unchanged value keeps its errors to itself.
        if self.errors.len() > start && old == Some(value) {
            self.errors.truncate(start);
        }
    }

    fn type_check(&mut self, node: &Node, value: &Value) {
        let declared;
        let expected: &[&str] = if node.int_or_string {
            &["integer", "string"]
        } else if let Some(json_type) = node.json_type {
            declared = [json_type.name()];
            &declared
        } else {
            return;
        };
        let found = type_name(value);
        if value.is_null() {
            if !node.nullable {
                self.type_error(expected, found);
            }
            return;
        }
        let has = |name: &str| expected.contains(&name);
        let format = node
            .checks
            .as_deref()
            .and_then(|checks| checks.format.as_deref())
            .unwrap_or("");
        // A string or list under a format is left to the format check.
        if !has("number")
            && !has("integer")
            && !format.is_empty()
            && matches!(value, Value::String(_) | Value::Array(_))
        {
            return;
        }
        let float_integer = matches!(value, Value::Number(n) if n.as_f64().is_some_and(is_integral) && n.is_f64())
            && has("integer");
        let integer_number = found == "integer" && has("number");
        if !(has(found) || float_integer || integer_number) {
            self.type_error(expected, found);
        }
    }

    fn type_error(&mut self, expected: &[&str], found: &'static str) {
        let name = self.path.clone();
        let detail = format!(
            "{name} in body must be of type {}: {}",
            expected.join(","),
            go_quoted(found)
        );
        self.push(
            FieldErrorKind::TypeInvalid,
            &name,
            Value::String(found.to_string()),
            detail,
        );
    }

    fn combinations(&mut self, checks: &Checks, value: &Value) {
        let path = self.path.clone();
        if !checks.any_of.is_empty() {
            let mut best: Option<Vec<FieldError>> = None;
            let mut passed = false;
            for schema in &checks.any_of {
                let errors = errors_of(schema, value, &path, self.prefix);
                if errors.is_empty() {
                    passed = true;
                    break;
                }
                if best.as_ref().is_none_or(|best| errors.len() < best.len()) {
                    best = Some(errors);
                }
            }
            if !passed {
                self.push_general(format!(
                    "{} must validate at least one schema (anyOf)",
                    go_quoted(&path)
                ));
                self.errors.extend(best.unwrap_or_default());
            }
        }
        if !checks.one_of.is_empty() {
            let mut best: Option<Vec<FieldError>> = None;
            let mut valid = 0;
            for schema in &checks.one_of {
                let errors = errors_of(schema, value, &path, self.prefix);
                if errors.is_empty() {
                    valid += 1;
                } else if valid == 0 && best.as_ref().is_none_or(|best| errors.len() < best.len()) {
                    best = Some(errors);
                }
            }
            if valid != 1 {
                let found = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                self.push_general(format!(
                    "{} must validate one and only one schema (oneOf). {found}",
                    go_quoted(&path)
                ));
                if valid == 0 {
                    self.errors.extend(best.unwrap_or_default());
                }
            }
        }
        if !checks.all_of.is_empty() {
            let mut valid = 0;
            for schema in &checks.all_of {
                let errors = errors_of(schema, value, &path, self.prefix);
                if errors.is_empty() {
                    valid += 1;
                }
                self.errors.extend(errors);
            }
            if valid != checks.all_of.len() {
                let none = if valid == 0 { ". None validated" } else { "" };
                self.push_general(format!(
                    "{} must validate all the schemas (allOf){none}",
                    go_quoted(&path)
                ));
            }
        }
        if let Some(not) = &checks.not
            && errors_of(not, value, &path, self.prefix).is_empty()
        {
            self.push_general(format!(
                "{} must not validate the schema (not)",
                go_quoted(&path)
            ));
        }
    }

    fn string(&mut self, checks: &Checks, text: &str) {
        let name = self.path.clone();
        let length = || i64::try_from(text.chars().count()).unwrap_or(i64::MAX);
        if let Some(max) = checks.max_length
            && length() > max
        {
            self.push(
                FieldErrorKind::TooLong,
                &name,
                Value::Null,
                format!(
                    "may not be more than {max} {}",
                    if max == 1 { "byte" } else { "bytes" }
                ),
            );
            return;
        }
        if let Some(min) = checks.min_length
            && length() < min
        {
            let detail = format!("{name} in body should be at least {min} chars long");
            self.push(FieldErrorKind::Invalid, &name, Value::from(text), detail);
            return;
        }
        if let Some(pattern) = &checks.pattern {
            let detail = match &pattern.regex {
                Ok(regex) if regex.is_match(text) => return,
                Ok(_) => format!("{name} in body should match '{}'", pattern.source),
                Err(error) => format!(
                    "{name} in body should match '{}, but pattern is invalid: {error}'",
                    pattern.source
                ),
            };
            self.push(FieldErrorKind::Invalid, &name, Value::from(text), detail);
        }
    }

    fn format(&mut self, node: &Node, checks: &Checks, text: &str) {
        let Some(format) = checks.format.as_deref() else {
            return;
        };
        // kube strips the formats it does not know, and those of non-strings.
        if !matches!(node.json_type, None | Some(JsonType::String)) || node.int_or_string {
            return;
        }
        if formats::is_valid(format, text) == Some(false) {
            let name = self.path.clone();
            let detail = format!(
                "{name} in body must be of type {format}: {}",
                go_quoted(text)
            );
            self.push(
                FieldErrorKind::TypeInvalid,
                &name,
                Value::from(text),
                detail,
            );
        }
    }

    fn number(&mut self, node: &Node, checks: Option<&Checks>, number: &Number) {
        let name = self.path.clone();
        // The type and format the range check reads: kube's only when the node has one type.
        let declared = (!node.int_or_string).then_some(node.json_type).flatten();
        let format = checks.and_then(|checks| checks.format.as_deref());
        let fits = |value: f64| fits_declared(value, declared, format);
        let value = number.as_f64().unwrap_or(0.0);
        if let Some(problem) = range_problem(number, declared, format) {
            self.push_general(format!("Checked value {problem} in {name}"));
        }
        let Some(checks) = checks else {
            return;
        };
        let integer = number.as_i64().filter(|_| !number.is_f64());
        if let Some(factor) = checks.multiple_of {
            let native = fits(factor);
            if !native {
                self.push_general(format!(
                    "MultipleOf value {} in {name}",
                    range_problem_of(declared, format)
                ));
            }
            let problem = match integer.filter(|_| native) {
                #[allow(clippy::cast_possible_truncation)]
                Some(integer) => {
                    let factor = factor as i64;
                    if factor <= 0 {
                        Some(format!(
                            "factor MultipleOf declared for {name} must be positive: {factor}"
                        ))
                    } else if integer % factor != 0 {
                        Some(format!("{name} in body should be a multiple of {factor}"))
                    } else {
                        None
                    }
                }
                None => {
                    if factor <= 0.0 {
                        Some(format!(
                            "factor MultipleOf declared for {name} must be positive: {}",
                            go_float(factor)
                        ))
                    } else {
                        let multiple = if factor < 1.0 {
                            1.0 / factor * value
                        } else {
                            value / factor
                        };
                        (!is_integral(multiple)).then(|| {
                            format!(
                                "{name} in body should be a multiple of {}",
                                go_float(factor)
                            )
                        })
                    }
                }
            };
            if let Some(detail) = problem {
                self.push(
                    FieldErrorKind::Invalid,
                    &name,
                    Value::Number(number.clone()),
                    detail,
                );
            }
        }
        for (bound, above) in [(checks.minimum, false), (checks.maximum, true)] {
            let Some(Bound {
                value: limit,
                exclusive,
            }) = bound
            else {
                continue;
            };
            let native = fits(limit);
            if !native {
                let what = if above { "Maximum" } else { "Minimum" };
                self.push_general(format!(
                    "{what} boundary value {} in {name}",
                    range_problem_of(declared, format)
                ));
            }
            let (outside, shown) = match integer.filter(|_| native) {
                #[allow(clippy::cast_possible_truncation)]
                Some(integer) => {
                    let limit = limit as i64;
                    let outside = match (above, exclusive) {
                        (true, false) => integer > limit,
                        (true, true) => integer >= limit,
                        (false, false) => integer < limit,
                        (false, true) => integer <= limit,
                    };
                    (outside, limit.to_string())
                }
                None => {
                    let outside = match (above, exclusive) {
                        (true, false) => value > limit,
                        (true, true) => value >= limit,
                        (false, false) => value < limit,
                        (false, true) => value <= limit,
                    };
                    (outside, go_float(limit))
                }
            };
            if outside {
                let relation = match (above, exclusive) {
                    (true, false) => "less than or equal to",
                    (true, true) => "less than",
                    (false, false) => "greater than or equal to",
                    (false, true) => "greater than",
                };
                let detail = format!("{name} in body should be {relation} {shown}");
                self.push(
                    FieldErrorKind::Invalid,
                    &name,
                    Value::Number(number.clone()),
                    detail,
                );
            }
        }
    }

    fn list(&mut self, node: &Node, checks: Option<&Checks>, items: &[Value], old: Option<&Value>) {
        if let Some(item_node) = &node.items {
            // Only items of a map list have an old counterpart (found by their keys).
            let old_items = OldItems::new(node, old);
            let length = self.path.len();
            for (index, item) in items.iter().enumerate() {
                use std::fmt::Write as _;
                let _ = write!(self.path, "[{index}]");
                let old_item = old_items.of(item);
                self.node(item_node, item, old_item);
                self.path.truncate(length);
            }
        }
        let Some(checks) = checks else {
            return;
        };
        let name = self.path.clone();
        self.counts(
            &name,
            items.len(),
            checks.min_items,
            checks.max_items,
            "items",
        );
        if checks.unique_items && has_duplicates(items) {
            let detail = format!("{name} in body shouldn't contain duplicates");
            self.push(
                FieldErrorKind::Invalid,
                &name,
                Value::String(String::new()),
                detail,
            );
        }
    }

    /// `minItems` and `maxItems`, or `minProperties` and `maxProperties` (`noun`), of a value
    /// with `size` entries.
    fn counts(&mut self, name: &str, size: usize, min: Option<i64>, max: Option<i64>, noun: &str) {
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        if let Some(min) = min
            && size < min
        {
            let detail = format!("{name} in body should have at least {min} {noun}");
            self.push(FieldErrorKind::Invalid, name, Value::from(size), detail);
        }
        if let Some(max) = max
            && size > max
        {
            self.push(
                FieldErrorKind::TooMany,
                name,
                Value::from(size),
                too_many(max),
            );
        }
    }

    fn enumeration(&mut self, checks: &Checks, value: &Value) {
        let Some(allowed) = &checks.enumeration else {
            return;
        };
        if allowed.is_empty() || allowed.iter().any(|candidate| same_value(candidate, value)) {
            return;
        }
        let shown: Vec<String> = allowed
            .iter()
            .map(|candidate| match candidate {
                Value::String(text) => go_quoted(text),
                other => go_quoted(&serde_json::to_string(other).unwrap_or_default()),
            })
            .collect();
        let name = self.path.clone();
        self.push(
            FieldErrorKind::NotSupported,
            &name,
            value.clone(),
            format!("supported values: {}", shown.join(", ")),
        );
    }

    fn object(
        &mut self,
        node: &Node,
        checks: Option<&Checks>,
        fields: &serde_json::Map<String, Value>,
        old: Option<&Value>,
    ) {
        let name = self.path.clone();
        if let Some(checks) = checks {
            let (min, max) = (checks.min_properties, checks.max_properties);
            self.counts(&name, fields.len(), min, max, "properties");
        }
        let length = self.path.len();
        if let Some(values) = &node.additional_properties {
            for (key, value) in fields {
                if node.properties.contains_key(key.as_str()) {
                    continue;
                }
                self.path.push('.');
                self.path.push_str(key);
                self.node(values, value, old.and_then(|old| old.get(key)));
                self.path.truncate(length);
            }
        }
        for (property, schema) in &node.properties {
            let Some(value) = fields.get(property.as_ref()) else {
                continue;
            };
            if !self.path.is_empty() {
                self.path.push('.');
            }
            self.path.push_str(property);
            self.node(
                schema,
                value,
                old.and_then(|old| old.get(property.as_ref())),
            );
            self.path.truncate(length);
        }
        if let Some(checks) = checks {
            for required in &checks.required {
                if !fields.contains_key(required.as_ref()) {
                    let field = self.field(&format!("{name}.{required}"));
                    self.errors.push(FieldError::required(field, ""));
                }
            }
        }
    }
}

/// `Too many` detail.
fn too_many(max: i64) -> String {
    format!(
        "must have at most {max} {}",
        if max == 1 { "item" } else { "items" }
    )
}

/// Whether two values are equal as kube-openapi compares an enum's values: numbers by value.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => a == b,
    }
}

/// Whether a value occurs twice (compared by their JSON, in one pass).
fn has_duplicates(items: &[Value]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    !items.iter().all(|item| seen.insert(item.to_string()))
}

/// Whether `value` is in the range of the declared type and format (kube-openapi's
/// `IsValueValidAgainstRange`); the problem when not.
fn range_problem(
    number: &Number,
    declared: Option<JsonType>,
    format: Option<&str>,
) -> Option<String> {
    let value = number.as_f64().unwrap_or(0.0);
    if number.is_f64() {
        (!fits_declared(value, declared, format)).then(|| range_problem_of(declared, format))
    } else {
        // An integer fits an integer type unless its format is narrower.
        let fits = match (declared, format) {
            (Some(JsonType::Integer), Some("int32")) => {
                number.as_i64().is_some_and(|n| i32::try_from(n).is_ok())
            }
            (Some(JsonType::Integer), _) => number.as_i64().is_some(),
            _ => true,
        };
        (!fits).then(|| range_problem_of(declared, format))
    }
}

fn fits_declared(value: f64, declared: Option<JsonType>, format: Option<&str>) -> bool {
    match (declared, format) {
        (Some(JsonType::Integer), Some("int32")) => {
            is_integral(value) && value >= f64::from(i32::MIN) && value <= f64::from(i32::MAX)
        }
        #[allow(clippy::cast_precision_loss)]
        (Some(JsonType::Integer), _) => {
            is_integral(value) && value >= i64::MIN as f64 && value < i64::MAX as f64
        }
        (Some(JsonType::Number), Some("float")) => value.abs() <= f64::from(f32::MAX),
        _ => true,
    }
}

fn range_problem_of(declared: Option<JsonType>, format: Option<&str>) -> String {
    let type_name = declared.map_or("number", JsonType::name);
    match format {
        Some(format) => format!("must be of type {type_name} with format {format}"),
        None => format!("must be of type {type_name} (default format)"),
    }
}
