//! A server on a data directory (`ApiServerConfig::data_dir`), stopped and started again:
//! objects, custom resources and their CRDs, and watches carry over; a directory in use or
//! damaged is a typed error at start.

use std::path::Path;

use ctrlkit_apiserver::storage::PersistError;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig, ServerError};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, PostParams, WatchEvent,
    WatchParams,
};
use kube::{Client, Config};
use serde_json::json;

async fn start(dir: &Path) -> Result<(ApiServer, Client), ServerError> {
    let server = ApiServer::start(ApiServerConfig {
        data_dir: Some(dir.to_path_buf()),
        ..ApiServerConfig::default()
    })
    .await?;
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
    Ok((server, client))
}

fn foo_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "samplecontroller.k8s.io",
        "v1alpha1",
        "Foo",
    ))
}

#[tokio::test]
async fn a_restarted_server_serves_what_it_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (foo_before, configmap_before, resume_from) = {
        let (server, client) = start(dir.path()).await.unwrap();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": "foos.samplecontroller.k8s.io", "annotations": {"api-approved.kubernetes.io": "unapproved, experimental-only"}},
            "spec": {
                "group": "samplecontroller.k8s.io",
                "names": {"plural": "foos", "singular": "foo", "kind": "Foo"},
                "scope": "Namespaced",
                "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
            },
        }))
        .unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
        let foos: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), "default", &foo_resource());
        let foo: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "example"}, "spec": {"replicas": 2},
        }))
        .unwrap();
        let foo = foos.create(&PostParams::default(), &foo).await.unwrap();
        let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());
        let first = ConfigMap {
            metadata: ObjectMeta {
                name: Some("first".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let first = configmaps
            .create(&PostParams::default(), &first)
            .await
            .unwrap();
        let resume_from = first.metadata.resource_version.clone().unwrap();
        let mut second = first.clone();
        second.metadata.name = Some("second".into());
        second.metadata.resource_version = None;
        second.metadata.uid = None;
        configmaps
            .create(&PostParams::default(), &second)
            .await
            .unwrap();
        server.shutdown().await;
        (foo, first, resume_from)
    };

    let (server, client) = start(dir.path()).await.unwrap();
    let recovery = server.store().recovery().unwrap();
    assert_eq!(recovery.truncated, None);
    assert!(recovery.replayed > 0);
    // The CRD's resource is served again, with the object as it was.
    let foos: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &foo_resource());
    let foo = foos.get("example").await.unwrap();
    assert_eq!(
        foo.metadata.resource_version,
        foo_before.metadata.resource_version
    );
    assert_eq!(foo.metadata.uid, foo_before.metadata.uid);
    assert_eq!(foo.data["spec"]["replicas"], 2);
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    assert_eq!(configmaps.get("first").await.unwrap(), configmap_before);

    // A watch from before the restart gets exactly the later change.
    let events: Vec<_> = configmaps
        .watch(&WatchParams::default().timeout(1), &resume_from)
        .await
        .unwrap()
        .take(1)
        .try_collect()
        .await
        .unwrap();
    match &events[..] {
        [WatchEvent::Added(added)] => {
            assert_eq!(added.metadata.name.as_deref(), Some("second"));
            assert_eq!(
                added
                    .metadata
                    .resource_version
                    .as_deref()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap(),
                resume_from.parse::<u64>().unwrap() + 1
            );
        }
        other => panic!("expected the second ConfigMap's ADDED, got {other:?}"),
    }
}

#[tokio::test]
async fn a_directory_in_use_or_damaged_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _client) = start(dir.path()).await.unwrap();
    match start(dir.path()).await.map(|(server, _)| server) {
        Err(ServerError::Storage(PersistError::Locked(path))) => assert_eq!(path, dir.path()),
        other => panic!("expected the directory to be locked, got {other:?}"),
    }
    server.shutdown().await;

    // A snapshot that is unreadable, with nothing else to start from.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "snap") {
            std::fs::write(&path, b"not a snapshot").unwrap();
        }
    }
    match start(dir.path()).await.map(|(server, _)| server) {
        Err(ServerError::Storage(error @ PersistError::Corrupt { .. })) => {
            assert!(
                error.to_string().contains("no snapshot is readable"),
                "{error}"
            );
        }
        other => panic!("expected a damaged-directory error, got {other:?}"),
    }
}
