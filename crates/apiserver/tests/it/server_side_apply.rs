//! Server-side apply and `managedFields` through the API, as kube-client drives them: apply
//! creates and merges, a repeat is a no-op, conflicts and force, removal of what an applier
//! stops applying, status through its subresource, custom resources by their schema, dry run,
//! and kube-apiserver's answers to applies it refuses.

use crate::support;

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Client, Config};
use serde_json::{Value, json};
use support::api_error;

async fn server() -> (ApiServer, Client) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let config = Config::new(server.url().parse().unwrap());
    let client = Client::try_from(config).unwrap();
    (server, client)
}

/// Each managedFields entry as (manager, operation, subresource).
fn managers(metadata: &kube::api::ObjectMeta) -> Vec<(String, String, String)> {
    metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|entry| {
            (
                entry.manager.clone().unwrap_or_default(),
                entry.operation.clone().unwrap_or_default(),
                entry.subresource.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// What `manager` owns, as `fieldsV1`.
fn owned(metadata: &kube::api::ObjectMeta, manager: &str) -> Value {
    metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|entry| entry.manager.as_deref() == Some(manager))
        .and_then(|entry| entry.fields_v1.as_ref())
        .map_or(Value::Null, |fields| fields.0.clone())
}

fn config_map(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": data})
}

#[tokio::test]
async fn apply_creates_merges_and_a_repeat_changes_nothing() {
    let (_server, client) = server().await;
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let params = PatchParams::apply("tool");
    let created = maps
        .patch(
            "settings",
            &params,
            &Patch::Apply(config_map(json!({"a": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        managers(&created.metadata),
        [("tool".into(), "Apply".into(), String::new())]
    );
    // An applier owns the fields it applies, not the map that holds them.
    assert_eq!(
        owned(&created.metadata, "tool"),
        json!({"f:data": {"f:a": {}}})
    );
    let again = maps
        .patch(
            "settings",
            &params,
            &Patch::Apply(config_map(json!({"a": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(
        again.metadata.managed_fields,
        created.metadata.managed_fields
    );

    // Another manager's update is kept by the next apply, which drops only its own leftovers.
    maps.patch(
        "settings",
        &PatchParams {
            field_manager: Some("editor".into()),
            ..PatchParams::default()
        },
        &Patch::Merge(json!({"data": {"b": "2"}})),
    )
    .await
    .unwrap();
    let applied = maps
        .patch(
            "settings",
            &params,
            &Patch::Apply(config_map(json!({"c": "3"}))),
        )
        .await
        .unwrap();
    let data = applied.data.unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["b", "c"]);
    assert_eq!(
        managers(&applied.metadata),
        [
            ("tool".into(), "Apply".into(), String::new()),
            ("editor".into(), "Update".into(), String::new())
        ]
    );
}

fn deployment(replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "nginx"}]}},
        },
    })
}

#[tokio::test]
async fn a_conflict_is_kube_apiservers_409_and_force_takes_the_field() {
    let (_server, client) = server().await;
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let created = deployments
        .create(
            &PostParams {
                field_manager: Some("creator".into()),
                ..PostParams::default()
            },
            &serde_json::from_value(deployment(1)).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        managers(&created.metadata),
        [("creator".into(), "Update".into(), String::new())]
    );
    // The creator owns the defaults decoding gave the object too.
    let creator = owned(&created.metadata, "creator");
    assert_eq!(creator["f:spec"]["f:revisionHistoryLimit"], json!({}));
    assert!(creator.get("f:status").is_none());

    let status = api_error(
        deployments
            .patch(
                "web",
                &PatchParams::apply("applier"),
                &Patch::Apply(deployment(3)),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 409);
    assert_eq!(status.reason, "Conflict");
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"creator\" using apps/v1: .spec.replicas"
    );
    let forced = deployments
        .patch(
            "web",
            &PatchParams::apply("applier").force(),
            &Patch::Apply(deployment(3)),
        )
        .await
        .unwrap();
    assert_eq!(forced.spec.replicas, Some(3));
    assert_eq!(
        owned(&forced.metadata, "creator")["f:spec"].get("f:replicas"),
        None
    );
    assert_eq!(
        owned(&forced.metadata, "applier")["f:spec"]["f:replicas"],
        json!({})
    );
}

#[tokio::test]
async fn refused_applies_get_kube_apiservers_answers() {
    let (_server, client) = server().await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let params = PatchParams::apply("tool");
    let refused = |body: Value| {
        let maps = maps.clone();
        let params = params.clone();
        async move {
            api_error(
                maps.patch("settings", &params, &Patch::Apply(body))
                    .await
                    .unwrap_err(),
            )
        }
    };

    let wrong_kind =
        refused(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "settings"}}))
            .await;
    assert_eq!(
        (wrong_kind.code, wrong_kind.message.as_str()),
        (400, "invalid object type: /v1, Kind=Secret")
    );

    let undeclared = refused(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings"}, "dta": {"a": "1"}}))
    .await;
    assert_eq!(undeclared.code, 500);
    assert_eq!(
        undeclared.message,
        "failed to create typed patch object (/settings; /v1, Kind=ConfigMap): .dta: field not declared in schema"
    );

    let with_fields = refused(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "managedFields": [{"manager": "x"}]}}))
    .await;
    assert_eq!(
        (with_fields.code, with_fields.message.as_str()),
        (400, "metadata.managedFields must be nil")
    );

    let renamed =
        refused(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}}))
            .await;
    assert_eq!(
        (renamed.code, renamed.message.as_str()),
        (
            400,
            "the name of the object (other) does not match the name on the URL (settings)"
        )
    );

    let with_uid = refused(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "uid": "abc"}}))
    .await;
    assert_eq!(with_uid.code, 409);
    assert_eq!(
        with_uid.message,
        "Operation cannot be fulfilled on configmaps \"settings\": uid mismatch: the provided object specified uid abc, and no existing object was found"
    );

    let without_manager = api_error(
        maps.patch(
            "settings",
            &PatchParams::default(),
            &Patch::Apply(config_map(json!({}))),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(without_manager.code, 422);

    // Nothing of those was stored.
    assert_eq!(api_error(maps.get("settings").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn a_dry_run_apply_answers_the_object_and_stores_nothing() {
    let (_server, client) = server().await;
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let answered = maps
        .patch(
            "settings",
            &PatchParams::apply("tool").dry_run(),
            &Patch::Apply(config_map(json!({"a": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(answered.data.unwrap()["a"], "1");
    assert_eq!(
        managers(&answered.metadata),
        [("tool".into(), "Apply".into(), String::new())]
    );
    assert_eq!(api_error(maps.get("settings").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn custom_resources_merge_by_their_schema_and_status_applies_through_its_subresource() {
    let (_server, client) = server().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                  "x-kubernetes-list-map-keys": ["name"],
                                  "items": {"type": "object", "properties": {
                                      "name": {"type": "string"}, "port": {"type": "integer"}}}},
                    }},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                }}},
            }],
        },
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(client, "default", &ApiResource::from_gvk(&gvk));
    let widget = |ports: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w"}, "spec": {"ports": ports}})
    };
    widgets
        .patch(
            "w",
            &PatchParams::apply("a"),
            &Patch::Apply(widget(json!([{"name": "http", "port": 80}]))),
        )
        .await
        .unwrap();
    let merged = widgets
        .patch(
            "w",
            &PatchParams::apply("b"),
            &Patch::Apply(widget(json!([{"name": "https", "port": 443}]))),
        )
        .await
        .unwrap();
    assert_eq!(
        merged.data["spec"]["ports"],
        json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}])
    );

    let undeclared = api_error(
        widgets
            .patch(
                "w",
                &PatchParams::apply("a"),
                &Patch::Apply(json!({
                "apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "spec": {"colour": "red"}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(undeclared.code, 500);
    assert!(
        undeclared
            .message
            .ends_with(".spec.colour: field not declared in schema")
    );

    let with_status = widgets
        .patch_status(
            "w",
            &PatchParams::apply("controller"),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                                 "metadata": {"name": "w"}, "status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(with_status.data["status"]["ready"], true);
    assert!(managers(&with_status.metadata).contains(&(
        "controller".into(),
        "Apply".into(),
        "status".into()
    )));
    // Status sent to the resource itself is not written, and nobody owns it.
    let ignored = widgets
        .patch(
            "w",
            &PatchParams::apply("a"),
            &Patch::Apply(json!({
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"ports": [{"name": "http", "port": 80}]}, "status": {"ready": false}})),
        )
        .await
        .unwrap();
    assert_eq!(ignored.data["status"]["ready"], true);
    assert!(owned(&ignored.metadata, "a").get("f:status").is_none());

    // A status apply to an object that does not exist is a 404: only the resource creates.
    let missing = api_error(
        widgets
            .patch_status(
                "missing",
                &PatchParams::apply("controller"),
                &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                                     "metadata": {"name": "missing"}, "status": {"ready": true}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(missing.code, 404);
}

#[tokio::test]
async fn an_applier_that_stops_applying_all_it_owned_leaves_the_object_whole() {
    let (_server, client) = server().await;
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let params = PatchParams::apply("tool");
    let labelled = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "labels": {"team": "a"}},
    });
    maps.patch("settings", &params, &Patch::Apply(labelled))
        .await
        .unwrap();
    // Only the name is left: the label goes, the object (and its name) stays.
    let bare = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}});
    let applied = maps
        .patch("settings", &params, &Patch::Apply(bare))
        .await
        .unwrap();
    assert_eq!(applied.metadata.name.as_deref(), Some("settings"));
    assert_eq!(applied.metadata.labels, None);
    assert_eq!(applied.metadata.namespace.as_deref(), Some("default"));
}

#[tokio::test]
async fn an_apply_may_change_a_pods_image_and_nothing_kube_forbids() {
    let (_server, client) = server().await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, "default");
    let params = PatchParams::apply("tool");
    // The applied tolerations replace the list (it is atomic); the default ones come back on
    // every update, as the DefaultTolerationSeconds admission plugin adds them.
    let pod = |node: &str, image: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
               "spec": {"nodeName": node, "containers": [{"name": "app", "image": image}],
                        "tolerations": [{"key": "dedicated", "operator": "Exists"}]}})
    };
    pods.patch("web", &params, &Patch::Apply(pod("node-a", "app:1")))
        .await
        .unwrap();
    let updated = pods
        .patch("web", &params, &Patch::Apply(pod("node-a", "app:2")))
        .await
        .unwrap();
    let spec = updated.spec.unwrap();
    assert_eq!(spec.containers[0].image.as_deref(), Some("app:2"));
    let tolerated: Vec<_> = spec
        .tolerations
        .unwrap()
        .into_iter()
        .map(|toleration| toleration.key.unwrap_or_default())
        .collect();
    assert_eq!(
        tolerated,
        [
            "dedicated",
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable"
        ]
    );

    let moved = api_error(
        pods.patch("web", &params, &Patch::Apply(pod("node-b", "app:2")))
            .await
            .unwrap_err(),
    );
    assert_eq!((moved.code, moved.reason.as_str()), (422, "Invalid"));
    assert!(
        moved.message.starts_with(
            "Pod \"web\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"
        ),
        "{}",
        moved.message
    );
    let cause = &moved.details.as_ref().unwrap().causes[0];
    assert_eq!(
        (cause.reason.as_str(), cause.field.as_str()),
        ("FieldValueForbidden", "spec")
    );
    let stored = pods.get("web").await.unwrap().spec.unwrap();
    assert_eq!(
        stored.node_name.as_deref(),
        Some("node-a"),
        "nothing stored"
    );

    // The ephemeralcontainers subresource adds to the spec: it has checks of its own.
    let debug = json!({"spec": {"ephemeralContainers": [
        {"name": "debug", "image": "busybox:stable", "command": ["sh"]}]}});
    let debugged = pods
        .patch_ephemeral_containers("web", &PatchParams::default(), &Patch::Strategic(debug))
        .await
        .unwrap();
    assert_eq!(
        debugged.spec.unwrap().ephemeral_containers.unwrap()[0].name,
        "debug"
    );
}
