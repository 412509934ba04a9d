//! The embedded API server driven by kube-client, as a controller would use it.

use std::collections::BTreeMap;

use crate::support;

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::{Client, Config};
use serde_json::json;
use support::api_error;

async fn server() -> (ApiServer, Client) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let config = Config::new(server.url().parse().unwrap());
    let client = Client::try_from(config).unwrap();
    (server, client)
}

fn configmap(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("key".to_string(), "value".to_string())])),
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn configmap_lifecycle() {
    let (_server, client) = server().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some("test".into()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "test");

    let created = api
        .create(&PostParams::default(), &configmap("a", &[("app", "web")]))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    api.create(&PostParams::default(), &configmap("b", &[("app", "db")]))
        .await
        .unwrap();

    let exists = api_error(
        api.create(&PostParams::default(), &configmap("a", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (exists.code, exists.reason.as_str()),
        (409, "AlreadyExists")
    );
    assert_eq!(exists.message, "configmaps \"a\" already exists");

    let fetched = api.get("a").await.unwrap();
    assert_eq!(fetched.data.unwrap()["key"], "value");

    let web = api
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(web.items.len(), 1);
    let all = api.list(&ListParams::default()).await.unwrap();
    // The two, and the cluster's `kube-root-ca.crt` every namespace has.
    assert_eq!(all.items.len(), 3);
    assert!(all.metadata.resource_version.is_some());

    // Update with the current version, then again with the stale one.
    let mut changed = created.clone();
    changed.data = Some(BTreeMap::from([("key".to_string(), "new".to_string())]));
    let updated = api
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    let conflict = api_error(
        api.replace("a", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        conflict.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );

    let merged = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"patched": "yes"}}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.metadata.labels.unwrap()["patched"], "yes");
    let json_patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(
                    json!([{"op": "replace", "path": "/data/key", "value": "j"}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(json_patched.data.unwrap()["key"], "j");

    api.delete("a", &DeleteParams::default()).await.unwrap();
    let gone = api_error(api.get("a").await.unwrap_err());
    assert_eq!((gone.code, gone.reason.as_str()), (404, "NotFound"));
    assert_eq!(gone.message, "configmaps \"a\" not found");

    let missing_namespace: Api<ConfigMap> = Api::namespaced(client, "nope");
    let refused = api_error(
        missing_namespace
            .create(&PostParams::default(), &configmap("x", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (refused.code, refused.message.as_str()),
        (404, "namespaces \"nope\" not found")
    );
}

#[tokio::test]
async fn watch_streams_every_change_in_order() {
    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &configmap("before", &[]))
        .await
        .unwrap();
    let mut events = api
        .watch(&WatchParams::default().timeout(10), "0")
        .await
        .unwrap()
        .boxed();
    // From "0": a synthetic ADDED for what exists (with the cluster's `kube-root-ca.crt`).
    for expected in ["before", "kube-root-ca.crt"] {
        match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some(expected)),
            other => panic!("unexpected {other:?}"),
        }
    }
    let created = api
        .create(&PostParams::default(), &configmap("after", &[]))
        .await
        .unwrap();
    api.delete("after", &DeleteParams::default()).await.unwrap();
    match events.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(cm) => {
            assert_eq!(
                cm.metadata.resource_version,
                created.metadata.resource_version
            )
        }
        other => panic!("unexpected {other:?}"),
    }
    match events.try_next().await.unwrap().unwrap() {
        WatchEvent::Deleted(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("after")),
        other => panic!("unexpected {other:?}"),
    }

    // From a resourceVersion: exactly the later events.
    let from = created.metadata.resource_version.unwrap();
    let mut resumed = api
        .watch(&WatchParams::default().timeout(10), &from)
        .await
        .unwrap()
        .boxed();
    match resumed.try_next().await.unwrap().unwrap() {
        WatchEvent::Deleted(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("after")),
        other => panic!("unexpected {other:?}"),
    }
}

/// A watch resumed over a backlog gets its events in batches; with a label selector, changes
/// that move an object into or out of the selection are sent as `ADDED` and `DELETED` among
/// the stored events, in order, and objects outside it are left out.
#[tokio::test]
async fn a_selected_watch_over_a_backlog_gets_every_event_in_order() {
    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let start = api
        .create(&PostParams::default(), &configmap("start", &[]))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let label = |name: &str, app: &str| {
        let patch = json!({"metadata": {"labels": {"app": app, "changed": "yes"}}});
        let api = api.clone();
        let name = name.to_string();
        async move {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    };
    // Enough events, a few KiB each, to fill more than one batch.
    let big = "x".repeat(3000);
    let mut expected = Vec::new();
    for i in 0..60 {
        let name = format!("cm-{i:02}");
        let mut cm = configmap(&name, &[("app", if i % 3 == 0 { "other" } else { "web" })]);
        cm.data = Some(BTreeMap::from([("big".to_string(), big.clone())]));
        api.create(&PostParams::default(), &cm).await.unwrap();
        match i % 3 {
            // Created outside the selection, then moved into it.
            0 => {
                label(&name, "web").await;
                expected.push(("ADDED", name));
            }
            // Created inside, then moved out of it.
            1 => {
                expected.push(("ADDED", name.clone()));
                label(&name, "other").await;
                expected.push(("DELETED", name));
            }
            // Created inside, changed inside it, deleted.
            _ => {
                expected.push(("ADDED", name.clone()));
                label(&name, "web").await;
                expected.push(("MODIFIED", name.clone()));
                api.delete(&name, &DeleteParams::default()).await.unwrap();
                expected.push(("DELETED", name));
            }
        }
    }
    let mut events = api
        .watch(
            &WatchParams::default().labels("app=web").timeout(10),
            &start,
        )
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    while seen.len() < expected.len() {
        let (kind, cm) = match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(cm) => ("ADDED", cm),
            WatchEvent::Modified(cm) => ("MODIFIED", cm),
            WatchEvent::Deleted(cm) => ("DELETED", cm),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(cm.data.unwrap()["big"].len(), 3000);
        seen.push((kind, cm.metadata.name.unwrap()));
    }
    let expected: Vec<(&str, String)> = expected;
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn an_expired_resource_version_gets_a_410_error_event() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &configmap(name, &[]))
            .await
            .unwrap();
    }
    server.store().compact(server.store().resource_version());
    let mut events = api
        .watch(&WatchParams::default(), "2")
        .await
        .unwrap()
        .boxed();
    match events.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(status.message.starts_with("too old resource version: 2"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(events.next().await.is_none());
}

#[tokio::test]
async fn leases_take_part_in_optimistic_concurrency() {
    let (_server, client) = server().await;
    let api: Api<Lease> = Api::namespaced(client, "default");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                 "renewTime": "2026-11-21T10:00:00.000000Z"},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &lease).await.unwrap();
    assert_eq!(
        created.spec.as_ref().unwrap().holder_identity.as_deref(),
        Some("a")
    );
    let mut takeover = created.clone();
    takeover.spec.as_mut().unwrap().holder_identity = Some("b".into());
    api.replace("leader", &PostParams::default(), &takeover)
        .await
        .unwrap();
    // A second candidate racing with the same old version loses.
    let lost = api_error(
        api.replace("leader", &PostParams::default(), &takeover)
            .await
            .unwrap_err(),
    );
    assert_eq!(lost.code, 409);
}

#[tokio::test]
async fn deployments_track_generation_and_status_separately() {
    let (_server, client) = server().await;
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
    }))
    .unwrap();
    let created = api
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let scaled = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));
    let with_status = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"availableReplicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(with_status.status.unwrap().available_replicas, Some(3));
    assert_eq!(with_status.metadata.generation, Some(2));
}

#[tokio::test]
async fn discovery_answers_kube_clients() {
    let (_server, client) = server().await;
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
    let core = client.list_core_api_resources("v1").await.unwrap();
    assert!(
        core.resources
            .iter()
            .any(|r| r.name == "configmaps" && r.namespaced)
    );
    assert!(core.resources.iter().any(|r| r.name == "pods/status"));
    let groups = client.list_api_groups().await.unwrap();
    assert!(
        groups
            .groups
            .iter()
            .any(|g| g.name == "coordination.k8s.io")
    );
    let apps = client.list_api_group_resources("apps/v1").await.unwrap();
    assert!(apps.resources.iter().any(|r| r.name == "deployments"));
}

#[tokio::test(start_paused = true)]
async fn a_custom_resource_is_served_once_its_crd_exists() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

    let (_server, client) = support::in_process().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "foos.samplecontroller.k8s.io", "annotations": {"api-approved.kubernetes.io": "unapproved, experimental-only"}},
        "spec": {
            "group": "samplecontroller.k8s.io",
            "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "shortNames": ["fo"]},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}},
            }],
        },
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let established = crds.get("foos.samplecontroller.k8s.io").await.unwrap();
    let conditions = established.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let resources = client
        .list_api_group_resources("samplecontroller.k8s.io/v1alpha1")
        .await
        .unwrap();
    assert!(resources.resources.iter().any(|r| r.name == "foos/status"));

    let gvk = GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo");
    let foos: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk(&gvk));
    let foo: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": "example"},
        "spec": {"deploymentName": "example", "replicas": 1},
    }))
    .unwrap();
    let created = foos.create(&PostParams::default(), &foo).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let with_status = foos
        .patch_status(
            "example",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"availableReplicas": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(with_status.data["status"]["availableReplicas"], 1);
    assert_eq!(
        foos.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    // An update without a resourceVersion is refused for custom resources.
    let mut unversioned = with_status.clone();
    unversioned.metadata.resource_version = None;
    let refused = api_error(
        foos.replace("example", &PostParams::default(), &unversioned)
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 422);

    // As kube-apiserver, the delete only marks the CRD; its custom resources go first, then it.
    let terminating = crds
        .delete("foos.samplecontroller.k8s.io", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the CRD is marked, not gone at once");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(
        terminating.metadata.finalizers,
        Some(vec![
            "customresourcecleanup.apiextensions.k8s.io".to_string()
        ])
    );
    for _ in 0..100 {
        if crds
            .get_opt("foos.samplecontroller.k8s.io")
            .await
            .unwrap()
            .is_none()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        crds.get_opt("foos.samplecontroller.k8s.io")
            .await
            .unwrap()
            .is_none()
    );
    let gone = api_error(foos.get("example").await.unwrap_err());
    assert_eq!(gone.code, 404);
}

#[tokio::test(start_paused = true)]
async fn deleting_a_namespace_terminates_it_empties_it_then_removes_it() {
    let (_server, client) = support::in_process().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap();
    let created = namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Active"));
    assert_eq!(
        created.spec.unwrap().finalizers,
        Some(vec!["kubernetes".to_string()])
    );

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    configmaps
        .create(&PostParams::default(), &configmap("plain", &[]))
        .await
        .unwrap();
    let mut held = configmap("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    configmaps
        .create(&PostParams::default(), &held)
        .await
        .unwrap();

    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = namespaces.get("doomed").await.unwrap();
    assert_eq!(
        terminating.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    let refused = api_error(
        configmaps
            .create(&PostParams::default(), &configmap("late", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));

    // The contents go; the one held by a finalizer stays, marked, and holds the namespace.
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(20));
    let mut plain_gone = false;
    for _ in 0..100 {
        if configmaps.get("plain").await.is_err() {
            plain_gone = true;
            break;
        }
        pause().await;
    }
    assert!(plain_gone);
    let marked = configmaps.get("held").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        namespaces.get("doomed").await.is_ok(),
        "held by the finalizer"
    );

    // Release it: the namespace finishes and disappears.
    configmaps
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    let mut namespace_gone = false;
    for _ in 0..100 {
        if namespaces.get("doomed").await.is_err() {
            namespace_gone = true;
            break;
        }
        pause().await;
    }
    assert!(namespace_gone);
}

/// Polls `check` every 20 ms for up to 2 s.
async fn eventually(mut check: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..100 {
        if check().await {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    false
}

fn owned_by(name: &str, owner: &ConfigMap, finalizer: Option<&str>) -> ConfigMap {
    let mut dependent = configmap(name, &[]);
    dependent.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: owner.metadata.name.clone().unwrap(),
            uid: owner.metadata.uid.clone().unwrap(),
            block_owner_deletion: Some(true),
            ..Default::default()
        },
    ]);
    dependent.metadata.finalizers = finalizer.map(|f| vec![f.to_string()]);
    dependent
}

#[tokio::test(start_paused = true)]
async fn the_garbage_collector_honours_each_propagation_policy() {
    let (_server, client) = support::in_process().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();

    // Background (the default): the owner goes at once, its dependents (and theirs) after.
    let owner = api.create(&pp, &configmap("bg-owner", &[])).await.unwrap();
    let child = api
        .create(&pp, &owned_by("bg-child", &owner, None))
        .await
        .unwrap();
    api.create(&pp, &owned_by("bg-grandchild", &child, None))
        .await
        .unwrap();
    api.delete("bg-owner", &DeleteParams::default())
        .await
        .unwrap();
    assert!(eventually(async || api.get("bg-grandchild").await.is_err()).await);
    assert!(api.get("bg-child").await.is_err());

    // Foreground: the owner waits, marked, until its dependents are gone.
    let owner = api.create(&pp, &configmap("fg-owner", &[])).await.unwrap();
    api.create(&pp, &owned_by("fg-child", &owner, Some("example.com/hold")))
        .await
        .unwrap();
    api.delete("fg-owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let waiting = api.get("fg-owner").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(
        waiting
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    assert!(
        eventually(async || api
            .get("fg-child")
            .await
            .is_ok_and(|child| child.metadata.deletion_timestamp.is_some()))
        .await
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        api.get("fg-owner").await.is_ok(),
        "held while its dependent finalizes"
    );
    api.patch(
        "fg-child",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(eventually(async || api.get("fg-owner").await.is_err()).await);

    // Orphan: the dependents stay, their references to the owner removed.
    let owner = api.create(&pp, &configmap("or-owner", &[])).await.unwrap();
    api.create(&pp, &owned_by("or-child", &owner, None))
        .await
        .unwrap();
    api.delete("or-owner", &DeleteParams::orphan())
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let orphan = api.get("or-child").await.unwrap();
    assert!(
        orphan
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
}

/// A paged list is one snapshot however the objects change between its pages; `Exact` (and a
/// paged list with a resourceVersion and no match, as kube-apiserver keeps for older clients)
/// reads the objects as they were; `NotOlderThan` reads the newest; a version no longer kept is
/// 410 Expired.
#[tokio::test]
async fn lists_read_one_snapshot_and_exact_reads_the_past() {
    use kube::api::VersionMatch;

    let (server, client) = server().await;
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for index in 0..6 {
        configmaps
            .create(
                &PostParams::default(),
                &configmap(&format!("cm-{index}"), &[("v", "1")]),
            )
            .await
            .unwrap();
    }
    let first = configmaps
        .list(&ListParams::default().limit(2))
        .await
        .unwrap();
    let at = first.metadata.resource_version.clone().unwrap();
    let mut names: Vec<String> = first
        .items
        .iter()
        .map(|cm| cm.metadata.name.clone().unwrap())
        .collect();
    // Between the pages: one ahead of the cursor deleted, one created, one relabelled.
    configmaps
        .delete("cm-4", &DeleteParams::default())
        .await
        .unwrap();
    configmaps
        .create(&PostParams::default(), &configmap("cm-33", &[("v", "1")]))
        .await
        .unwrap();
    configmaps
        .patch(
            "cm-5",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"v": "2"}}})),
        )
        .await
        .unwrap();
    let mut token = first.metadata.continue_;
    while let Some(next) = token.filter(|token| !token.is_empty()) {
        let page = configmaps
            .list(&ListParams::default().limit(2).continue_token(&next))
            .await
            .unwrap();
        assert_eq!(page.metadata.resource_version.as_deref(), Some(at.as_str()));
        for cm in page
            .items
            .iter()
            .filter(|cm| cm.metadata.name.as_deref() != Some("kube-root-ca.crt"))
        {
            assert_eq!(
                kube::ResourceExt::labels(cm)["v"],
                "1",
                "{:?} is from after the snapshot",
                cm.metadata.name
            );
        }
        names.extend(
            page.items
                .iter()
                .map(|cm| cm.metadata.name.clone().unwrap()),
        );
        token = page.metadata.continue_;
    }
    names.retain(|name| name != "kube-root-ca.crt");
    assert_eq!(names, ["cm-0", "cm-1", "cm-2", "cm-3", "cm-4", "cm-5"]);

    let names_of = |list: &kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .filter(|name| name != "kube-root-ca.crt")
            .collect()
    };
    let exact = configmaps
        .list(&ListParams::default().at(&at).matching(VersionMatch::Exact))
        .await
        .unwrap();
    assert_eq!(
        exact.metadata.resource_version.as_deref(),
        Some(at.as_str())
    );
    assert_eq!(names_of(&exact).len(), 6);
    assert!(names_of(&exact).contains(&"cm-4".to_string()));
    let legacy = configmaps
        .list(&ListParams::default().at(&at).limit(100))
        .await
        .unwrap();
    assert_eq!(names_of(&legacy), names_of(&exact));
    let newest = configmaps
        .list(
            &ListParams::default()
                .at(&at)
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .unwrap();
    assert_eq!(
        newest.metadata.resource_version.clone().unwrap(),
        server.store().resource_version().to_string()
    );
    assert!(names_of(&newest).contains(&"cm-33".to_string()));
    assert!(!names_of(&newest).contains(&"cm-4".to_string()));

    server.store().compact(server.store().resource_version());
    let expired = api_error(
        configmaps
            .list(&ListParams::default().at(&at).matching(VersionMatch::Exact))
            .await
            .unwrap_err(),
    );
    assert_eq!((expired.code, expired.reason.as_str()), (410, "Expired"));
}

/// A strategic merge patch merges a Deployment's containers by name (the patch `kubectl apply`
/// sends, directives included), and a custom resource refuses it with 415 as kube-apiserver's do.
#[tokio::test]
async fn strategic_merge_patch_merges_containers_and_custom_resources_refuse_it() {
    let (_server, client) = server().await;
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [
                    {"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80}]},
                    {"name": "sidecar", "image": "envoy:1"},
                ]},
            },
        },
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let patched = deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
                "containers": [{"name": "web", "image": "nginx:2"}],
            }}}})),
        )
        .await
        .unwrap();
    let containers = patched.spec.template.spec.unwrap().containers;
    assert_eq!(containers.len(), 2);
    assert_eq!(containers[0].image.as_deref(), Some("nginx:2"));
    assert_eq!(containers[0].ports.as_ref().unwrap()[0].container_port, 80);
    assert_eq!(containers[1].image.as_deref(), Some("envoy:1"));

    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "bars.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "bars", "singular": "bar", "kind": "Bar"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let bars: Api<DynamicObject> = Api::namespaced_with(
        client,
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Bar")),
    );
    let bar: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Bar", "metadata": {"name": "one"}, "spec": {"a": 1},
    }))
    .unwrap();
    bars.create(&PostParams::default(), &bar).await.unwrap();
    let refused = api_error(
        bars.patch(
            "one",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"a": 2}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (refused.code, refused.reason.as_str()),
        (415, "UnsupportedMediaType")
    );
    let accepted = refused.message.split("(got").next().unwrap();
    assert!(
        !accepted.contains("strategic-merge-patch"),
        "{}",
        refused.message
    );
    // A merge patch is what they take.
    let merged = bars
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"a": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.data["spec"]["a"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_created_at_once_get_distinct_addresses_and_node_ports() {
    let (_server, client) = server().await;
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client, "default");
    let creates = (0..24).map(|i| {
        let services = services.clone();
        tokio::spawn(async move {
            let service = serde_json::from_value(json!({
                "metadata": {"name": format!("svc-{i}")},
                "spec": {"type": "NodePort", "ports": [{"port": 80}]},
            }))
            .unwrap();
            services
                .create(&PostParams::default(), &service)
                .await
                .unwrap()
        })
    });
    let mut addresses = std::collections::BTreeSet::new();
    let mut node_ports = std::collections::BTreeSet::new();
    for create in creates.collect::<Vec<_>>() {
        let spec = create.await.unwrap().spec.unwrap();
        assert!(addresses.insert(spec.cluster_ip.unwrap()));
        assert!(node_ports.insert(spec.ports.unwrap()[0].node_port.unwrap()));
    }
}
