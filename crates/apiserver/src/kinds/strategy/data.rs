//! ConfigMaps' and Secrets' own checks (core's `ValidateConfigMap` and `ValidateSecret`): each
//! key a valid config key, at most 1 MiB of data in all, no key in both `data` and
//! `binaryData`, and nothing changed once the object is `immutable`.

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::custom::{FieldError, FieldErrorKind};
use crate::resource::ResourceKind;

/// The two kinds whose data is checked here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DataKind {
    ConfigMap,
    Secret,
}

impl DataKind {
    /// Which of the two `kind` is, if either.
    pub(super) fn of(kind: &ResourceKind) -> Option<Self> {
        match (kind.group.as_str(), kind.plural.as_str(), kind.is_builtin()) {
            ("", "configmaps", true) => Some(Self::ConfigMap),
            ("", "secrets", true) => Some(Self::Secret),
            _ => None,
        }
    }

    /// The errors of `object` of this kind.
    pub(super) fn errors(self, object: &Value) -> Vec<FieldError> {
        match self {
            Self::ConfigMap => config_map_errors(object),
            Self::Secret => secret_errors(object),
        }
    }

    /// What an update of `old` to `new` may not change.
    pub(super) fn update_errors(self, new: &Value, old: &Value) -> Vec<FieldError> {
        update_errors(new, old, self == Self::Secret)
    }
}

/// The most data one ConfigMap or Secret may hold (`MaxSecretSize`).
const DATA_LIMIT: usize = 1024 * 1024;

const CONFIG_KEY_MESSAGE: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

const IMMUTABLE: &str = "field is immutable when `immutable` is set";

/// What is wrong with `key` as a ConfigMap or Secret key (`IsConfigMapKey`).
fn key_problems(key: &str) -> Vec<&'static str> {
    let mut problems = Vec::new();
    if key.len() > 253 {
        problems.push("must be no more than 253 characters");
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        problems.push(CONFIG_KEY_MESSAGE);
    }
    match key {
        "." => problems.push("must not be '.'"),
        ".." => problems.push("must not be '..'"),
        _ if key.starts_with("..") => problems.push("must not start with '..'"),
        _ => {}
    }
    problems
}

fn entries<'a>(object: &'a Value, field: &str) -> Option<&'a Map<String, Value>> {
    object.get(field).and_then(Value::as_object)
}

/// How many bytes a base64 value holds once decoded.
fn decoded_len(value: &Value) -> usize {
    value.as_str().map_or(0, |text| {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_or(text.len(), |bytes| bytes.len())
    })
}

fn key_errors(field: &str, map: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    for key in map.keys() {
        for problem in key_problems(key) {
            errors.push(FieldError::invalid(
                format!("{field}[{key}]"),
                Value::from(key.as_str()),
                problem,
            ));
        }
    }
}

fn too_long(field: &str) -> FieldError {
    FieldError::new(
        FieldErrorKind::TooLong,
        field,
        Value::Null,
        format!("may not be more than {DATA_LIMIT} bytes"),
    )
}

/// A ConfigMap's errors.
fn config_map_errors(object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let data = entries(object, "data");
    let binary = entries(object, "binaryData");
    let mut size = 0usize;
    if let Some(data) = data {
        for (key, value) in data {
            for problem in key_problems(key) {
                errors.push(FieldError::invalid(
                    format!("data[{key}]"),
                    Value::from(key.as_str()),
                    problem,
                ));
            }
            if binary.is_some_and(|binary| binary.contains_key(key)) {
                errors.push(FieldError::invalid(
                    format!("data[{key}]"),
                    Value::from(key.as_str()),
                    "duplicate of key present in binaryData",
                ));
            }
            size = size.saturating_add(value.as_str().map_or(0, str::len));
        }
    }
    if let Some(binary) = binary {
        key_errors("binaryData", binary, &mut errors);
        size = binary
            .values()
            .map(decoded_len)
            .fold(size, usize::saturating_add);
    }
    if size > DATA_LIMIT {
        errors.push(too_long(""));
    }
    errors
}

/// A Secret's errors.
fn secret_errors(object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(data) = entries(object, "data") {
        key_errors("data", data, &mut errors);
        let size = data
            .values()
            .map(decoded_len)
            .fold(0, usize::saturating_add);
        if size > DATA_LIMIT {
            errors.push(too_long("data"));
        }
    }
    errors
}

/// What an update of an `immutable` ConfigMap or Secret may not change; a Secret's `type`
/// never changes.
fn update_errors(new: &Value, old: &Value, secret: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if secret && new.get("type") != old.get("type") {
        let shown = new.get("type").cloned().unwrap_or(Value::from(""));
        errors.push(FieldError::invalid("type", shown, "field is immutable"));
    }
    if old["immutable"] == Value::Bool(true) {
        if new["immutable"] != Value::Bool(true) {
            errors.push(FieldError::new(
                FieldErrorKind::Forbidden,
                "immutable",
                Value::Null,
                IMMUTABLE,
            ));
        }
        let fields: &[&str] = if secret {
            &["data"]
        } else {
            &["data", "binaryData"]
        };
        for field in fields {
            if new.get(*field) != old.get(*field) {
                errors.push(FieldError::new(
                    FieldErrorKind::Forbidden,
                    *field,
                    Value::Null,
                    IMMUTABLE,
                ));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(errors: Vec<FieldError>) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn keys_and_sizes_are_checked_as_kube_checks_them() {
        let object = json!({"data": {"ok.key-1_2": "v", "bad key": "v", "..x": "v", "dup": "v"},
                            "binaryData": {"dup": "AA=="}});
        // Sorted: the errors follow the keys, whose order is the map's.
        let mut errors = shown(config_map_errors(&object));
        errors.sort();
        assert_eq!(
            errors,
            [
                "data[..x]: Invalid value: \"..x\": must not start with '..'".to_string(),
                format!("data[bad key]: Invalid value: \"bad key\": {CONFIG_KEY_MESSAGE}"),
                "data[dup]: Invalid value: \"dup\": duplicate of key present in binaryData"
                    .to_string(),
            ]
        );
        let big = json!({"data": {"a": "x".repeat(DATA_LIMIT), "b": "y"}});
        assert_eq!(
            shown(config_map_errors(&big)),
            [": Too long: may not be more than 1048576 bytes"]
        );
        let fits = json!({"data": {"a": "x".repeat(DATA_LIMIT)}});
        assert!(config_map_errors(&fits).is_empty());
        let secret = json!({"data": {"a": base64::engine::general_purpose::STANDARD.encode(vec![0u8; DATA_LIMIT + 1])}});
        assert_eq!(
            shown(secret_errors(&secret)),
            ["data: Too long: may not be more than 1048576 bytes"]
        );
    }

    #[test]
    fn an_immutable_object_keeps_its_data() {
        let old = json!({"immutable": true, "data": {"a": "1"}, "type": "Opaque"});
        let new = json!({"immutable": true, "data": {"a": "2"}, "type": "Opaque"});
        assert_eq!(
            shown(update_errors(&new, &old, true)),
            ["data: Forbidden: field is immutable when `immutable` is set"]
        );
        let unfrozen = json!({"data": {"a": "1"}, "type": "kubernetes.io/tls"});
        assert_eq!(
            shown(update_errors(&unfrozen, &old, true)),
            [
                "type: Invalid value: \"kubernetes.io/tls\": field is immutable",
                "immutable: Forbidden: field is immutable when `immutable` is set",
            ]
        );
        assert!(update_errors(&new, &json!({"data": {"a": "1"}}), false).is_empty());
    }
}
