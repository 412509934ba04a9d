//! Predicates on a controller's watches: a controller that writes its own status reconciles
//! itself forever without [`GenerationChanged`], and once per spec change with it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ctrlkit_cache::SharedInformerFactory;
use ctrlkit_controller::predicate::{GenerationChanged, LabelsChanged, or};
use ctrlkit_controller::{Action, Context, Controller, ReconcileError, Reconciler};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{deployment, eventually, server};

/// Writes a status that differs each time: every reconcile changes the object it reconciles.
struct StatusWriter {
    api: Api<Deployment>,
    calls: Arc<AtomicUsize>,
}

/// Enough reconciles to call it a loop; the writer stops writing there so the test ends.
const LOOP: usize = 25;

impl Reconciler for StatusWriter {
    async fn reconcile(&self, key: &str, _: &Context) -> Result<Action, ReconcileError> {
        let calls = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if calls < LOOP {
            let name = key.rsplit('/').next().unwrap_or(key);
            let status = json!({"status": {"observedGeneration": 1, "replicas": calls}});
            self.api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
                .await?;
        }
        Ok(Action::done())
    }
}

/// Runs a status-writing controller (configured by `configure`) on one Deployment for a while
/// of virtual time, scales it once, and returns how many reconciles there were before and after.
async fn reconciles(
    configure: impl FnOnce(Controller<Deployment>) -> Controller<Deployment>,
) -> (usize, usize) {
    let (_server, client) = server().await;
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let controller = configure(Controller::new(
        "deployments",
        factory.namespaced_informer::<Deployment>("default"),
    ));
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let calls = Arc::new(AtomicUsize::new(0));
    let reconciler = StatusWriter {
        api: api.clone(),
        calls: Arc::clone(&calls),
    };
    let run = tokio::spawn(controller.run(reconciler, cancel.clone()));
    api.create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();
    eventually(Duration::from_secs(5), || calls.load(Ordering::SeqCst) >= 1).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let before = calls.load(Ordering::SeqCst);
    // A spec change bumps the generation.
    let scale = json!({"spec": {"replicas": 3}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(scale))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let after = calls.load(Ordering::SeqCst);
    cancel.cancel();
    run.await.unwrap().unwrap();
    (before, after)
}

#[tokio::test(start_paused = true)]
async fn without_a_predicate_a_status_writer_reconciles_itself_in_a_loop() {
    let (before, _) = reconciles(|controller| controller).await;
    assert!(
        before >= LOOP,
        "only {before} reconciles: no self-trigger loop"
    );
}

#[tokio::test(start_paused = true)]
async fn generation_changed_stops_the_loop_and_passes_spec_changes() {
    let (before, after) = reconciles(|controller| controller.predicate(GenerationChanged)).await;
    assert_eq!(before, 1, "the create only");
    assert_eq!(after, 2, "and the spec change");
}

#[tokio::test(start_paused = true)]
async fn combined_predicates_pass_what_either_passes() {
    let (before, after) =
        reconciles(|controller| controller.predicate(or(GenerationChanged, LabelsChanged))).await;
    assert_eq!((before, after), (1, 2));
}
