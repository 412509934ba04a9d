//! The cost check kube-apiserver makes of a CRD's CEL rules when the CRD is written: a rule
//! whose estimated worst case (over the sizes its schema allows) exceeds 10,000,000 is refused
//! (apiextensions-apiserver's `validation.go`, cel-go's cost estimator).
//!
//! The estimate here is a lower bound of kube's, so that no CRD kube accepts is refused: each
//! use of a variable (`self`, `oldSelf`, a comprehension's element) and each field selected
//! from an object counts 1 (cel-go counts at least that), anything else nothing more, and a
//! comprehension its step once per element of the list or map it ranges over, at the most
//! elements its schema allows (`maxItems`, `maxProperties`, or as many as fit in a 3 MiB
//! request, with each element counted at least as large as kube counts it). Times the number
//! of places the rule runs in one object, as kube counts them. A rule is refused
//! only when that bound is over 100 times the limit, which kube words as "more than 100x" with
//! no factor to match: the quadratic rules (a comprehension over an unbounded list inside
//! another) that kube's estimate exists to catch. Rules between the limit and 100 times it are
//! accepted here.

use std::collections::HashMap;

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, operators};

use super::library::comprehensions::{ITERATION_KEYS, is_binding, is_target_element};
use super::schema_lookup::{declared_property, element};
use serde_json::Value;

/// kube's per-expression limit (`StaticEstimatedCostLimit`).
pub const STATIC_LIMIT: u64 = 10_000_000;

/// The largest request kube-apiserver takes, which bounds unbounded lists and maps.
const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;

/// Refused past this: "more than 100x" in kube's words.
const REFUSED_OVER: u64 = 100 * STATIC_LIMIT;

/// kube's message for a cost over "more than 100x" the limit.
pub fn over_budget(cost_name: &str) -> String {
    format!(
        "{cost_name} exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// Whether the rule `expression` at the schema node `schema`, which runs `cardinality` times
/// per object, is surely over 100 times the limit.
pub fn rule_refused(expression: &IdedExpr, schema: &Value, cardinality: u64) -> bool {
    let mut scope = HashMap::new();
    scope.insert("self", Binding::Schema(schema));
    scope.insert("oldSelf", Binding::Schema(schema));
    let cost = u128::from(lower_bound(expression, &scope)) * u128::from(cardinality);
    cost > u128::from(REFUSED_OVER)
}

/// Whether a message expression at `schema` is surely over 100 times the limit (kube does not
/// multiply it by where it runs).
pub fn message_refused(expression: &IdedExpr, schema: &Value) -> bool {
    rule_refused(expression, schema, 1)
}

/// How many times a rule at a node under these ancestors runs in one object, at least as kube
/// counts it: the product of the ancestors' `maxItems`/`maxProperties` while all have one,
/// else as many as the node's smallest JSON fits in a request.
pub fn cardinality(factors: &[Option<u64>], node: &Value) -> u64 {
    let bounded = factors.iter().try_fold(1_u64, |product, factor| {
        Some(product.saturating_mul((*factor)?))
    });
    bounded.unwrap_or_else(|| MAX_REQUEST_BYTES / (min_size(node).saturating_add(1)))
}

/// The factor by which `schema` multiplies how often its children occur: a list's `maxItems`,
/// an object's with `additionalProperties` (a schema, or `true` beside properties) its
/// `maxProperties` (`None`: unbounded), any other object's or a scalar's 1 (kube's
/// `extractMaxElements`).
pub fn child_factor(schema: &Value) -> Option<u64> {
    let bound = |field: &str| schema[field].as_i64().map(|n| n.max(0).unsigned_abs());
    match schema["type"].as_str() {
        Some("array") => bound("maxItems"),
        Some("object") if !schema["additionalProperties"].is_null() => bound("maxProperties"),
        _ => Some(1),
    }
}

/// What a variable stands for in a rule.
#[derive(Clone, Copy)]
enum Binding<'a> {
    /// A value of this schema.
    Schema(&'a Value),
    /// A value of no known schema (a map's key, a computed value).
    Unknown,
    /// A comprehension's accumulator: counted as nothing.
    Accumulator,
    /// A name an expansion binds (a two-variable comprehension's target, `sortBy`'s list),
    /// which the rule does not write: counted as nothing, its schema kept.
    Internal(Option<&'a Value>),
}

/// A lower bound of cel-go's estimate of `expression`.
fn lower_bound(expression: &IdedExpr, scope: &HashMap<&str, Binding<'_>>) -> u64 {
    let sum = |parts: &mut dyn Iterator<Item = &IdedExpr>| {
        parts.fold(0_u64, |total, part| {
            total.saturating_add(lower_bound(part, scope))
        })
    };
    match &expression.expr {
        // A name that is no variable (a function's namespace, a type) may cost nothing.
        Expr::Ident(name) => match scope.get(name.as_str()) {
            Some(Binding::Schema(_) | Binding::Unknown) => 1,
            Some(Binding::Accumulator | Binding::Internal(_)) | None => 0,
        },
        // cel-go charges a selection from an object (a map or struct), and nothing for a
        // presence test (kube turns that charge off).
        Expr::Select(select) => {
            let from_object = !select.test
                && schema_of(&select.operand, scope).is_some_and(|schema| {
                    schema["type"] == "object" && schema["x-kubernetes-int-or-string"] != true
                });
            u64::from(from_object).saturating_add(lower_bound(&select.operand, scope))
        }
        Expr::Literal(_) | Expr::Unspecified => 0,
        Expr::Call(call) => sum(&mut call.target.as_deref().into_iter().chain(&call.args)),
        Expr::List(list) => sum(&mut list.elements.iter()),
        Expr::Map(map) => map.entries.iter().fold(0, |total, entry| {
            total.saturating_add(entry_bound(&entry.expr, scope))
        }),
        Expr::Struct(object) => object.entries.iter().fold(0, |total, entry| {
            total.saturating_add(entry_bound(&entry.expr, scope))
        }),
        Expr::Comprehension(comprehension) if is_binding(comprehension) => {
            let name = comprehension.accu_var.as_str();
            let schema = schema_of(&comprehension.accu_init, scope);
            let mut inner = scope.clone();
            // The value variable of a two-variable comprehension, bound to the target's
            // element: cel-go binds it for nothing, and each use of it counts.
            let (init, binding) = if is_target_element(&comprehension.accu_init) {
                (0, schema.map_or(Binding::Unknown, Binding::Schema))
            } else {
                let binding = if name.starts_with('@') {
                    Binding::Internal(schema)
                } else {
                    schema.map_or(Binding::Unknown, Binding::Schema)
                };
                (lower_bound(&comprehension.accu_init, scope), binding)
            };
            inner.insert(name, binding);
            init.saturating_add(lower_bound(&comprehension.result, &inner))
        }
        Expr::Comprehension(comprehension) => {
            // A two-variable comprehension ranges over its target's indices or keys.
            let (range, keys) = match &comprehension.iter_range.expr {
                Expr::Call(call) if call.func_name == ITERATION_KEYS => (
                    call.args
                        .first()
                        .and_then(|target| schema_of(target, scope)),
                    true,
                ),
                _ => (schema_of(&comprehension.iter_range, scope), false),
            };
            let (elements, element) = match range {
                Some(schema) if schema["type"] == "array" => (
                    max_elements(schema).unwrap_or(0),
                    Binding::of(&schema["items"]),
                ),
                Some(schema) if schema["additionalProperties"].is_object() => {
                    (max_elements(schema).unwrap_or(0), Binding::Unknown)
                }
                _ => (0, Binding::Unknown),
            };
            let element = if keys { Binding::Unknown } else { element };
            let mut inner = scope.clone();
            inner.insert(comprehension.iter_var.as_str(), element);
            if let Some(second) = &comprehension.iter_var2 {
                inner.insert(second.as_str(), Binding::Unknown);
            }
            inner.insert(comprehension.accu_var.as_str(), Binding::Accumulator);
            let step = lower_bound(&comprehension.loop_step, &inner);
            lower_bound(&comprehension.iter_range, scope)
                .saturating_add(elements.saturating_mul(step))
        }
    }
}

fn entry_bound(entry: &EntryExpr, scope: &HashMap<&str, Binding<'_>>) -> u64 {
    match entry {
        EntryExpr::MapEntry(entry) => {
            lower_bound(&entry.key, scope).saturating_add(lower_bound(&entry.value, scope))
        }
        EntryExpr::StructField(field) => lower_bound(&field.value, scope),
    }
}

impl<'a> Binding<'a> {
    fn of(schema: &'a Value) -> Self {
        if schema.is_object() {
            Self::Schema(schema)
        } else {
            Self::Unknown
        }
    }
}

/// The schema of the value `expression` stands for, when it is a variable, a field of one, or
/// an element of a list or map of one (`x[i]`).
fn schema_of<'a>(expression: &IdedExpr, scope: &HashMap<&str, Binding<'a>>) -> Option<&'a Value> {
    match &expression.expr {
        Expr::Ident(name) => match scope.get(name.as_str())? {
            Binding::Schema(schema) => Some(*schema),
            Binding::Internal(schema) => *schema,
            _ => None,
        },
        // An element of a list or a map.
        Expr::Call(call) if call.func_name == operators::INDEX && call.target.is_none() => {
            element(schema_of(call.args.first()?, scope)?)
        }
        Expr::Select(select) if !select.test => {
            let parent = schema_of(&select.operand, scope)?;
            declared_property(parent, &select.field)
                .or_else(|| Some(&parent["additionalProperties"]).filter(|map| map.is_object()))
        }
        _ => None,
    }
}

/// The most elements a list or map of `schema` may have, as kube estimates it: its `maxItems`
/// or `maxProperties`, else as many of its smallest elements as fit in a request.
fn max_elements(schema: &Value) -> Option<u64> {
    let declared = |field: &str| schema[field].as_i64().map(|n| n.max(0).unsigned_abs());
    if schema["type"] == "array" {
        let items = &schema["items"];
        Some(
            declared("maxItems")
                .unwrap_or_else(|| (MAX_REQUEST_BYTES - 2) / min_size(items).saturating_add(1)),
        )
    } else if schema["additionalProperties"].is_object() {
        let values = &schema["additionalProperties"];
        Some(
            declared("maxProperties")
                .unwrap_or_else(|| (MAX_REQUEST_BYTES - 2) / min_size(values).saturating_add(6)),
        )
    } else {
        None
    }
}

/// The size of the smallest JSON of `schema`, at least as kube counts it (kube's
/// `MinSerializedSize`; where unsure, larger, which only lowers the counts it bounds).
fn min_size(schema: &Value) -> u64 {
    if schema["x-kubernetes-int-or-string"] == true {
        return 1;
    }
    match schema["type"].as_str() {
        Some("array") => 2,
        Some("object") if schema["additionalProperties"].is_object() => 2,
        Some("object") => {
            let required: Vec<&str> = schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let properties = schema["properties"].as_object();
            required.iter().fold(2_u64, |size, name| {
                match properties.and_then(|properties| properties.get(*name)) {
                    // A defaulted field is filled in by the server: the request may omit it.
                    // (`default: null` is no default.)
                    Some(property) if property["default"].is_null() => size
                        .saturating_add(name.len() as u64)
                        .saturating_add(min_size(property))
                        .saturating_add(4),
                    _ => size,
                }
            })
        }
        Some("string") => match schema["format"].as_str() {
            Some("duration") => 12,
            Some("date") => 14,
            Some("date-time") => 40,
            _ => 2,
        },
        Some("boolean") => 5,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(source: &str) -> IdedExpr {
        let program = super::super::rules::environment()
            .compile(source)
            .expect("the rule compiles");
        program.expression().clone()
    }

    fn strings(max_items: Option<u64>) -> Value {
        let mut list = json!({"type": "array", "items": {"type": "string"}});
        if let Some(max) = max_items {
            list["maxItems"] = json!(max);
        }
        list
    }

    #[test]
    fn a_quadratic_rule_over_an_unbounded_list_is_refused_and_bounded_it_is_not() {
        let rule = parse("self.all(x, self.exists(y, x == y))");
        assert!(rule_refused(&rule, &strings(None), 1));
        assert!(!rule_refused(&rule, &strings(Some(1000)), 1));
        // A single pass over the unbounded list is within kube's reach of the limit: accepted.
        assert!(!rule_refused(
            &parse("self.all(x, x.size() < 10)"),
            &strings(None),
            1
        ));
    }

    #[test]
    fn where_a_rule_runs_multiplies_its_cost() {
        let item = json!({"type": "object", "properties": {"tags": strings(Some(1000))}});
        let rule = parse("self.tags.all(x, self.tags.exists(y, x == y))");
        // 1000 × 1000 per run: refused only if it runs over 1,000 times.
        assert!(!rule_refused(&rule, &item, 1));
        assert!(rule_refused(&rule, &item, 2_000));
        assert_eq!(cardinality(&[Some(1), Some(10), Some(5)], &item), 50);
        // Under an unbounded list: as many as fit in a request (the object's smallest JSON, `{}`).
        assert_eq!(cardinality(&[Some(1), None], &item), MAX_REQUEST_BYTES / 3);
    }

    #[test]
    fn sizes_count_required_fields_and_maps_use_their_values() {
        let object = json!({"type": "object", "required": ["name", "port", "mode"],
            "properties": {"name": {"type": "string"}, "port": {"type": "integer"},
                           "mode": {"type": "string", "default": "fast"}}});
        // {} + "name":"" + "port":0 (the defaulted mode may be omitted).
        assert_eq!(min_size(&object), 2 + (4 + 2 + 4) + (4 + 1 + 4));
        // `default: null` is no default: the field counts.
        let nulled = json!({"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string", "nullable": true, "default": null}}});
        assert_eq!(min_size(&nulled), 2 + (4 + 2 + 4));
        assert_eq!(
            child_factor(&json!({"type": "object", "additionalProperties": true,
            "properties": {"a": {"type": "string"}}, "maxProperties": 7})),
            Some(7)
        );
        let map = json!({"type": "object", "additionalProperties": {"type": "integer"}});
        assert_eq!(max_elements(&map), Some((MAX_REQUEST_BYTES - 2) / 7));
        let rule = parse("self.all(k, self.exists(j, k == j))");
        assert!(
            rule_refused(&rule, &map, 1),
            "keys of an unbounded map, squared"
        );
    }

    #[test]
    fn two_variable_comprehensions_count_as_their_one_variable_forms() {
        // Over the values of an unbounded list, squared: refused; bounded: accepted.
        let rule = parse("self.all(i, x, self.exists(j, y, x == y && i != j))");
        assert!(rule_refused(&rule, &strings(None), 1));
        assert!(!rule_refused(&rule, &strings(Some(1000)), 1));
        // The value variable has its element's schema: a list inside each element is seen.
        let nested = json!({"type": "array", "items": strings(None)});
        let rule = parse("self.all(i, inner, inner.all(x, inner.exists(y, x == y)))");
        assert!(rule_refused(
            &rule,
            &json!({"type": "array", "maxItems": 1, "items": strings(None)}),
            1
        ));
        assert!(rule_refused(&rule, &nested, 1));
        let bounded = json!({"type": "array", "maxItems": 1, "items": strings(Some(10))});
        assert!(!rule_refused(&rule, &bounded, 1));
    }
}
