//! A new Pod: its service account (and the token volume the ServiceAccount admission plugin
//! mounts), its priority and default tolerations, and its initial status (`Pending` with its QoS
//! class), as a cluster's admission plugins and the Pod strategy set them.

use serde_json::{Map, Value, json};

use super::{Context, map_at};
use crate::resource::builtin_resource;
use crate::rest::status::ApiError;
use crate::storage::StoreError;

/// Where the ServiceAccount admission plugin mounts the token volume.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

pub(super) fn prepare_for_create(
    namespace: &str,
    pod: &mut Value,
    context: &Context<'_>,
) -> Result<(), ApiError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
    let Some(spec) = map_at(pod, "spec") else {
        return Ok(());
    };
    let account = ["serviceAccountName", "serviceAccount"]
        .iter()
        .find_map(|field| {
            spec.get(*field)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        })
        .unwrap_or("default")
        .to_string();
    spec.insert("serviceAccountName".into(), json!(account));
    spec.insert("serviceAccount".into(), json!(account));
    let accounts = builtin_resource("", "serviceaccounts");
    let found = match accounts {
        Some(accounts) => match context.store.get_latest(&accounts, namespace, &account) {
            Ok(found) => Some(found),
            Err(StoreError::NotFound { .. }) => None,
            Err(error) => return Err(ApiError::from_store(&error, None)),
        },
        None => None,
    };
    let Some(found) = found else {
        return Err(ApiError::forbidden(
            "pods",
            "",
            &name,
            format!(
                "error looking up service account {namespace}/{account}: serviceaccount \"{account}\" not found"
            ),
        ));
    };
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| found["automountServiceAccountToken"].as_bool())
        .unwrap_or(true);
    if automount {
        mount_token(spec);
    }
    if spec.get("priorityClassName").is_none_or(Value::is_null) {
        spec.entry("priority").or_insert(json!(0));
    }
    spec.entry("preemptionPolicy")
        .or_insert(json!("PreemptLowerPriority"));
    default_tolerations(spec);
    let qos = qos_class(spec);
    if let Some(status) = map_at(pod, "status") {
        status.clear();
        status.insert("phase".into(), json!("Pending"));
        status.insert("qosClass".into(), json!(qos));
    }
    Ok(())
}

/// The projected volume of the service account's token, the cluster's CA and the namespace,
/// mounted in every container, unless a container already mounts something there.
fn mount_token(spec: &mut Map<String, Value>) {
    let containers = ["containers", "initContainers"];
    let mounted = containers.iter().any(|list| {
        spec.get(*list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .flat_map(|container| container["volumeMounts"].as_array().into_iter().flatten())
            .any(|mount| mount["mountPath"] == TOKEN_MOUNT_PATH)
    });
    if mounted {
        return;
    }
    let volume_name = format!("kube-api-access-{}", crate::storage::random_suffix());
    let volume = json!({
        "name": volume_name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    });
    if let Value::Array(volumes) = spec.entry("volumes").or_insert_with(|| json!([])) {
        volumes.push(volume);
    }
    let mount = json!({"name": volume_name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    for list in containers {
        let Some(Value::Array(items)) = spec.get_mut(list) else {
            continue;
        };
        for container in items.iter_mut().filter_map(Value::as_object_mut) {
            if let Value::Array(mounts) =
                container.entry("volumeMounts").or_insert_with(|| json!([]))
            {
                mounts.push(mount.clone());
            }
        }
    }
}

/// An updated Pod: the DefaultTolerationSeconds admission plugin runs on updates too, so a write
/// that replaces the tolerations (an apply's list is atomic) gets the default ones back.
pub(super) fn prepare_for_update(pod: &mut Value) {
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        default_tolerations(spec);
    }
}

/// The DefaultTolerationSeconds admission plugin (on create and update): five minutes of
/// tolerating a node that is not ready or unreachable, unless the pod says otherwise.
fn default_tolerations(spec: &mut Map<String, Value>) {
    let Value::Array(tolerations) = spec.entry("tolerations").or_insert_with(|| json!([])) else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|toleration| {
            (toleration["key"] == key || toleration["key"].is_null())
                && (toleration["effect"] == "NoExecute" || toleration["effect"].is_null())
        });
        if !tolerated {
            tolerations.push(json!({
                "key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300,
            }));
        }
    }
}

/// The pod's quality of service: `Guaranteed` when every container's CPU and memory limits are
/// set and equal to its requests, `BestEffort` when no container asks for either, else
/// `Burstable`.
fn qos_class(spec: &Map<String, Value>) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|list| {
            spec.get(*list)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for container in containers {
        let resources = &container["resources"];
        for resource in ["cpu", "memory"] {
            let request = &resources["requests"][resource];
            let limit = &resources["limits"][resource];
            any |= !request.is_null() || !limit.is_null();
            guaranteed &= !limit.is_null() && (request.is_null() || request == limit);
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_classes() {
        let spec = |resources: Value| -> Map<String, Value> {
            json!({"containers": [{"name": "c", "resources": resources}]})
                .as_object()
                .cloned()
                .unwrap()
        };
        assert_eq!(qos_class(&spec(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&spec(json!({"requests": {"cpu": "1"}}))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&spec(json!({"limits": {"cpu": "1", "memory": "1Gi"},
                                   "requests": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
    }

    #[test]
    fn tolerations_are_added_once() {
        let mut spec = json!({"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]})
            .as_object()
            .cloned()
            .unwrap();
        default_tolerations(&mut spec);
        let tolerations = spec["tolerations"].as_array().unwrap();
        assert_eq!(tolerations.len(), 2);
        assert_eq!(tolerations[1]["key"], "node.kubernetes.io/not-ready");
    }
}
