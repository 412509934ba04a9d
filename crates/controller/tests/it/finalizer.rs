//! The finalizer helper: the finalizer is added, kept until cleanup succeeded, and a crash
//! between the cleanup and the finalizer's removal runs the cleanup again.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use ctrlkit_cache::{Indexer, SharedInformerFactory};
use ctrlkit_controller::finalizer::{FinalizerEvent, finalizer};
use ctrlkit_controller::{Action, Context, Controller, ReconcileError, Reconciler};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, server};

const FINALIZER: &str = "example.com/external-record";

/// Records outside the API server, one per ConfigMap: what the finalizer protects.
#[derive(Default)]
struct External {
    records: Mutex<BTreeSet<String>>,
    cleanups: AtomicUsize,
    /// The first cleanup "crashes" after deleting the record, before it returns.
    crash_once: AtomicBool,
}

struct Recorder {
    api: Api<ConfigMap>,
    cache: Indexer<ConfigMap>,
    external: Arc<External>,
}

impl Reconciler for Recorder {
    async fn reconcile(&self, key: &str, _: &Context) -> Result<Action, ReconcileError> {
        let Some(object) = self.cache.get_by_key(key) else {
            return Ok(Action::done());
        };
        let external = Arc::clone(&self.external);
        finalizer(&self.api, FINALIZER, object, |event| async move {
            match event {
                FinalizerEvent::Apply(object) => {
                    external.records.lock().insert(object.name_any());
                }
                FinalizerEvent::Cleanup(object) => {
                    // Idempotent: a record already gone is success.
                    external.records.lock().remove(&object.name_any());
                    external.cleanups.fetch_add(1, Ordering::SeqCst);
                    if external.crash_once.swap(false, Ordering::SeqCst) {
                        std::future::pending::<()>().await;
                    }
                }
            }
            Ok(Action::done())
        })
        .await
    }
}

/// Starts a controller process on the server; aborting the task is the crash.
fn start(client: &kube::Client, external: &Arc<External>) -> tokio::task::JoinHandle<()> {
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.namespaced_informer::<ConfigMap>("default");
    let reconciler = Recorder {
        api: Api::namespaced(client.clone(), "default"),
        cache: informer.get_indexer(),
        external: Arc::clone(external),
    };
    let controller = Controller::new("records", informer);
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    tokio::spawn(async move {
        let _stop = cancel.clone().drop_guard();
        controller.run(reconciler, cancel).await.unwrap();
    })
}

#[tokio::test(start_paused = true)]
async fn a_crash_between_cleanup_and_removal_runs_the_cleanup_again() {
    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let external = Arc::new(External::default());
    external.crash_once.store(true, Ordering::SeqCst);
    let first = start(&client, &external);

    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some("a".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &object).await.unwrap();
    eventually(Duration::from_secs(5), || {
        external.records.lock().contains("a")
    })
    .await;
    assert_eq!(api.get("a").await.unwrap().finalizers(), [FINALIZER]);

    // The delete only marks the object while the finalizer is on it.
    api.delete("a", &DeleteParams::default()).await.unwrap();
    eventually(Duration::from_secs(5), || {
        external.cleanups.load(Ordering::SeqCst) == 1
    })
    .await;
    assert!(external.records.lock().is_empty());
    first.abort();
    let _ = first.await;
    let marked = api.get("a").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(
        marked.finalizers(),
        [FINALIZER],
        "the crash kept the finalizer"
    );

    // The next process cleans up again (nothing left to delete), then lets the object go.
    let second = start(&client, &external);
    eventually(Duration::from_secs(5), || {
        external.cleanups.load(Ordering::SeqCst) == 2
    })
    .await;
    for _ in 0..5000 {
        if api.get_opt("a").await.unwrap().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(
        api.get_opt("a").await.unwrap().is_none(),
        "the object is gone"
    );
    assert_eq!(external.cleanups.load(Ordering::SeqCst), 2);
    second.abort();
}

#[tokio::test(start_paused = true)]
async fn an_invalid_finalizer_name_is_a_terminal_error() {
    let (_server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let object = Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some("a".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    });
    let error = finalizer(&api, "no-domain", object, |_| async { Ok(Action::done()) })
        .await
        .unwrap_err();
    assert!(error.is_terminal());
    assert!(
        error
            .to_string()
            .contains("invalid finalizer \"no-domain\""),
        "{error}"
    );
}
