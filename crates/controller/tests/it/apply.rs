//! A reconciler's server-side apply ([`Context::apply`], [`Context::apply_status`]) against
//! the embedded API server: create on first apply, the controller's name as the field manager,
//! a field it no longer states removed, a field another manager took taken back.

use std::collections::BTreeMap;

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use ctrlkit_controller::{ApplyError, Context};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use serde_json::json;

fn context(controller: &str) -> Context {
    Context::new(controller)
}

fn config_map(data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

fn data(object: &ConfigMap) -> BTreeMap<String, String> {
    object.data.clone().unwrap_or_default()
}

/// The managers of `object`, as `(manager, operation)`.
fn managers(meta: &ObjectMeta) -> Vec<(String, String)> {
    meta.managed_fields
        .iter()
        .flatten()
        .map(|entry| {
            (
                entry.manager.clone().unwrap_or_default(),
                entry.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_controller_applies_what_it_manages_and_takes_it_back() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::new(server.service(), "default");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let ctx = context("settings-controller");
    assert_eq!(ctx.field_manager(), "settings-controller");

    let created = ctx
        .apply(&api, &config_map(&[("mode", "fast"), ("level", "3")]))
        .await
        .unwrap();
    assert_eq!(data(&created).len(), 2);
    assert_eq!(
        managers(&created.metadata),
        [("settings-controller".to_string(), "Apply".to_string())]
    );

    // Someone else changes a field the controller states, and adds one of their own.
    let edit = Patch::Merge(json!({"data": {"mode": "slow", "owner": "ops"}}));
    api.patch("settings", &PatchParams::default(), &edit)
        .await
        .unwrap();
    // The controller's next apply takes its field back (forced), no longer states `level`
    // (removed), and leaves the other manager's field alone.
    let applied = ctx
        .apply(&api, &config_map(&[("mode", "fast")]))
        .await
        .unwrap();
    assert_eq!(
        data(&applied),
        BTreeMap::from([
            ("mode".to_string(), "fast".to_string()),
            ("owner".to_string(), "ops".to_string()),
        ])
    );
    let again = ctx
        .apply(&api, &config_map(&[("mode", "fast")]))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version, applied.metadata.resource_version,
        "an apply that changes nothing writes nothing"
    );

    // A desired object carrying managedFields (edited from a read copy) still applies.
    let mut from_cache = applied.clone();
    from_cache.data = Some(BTreeMap::from([("mode".into(), "turbo".into())]));
    let applied = ctx.apply(&api, &from_cache).await.unwrap();
    assert_eq!(data(&applied)["mode"], "turbo");

    let unnamed = ctx.apply(&api, &ConfigMap::default()).await.unwrap_err();
    assert!(
        matches!(&unnamed, ApplyError::Unnamed { kind } if kind == "ConfigMap"),
        "{unnamed:?}"
    );
    assert_eq!(
        unnamed.to_string(),
        "the desired ConfigMap has no metadata.name"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_controller_applies_the_status_it_reports() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::new(server.service(), "default");
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let deployment = crate::support::deployment("web");
    let ctx = context("web-controller");
    ctx.apply(&api, &deployment).await.unwrap();
    let reported = ctx
        .apply_status(&api, "web", &json!({"availableReplicas": 1, "replicas": 1}))
        .await
        .unwrap();
    let status = reported.status.unwrap();
    assert_eq!(
        (status.available_replicas, status.replicas),
        (Some(1), Some(1))
    );
    let entries = reported.metadata.managed_fields.unwrap();
    let status_entry = entries
        .iter()
        .find(|entry| entry.subresource.as_deref() == Some("status"))
        .expect("a status entry");
    assert_eq!(status_entry.manager.as_deref(), Some("web-controller"));
    assert_eq!(status_entry.operation.as_deref(), Some("Apply"));

    let missing = ctx
        .apply_status(&api, "gone", &json!({"replicas": 1}))
        .await
        .unwrap_err();
    match missing {
        ApplyError::Api(kube::Error::Api(status)) => assert_eq!(status.code, 404),
        other => panic!("{other:?}"),
    }
    server.shutdown().await;
}
