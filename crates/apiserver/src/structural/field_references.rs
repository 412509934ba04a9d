//! The field check cel-go's type checker makes of a rule when kube-apiserver compiles it: a
//! field selected from an object must be one its schema declares (by its escaped name), else
//! the CRD is refused with `undefined field '…'`. The cel crate has no type checker, so this
//! walks the rule with the schema of each variable, as kube declares the types
//! (apiserver's `SchemaDeclType`): an object with properties is a type with those fields only
//! (its unknown fields, preserved or not, are not exposed), a map (`additionalProperties` with
//! a schema) takes any key, and a resource's root (the schema's, or an embedded resource's)
//! also has `apiVersion`, `kind` and `metadata` with only `name` and `generateName` (unless it
//! declares all of these itself, when its own declarations stand).
//!
//! Where a value's schema is not known here (a computed value, an `int-or-string`), nothing is
//! checked: a rule is refused only when kube surely refuses it.

use std::collections::HashMap;

use cel::common::ast::{EntryExpr, Expr, operators};
use cel::{IdedExpr, Program};
use serde_json::Value;

use super::library::comprehensions::{ITERATION_KEYS, is_binding};
use super::located_error::located;
use super::schema_lookup::{declared_property, element};

/// What a variable is known to be.
#[derive(Clone, Copy)]
enum Known<'a> {
    /// A value of this schema; `root` for a resource's root.
    Schema { schema: &'a Value, root: bool },
    /// A resource root's `metadata`, of which rules see `name` and `generateName`.
    RootMetadata,
}

/// The first field `program` selects that its object does not declare, in cel-go's words
/// (`ERROR: <input>:line:column: undefined field '…'` and the line marked), or `None`.
/// `schema` is the schema of `self` (and `oldSelf`); `root` whether it is a resource's root.
pub fn undefined_field(program: &Program, schema: &Value, root: bool) -> Option<String> {
    let mut scope = HashMap::new();
    let known = Known::Schema { schema, root };
    scope.insert("self", Some(known));
    scope.insert("oldSelf", Some(known));
    let (id, field) = walk(program.expression(), &scope)?;
    Some(located(program, id, &format!("undefined field '{field}'")))
}

/// The first undefined selection under `expression`: the selection's node id and its field.
fn walk<'a>(
    expression: &'a IdedExpr,
    scope: &HashMap<&'a str, Option<Known<'a>>>,
) -> Option<(u64, &'a str)> {
    let each = |parts: &mut dyn Iterator<Item = &'a IdedExpr>| {
        for part in parts {
            if let Some(found) = walk(part, scope) {
                return Some(found);
            }
        }
        None
    };
    match &expression.expr {
        Expr::Select(select) => {
            if let Some(found) = walk(&select.operand, scope) {
                return Some(found);
            }
            let parent = known(&select.operand, scope)?;
            (!declares(parent, &select.field)).then_some((expression.id, select.field.as_str()))
        }
        Expr::Call(call) => each(&mut call.target.as_deref().into_iter().chain(&call.args)),
        Expr::List(list) => each(&mut list.elements.iter()),
        Expr::Map(map) => map
            .entries
            .iter()
            .find_map(|entry| entry_walk(&entry.expr, scope)),
        Expr::Struct(object) => object
            .entries
            .iter()
            .find_map(|entry| entry_walk(&entry.expr, scope)),
        Expr::Comprehension(comprehension) if is_binding(comprehension) => {
            let found = walk(&comprehension.accu_init, scope);
            if found.is_some() {
                return found;
            }
            let mut inner = scope.clone();
            inner.insert(
                comprehension.accu_var.as_str(),
                known(&comprehension.accu_init, scope),
            );
            walk(&comprehension.result, &inner)
        }
        Expr::Comprehension(comprehension) => {
            let found = walk(&comprehension.iter_range, scope)
                .or_else(|| walk(&comprehension.accu_init, scope));
            if found.is_some() {
                return found;
            }
            // A list's elements have its items' schema; a map's keys and a two-variable
            // comprehension's indices are strings or integers.
            let element = match &comprehension.iter_range.expr {
                Expr::Call(call) if call.func_name == ITERATION_KEYS => None,
                _ => match known(&comprehension.iter_range, scope) {
                    Some(Known::Schema { schema, .. }) if schema["type"] == "array" => {
                        schema_known(&schema["items"])
                    }
                    _ => None,
                },
            };
            let mut inner = scope.clone();
            inner.insert(comprehension.iter_var.as_str(), element);
            inner.insert(comprehension.accu_var.as_str(), None);
            [
                &comprehension.loop_cond,
                &comprehension.loop_step,
                &comprehension.result,
            ]
            .into_iter()
            .find_map(|part| walk(part, &inner))
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => None,
    }
}

fn entry_walk<'a>(
    entry: &'a EntryExpr,
    scope: &HashMap<&'a str, Option<Known<'a>>>,
) -> Option<(u64, &'a str)> {
    match entry {
        EntryExpr::MapEntry(entry) => walk(&entry.key, scope).or_else(|| walk(&entry.value, scope)),
        EntryExpr::StructField(field) => walk(&field.value, scope),
    }
}

/// A schema as what a variable of it is known to be (a resource's root when embedded).
fn schema_known(schema: &Value) -> Option<Known<'_>> {
    schema.is_object().then(|| Known::Schema {
        schema,
        root: schema["x-kubernetes-embedded-resource"] == true,
    })
}

/// What `expression` is known to be: a variable, a field of one, or an element of a list or
/// map of one.
fn known<'a>(
    expression: &'a IdedExpr,
    scope: &HashMap<&'a str, Option<Known<'a>>>,
) -> Option<Known<'a>> {
    match &expression.expr {
        Expr::Ident(name) => scope.get(name.as_str()).copied().flatten(),
        Expr::Select(select) if !select.test => match known(&select.operand, scope)? {
            Known::Schema { schema, root } => {
                if root && select.field == "metadata" && !declares_type_and_meta(schema) {
                    return Some(Known::RootMetadata);
                }
                schema_known(declared_property(schema, &select.field)?)
            }
            Known::RootMetadata => None,
        },
        Expr::Call(call) if call.func_name == operators::INDEX && call.target.is_none() => {
            match known(call.args.first()?, scope)? {
                Known::Schema { schema, .. } => schema_known(element(schema)?),
                Known::RootMetadata => None,
            }
        }
        _ => None,
    }
}

/// Whether a resource root's schema already declares `kind`, `apiVersion` and a `metadata`
/// with `name` and `generateName` (as strings): then kube keeps it as it is, `metadata`'s other
/// declared fields included, instead of putting its own `metadata` in place.
fn declares_type_and_meta(schema: &Value) -> bool {
    let string = |schema: &Value| schema["type"] == "string";
    let properties = &schema["properties"];
    let metadata = &properties["metadata"];
    string(&properties["kind"])
        && string(&properties["apiVersion"])
        && metadata["type"] == "object"
        && string(&metadata["properties"]["name"])
        && string(&metadata["properties"]["generateName"])
}

/// Whether a value known as `parent` has the field `field` in kube's declared type.
fn declares(parent: Known<'_>, field: &str) -> bool {
    let (schema, root) = match parent {
        Known::RootMetadata => return matches!(field, "name" | "generateName"),
        Known::Schema { schema, root } => (schema, root),
    };
    // Only an object with no map of values is a type of fixed fields; an int-or-string is
    // checked when the rule runs.
    if schema["type"] != "object"
        || schema["additionalProperties"].is_object()
        || schema["x-kubernetes-int-or-string"] == true
    {
        return true;
    }
    if root && matches!(field, "apiVersion" | "kind" | "metadata") {
        return true;
    }
    declared_property(schema, field).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(rule: &str, schema: &Value, root: bool) -> Option<String> {
        let program = super::super::rules::environment()
            .compile(rule)
            .expect("the rule compiles");
        undefined_field(&program, schema, root)
    }

    fn spec() -> Value {
        json!({"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "max-size": {"type": "integer"},
            "ports": {"type": "array", "items": {"type": "object", "properties": {
                "port": {"type": "integer"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "size": {"x-kubernetes-int-or-string": true},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                         "properties": {"spec": {"type": "object"}}},
        }})
    }

    #[test]
    fn a_field_the_schema_does_not_declare_is_refused_in_cel_gos_words() {
        assert_eq!(
            check("self.replcas > 1", &spec(), false).as_deref(),
            Some("ERROR: <input>:1:5: undefined field 'replcas'\n | self.replcas > 1\n | ....^")
        );
        for (rule, field) in [
            ("has(self.replcas)", "replcas"),
            ("self.ports.all(p, p.prot > 0)", "prot"),
            ("self.ports[0].prot > 0", "prot"),
            ("self.ports.all(i, p, p.prot > i)", "prot"),
            ("self.extra.anything == 1", "anything"),
            ("self.max_size > 0", "max_size"),
            ("self.template.metadata.labels.size() > 0", "labels"),
            ("self.template.status == null", "status"),
        ] {
            let found = check(rule, &spec(), false);
            assert!(
                found
                    .as_deref()
                    .is_some_and(|found| found.contains(&format!("undefined field '{field}'"))),
                "{rule}: {found:?}"
            );
        }
    }

    #[test]
    fn declared_fields_maps_and_unknown_values_pass() {
        for rule in [
            "self.replicas > 1 && self.max__dash__size > 0",
            "self.ports.all(p, p.port > 0) && self.ports[0].port > 0",
            "self.labels.app == 'web' && self.labels.all(k, self.labels[k] != '')",
            "self.size == 1 || self.size.foo == 1",
            "self.template.metadata.name != '' && self.template.kind != ''",
            "self.template.spec == self.template.spec",
            "[{'a': 1}].all(x, x.b == 1)",
            "self.ports.transformList(i, p, p.port).all(x, x > 0)",
        ] {
            assert_eq!(check(rule, &spec(), false), None, "{rule}");
        }
        // At a resource's root: apiVersion, kind, and metadata's name and generateName.
        let root = json!({"type": "object", "properties": {"spec": spec()}});
        assert_eq!(
            check(
                "self.metadata.name.startsWith('a') && self.kind == 'W' && self.spec.replicas > 0",
                &root,
                true
            ),
            None
        );
        assert!(check("self.metadata.labels.size() > 0", &root, true).is_some());
        // An embedded resource that declares its type and metadata keeps its own metadata.
        let declared = json!({"type": "object", "properties": {"template": {
            "type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                "kind": {"type": "string"}, "apiVersion": {"type": "string"},
                "metadata": {"type": "object", "properties": {
                    "name": {"type": "string"}, "generateName": {"type": "string"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}});
        assert_eq!(
            check("self.template.metadata.labels.size() > 0", &declared, false),
            None
        );
        assert!(
            check(
                "self.template.metadata.annotations.size() > 0",
                &declared,
                false
            )
            .is_some()
        );
        assert!(check("self.kind == 'W'", &root, false).is_some());
    }

    #[test]
    fn the_caret_marks_the_selection_on_its_own_line() {
        let found = check(
            "self.replicas > 0 &&\n  self.ports.all(p, p.nope)",
            &spec(),
            false,
        );
        assert_eq!(
            found.as_deref(),
            Some(
                "ERROR: <input>:2:22: undefined field 'nope'\n |   self.ports.all(p, p.nope)\n | .....................^"
            )
        );
    }
}
