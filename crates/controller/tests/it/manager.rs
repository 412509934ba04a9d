//! The manager: several controllers on one informer factory and one health endpoint, stopped
//! together on SIGTERM within the grace period.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ctrlkit_cache::SharedInformerFactory;
use ctrlkit_controller::{
    Action, Context, Controller, Manager, ManagerError, ReconcileError, Reconciler,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, server};

/// Takes `work` per key, counting starts and ends.
#[derive(Clone)]
struct Slow {
    work: Option<Duration>,
    started: Arc<AtomicUsize>,
    finished: Arc<AtomicUsize>,
}

impl Slow {
    fn new(work: Option<Duration>) -> Self {
        Self {
            work,
            started: Arc::default(),
            finished: Arc::default(),
        }
    }
}

impl Reconciler for Slow {
    async fn reconcile(&self, _: &str, _: &Context) -> Result<Action, ReconcileError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        match self.work {
            Some(work) => tokio::time::sleep(work).await,
            None => std::future::pending().await,
        }
        self.finished.fetch_add(1, Ordering::SeqCst);
        Ok(Action::done())
    }
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..ObjectMeta::default()
    }
}

async fn objects(client: &kube::Client) {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    config_maps
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: meta("a"),
                ..ConfigMap::default()
            },
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: meta("b"),
                ..Secret::default()
            },
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_every_controller_after_its_reconciles_finish() {
    let (_server, client) = server().await;
    objects(&client).await;
    let (settings, secrets) = (
        Slow::new(Some(Duration::from_millis(400))),
        Slow::new(Some(Duration::from_millis(400))),
    );
    let mut manager = Manager::new(SharedInformerFactory::new(client, Duration::ZERO))
        .graceful_shutdown_timeout(Some(Duration::from_secs(20)));
    let informer = manager
        .factory()
        .namespaced_informer::<ConfigMap>("default");
    manager.add(Controller::new("settings", informer), settings.clone());
    let informer = manager.factory().namespaced_informer::<Secret>("default");
    manager.add(Controller::new("secrets", informer), secrets.clone());
    let health = manager.health_handle().clone();
    let run = tokio::spawn(manager.run_until_signal());
    // Both reconciles are under way (so the signal handlers are installed).
    eventually(Duration::from_secs(10), || {
        settings.started.load(Ordering::SeqCst) == 1 && secrets.started.load(Ordering::SeqCst) == 1
    })
    .await;
    let metrics = health.metrics_text();
    for name in ["settings", "secrets"] {
        let series = format!("workqueue_adds_total{{name=\"{name}\",controller=\"{name}\"}}");
        assert!(metrics.contains(&series), "{series} missing from {metrics}");
    }

    let signalled = std::time::Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let result = tokio::time::timeout(Duration::from_secs(15), run)
        .await
        .expect("the manager did not stop")
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    assert!(signalled.elapsed() < Duration::from_secs(15));
    // The reconciles in progress were let finish, not cut off.
    assert_eq!(settings.finished.load(Ordering::SeqCst), 1);
    assert_eq!(secrets.finished.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_that_outlives_the_grace_period_is_abandoned_with_an_error() {
    let (_server, client) = server().await;
    objects(&client).await;
    let (stuck, quick) = (Slow::new(None), Slow::new(Some(Duration::from_millis(1))));
    let mut manager = Manager::new(SharedInformerFactory::new(client, Duration::ZERO));
    let informer = manager
        .factory()
        .namespaced_informer::<ConfigMap>("default");
    manager.add(Controller::new("stuck", informer), stuck.clone());
    let informer = manager.factory().namespaced_informer::<Secret>("default");
    manager.add(Controller::new("quick", informer), quick.clone());
    let cancel = CancellationToken::new();
    let run = tokio::spawn(manager.run(cancel.clone()));
    eventually(Duration::from_secs(10), || {
        stuck.started.load(Ordering::SeqCst) == 1 && quick.finished.load(Ordering::SeqCst) == 1
    })
    .await;
    let stopping = tokio::time::Instant::now();
    cancel.cancel();
    let result = run.await.unwrap();
    assert!(
        matches!(result, Err(ManagerError::GracePeriodExceeded(grace)) if grace == Duration::from_secs(30)),
        "{result:?}"
    );
    assert_eq!(stopping.elapsed(), Duration::from_secs(30));
    assert_eq!(
        result.unwrap_err().to_string(),
        "failed waiting for all controllers to end within grace period of 30s"
    );
}

/// Counts reconciles per replica.
#[derive(Clone, Default)]
struct Count(Arc<AtomicUsize>);

impl Reconciler for Count {
    async fn reconcile(&self, _: &str, _: &Context) -> Result<Action, ReconcileError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(Action::done())
    }
}

/// A manager replica named `id` with one controller of ConfigMaps, elected on one lease.
fn replica(client: &kube::Client, id: &str) -> (Manager, Count) {
    use ctrlkit_leaderelection::{LeaderElectionConfig, LeaseLock};
    let count = Count::default();
    let mut manager = Manager::new(SharedInformerFactory::new(client.clone(), Duration::ZERO))
        .leader_election(
            LeaseLock::new(client.clone(), "default", "managers", id),
            LeaderElectionConfig {
                release_on_cancel: true,
                name: "managers".into(),
                ..LeaderElectionConfig::default()
            },
        );
    let informer = manager
        .factory()
        .namespaced_informer::<ConfigMap>("default");
    manager.add(Controller::new("settings", informer), count.clone());
    (manager, count)
}

#[tokio::test(start_paused = true)]
async fn one_election_for_the_managers_controllers_and_the_standby_takes_over() {
    let (_server, client) = server().await;
    objects(&client).await;
    let (a, count_a) = replica(&client, "a");
    let cancel_a = CancellationToken::new();
    let run_a = tokio::spawn(a.run(cancel_a.clone()));
    eventually(Duration::from_secs(30), || {
        count_a.0.load(Ordering::SeqCst) == 1
    })
    .await;
    let (b, count_b) = replica(&client, "b");
    let health_b = b.health_handle().clone();
    assert!(!health_b.is_ready(), "ready before its informers ran");
    let cancel_b = CancellationToken::new();
    let run_b = tokio::spawn(b.run(cancel_b.clone()));
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(
        count_b.0.load(Ordering::SeqCst),
        0,
        "the standby reconciled"
    );
    // A standby's caches are whole: it is ready to take over, though it does not lead.
    assert!(health_b.is_ready(), "the standby is not ready");

    // The leader stops and releases the lease: the standby leads and reconciles at once.
    cancel_a.cancel();
    run_a.await.unwrap().unwrap();
    eventually(Duration::from_secs(30), || {
        count_b.0.load(Ordering::SeqCst) == 1
    })
    .await;
    cancel_b.cancel();
    run_b.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_health_shared_with_a_lone_controller_waits_for_it_and_the_managers_informers() {
    use ctrlkit_controller::Health;
    let (_server, client) = server().await;
    objects(&client).await;
    let health = Health::default();
    let mut manager = Manager::new(SharedInformerFactory::new(client.clone(), Duration::ZERO))
        .health(health.clone());
    let informer = manager
        .factory()
        .namespaced_informer::<ConfigMap>("default");
    manager.add(
        Controller::new("managed", informer),
        Slow::new(Some(Duration::from_millis(1))),
    );
    // A controller of its own reports to the same health; its informer is not started yet.
    let lone_factory = SharedInformerFactory::new(client, Duration::ZERO);
    let lone = Controller::new(
        "lone",
        lone_factory.namespaced_informer::<Secret>("default"),
    )
    .health(health.clone());
    let cancel = CancellationToken::new();
    let run_manager = tokio::spawn(manager.run(cancel.clone()));
    let run_lone =
        tokio::spawn(lone.run(Slow::new(Some(Duration::from_millis(1))), cancel.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !health.is_ready(),
        "ready while the lone controller has not synced"
    );
    lone_factory.start(&cancel);
    eventually(Duration::from_secs(5), || health.is_ready()).await;
    cancel.cancel();
    run_manager.await.unwrap().unwrap();
    run_lone.await.unwrap().unwrap();
}
