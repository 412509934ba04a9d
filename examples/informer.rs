//! An informer on the embedded API server: a cache, handlers and a lister, with no cluster.
//!
//! `cargo run -p ctrlkit-examples --example informer`
//!
//! Starts the embedded API server, creates a few ConfigMaps, runs a shared informer with a
//! handler that prints every change, changes and deletes objects while it runs, then answers
//! lister queries from the cache.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit::apiserver::{ApiServer, ApiServerConfig};
use ctrlkit::cache::{
    Lister, ObjectOrTombstone, ResourceEventHandlerFuncs, SharedInformerFactory,
    drop_managed_fields,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::core::{Expression, Selector};
use kube::{Client, Config};
use tokio_util::sync::CancellationToken;

fn configmap(name: &str, tier: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("tier".to_string(), tier.to_string())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "greeting".to_string(),
            "hello".to_string(),
        )])),
        ..ConfigMap::default()
    }
}

fn name(cm: &ConfigMap) -> &str {
    cm.metadata.name.as_deref().unwrap_or("?")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = ApiServer::start(ApiServerConfig::default()).await?;
    let client = Client::try_from(Config::new(server.url().parse()?))?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (name, tier) in [("web", "frontend"), ("api", "backend"), ("db", "backend")] {
        api.create(&PostParams::default(), &configmap(name, tier))
            .await?;
    }

    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let informer = factory.namespaced_informer::<ConfigMap>("default");
    informer.set_transform(Arc::new(drop_managed_fields))?;
    informer.add_event_handler(
        ResourceEventHandlerFuncs::new()
            .on_add(|cm: &Arc<ConfigMap>, initial| {
                let when = if initial { "initial list" } else { "new" };
                println!("added   {} ({when})", name(cm));
            })
            .on_update(|old: &Arc<ConfigMap>, new: &Arc<ConfigMap>| {
                println!(
                    "updated {} (resourceVersion {} -> {})",
                    name(new),
                    old.metadata.resource_version.as_deref().unwrap_or(""),
                    new.metadata.resource_version.as_deref().unwrap_or("")
                );
            })
            .on_delete(|deleted: &ObjectOrTombstone<ConfigMap>| {
                let seen = deleted.object().map_or("?", |cm| name(cm));
                let how = if deleted.is_tombstone() {
                    "inferred from a relist"
                } else {
                    "watched"
                };
                println!("deleted {seen} ({how})");
            }),
    )?;

    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let synced = factory.wait_for_cache_sync(&cancel).await;
    let all = synced.values().all(|done| *done);
    println!(
        "the informer's cache holds every ConfigMap of the namespace: {}",
        if all { "synced" } else { "not synced" }
    );

    let mut web = api.get("web").await?;
    web.data = Some(BTreeMap::from([("greeting".to_string(), "hi".to_string())]));
    api.replace("web", &PostParams::default(), &web).await?;
    api.delete("db", &DeleteParams::default()).await?;
    api.create(&PostParams::default(), &configmap("cache", "backend"))
        .await?;
    // Let the watch deliver the changes.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let lister = Lister::new(informer.get_indexer());
    let backend: Selector = Expression::Equal("tier".into(), "backend".into()).into();
    let mut names: Vec<String> = lister
        .namespaced("default")
        .list(&backend)
        .iter()
        .map(|cm| name(cm).to_owned())
        .collect();
    names.sort();
    println!("backend config maps in the cache: {names:?}");
    println!(
        "web from the cache says: {:?}",
        lister.get(Some("default"), "web").and_then(|cm| cm
            .data
            .as_ref()?
            .get("greeting")
            .cloned())
    );

    cancel.cancel();
    factory.shutdown().await;
    server.shutdown().await;
    Ok(())
}
