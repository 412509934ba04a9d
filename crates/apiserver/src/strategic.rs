//! Strategic merge patch (`application/strategic-merge-patch+json`) for the built-in kinds, as
//! kubectl's `apply`, `edit`, `label` and `scale` send it.
//!
//! It is a merge patch with two differences. Lists of objects that have a merge key (containers
//! by `name`, container ports by `containerPort`, volume mounts by `mountPath`, conditions by
//! `type`, …) merge element by element on that key instead of being replaced, and
//! `metadata.finalizers` merges as a set. And the patch may carry directives: `$patch: replace`
//! (replace this map, or the whole list when it is a list element), `$patch: delete` (remove this
//! map, or the list element with this key), `$setElementOrder/<list>` (the order of a merged
//! list), `$deleteFromPrimitiveList/<list>` (values to remove from a set-like list) and
//! `$retainKeys` (the keys a map keeps). Lists without a merge key are replaced, as in a merge
//! patch. Custom resources have no patch strategies: kube-apiserver refuses this patch type for
//! them (415), and so does this server.
//!
//! ```
//! use ctrlkit_apiserver::strategic::strategic_merge_patch;
//! use serde_json::json;
//!
//! let mut deployment = json!({"spec": {"template": {"spec": {"containers": [
//!     {"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80}]},
//!     {"name": "sidecar", "image": "envoy:1"},
//! ]}}}});
//! let patch = json!({"spec": {"template": {"spec": {
//!     "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
//!     "containers": [{"name": "web", "image": "nginx:2"}],
//! }}}});
//! strategic_merge_patch(&mut deployment, &patch).unwrap();
//! assert_eq!(deployment["spec"]["template"]["spec"]["containers"], json!([
//!     {"name": "web", "image": "nginx:2", "ports": [{"containerPort": 80}]},
//!     {"name": "sidecar", "image": "envoy:1"},
//! ]));
//! ```

use serde_json::{Map, Value};

use crate::patch::PatchError;

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// Element by element, matched on this field.
    ByKey(&'static str),
    /// As a set of plain values.
    Set,
    /// Replaced whole, as in a merge patch.
    Replace,
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// The patch strategy of the list `field` inside the map at `path` (field names from the root,
/// list positions left out), as the built-in types declare it.
fn list_strategy(path: &[String], field: &str) -> ListStrategy {
    let parent = path.last().map(String::as_str);
    let in_container = parent.is_some_and(|parent| CONTAINER_LISTS.contains(&parent));
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => ListStrategy::ByKey("name"),
        "env" if in_container => ListStrategy::ByKey("name"),
        "ports" if in_container => ListStrategy::ByKey("containerPort"),
        // A Service's ports.
        "ports" if path.len() == 1 && parent == Some("spec") => ListStrategy::ByKey("port"),
        "volumeMounts" if in_container => ListStrategy::ByKey("mountPath"),
        "volumeDevices" if in_container => ListStrategy::ByKey("devicePath"),
        "hostAliases" => ListStrategy::ByKey("ip"),
        "topologySpreadConstraints" => ListStrategy::ByKey("topologyKey"),
        "podIPs" => ListStrategy::ByKey("ip"),
        "conditions" if parent == Some("status") => ListStrategy::ByKey("type"),
        "ownerReferences" if parent == Some("metadata") => ListStrategy::ByKey("uid"),
        "finalizers" if parent == Some("metadata") => ListStrategy::Set,
        _ => ListStrategy::Replace,
    }
}

const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

fn malformed(message: impl Into<String>) -> PatchError {
    PatchError::Malformed(message.into())
}

/// Applies a strategic merge patch to a built-in object.
pub fn strategic_merge_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Object(patch) = patch else {
        return Err(malformed("a strategic merge patch must be a JSON object"));
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(fields) = target else {
        return Ok(());
    };
    if merge_map(fields, patch, &mut Vec::new())? == MapOutcome::Delete {
        *target = Value::Object(Map::new());
    }
    Ok(())
}

/// What merging into a map asked of the map itself.
#[derive(Debug, PartialEq, Eq)]
enum MapOutcome {
    Keep,
    /// `$patch: delete`: the map is to go.
    Delete,
}

fn merge_map(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<MapOutcome, PatchError> {
    match patch.get("$patch").map(|directive| directive.as_str()) {
        None => {}
        Some(Some("replace")) => {
            *target = without_directives(patch);
            return Ok(MapOutcome::Keep);
        }
        Some(Some("delete")) => return Ok(MapOutcome::Delete),
        Some(other) => {
            return Err(malformed(format!(
                "unknown $patch directive {other:?} (replace, delete)"
            )));
        }
    }
    let mut orders: Vec<(&str, &Vec<Value>)> = Vec::new();
    for (key, value) in patch {
        if key == "$patch" || key == "$retainKeys" {
            continue;
        }
        if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) {
            let order = value
                .as_array()
                .ok_or_else(|| malformed(format!("{key} must be a list")))?;
            orders.push((field, order));
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let remove = value
                .as_array()
                .ok_or_else(|| malformed(format!("{key} must be a list")))?;
            if let Some(Value::Array(values)) = target.get_mut(field) {
                values.retain(|value| !remove.contains(value));
            }
            continue;
        }
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(child_patch) => {
                let child = target
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !child.is_object() {
                    *child = Value::Object(Map::new());
                }
                path.push(key.clone());
                let outcome = match child {
                    Value::Object(child) => merge_map(child, child_patch, path)?,
                    _ => MapOutcome::Keep,
                };
                path.pop();
                if outcome == MapOutcome::Delete {
                    target.remove(key);
                }
            }
            Value::Array(items) => {
                let strategy = list_strategy(path, key);
                let current = match target.remove(key) {
                    Some(Value::Array(current)) => current,
                    _ => Vec::new(),
                };
                path.push(key.clone());
                let merged = merge_list(current, items, strategy, path);
                path.pop();
                target.insert(key.clone(), Value::Array(merged?));
            }
            scalar => {
                target.insert(key.clone(), scalar.clone());
            }
        }
    }
    for (field, order) in orders {
        if let (Some(Value::Array(items)), ListStrategy::ByKey(merge_key)) =
            (target.get_mut(field), list_strategy(path, field))
        {
            reorder(items, order, merge_key);
        }
    }
    if let Some(retain) = patch.get("$retainKeys") {
        let retain = retain
            .as_array()
            .ok_or_else(|| malformed("$retainKeys must be a list"))?;
        target.retain(|key, _| retain.iter().any(|kept| kept == key));
    }
    Ok(MapOutcome::Keep)
}

fn merge_list(
    mut current: Vec<Value>,
    patch: &[Value],
    strategy: ListStrategy,
    path: &mut Vec<String>,
) -> Result<Vec<Value>, PatchError> {
    let replace_all = patch
        .iter()
        .any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace"));
    if replace_all || strategy == ListStrategy::Replace {
        return Ok(patch
            .iter()
            .filter(|item| !(replace_all && item.get("$patch").is_some()))
            .map(strip)
            .collect());
    }
    let merge_key = match strategy {
        ListStrategy::Set => {
            for item in patch {
                if !current.contains(item) {
                    current.push(item.clone());
                }
            }
            return Ok(current);
        }
        ListStrategy::ByKey(merge_key) => merge_key,
        ListStrategy::Replace => return Ok(patch.to_vec()),
    };
    for item in patch {
        let Value::Object(item_patch) = item else {
            if !current.contains(item) {
                current.push(item.clone());
            }
            continue;
        };
        let key_value = item_patch.get(merge_key).ok_or_else(|| {
            malformed(format!(
                "an element of {} has no merge key {merge_key:?}",
                path.join(".")
            ))
        })?;
        let position = current
            .iter()
            .position(|existing| existing.get(merge_key) == Some(key_value));
        if item_patch.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(position) = position {
                current.remove(position);
            }
            continue;
        }
        match position {
            Some(position) => {
                if let Value::Object(existing) = &mut current[position]
                    && merge_map(existing, item_patch, path)? == MapOutcome::Delete
                {
                    current.remove(position);
                }
            }
            None => current.push(Value::Object(without_directives(item_patch))),
        }
    }
    Ok(current)
}

/// Puts the elements named in `order` (by merge key) in that order, ahead of the others, which
/// keep their own order.
fn reorder(items: &mut [Value], order: &[Value], merge_key: &str) {
    let rank = |item: &Value| {
        order
            .iter()
            .position(|entry| entry.get(merge_key) == item.get(merge_key))
            .unwrap_or(usize::MAX)
    };
    items.sort_by_key(rank);
}

/// A patch value with its directives removed, to be stored as it is.
fn strip(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(without_directives(map)),
        Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
        other => other.clone(),
    }
}

fn without_directives(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .filter(|(key, _)| !key.starts_with('$'))
        .map(|(key, value)| (key.clone(), strip(value)))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn patched(target: Value, patch: Value) -> Value {
        let mut target = target;
        strategic_merge_patch(&mut target, &patch).unwrap();
        target
    }

    #[test]
    fn kubectl_apply_changing_an_image_keeps_the_rest_of_the_container() {
        // The patch `kubectl apply` sends after a container's image changed in the file.
        let pod_spec = json!({"spec": {"containers": [
            {"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80, "protocol": "TCP"}],
             "env": [{"name": "A", "value": "1"}]},
        ]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "web"}],
            "containers": [{"image": "nginx:2", "name": "web"}],
        }});
        assert_eq!(
            patched(pod_spec, patch),
            json!({"spec": {"containers": [
                {"name": "web", "image": "nginx:2", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                 "env": [{"name": "A", "value": "1"}]},
            ]}})
        );
    }

    #[test]
    fn nested_lists_merge_on_their_own_keys() {
        let target = json!({"spec": {"containers": [{"name": "web",
            "ports": [{"containerPort": 80}],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "volumeMounts": [{"mountPath": "/data", "name": "data"}]}]}});
        let patch = json!({"spec": {"containers": [{"name": "web",
            "ports": [{"containerPort": 443, "name": "https"}],
            "env": [{"name": "B", "value": "3"}, {"name": "A", "$patch": "delete"}],
            "volumeMounts": [{"mountPath": "/data", "readOnly": true}]}]}});
        assert_eq!(
            patched(target, patch),
            json!({"spec": {"containers": [{"name": "web",
                "ports": [{"containerPort": 80}, {"containerPort": 443, "name": "https"}],
                "env": [{"name": "B", "value": "3"}],
                "volumeMounts": [{"mountPath": "/data", "name": "data", "readOnly": true}]}]}})
        );
    }

    #[test]
    fn set_element_order_reorders_the_merged_list() {
        let target = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "b"}, {"name": "a"}],
            "containers": [{"name": "c", "image": "x"}],
        }});
        assert_eq!(
            patched(target, patch)["spec"]["containers"],
            json!([{"name": "c", "image": "x"}, {"name": "b"}, {"name": "a"}])
        );
    }

    #[test]
    fn finalizers_merge_as_a_set_and_primitive_deletions_apply() {
        let target = json!({"metadata": {"finalizers": ["a", "b"]}});
        let added = patched(
            target.clone(),
            json!({"metadata": {"finalizers": ["b", "c"]}}),
        );
        assert_eq!(added["metadata"]["finalizers"], json!(["a", "b", "c"]));
        let removed = patched(
            target,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
        );
        assert_eq!(removed["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn replace_and_delete_directives() {
        let target = json!({"spec": {"selector": {"a": "1", "b": "2"},
            "containers": [{"name": "a"}, {"name": "b"}], "extra": {"x": 1}}});
        let patch = json!({"spec": {
            "selector": {"$patch": "replace", "c": "3"},
            "containers": [{"$patch": "replace"}, {"name": "z"}],
            "extra": {"$patch": "delete"},
        }});
        assert_eq!(
            patched(target, patch),
            json!({"spec": {"selector": {"c": "3"}, "containers": [{"name": "z"}]}})
        );
    }

    #[test]
    fn lists_without_a_strategy_are_replaced_and_maps_merge() {
        let target = json!({"metadata": {"labels": {"a": "1", "b": "2"}},
            "spec": {"containers": [{"name": "a", "args": ["x", "y"]}], "tolerations": [{"key": "k"}]}});
        let patch = json!({"metadata": {"labels": {"b": null, "c": "3"}},
            "spec": {"containers": [{"name": "a", "args": ["z"]}], "tolerations": []}});
        assert_eq!(
            patched(target, patch),
            json!({"metadata": {"labels": {"a": "1", "c": "3"}},
                "spec": {"containers": [{"name": "a", "args": ["z"]}], "tolerations": []}})
        );
    }

    #[test]
    fn retain_keys_drops_the_others() {
        let target = json!({"spec": {"strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1}}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        assert_eq!(
            patched(target, patch),
            json!({"spec": {"strategy": {"type": "Recreate"}}})
        );
    }

    #[test]
    fn service_ports_and_conditions_merge_on_their_keys() {
        let service = json!({"spec": {"ports": [{"port": 80, "name": "http"}]}});
        let merged = patched(
            service,
            json!({"spec": {"ports": [{"port": 443, "name": "https"}]}}),
        );
        assert_eq!(merged["spec"]["ports"].as_array().unwrap().len(), 2);
        let status = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        let merged = patched(
            status,
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        assert_eq!(
            merged["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}])
        );
    }

    #[test]
    fn every_built_in_resource_takes_it_and_a_custom_one_does_not() {
        let builtins = crate::resource::builtin_resources();
        assert!(
            builtins
                .iter()
                .all(crate::resource::ResourceKind::is_builtin)
        );
        let mut custom = builtins[0].clone();
        custom.group = "samplecontroller.k8s.io".into();
        custom.builtin = None;
        assert!(!custom.is_builtin());
    }

    #[test]
    fn bad_patches_are_typed_errors() {
        let mut target = json!({"spec": {"containers": [{"name": "a"}]}});
        for patch in [
            json!(5),
            json!({"spec": {"$patch": "merge-please"}}),
            json!({"spec": {"containers": [{"image": "no-name"}]}}),
            json!({"spec": {"$setElementOrder/containers": "x"}}),
            json!({"spec": {"$retainKeys": 1}}),
        ] {
            assert!(
                matches!(
                    strategic_merge_patch(&mut target, &patch),
                    Err(PatchError::Malformed(_))
                ),
                "{patch}"
            );
        }
    }
}
