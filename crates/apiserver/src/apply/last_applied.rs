//! The bridge from client-side to server-side apply, for the manager `kubectl` only (what
//! `kubectl apply --server-side` is by default), as kube-apiserver has it:
//!
//! - fields client-side `kubectl apply` last set (its `last-applied-configuration`
//!   annotation) and nobody changed since are taken without a conflict;
//! - after an apply, an object that has the annotation gets it rewritten to the applied
//!   configuration, so that a later client-side apply sees what was applied last. An object
//!   without it never gets one.

use std::collections::BTreeMap;

use serde_json::Value;

use super::managed_fields::go_escape_html;
use super::schema::Type;
use super::set::Set;
use super::typed;
use super::validate::checked_field_set;

/// The manager the bridge is for.
pub const KUBECTL: &str = "kubectl";

/// The annotation client-side apply keeps.
pub const ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The most all annotations of an object may hold, in bytes (keys and values).
const ANNOTATIONS_LIMIT: usize = 256 * 1024;

/// The fields of `live`'s last client-side apply that still have the value it applied; `None`
/// when there is no usable annotation (missing, not JSON, of another version, not of the type).
pub fn allowed_conflicts(live: &Value, ty: &Type, api_version: &str) -> Option<Set> {
    let text = live["metadata"]["annotations"][ANNOTATION].as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    if last["apiVersion"].as_str() != Some(api_version) {
        return None;
    }
    let set = checked_field_set(&last, ty).ok()?;
    let changed = typed::compare(Some(&last), Some(live), ty).ok()?;
    Some(
        set.difference(&changed.modified)
            .difference(&changed.added)
            .difference(&changed.removed),
    )
}

/// The conflicts that remain once those in `allowed` are let go; all of them without it.
pub fn refused(conflicts: &BTreeMap<String, Set>, allowed: Option<&Set>) -> BTreeMap<String, Set> {
    let Some(allowed) = allowed else {
        return conflicts.clone();
    };
    conflicts
        .iter()
        .map(|(manager, set)| (manager.clone(), set.difference(allowed)))
        .filter(|(_, set)| !set.is_empty())
        .collect()
}

/// Rewrites `object`'s annotation (when it has one) to `config` (without the annotation), as
/// Go's JSON encoder writes it; removes it instead if the annotations would grow too large.
pub fn follow(object: &mut Value, mut config: Value) {
    let has_annotation = object["metadata"]["annotations"][ANNOTATION]
        .as_str()
        .is_some_and(|text| !text.is_empty());
    if !has_annotation {
        return;
    }
    if let Some(annotations) = config
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(ANNOTATION);
    }
    let text = go_escape_html(&config.to_string()) + "\n";
    let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let others: usize = annotations
        .iter()
        .filter(|(key, _)| key.as_str() != ANNOTATION)
        .map(|(key, value)| key.len() + value.as_str().map_or(0, str::len))
        .sum();
    if others + ANNOTATION.len() + text.len() > ANNOTATIONS_LIMIT {
        annotations.remove(ANNOTATION);
    } else {
        annotations.insert(ANNOTATION.into(), Value::String(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_annotation_follows_the_applied_configuration_only_where_it_exists() {
        let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {ANNOTATION: "old", "a": "<b>"}},
            "data": {"k": "v"}});
        let mut with = json!({"metadata": {"annotations": {ANNOTATION: "{}"}}});
        follow(&mut with, config.clone());
        assert_eq!(
            with["metadata"]["annotations"][ANNOTATION],
            "{\"apiVersion\":\"v1\",\"data\":{\"k\":\"v\"},\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":{\"a\":\"\\u003cb\\u003e\"},\"name\":\"c\"}}\n"
        );
        let mut without = json!({"metadata": {"name": "c"}});
        follow(&mut without, config);
        assert_eq!(without, json!({"metadata": {"name": "c"}}));
    }

    #[test]
    fn only_fields_unchanged_since_the_last_client_side_apply_are_allowed() {
        let ty = Type::of_kind_message("io.k8s.api.core.v1.ConfigMap").unwrap();
        let last = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"same": "1", "changed": "1"}});
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {ANNOTATION: last.to_string()}},
            "data": {"same": "1", "changed": "2"}});
        let allowed = allowed_conflicts(&live, &ty, "v1").unwrap();
        let paths: Vec<String> = allowed
            .paths()
            .iter()
            .map(|path| super::super::path::path_text(path))
            .collect();
        assert!(paths.contains(&".data.same".to_string()), "{paths:?}");
        assert!(!paths.contains(&".data.changed".to_string()), "{paths:?}");
        assert!(allowed_conflicts(&live, &ty, "v2").is_none());
    }
}
