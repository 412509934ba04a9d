//! client-go's informer metrics, reported by an informer of the embedded API server.

use std::collections::BTreeMap;
use std::time::Duration;

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use ctrlkit_cache::{InformerMetrics, SharedInformerFactory};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

fn line<'a>(text: &'a str, start: &str) -> Option<&'a str> {
    text.lines().find(|line| line.starts_with(start))
}

#[tokio::test]
async fn an_informer_reports_its_queue_its_latency_and_its_resource_version() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = kube::Client::new(server.service(), "default");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut last = None;
    for i in 0..3 {
        let object = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("cm-{i}")),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("i".to_string(), i.to_string())])),
            ..ConfigMap::default()
        };
        last = api
            .create(&PostParams::default(), &object)
            .await
            .unwrap()
            .metadata
            .resource_version;
    }
    let mut registry = Registry::default();
    let factory = SharedInformerFactory::new(client, Duration::ZERO)
        .with_metrics(InformerMetrics::new(&mut registry));
    let informer = factory.namespaced_informer::<ConfigMap>("default");
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    assert!(informer.wait_for_sync(&cancel).await);

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let labels = r#"{name="/api/v1/namespaces/default/configmaps",group="",version="v1",resource="configmaps"}"#;
    assert_eq!(
        line(&text, &format!("informer_queued_items{labels}")),
        Some(format!("informer_queued_items{labels} 0").as_str()),
        "{text}"
    );
    // The namespace's CA ConfigMap and the three.
    assert_eq!(
        line(
            &text,
            &format!("informer_processing_latency_seconds_count{labels}")
        ),
        Some(format!("informer_processing_latency_seconds_count{labels} 4").as_str()),
        "{text}"
    );
    let newest: u64 = last.unwrap().parse().unwrap();
    assert_eq!(
        line(&text, &format!("informer_store_resource_version{labels}")),
        Some(format!("informer_store_resource_version{labels} {newest}").as_str()),
        "{text}"
    );
    cancel.cancel();
}
