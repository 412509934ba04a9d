//! What every area's tests start from: an embedded API server with an empty default
//! namespace, and waiting for a condition on the paused clock.

use std::time::Duration;

use ctrlkit_apiserver::resource::builtin_resources;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;
use tokio::time::{Instant, sleep};

/// An embedded API server and a client of it.
pub async fn server() -> (ApiServer, kube::Client) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    // The namespace starts empty: without the CA ConfigMap every namespace of a cluster has, so
    // a controller of ConfigMaps reconciles only what a test writes.
    let config_maps = builtin_resources()
        .into_iter()
        .find(|kind| kind.plural == "configmaps")
        .unwrap();
    server
        .store()
        .delete(&config_maps, "default", "kube-root-ca.crt", None)
        .unwrap();
    let client = kube::Client::new(server.service(), "default");
    (server, client)
}

/// Waits (on the paused clock, or in real time) until `done` holds, at most `limit`.
pub async fn eventually(limit: Duration, done: impl Fn() -> bool) {
    let end = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < end, "condition not met within {limit:?}");
        sleep(Duration::from_millis(1)).await;
    }
}

/// A Deployment `name` of one nginx container, its Pods labelled `app: <name>`.
pub fn deployment(name: &str) -> Deployment {
    let labels = std::collections::BTreeMap::from([("app".to_string(), name.to_string())]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: Some("nginx".into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        status: None,
    }
}
