//! Where a CEL rule's selections and indexes lead in a schema, as kube declares a schema's
//! types to CEL: a field by its property's escaped name, an element by a list's `items` or a
//! map's `additionalProperties`.

use serde_json::Value;

/// The property of `schema` that a rule selects as `field` (kube's escaped name of it, such
/// as `__namespace__` or `max__dash__size`).
pub fn declared_property<'a>(schema: &'a Value, field: &str) -> Option<&'a Value> {
    schema["properties"]
        .as_object()?
        .iter()
        .find(|(name, _)| crate::custom::property_names::escape(name).as_deref() == Some(field))
        .map(|(_, property)| property)
}

/// The schema of an element of `schema`: a list's items, a map's values.
pub fn element(schema: &Value) -> Option<&Value> {
    let element = match schema["type"].as_str() {
        Some("array") => &schema["items"],
        _ => &schema["additionalProperties"],
    };
    Some(element).filter(|element| element.is_object())
}
