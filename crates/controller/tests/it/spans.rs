//! Each reconcile runs in a `reconciling object` span carrying the object reference and what
//! queued it, kube-runtime's fields, so every log line of a reconcile says which and why.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_cache::SharedInformerFactory;
use ctrlkit_controller::{Action, Context, Controller, ReconcileError, Reconciler};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, server};

/// Collects what the fmt subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Logs;

impl Reconciler for Logs {
    async fn reconcile(&self, key: &str, _: &Context) -> Result<Action, ReconcileError> {
        tracing::info!(key, "reconciled");
        Ok(Action::done())
    }
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_logs_inside_a_span_naming_the_object_and_the_reason() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    // The runtime of this test is one thread: every task logs to this subscriber.
    let _default = tracing::subscriber::set_default(subscriber);

    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let controller = Controller::new("spans", factory.namespaced_informer::<ConfigMap>("default"));
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let run = tokio::spawn(controller.run(Logs, cancel.clone()));
    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some("traced".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &object).await.unwrap();
    let logged = || String::from_utf8_lossy(&captured.0.lock()).into_owned();
    eventually(Duration::from_secs(5), || logged().contains("reconciled")).await;
    let line = logged()
        .lines()
        .find(|line| line.contains("reconciled"))
        .unwrap_or_default()
        .to_owned();
    assert!(line.contains("reconciling object{"), "{line}");
    assert!(line.contains("controller=spans"), "{line}");
    assert!(
        line.contains("object.ref=ConfigMap.v1./traced.default"),
        "{line}"
    );
    assert!(line.contains("object.reason=object updated"), "{line}");
    cancel.cancel();
    run.await.unwrap().unwrap();
}
