//! kube-apiserver's checks of an object's `metadata` beyond its name (apimachinery's
//! `ValidateObjectMeta`, and core's finalizer rule for built-in kinds): label keys and
//! values, annotation keys and their total size, owner references, and finalizer names.

use serde_json::{Map, Value};

use super::error::Cause;
use super::meta::{DNS1123_SUBDOMAIN_MESSAGE, is_dns1123_subdomain};

/// The most all annotations of an object may hold, keys and values together (256 KiB).
pub(crate) const ANNOTATIONS_LIMIT: usize = 256 * 1024;

const LABEL_KEY_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MESSAGE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// The finalizers a built-in kind may name without a domain.
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// Alphanumerics first and last, alphanumerics, `-`, `_` and `.` between.
fn is_label_part(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// What is wrong with `key` as a label key (a qualified name: an optional DNS subdomain
/// prefix and `/`, then a name of at most 63 characters); empty when nothing is.
pub(crate) fn label_key_problems(key: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let mut problems = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    problems.push("prefix part must be no more than 253 characters".to_string());
                }
                if !is_dns1123_subdomain(prefix) {
                    problems.push(format!("prefix part {DNS1123_SUBDOMAIN_MESSAGE}"));
                }
            }
            name
        }
        _ => {
            return vec![format!(
                "a valid label key {LABEL_KEY_MESSAGE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 characters".to_string());
    }
    if !is_label_part(name) {
        problems.push(format!("name part {LABEL_KEY_MESSAGE}"));
    }
    problems
}

/// What is wrong with `value` as a label value; empty when nothing is.
pub(crate) fn label_value_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > 63 {
        problems.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_label_part(value) {
        problems.push(LABEL_VALUE_MESSAGE.to_string());
    }
    problems
}

fn invalid(field: impl Into<String>, value: &str, message: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {value:?}: {message}"),
    }
}

fn required(field: String) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        field,
        message: "Required value: must not be empty".to_string(),
    }
}

/// The string entries of a map field of `metadata`.
fn string_map<'a>(metadata: &'a Map<String, Value>, field: &str) -> Vec<(&'a str, &'a str)> {
    metadata
        .get(field)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(key, value)| Some((key.as_str(), value.as_str()?)))
        .collect()
}

/// Whether `api_version` is `<group>/<version>` or `<version>`, as `ParseGroupVersion` reads it.
fn is_group_version(api_version: &str) -> bool {
    match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [version] | [_, version] => !version.is_empty(),
        _ => false,
    }
}

/// What is wrong with `metadata`'s labels, annotations, owner references and finalizers, in
/// kube-apiserver's order; `builtin` kinds also refuse a finalizer that is neither standard
/// nor domain-qualified.
pub(crate) fn meta_causes(metadata: &Map<String, Value>, builtin: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (key, value) in string_map(metadata, "labels") {
        for problem in label_key_problems(key) {
            causes.push(invalid("metadata.labels", key, &problem));
        }
        for problem in label_value_problems(value) {
            causes.push(invalid("metadata.labels", value, &problem));
        }
    }
    let annotations = string_map(metadata, "annotations");
    for (key, _) in &annotations {
        for problem in label_key_problems(&key.to_ascii_lowercase()) {
            causes.push(invalid("metadata.annotations", key, &problem));
        }
    }
    let size = annotations.iter().fold(0usize, |total, (key, value)| {
        total.saturating_add(key.len() + value.len())
    });
    if size > ANNOTATIONS_LIMIT {
        causes.push(Cause {
            reason: "FieldValueTooLong",
            field: "metadata.annotations".to_string(),
            message: format!("Too long: may not be more than {ANNOTATIONS_LIMIT} bytes"),
        });
    }
    let owners = metadata.get("ownerReferences").and_then(Value::as_array);
    let mut first_controller: Option<String> = None;
    for (index, owner) in owners.into_iter().flatten().enumerate() {
        let path = |field: &str| format!("metadata.ownerReferences[{index}].{field}");
        let text = |field: &str| owner[field].as_str().unwrap_or_default();
        match text("apiVersion") {
            "" => causes.push(required(path("apiVersion"))),
            version if !is_group_version(version) => causes.push(invalid(
                path("apiVersion"),
                version,
                "must be <group>/<version> or <version>",
            )),
            _ => {}
        }
        for field in ["kind", "name", "uid"] {
            if text(field).is_empty() {
                causes.push(required(path(field)));
            }
        }
        if owner["controller"] == Value::Bool(true) {
            let controller = format!("{}/{}", text("kind"), text("name"));
            match &first_controller {
                None => first_controller = Some(controller),
                // kube-apiserver shows the list as Go prints it; here it is its JSON.
                Some(first) => causes.push(Cause {
                    reason: "FieldValueInvalid",
                    field: "metadata.ownerReferences".to_string(),
                    message: format!(
                        "Invalid value: {}: Only one reference can have Controller set to true. Found \"true\" in references for {first} and {controller}",
                        metadata["ownerReferences"]
                    ),
                }),
            }
        }
    }
    let finalizers = metadata.get("finalizers").and_then(Value::as_array);
    let finalizers: Vec<&str> = finalizers
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for finalizer in &finalizers {
        for problem in label_key_problems(finalizer) {
            causes.push(invalid("metadata.finalizers", finalizer, &problem));
        }
    }
    if builtin {
        for (index, finalizer) in finalizers.iter().enumerate() {
            if !finalizer.contains('/') && !STANDARD_FINALIZERS.contains(finalizer) {
                causes.push(invalid(
                    format!("metadata.finalizers[{index}]"),
                    finalizer,
                    "name is neither a standard finalizer name nor is it fully qualified",
                ));
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_one_owner_reference_may_be_the_controller() {
        let owner = |kind: &str, name: &str, controller: bool| json!({"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": name, "controller": controller});
        let one = json!({"ownerReferences": [owner("ReplicaSet", "a", true), owner("Deployment", "b", false)]});
        assert!(messages(one, true).is_empty());
        let two = json!({"ownerReferences": [owner("ReplicaSet", "a", true), owner("Deployment", "b", true)]});
        let found = messages(two, true);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("metadata.ownerReferences: Invalid value: [{"));
        assert!(found[0].ends_with(
            ": Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/a and Deployment/b"
        ));
    }

    fn messages(metadata: Value, builtin: bool) -> Vec<String> {
        meta_causes(metadata.as_object().unwrap(), builtin)
            .into_iter()
            .map(|cause| format!("{}: {}", cause.field, cause.message))
            .collect()
    }

    #[test]
    fn valid_metadata_has_no_causes() {
        let metadata = json!({
            "labels": {"app": "web", "example.com/tier": "", "a_b.c-d": "X_y.z-1"},
            "annotations": {"Example.com/Note": "anything at all"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u"}],
            "finalizers": ["kubernetes", "example.com/cleanup"],
        });
        assert!(messages(metadata, true).is_empty());
    }

    #[test]
    fn each_problem_is_kubes_cause() {
        let metadata = json!({
            "labels": {"bad key!": "ok", "k": "bad value!"},
            "annotations": {"a/b/c": "v"},
            "ownerReferences": [{"apiVersion": "apps/v1/x", "kind": "", "name": "n", "uid": ""}],
            "finalizers": ["nodomain"],
        });
        assert_eq!(
            messages(metadata, true),
            [
                format!("metadata.labels: Invalid value: \"bad key!\": name part {LABEL_KEY_MESSAGE}"),
                format!("metadata.labels: Invalid value: \"bad value!\": {LABEL_VALUE_MESSAGE}"),
                format!("metadata.annotations: Invalid value: \"a/b/c\": a valid label key {LABEL_KEY_MESSAGE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"),
                "metadata.ownerReferences[0].apiVersion: Invalid value: \"apps/v1/x\": must be <group>/<version> or <version>".to_string(),
                "metadata.ownerReferences[0].kind: Required value: must not be empty".to_string(),
                "metadata.ownerReferences[0].uid: Required value: must not be empty".to_string(),
                "metadata.finalizers[0]: Invalid value: \"nodomain\": name is neither a standard finalizer name nor is it fully qualified".to_string(),
            ]
        );
        // A custom resource may name a finalizer without a domain.
        assert!(messages(json!({"finalizers": ["nodomain"]}), false).is_empty());
    }

    #[test]
    fn annotations_are_limited_in_total() {
        let big = "x".repeat(ANNOTATIONS_LIMIT);
        assert_eq!(
            messages(json!({"annotations": {"a": big}}), false),
            ["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
        let fits = "x".repeat(ANNOTATIONS_LIMIT - 1);
        assert!(messages(json!({"annotations": {"a": fits}}), false).is_empty());
    }
}
