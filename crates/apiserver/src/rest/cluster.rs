//! What every cluster has before anyone writes to it, and what its controllers add to each
//! namespace: the `default/kubernetes` Service, the system PriorityClasses and bootstrap RBAC
//! roles kube-apiserver creates at start, and the `default` ServiceAccount and
//! `kube-root-ca.crt` ConfigMap kube-controller-manager puts in every namespace (here at once,
//! with the namespace, so a Pod can be created in a namespace as soon as it exists).
//!
//! Each object is made only where it is missing, so a server restarted on its data directory
//! keeps what it has, and puts back what was deleted, as kube-apiserver does for its own.

use serde_json::{Value, json};

use super::App;
use crate::kinds::strategy::KUBERNETES_SERVICE_IP;
use crate::kinds::typed::UnknownFields;
use crate::resource::ResourceKind;
use crate::storage::StoreError;

/// Creates what a cluster starts with, where it is missing.
pub(crate) fn bootstrap(app: &App) {
    if let Some(namespaces) = app.registry.find("", "v1", "namespaces") {
        let stored = app.store.list_latest(&namespaces, None);
        for namespace in stored {
            if namespace["metadata"].get("deletionTimestamp").is_none()
                && let Some(name) = namespace["metadata"]["name"].as_str()
            {
                populate_namespace(app, name);
            }
        }
    }
    create_missing(
        app,
        "",
        "services",
        "default",
        json!({
            "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {
                "clusterIP": KUBERNETES_SERVICE_IP,
                "clusterIPs": [KUBERNETES_SERVICE_IP],
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                "sessionAffinity": "None",
                "type": "ClusterIP",
                "ipFamilies": ["IPv4"],
                "ipFamilyPolicy": "SingleStack",
                "internalTrafficPolicy": "Cluster",
            },
            "status": {"loadBalancer": {}},
        }),
    );
    for (name, value, description) in [
        (
            "system-node-critical",
            2_000_001_000,
            "Used for system critical pods that must not be moved from their current node.",
        ),
        (
            "system-cluster-critical",
            2_000_000_000,
            "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
        ),
    ] {
        create_missing(
            app,
            "scheduling.k8s.io",
            "priorityclasses",
            "",
            json!({
                "metadata": {"name": name},
                "value": value,
                "description": description,
                "preemptionPolicy": "PreemptLowerPriority",
            }),
        );
    }
    // What `kubectl get componentstatuses` reports of the control plane.
    for name in ["scheduler", "controller-manager", "etcd-0"] {
        create_missing(
            app,
            "",
            "componentstatuses",
            "",
            json!({
                "metadata": {"name": name},
                "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}],
            }),
        );
    }
    let bootstrapping = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let autoupdate = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    create_missing(
        app,
        "rbac.authorization.k8s.io",
        "clusterroles",
        "",
        json!({
            "metadata": {"name": "cluster-admin", "labels": bootstrapping, "annotations": autoupdate},
            "rules": [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        }),
    );
    for (name, aggregate_from) in [
        ("admin", "rbac.authorization.k8s.io/aggregate-to-admin"),
        ("edit", "rbac.authorization.k8s.io/aggregate-to-edit"),
        ("view", "rbac.authorization.k8s.io/aggregate-to-view"),
    ] {
        create_missing(
            app,
            "rbac.authorization.k8s.io",
            "clusterroles",
            "",
            json!({
                "metadata": {"name": name, "labels": bootstrapping, "annotations": autoupdate},
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {aggregate_from: "true"}}]},
            }),
        );
    }
    create_missing(
        app,
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        "",
        json!({
            "metadata": {"name": "cluster-admin", "labels": bootstrapping, "annotations": autoupdate},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}],
        }),
    );
}

/// What kube-controller-manager adds to a namespace: its `default` ServiceAccount and the
/// `kube-root-ca.crt` ConfigMap.
pub(crate) fn populate_namespace(app: &App, namespace: &str) {
    create_missing(
        app,
        "",
        "serviceaccounts",
        namespace,
        json!({"metadata": {"name": "default"}}),
    );
    create_missing(
        app,
        "",
        "configmaps",
        namespace,
        json!({
            "metadata": {
                "name": "kube-root-ca.crt",
                "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."},
            },
            "data": {"ca.crt": ""},
        }),
    );
}

/// Creates `object` of the resource `plural` of `group` unless an object of its name exists,
/// with the defaults of its type.
fn create_missing(app: &App, group: &str, plural: &str, namespace: &str, object: Value) {
    let Some(kind) = find(app, group, plural) else {
        return;
    };
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    match app.store.get_latest(&kind, namespace, &name) {
        Err(StoreError::NotFound { .. }) => {}
        _ => return,
    }
    let mut object = object;
    if let Some(builtin) = kind.builtin {
        // An object that does not decode is left as it was.
        let _ = builtin.decode(&mut object, UnknownFields::Drop);
    }
    match app.store.create(&kind, namespace, object) {
        Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
        Err(error) => {
            tracing::warn!(%error, plural, namespace, name, "could not create a bootstrap object");
        }
    }
}

fn find(app: &App, group: &str, plural: &str) -> Option<ResourceKind> {
    app.registry.find_in_group(group, plural)
}
