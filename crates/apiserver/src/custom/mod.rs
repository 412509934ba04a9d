//! CustomResourceDefinitions and their custom resources as kube-apiserver's
//! apiextensions-apiserver treats them:
//!
//! - a CRD is checked and defaulted before it is served ([`definition`]); each served version
//!   is read once into a [`CustomVersion`];
//! - decoding makes a custom resource fit its version's schema ([`fit_to_schema`], with
//!   [`coerce`]: unknown fields pruned and named for the field validation policy, disallowed
//!   `null`s dropped, defaults filled in);
//! - the strategy drops `status` from a create and keeps the stored one on a write of the main
//!   resource when the version has a status subresource;
//! - validation checks the object against the schema ([`validate`], with ratcheting on update),
//!   the uniqueness of `set` and `map` lists, the `scale` subresource's replicas, then the CEL
//!   rules, each error worded as kube words it ([`FieldError`]);
//! - reads through another served version convert the object ([`conversion`]), and Tables show
//!   the version's printer columns ([`table`]).

pub mod api_approval;
pub mod coerce;
pub mod conversion;
pub mod definition;
mod field_error;
pub(crate) mod formats;
mod json_path;
mod list_type;
mod old_items;
pub(crate) mod property_names;
mod rules;
pub mod table;
pub(crate) mod typed_strings;
pub mod validate;
mod version;
pub mod webhook;

use serde_json::Value;

use crate::storage::meta::set_status_from;
use crate::structural::Node;

pub use self::field_error::{
    FieldError, FieldErrorKind, go_float, go_quoted, go_type, write_go_value,
};
pub use self::json_path::JsonPath;
pub use self::version::{CustomVersion, PrinterColumn, ScalePaths};

/// How kube-apiserver names the root of an object in a field error: a nil path, printed.
pub const NIL_PATH: &str = "<nil>";

/// Makes `object`, a custom resource of `version` as decoded from a request, fit the version's
/// schema; returns the paths of the fields it did not declare, which are gone.
pub fn fit_to_schema(version: &CustomVersion, object: &mut Value) -> Vec<String> {
    let Some(schema) = version.schema.as_deref() else {
        return Vec::new();
    };
    let removed = coerce::prune(object, schema);
    coerce::prune_nulls(object, Some(schema));
    if version.has_defaults {
        coerce::apply_defaults(object, schema);
    }
    removed
}

/// What the strategy does to a new object: with a status subresource, its `status` is not the
/// creator's to set.
pub fn prepare_for_create(status_subresource: bool, object: &mut Value) {
    if status_subresource && let Some(fields) = object.as_object_mut() {
        fields.remove("status");
    }
}

/// What the strategy does to an update of the main resource: with a status subresource, the
/// stored `status` stays.
pub fn prepare_for_update(status_subresource: bool, new: &mut Value, old: &Value) {
    if status_subresource {
        set_status_from(new, old);
    }
}

/// The errors of a new object.
pub fn validate_create(version: &CustomVersion, object: &Value) -> Vec<FieldError> {
    validate_object(version, object, None)
}

/// The errors of an object, new or (with `old`) replacing `old`.
fn validate_object(version: &CustomVersion, new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let schema = version.schema.as_deref();
    if let Some(schema) = schema {
        errors.extend(validate::validate(schema, new, old, ""));
    }
    if let Some(scale) = &version.scale {
        errors.extend(scale_replicas(new, &scale.spec_replicas));
        errors.extend(scale_status(new, scale));
    }
    if let Some(schema) = schema {
        errors.extend(match old {
            Some(old) => list_types_unless_old_broke_them(schema, new, old),
            None => list_type::validate(schema, new),
        });
        errors.extend(rules_unless_blocked(schema, &errors, new, old));
    }
    errors
}

/// The errors of the CEL rules, unless the schema's errors already make the object one that
/// rules cannot be run on (kube's `hasBlockingErr`): then one error says they were not run.
fn rules_unless_blocked(
    schema: &Node,
    errors: &[FieldError],
    new: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    if !schema.rules_below {
        return Vec::new();
    }
    let blocking = errors.iter().any(|error| {
        matches!(
            error.kind,
            FieldErrorKind::NotSupported
                | FieldErrorKind::Required
                | FieldErrorKind::TooLong
                | FieldErrorKind::TooMany
                | FieldErrorKind::TypeInvalid
        )
    });
    if blocking {
        return vec![FieldError::invalid(
            NIL_PATH,
            Value::Null,
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        )];
    }
    rules::validate(schema, new, old)
}

/// The errors of an update of `old` to `new`: what did not change is not held against it.
/// A status update (`status_only`) is checked on its `status` alone, against the status schema.
pub fn validate_update(
    version: &CustomVersion,
    new: &Value,
    old: &Value,
    status_only: bool,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let schema = version.schema.as_deref();
    if status_only {
        // What the status write stores: the old object with the new status (none if it has
        // none), as the status strategy makes it.
        let mut merged = old.clone();
        set_status_from(&mut merged, new);
        if let (Some(status), Some(status_schema)) = (
            new.get("status"),
            schema.and_then(|schema| schema.properties.get("status")),
        ) {
            errors.extend(validate::validate(
                status_schema,
                status,
                old.get("status"),
                "status",
            ));
        }
        if let Some(scale) = &version.scale {
            errors.extend(scale_status(&merged, scale));
        }
        if let Some(schema) = schema {
            errors.extend(list_types_unless_old_broke_them(schema, &merged, old));
            errors.extend(rules_unless_blocked(schema, &errors, &merged, Some(old)));
        }
        return errors;
    }
    validate_object(version, new, Some(old))
}

/// The list uniqueness errors of `new`, unless `old` broke uniqueness already (ratcheting, as
/// kube-apiserver does it for list types: whole objects).
fn list_types_unless_old_broke_them(schema: &Node, new: &Value, old: &Value) -> Vec<FieldError> {
    let errors = list_type::validate(schema, new);
    if errors.is_empty() || !list_type::validate(schema, old).is_empty() {
        return Vec::new();
    }
    errors
}

/// The value at a dotted path (`spec.replicas`), if there is one.
pub(crate) fn at<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|segment| !segment.is_empty())
        .try_fold(object, |value, segment| value.get(segment))
}

/// The replicas at `path` must be a non-negative int32 (kube's `ValidateScaleSpec`).
fn scale_replicas(object: &Value, path: &str) -> Option<FieldError> {
    let field = format!(".{path}");
    let value = at(object, path)?;
    let Some(replicas) = value.as_i64().filter(|_| !value.is_f64()) else {
        let mut shown = String::new();
        write_go_value(&mut shown, value);
        let shown = shown.trim_matches('"').to_string();
        return Some(FieldError::invalid(
            field.clone(),
            Value::from(0),
            format!(
                "{field} accessor error: {shown} is of the type {}, expected int64",
                go_type(value)
            ),
        ));
    };
    if replicas < 0 {
        Some(FieldError::invalid(
            field,
            Value::from(replicas),
            "should be a non-negative integer",
        ))
    } else if replicas > i64::from(i32::MAX) {
        Some(FieldError::invalid(
            field,
            Value::from(replicas),
            format!("should be less than or equal to {}", i32::MAX),
        ))
    } else {
        None
    }
}

/// The status replicas must be a non-negative int32 and the selector a string (kube's
/// `ValidateScaleStatus`).
fn scale_status(object: &Value, scale: &ScalePaths) -> Vec<FieldError> {
    let mut errors: Vec<FieldError> = scale_replicas(object, &scale.status_replicas)
        .into_iter()
        .collect();
    if let Some(path) = &scale.label_selector
        && let Some(selector) = at(object, path)
        && !selector.is_string()
    {
        let field = format!(".{path}");
        errors.push(FieldError::invalid(
            field.clone(),
            Value::String(String::new()),
            format!(
                "{field} accessor error: {selector} is of the type {}, expected string",
                go_type(selector)
            ),
        ));
    }
    errors
}
