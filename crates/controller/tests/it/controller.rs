//! The reconcile loop's contract, end to end against the embedded API server on the paused
//! clock: forget on success, backoff on error, give up after K, timeouts, panics, terminal
//! errors, one key never reconciled twice at once, draining shutdown, leader-gated workers, and
//! the metrics and health endpoint.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ctrlkit_apiserver::ApiServer;
use ctrlkit_cache::SharedInformerFactory;
use ctrlkit_controller::{Action, Context, Controller, Health, ReconcileError, Reconciler};
use ctrlkit_leaderelection::{HealthzAdaptor, LeaderElectionConfig, LeaseLock};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, server};

fn config_map(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_string(), value.to_string())])),
        ..ConfigMap::default()
    }
}

async fn create(client: &kube::Client, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &config_map(name, "0"))
        .await
        .unwrap();
}

async fn update(client: &kube::Client, name: &str, value: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut current = api.get(name).await.unwrap();
    current.data = Some(BTreeMap::from([("value".to_string(), value.to_string())]));
    api.replace(name, &PostParams::default(), &current)
        .await
        .unwrap();
}

/// What a test reconciler saw.
#[derive(Default)]
struct Seen {
    /// (key, retries, when) per reconcile.
    calls: Mutex<Vec<(String, usize, Instant)>>,
    in_flight: Mutex<HashSet<String>>,
    overlaps: AtomicUsize,
}

impl Seen {
    fn calls_for(&self, key: &str) -> Vec<(usize, Instant)> {
        self.calls
            .lock()
            .iter()
            .filter(|(k, _, _)| k == key)
            .map(|(_, retries, at)| (*retries, *at))
            .collect()
    }
}

type Behaviour = dyn Fn(&str, usize) -> Behave + Send + Sync;

enum Behave {
    Ok,
    RequeueAfter(Duration),
    Fail,
    Terminal,
    Panic,
    Hang,
    Work(Duration),
}

struct Scripted {
    seen: Arc<Seen>,
    behaviour: Arc<Behaviour>,
}

impl Reconciler for Scripted {
    async fn reconcile(&self, key: &str, ctx: &Context) -> Result<Action, ReconcileError> {
        self.seen
            .calls
            .lock()
            .push((key.to_owned(), ctx.retries, Instant::now()));
        if !self.seen.in_flight.lock().insert(key.to_owned()) {
            self.seen.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        let behave = (self.behaviour)(key, ctx.retries);
        let result = match behave {
            Behave::Ok => Ok(Action::done()),
            Behave::RequeueAfter(delay) => Ok(Action::requeue_after(delay)),
            Behave::Fail => Err(ReconcileError::retry("not yet")),
            Behave::Terminal => Err(ReconcileError::terminal("cannot ever work")),
            Behave::Panic => {
                self.seen.in_flight.lock().remove(key);
                panic!("reconcile blew up")
            }
            Behave::Hang => {
                // Removed first: the timeout drops this future mid-way.
                self.seen.in_flight.lock().remove(key);
                std::future::pending::<()>().await;
                unreachable!()
            }
            Behave::Work(time) => {
                sleep(time).await;
                Ok(Action::done())
            }
        };
        self.seen.in_flight.lock().remove(key);
        result
    }
}

struct Running {
    _server: ApiServer,
    client: kube::Client,
    seen: Arc<Seen>,
    health: Health,
    cancel: CancellationToken,
    run: tokio::task::JoinHandle<()>,
}

async fn run(
    configure: impl FnOnce(Controller<ConfigMap>) -> Controller<ConfigMap>,
    behaviour: impl Fn(&str, usize) -> Behave + Send + Sync + 'static,
) -> Running {
    let (server, client) = server().await;
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let health = Health::new(
        Registry::default(),
        HealthzAdaptor::new(Duration::from_secs(20)),
    );
    let controller = configure(
        Controller::new("test", factory.namespaced_informer::<ConfigMap>("default"))
            .health(health.clone()),
    );
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let seen = Arc::new(Seen::default());
    let reconciler = Scripted {
        seen: Arc::clone(&seen),
        behaviour: Arc::new(behaviour),
    };
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { controller.run(reconciler, cancel).await.unwrap() }
    });
    Running {
        _server: server,
        client,
        seen,
        health,
        cancel,
        run,
    }
}

fn metric(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(line_start))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

#[tokio::test(start_paused = true)]
async fn success_forgets_and_errors_back_off_exponentially() {
    let failures = AtomicUsize::new(0);
    let running = run(
        |c| c,
        move |key, _| match key {
            "default/flaky" if failures.fetch_add(1, Ordering::SeqCst) < 4 => Behave::Fail,
            _ => Behave::Ok,
        },
    )
    .await;
    create(&running.client, "flaky").await;
    eventually(Duration::from_secs(5), || {
        running.seen.calls_for("default/flaky").len() == 5
    })
    .await;
    let calls = running.seen.calls_for("default/flaky");
    assert_eq!(
        calls
            .iter()
            .map(|(retries, _)| *retries)
            .collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    // client-go's default limiter: 5 ms × 2^n per key.
    let gaps: Vec<u128> = calls
        .windows(2)
        .map(|pair| (pair[1].1 - pair[0].1).as_millis())
        .collect();
    assert_eq!(gaps, [5, 10, 20, 40]);

    // The success forgot the backoff: the next change starts from zero retries.
    update(&running.client, "flaky", "1").await;
    eventually(Duration::from_secs(1), || {
        running.seen.calls_for("default/flaky").len() == 6
    })
    .await;
    assert_eq!(running.seen.calls_for("default/flaky")[5].0, 0);

    let text = running.health.metrics_text();
    assert_eq!(
        metric(
            &text,
            r#"controller_runtime_reconcile_total{controller="test",result="error"}"#
        ),
        Some(4.0)
    );
    assert_eq!(
        metric(
            &text,
            r#"controller_runtime_reconcile_total{controller="test",result="success"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        metric(
            &text,
            r#"controller_runtime_reconcile_errors_total{controller="test"}"#
        ),
        Some(4.0)
    );
    assert_eq!(
        metric(
            &text,
            r#"controller_runtime_max_concurrent_reconciles{controller="test"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &text,
            r#"controller_runtime_active_workers{controller="test"}"#
        ),
        Some(0.0)
    );
    assert!(text.contains("controller_runtime_reconcile_time_seconds_bucket"));
    // The work queue's metrics, under client-go's names, labelled with the controller's name.
    assert!(
        metric(
            &text,
            r#"workqueue_adds_total{name="test",controller="test"}"#
        )
        .is_some_and(|adds| adds >= 6.0)
    );
    assert_eq!(
        metric(&text, r#"workqueue_depth{name="test",controller="test"}"#),
        Some(0.0)
    );
    running.cancel.cancel();
    running.run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_key_is_given_up_after_k_failures_and_terminal_errors_are_not_retried() {
    let dead = Arc::new(Mutex::new(Vec::new()));
    let dead_letters = Arc::clone(&dead);
    let running = run(
        move |c| {
            c.give_up_after(3, move |key, error| {
                dead_letters
                    .lock()
                    .push((key.to_owned(), error.to_string()));
            })
        },
        |key, _| match key {
            "default/doomed" => Behave::Fail,
            "default/invalid" => Behave::Terminal,
            _ => Behave::Ok,
        },
    )
    .await;
    create(&running.client, "doomed").await;
    create(&running.client, "invalid").await;
    sleep(Duration::from_secs(60)).await;
    // The first try and three retries, then the dead letter.
    assert_eq!(running.seen.calls_for("default/doomed").len(), 4);
    assert_eq!(
        *dead.lock(),
        [("default/doomed".to_string(), "not yet".to_string())]
    );
    assert_eq!(running.seen.calls_for("default/invalid").len(), 1);
    let text = running.health.metrics_text();
    assert_eq!(
        metric(
            &text,
            r#"controller_runtime_terminal_reconcile_errors_total{controller="test"}"#
        ),
        Some(1.0)
    );
    // A change brings a given-up key back, from zero retries.
    update(&running.client, "doomed", "1").await;
    eventually(Duration::from_secs(1), || {
        running.seen.calls_for("default/doomed").len() == 5
    })
    .await;
    assert_eq!(running.seen.calls_for("default/doomed")[4].0, 0);
    running.cancel.cancel();
    running.run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn timeouts_and_panics_are_recovered_counted_and_requeued() {
    let running = run(
        |c| c.reconcile_timeout(Duration::from_secs(2)),
        |key, retries| match (key, retries) {
            ("default/slow", 0) => Behave::Hang,
            ("default/crashy", 0) => Behave::Panic,
            ("default/later", 0) => Behave::RequeueAfter(Duration::from_secs(30)),
            _ => Behave::Ok,
        },
    )
    .await;
    create(&running.client, "slow").await;
    create(&running.client, "crashy").await;
    create(&running.client, "later").await;
    eventually(Duration::from_secs(10), || {
        running.seen.calls_for("default/slow").len() == 2
            && running.seen.calls_for("default/crashy").len() == 2
    })
    .await;
    let slow = running.seen.calls_for("default/slow");
    assert!(slow[1].1 - slow[0].1 >= Duration::from_secs(2));
    // A requeue_after comes back after its delay, with its backoff reset.
    let later = running.seen.calls_for("default/later");
    assert_eq!(later.len(), 1);
    sleep(Duration::from_secs(31)).await;
    let later = running.seen.calls_for("default/later");
    assert_eq!(later.len(), 2);
    assert_eq!(later[1].0, 0);
    assert!(later[1].1 - later[0].1 >= Duration::from_secs(30));
    let text = running.health.metrics_text();
    assert_eq!(
        metric(
            &text,
            r#"controller_runtime_reconcile_timeouts_total{controller="test"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &text,
            r#"controller_runtime_reconcile_panics_total{controller="test"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        // "later" asks again each time: its backoff is reset, so it is at zero retries again.
        metric(
            &text,
            r#"controller_runtime_reconcile_total{controller="test",result="requeue_after"}"#
        ),
        Some(2.0)
    );
    running.cancel.cancel();
    running.run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn eight_workers_never_reconcile_one_key_twice_at_once() {
    let running = run(
        |c| c.workers(8),
        |_, _| Behave::Work(Duration::from_millis(7)),
    )
    .await;
    for n in 0..10 {
        create(&running.client, &format!("cm-{n}")).await;
    }
    for round in 0..20 {
        for n in 0..10 {
            update(&running.client, &format!("cm-{n}"), &round.to_string()).await;
        }
        sleep(Duration::from_millis(3)).await;
    }
    sleep(Duration::from_secs(5)).await;
    assert_eq!(running.seen.overlaps.load(Ordering::SeqCst), 0);
    // Every key's last reconcile came after its last update, and keys ran in parallel.
    let calls = running.seen.calls.lock().clone();
    let per_key: HashMap<&str, usize> = calls.iter().fold(HashMap::new(), |mut map, (k, _, _)| {
        *map.entry(k.as_str()).or_default() += 1;
        map
    });
    assert_eq!(per_key.len(), 10);
    let starts: HashSet<Instant> = calls.iter().map(|(_, _, at)| *at).collect();
    assert!(
        starts.len() < calls.len(),
        "no two keys ever ran at the same instant"
    );
    running.cancel.cancel();
    running.run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_work_in_flight_finish() {
    let finished = Arc::new(AtomicUsize::new(0));
    let (server, client) = server().await;
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let controller =
        Controller::new("drain", factory.namespaced_informer::<ConfigMap>("default")).workers(2);
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    struct Slow(Arc<AtomicUsize>);
    impl Reconciler for Slow {
        async fn reconcile(&self, _: &str, _: &Context) -> Result<Action, ReconcileError> {
            sleep(Duration::from_secs(3)).await;
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(Action::done())
        }
    }
    create(&client, "a").await;
    create(&client, "b").await;
    create(&client, "c").await;
    let run = tokio::spawn({
        let (cancel, finished) = (cancel.clone(), Arc::clone(&finished));
        async move { controller.run(Slow(finished), cancel).await.unwrap() }
    });
    sleep(Duration::from_secs(1)).await;
    cancel.cancel();
    run.await.unwrap();
    // The two keys in flight finished; the third was never started.
    assert_eq!(finished.load(Ordering::SeqCst), 2);
    drop(server);
}

#[tokio::test(start_paused = true)]
async fn only_the_leader_reconciles_and_a_new_leader_catches_up() {
    let (server, client) = server().await;
    create(&client, "x").await;
    let mut replicas = Vec::new();
    for id in ["replica-a", "replica-b"] {
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let seen = Arc::new(Seen::default());
        let health = Health::new(
            Registry::default(),
            HealthzAdaptor::new(Duration::from_secs(20)),
        );
        let controller =
            Controller::new("gated", factory.namespaced_informer::<ConfigMap>("default"))
                .health(health.clone())
                .leader_election(
                    LeaseLock::new(client.clone(), "default", "gated", id),
                    LeaderElectionConfig {
                        release_on_cancel: true,
                        name: "gated".into(),
                        ..LeaderElectionConfig::default()
                    },
                );
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let reconciler = Scripted {
            seen: Arc::clone(&seen),
            behaviour: Arc::new(|_, _| Behave::Ok),
        };
        let run = tokio::spawn({
            let cancel = cancel.clone();
            async move { controller.run(reconciler, cancel).await.unwrap() }
        });
        replicas.push((seen, health, cancel, run));
        sleep(Duration::from_millis(100)).await;
    }
    sleep(Duration::from_secs(1)).await;
    let (seen_a, health_a, cancel_a, run_a) = replicas.remove(0);
    let (seen_b, health_b, cancel_b, run_b) = replicas.remove(0);
    assert_eq!(seen_a.calls_for("default/x").len(), 1);
    assert_eq!(seen_b.calls_for("default/x").len(), 0);
    // Both replicas' caches are warm and ready; only one leads.
    assert!(health_a.is_ready() && health_b.is_ready());
    assert!(
        health_a
            .metrics_text()
            .contains(r#"leader_election_master_status{name="gated"} 1"#)
    );
    assert!(
        !health_b
            .metrics_text()
            .contains(r#"leader_election_master_status{name="gated"} 1"#)
    );

    // The leader steps down; the standby takes over at once and reconciles every key.
    update(&client, "x", "changed while a leads").await;
    sleep(Duration::from_millis(10)).await;
    cancel_a.cancel();
    run_a.await.unwrap();
    let handed_over = Instant::now();
    eventually(Duration::from_secs(1), || {
        !seen_b.calls_for("default/x").is_empty()
    })
    .await;
    assert!(handed_over.elapsed() < Duration::from_millis(10));
    cancel_b.cancel();
    run_b.await.unwrap();
    drop(server);
}

async fn http_get(address: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn the_endpoint_serves_metrics_health_and_readiness() {
    let health = Health::new(
        Registry::default(),
        HealthzAdaptor::new(Duration::from_secs(20)),
    );
    let cancel = CancellationToken::new();
    let address = health
        .serve("127.0.0.1:0".parse().unwrap(), cancel.clone())
        .await
        .unwrap();
    assert_eq!(http_get(address, "/readyz").await.0, 503);
    health.set_ready(true);
    assert_eq!(http_get(address, "/readyz").await, (200, "ok".into()));
    assert_eq!(http_get(address, "/healthz").await, (200, "ok".into()));
    let (status, body) = http_get(address, "/metrics").await;
    assert_eq!(status, 200);
    assert!(body.ends_with("# EOF\n"), "{body}");
    cancel.cancel();
}

#[tokio::test(start_paused = true)]
async fn controllers_sharing_one_health_register_each_family_once() {
    let (_server, client) = server().await;
    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let health = Health::new(
        Registry::default(),
        HealthzAdaptor::new(Duration::from_secs(20)),
    );
    let cancel = CancellationToken::new();
    let mut runs = Vec::new();
    for (name, namespace) in [("first", "default"), ("second", "other")] {
        let controller = Controller::new(name, factory.namespaced_informer::<ConfigMap>(namespace))
            .health(health.clone());
        let reconciler = Scripted {
            seen: Arc::default(),
            behaviour: Arc::new(|_, _| Behave::Ok),
        };
        let cancel = cancel.clone();
        runs.push(tokio::spawn(async move {
            controller.run(reconciler, cancel).await.unwrap()
        }));
    }
    factory.start(&cancel);
    eventually(Duration::from_secs(5), || {
        let text = health.metrics_text();
        text.contains(r#"controller_runtime_max_concurrent_reconciles{controller="first"} 1"#)
            && text
                .contains(r#"controller_runtime_max_concurrent_reconciles{controller="second"} 1"#)
    })
    .await;
    let text = health.metrics_text();
    assert_eq!(
        text.matches("# TYPE controller_runtime_max_concurrent_reconciles gauge")
            .count(),
        1,
        "{text}"
    );
    cancel.cancel();
    for run in runs {
        run.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_shared_health_is_ready_once_every_controller_has_synced() {
    let (_server, client) = server().await;
    let health = Health::new(
        Registry::default(),
        HealthzAdaptor::new(Duration::from_secs(20)),
    );
    let cancel = CancellationToken::new();
    let (first, second) = (
        SharedInformerFactory::new(client.clone(), Duration::ZERO),
        SharedInformerFactory::new(client, Duration::ZERO),
    );
    for (name, factory) in [("first", &first), ("second", &second)] {
        let controller = Controller::new(name, factory.namespaced_informer::<ConfigMap>("default"))
            .health(health.clone());
        let reconciler = Scripted {
            seen: Arc::default(),
            behaviour: Arc::new(|_, _| Behave::Ok),
        };
        let cancel = cancel.clone();
        tokio::spawn(async move { controller.run(reconciler, cancel).await.unwrap() });
    }
    first.start(&cancel);
    first.wait_for_cache_sync(&cancel).await;
    sleep(Duration::from_secs(5)).await;
    assert!(!health.is_ready(), "ready while the second is not synced");
    second.start(&cancel);
    eventually(Duration::from_secs(5), || health.is_ready()).await;
    cancel.cancel();
}
