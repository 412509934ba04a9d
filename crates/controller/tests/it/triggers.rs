//! Reconciles from outside the informers: every cached key on a stream's signal, one key from a
//! [`Trigger`](ctrlkit_controller::Trigger) or a stream of keys; each reconcile knows why.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_cache::SharedInformerFactory;
use ctrlkit_controller::{
    Action, Context, Controller, ReconcileError, ReconcileReason, Reconciler,
};
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, server};

#[derive(Clone, Default)]
struct Record(Arc<Mutex<Vec<(String, ReconcileReason)>>>);

impl Record {
    fn calls(&self) -> Vec<(String, ReconcileReason)> {
        self.0.lock().clone()
    }

    fn len(&self) -> usize {
        self.0.lock().len()
    }
}

impl Reconciler for Record {
    async fn reconcile(&self, key: &str, ctx: &Context) -> Result<Action, ReconcileError> {
        self.0.lock().push((key.to_owned(), ctx.reason.clone()));
        Ok(Action::done())
    }
}

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

#[tokio::test(start_paused = true)]
async fn reconcile_all_on_requeues_every_cached_key_once_per_signal() {
    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..5 {
        api.create(&PostParams::default(), &config_map(&format!("cm-{i}")))
            .await
            .unwrap();
    }
    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let (signal, signals) = mpsc::unbounded::<()>();
    let (keys, key_stream) = mpsc::unbounded::<String>();
    let controller = Controller::new("all", factory.namespaced_informer::<ConfigMap>("default"))
        .reconcile_all_on(signals)
        .watches_stream(key_stream);
    let trigger = controller.trigger();
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let record = Record::default();
    let run = tokio::spawn(controller.run(record.clone(), cancel.clone()));

    eventually(Duration::from_secs(5), || record.len() == 5).await;
    let initial = record.calls();
    assert!(
        initial
            .iter()
            .all(|(_, reason)| *reason == ReconcileReason::ObjectUpdated)
    );

    signal.unbounded_send(()).unwrap();
    eventually(Duration::from_secs(5), || record.len() == 10).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let calls = record.calls();
    assert_eq!(calls.len(), 10, "each key once: {calls:?}");
    let mut bulk: Vec<&str> = calls[5..].iter().map(|(key, _)| key.as_str()).collect();
    bulk.sort_unstable();
    assert_eq!(
        bulk,
        [
            "default/cm-0",
            "default/cm-1",
            "default/cm-2",
            "default/cm-3",
            "default/cm-4"
        ]
    );
    assert!(
        calls[5..]
            .iter()
            .all(|(_, reason)| *reason == ReconcileReason::BulkReconcile)
    );
    assert_eq!(calls[5].1.to_string(), "bulk reconcile requested");

    // One key from a trigger (known or not to the cache), one from the stream of keys.
    assert!(trigger.trigger("default/cm-2"));
    eventually(Duration::from_secs(5), || record.len() == 11).await;
    keys.unbounded_send("default/elsewhere".to_owned()).unwrap();
    eventually(Duration::from_secs(5), || record.len() == 12).await;
    let calls = record.calls();
    assert_eq!(
        calls[10],
        (
            "default/cm-2".to_owned(),
            ReconcileReason::Custom("external trigger".into())
        )
    );
    assert_eq!(
        calls[11],
        (
            "default/elsewhere".to_owned(),
            ReconcileReason::Custom("stream event".into())
        )
    );

    cancel.cancel();
    run.await.unwrap().unwrap();
    assert!(
        !trigger.trigger("default/cm-2"),
        "a stopped controller takes no keys"
    );
}

#[tokio::test(start_paused = true)]
async fn reasons_say_what_queued_the_key() {
    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let controller = Controller::new("why", factory.namespaced_informer::<ConfigMap>("default"));
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let record = Record::default();
    let run = tokio::spawn(controller.run(record.clone(), cancel.clone()));
    api.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    eventually(Duration::from_secs(5), || record.len() == 1).await;
    let mut changed = api.get("a").await.unwrap();
    changed.data = Some(BTreeMap::from([("k".to_string(), "v".to_string())]));
    api.replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    eventually(Duration::from_secs(5), || record.len() == 2).await;
    assert_eq!(
        record.calls(),
        [
            ("default/a".to_owned(), ReconcileReason::ObjectUpdated),
            ("default/a".to_owned(), ReconcileReason::ObjectUpdated),
        ]
    );
    cancel.cancel();
    run.await.unwrap().unwrap();
}

/// Reconciles keys in order, lingering a second on the first key after `slow_from`.
struct Slow {
    calls: Arc<Mutex<Vec<String>>>,
    slow_from: tokio::time::Instant,
}

impl Reconciler for Slow {
    async fn reconcile(&self, key: &str, _: &Context) -> Result<Action, ReconcileError> {
        let first_late = {
            let mut calls = self.calls.lock();
            calls.push(key.to_owned());
            tokio::time::Instant::now() >= self.slow_from && calls.len() == 3
        };
        if first_late {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(Action::done())
    }
}

#[tokio::test(start_paused = true)]
async fn resyncs_wait_behind_real_changes() {
    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &config_map(name))
            .await
            .unwrap();
    }
    let factory = SharedInformerFactory::new(client, Duration::from_secs(30));
    let controller = Controller::new(
        "resync",
        factory.namespaced_informer::<ConfigMap>("default"),
    );
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let reconciler = Slow {
        calls: Arc::clone(&calls),
        slow_from: tokio::time::Instant::now() + Duration::from_secs(29),
    };
    let run = tokio::spawn(controller.run(reconciler, cancel.clone()));
    eventually(Duration::from_secs(5), || calls.lock().len() == 2).await;
    // The resync queues a and b; the worker lingers on the first while c changes.
    eventually(Duration::from_secs(40), || calls.lock().len() == 3).await;
    api.create(&PostParams::default(), &config_map("c"))
        .await
        .unwrap();
    eventually(Duration::from_secs(5), || calls.lock().len() == 5).await;
    let calls = calls.lock().clone();
    let resynced: Vec<&str> = [calls[2].as_str(), calls[4].as_str()].into();
    assert!(
        resynced.contains(&"default/a") && resynced.contains(&"default/b"),
        "{calls:?}"
    );
    assert_eq!(
        calls[3], "default/c",
        "the change went before the waiting resync: {calls:?}"
    );
    cancel.cancel();
    run.await.unwrap().unwrap();
}
