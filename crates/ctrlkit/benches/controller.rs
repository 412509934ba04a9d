//! The controller loop end to end: ctrlkit's `Controller` beside kube-runtime's, against one
//! embedded API server in the same run, and the failover of a leader-elected ctrlkit controller
//! with and without a warm standby.
//!
//! `cargo bench -p ctrlkit --bench controller [-- --quick]`
//!
//! Throughput and latency: for ctrlkit with 1 and 8 workers and kube-runtime with concurrency 1
//! and 8, each alone and in namespaces of its own, a trivial reconcile (read the Foo from the
//! cache, note the time, done; no writes) while 8 writer tasks create 10,000 Foos over TCP and
//! then update all of them (a label). Per phase: the writers' rate, reconciles per second from
//! the first write to the last object reconciled, and per object the delay from the server's
//! acknowledgement of the write (as the writer received it) to the start of the first reconcile
//! that saw it, p50 and p99 ("before ack": the share of objects whose reconcile started before
//! the writer had read the response, counted as negative delays). A third phase creates 10,000
//! Foos first and then starts the controller: time from start to all reconciled, the controller
//! alone (its initial list included). Three rounds, each row's figures the median.
//!
//! Failover: two ctrlkit replicas with leader election (Lease, 4 s lease, 3 s renew deadline,
//! 0.5 s retry) over 10,000 existing Foos; the leader's task is aborted and its informers
//! stopped (a crash), and the standby takes over: with a warm standby (`Controller::
//! leader_election`: informers synced at boot) and a cold one (a `LeaderElector` whose
//! `on_started_leading` starts the informers and then the controller). Kill → leadership
//! (`leader_election_master_status`, polled every 5 ms), kill → first reconcile, kill → all
//! reconciled; three rounds of each.
//!
//! `--quick` uses 1,000 objects and one round of everything.

// A benchmark harness: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ctrlkit::apiserver::{ApiServer, ApiServerConfig};
use ctrlkit::cache::{Indexer, ReflectorError, SharedInformerFactory};
use ctrlkit::controller::{Action, Context, Controller, Health, ReconcileError, Reconciler};
use ctrlkit::leaderelection::{
    LeaderCallbacks, LeaderElectionConfig, LeaderElectionMetrics, LeaderElector, LeaseLock,
};
use ctrlkit::sample_controller::{Foo, FooSpec, install_crd};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{controller as kube_controller, watcher};
use kube::{Client, Config, ResourceExt};
use parking_lot::RwLock;
use serde_json::json;
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Concurrent writer tasks (and so connections), as in the API server's own benchmark.
const WRITERS: usize = 8;
/// Workers of each failover replica.
const FAILOVER_WORKERS: usize = 8;
/// A Foo in every namespace besides the measured ones: seen in a controller's cache, it shows
/// that the cache has synced.
const SENTINEL: &str = "sentinel";
/// How long any phase may take before the benchmark gives up.
const PHASE_TIMEOUT: Duration = Duration::from_secs(180);

/// When the benchmark started, for the progress lines on stderr.
static STARTED: OnceLock<std::time::Instant> = OnceLock::new();

/// A progress line on stderr, with the time since the start.
fn progress(what: &str) {
    let started = STARTED.get_or_init(std::time::Instant::now);
    eprintln!("[{:>6.1} s] {what}", started.elapsed().as_secs_f64());
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let objects = if quick { 1_000 } else { 10_000 };
    let rounds = if quick { 1 } else { 3 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let started = *STARTED.get_or_init(std::time::Instant::now);
    runtime.block_on(run(objects, rounds));
    println!(
        "\nbenchmark run time: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

async fn run(objects: usize, rounds: usize) {
    let server = ApiServer::start(ApiServerConfig::default())
        .await
        .expect("server");
    let url = server.url();
    install_crd(client(&url), Duration::from_secs(30))
        .await
        .expect("CRD");

    let rows = [
        (Kind::Ctrlkit, 1),
        (Kind::Ctrlkit, 8),
        (Kind::KubeRuntime, 1),
        (Kind::KubeRuntime, 8),
    ];
    // Rounds interleave the rows, so that drift over the run spreads over all of them.
    let mut results: Vec<Vec<[Measured; 3]>> = vec![Vec::new(); rows.len()];
    for round in 1..=rounds {
        for (results, &(kind, workers)) in results.iter_mut().zip(&rows) {
            results.push(row(&url, kind, workers, objects, round).await);
        }
    }
    println!(
        "Throughput and latency, {objects} Foos per phase, {WRITERS} writer tasks, median of {rounds} round(s)"
    );
    println!(
        "| controller | workers | phase | writes/s | reconciles/s | first write → all reconciled | p50 | p99 | before ack |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
    for (results, &(kind, workers)) in results.iter().zip(&rows) {
        for (index, phase) in PHASES.iter().enumerate() {
            let rounds: Vec<Measured> = results.iter().map(|phases| phases[index]).collect();
            print_row(kind, workers, phase, &rounds);
        }
    }

    println!(
        "\nFailover over {objects} Foos (lease 4 s, renew deadline 3 s, retry 0.5 s, {FAILOVER_WORKERS} workers)"
    );
    println!(
        "| standby | round | kill → leader | leader → first reconcile | kill → first reconcile | kill → all reconciled |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let namespace = "bench-failover";
    create_namespace(&url, namespace).await;
    let writing = Phase::new("0", objects);
    write_all(&Api::namespaced(client(&url), namespace), &writing, false).await;
    for warm in [true, false] {
        for round in 1..=rounds {
            failover(&url, namespace, objects, warm, round).await;
        }
    }
    server.shutdown().await;
}

fn client(url: &str) -> Client {
    Client::try_from(Config::new(url.parse().expect("url"))).expect("client")
}

/// A namespace, with a Foo named [`SENTINEL`] in it.
async fn create_namespace(url: &str, name: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client(url))
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace");
    Api::<Foo>::namespaced(client(url), name)
        .create(
            &PostParams::default(),
            &Foo::new(SENTINEL, FooSpec::default()),
        )
        .await
        .expect("sentinel");
}

fn object_name(index: usize) -> String {
    format!("foo-{index:06}")
}

fn object_index(name: &str) -> Option<usize> {
    name.strip_prefix("foo-")?.parse().ok()
}

/// What one phase records per object (by its number): when the writer got the server's
/// acknowledgement of its write, and when the first reconcile that saw the written state
/// started. Stamps are nanoseconds after `base` plus one; zero means not yet.
struct Phase {
    /// The `round` label this phase's writes set: a reconcile counts once it sees it.
    round: String,
    base: Instant,
    acked: Vec<AtomicU64>,
    reconciled: Vec<AtomicU64>,
    count: AtomicUsize,
    all: Notify,
}

impl Phase {
    fn new(round: &str, objects: usize) -> Arc<Self> {
        Arc::new(Self {
            round: round.to_owned(),
            base: Instant::now(),
            acked: (0..objects).map(|_| AtomicU64::new(0)).collect(),
            reconciled: (0..objects).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicUsize::new(0),
            all: Notify::new(),
        })
    }

    fn stamp(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64 + 1
    }

    fn instant(&self, stamp: u64) -> Instant {
        self.base + Duration::from_nanos(stamp - 1)
    }

    fn acked(&self, index: usize) {
        self.acked[index].store(self.stamp(), Ordering::Relaxed);
    }

    /// A reconcile that started at `at` read `foo` from its cache.
    fn saw(&self, foo: &Foo, at: u64) {
        if foo.labels().get("round") != Some(&self.round) {
            return;
        }
        let Some(slot) = object_index(&foo.name_any()).and_then(|i| self.reconciled.get(i)) else {
            return;
        };
        if slot
            .compare_exchange(0, at, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
            && self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.reconciled.len()
        {
            self.all.notify_one();
        }
    }

    async fn wait_all(&self, what: &str) {
        progress(&format!(
            "{what}: waiting for {} reconciles",
            self.reconciled.len()
        ));
        let deadline = Instant::now() + PHASE_TIMEOUT;
        while self.count.load(Ordering::Acquire) < self.reconciled.len() {
            if tokio::time::timeout_at(deadline, self.all.notified())
                .await
                .is_err()
            {
                panic!(
                    "{what}: only {} of {} objects reconciled within {PHASE_TIMEOUT:?}",
                    self.count.load(Ordering::Acquire),
                    self.reconciled.len()
                );
            }
        }
    }

    fn stamps(slots: &[AtomicU64]) -> impl Iterator<Item = u64> + '_ {
        slots
            .iter()
            .map(|slot| slot.load(Ordering::Relaxed))
            .filter(|&stamp| stamp > 0)
    }

    /// Seconds from `base` to the last acknowledgement.
    fn last_ack(&self) -> f64 {
        Self::stamps(&self.acked).max().unwrap_or(1) as f64 / 1e9
    }

    /// Seconds from `base` to the last first reconcile.
    fn last_reconcile(&self) -> f64 {
        Self::stamps(&self.reconciled).max().unwrap_or(1) as f64 / 1e9
    }

    fn first_reconcile(&self) -> Instant {
        self.instant(Self::stamps(&self.reconciled).min().unwrap_or(1))
    }

    fn all_reconciled(&self) -> Instant {
        self.instant(Self::stamps(&self.reconciled).max().unwrap_or(1))
    }

    /// Acknowledgement → reconcile, per object, in milliseconds, sorted. (Negative if a
    /// reconcile started before the writer read the response.)
    fn latencies(&self) -> Vec<f64> {
        let mut latencies: Vec<f64> = self
            .acked
            .iter()
            .zip(&self.reconciled)
            .map(|(acked, reconciled)| {
                (reconciled.load(Ordering::Relaxed) as f64 - acked.load(Ordering::Relaxed) as f64)
                    / 1e6
            })
            .collect();
        latencies.sort_by(f64::total_cmp);
        latencies
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// The phase the reconcilers report to; swapped between phases.
struct Recorder {
    phase: RwLock<Arc<Phase>>,
}

impl Recorder {
    fn new(phase: Arc<Phase>) -> Arc<Self> {
        Arc::new(Self {
            phase: RwLock::new(phase),
        })
    }

    /// A recorder that counts nothing until a phase begins.
    fn idle() -> Arc<Self> {
        Self::new(Phase::new("none", 0))
    }

    fn begin(&self, phase: &Arc<Phase>) {
        *self.phase.write() = Arc::clone(phase);
    }

    fn saw(&self, foo: Option<&Foo>) {
        let phase = Arc::clone(&self.phase.read());
        let at = phase.stamp();
        if let Some(foo) = foo {
            phase.saw(foo, at);
        }
    }
}

/// `objects` writes from [`WRITERS`] tasks: creates of `foo-000000`… with the phase's `round`
/// label, or (with `update`) merge patches setting it.
async fn write_all(api: &Api<Foo>, phase: &Arc<Phase>, update: bool) {
    progress(&format!(
        "writing {} {}s",
        phase.acked.len(),
        if update { "update" } else { "create" }
    ));
    let next = Arc::new(AtomicUsize::new(0));
    let mut writers = JoinSet::new();
    for _ in 0..WRITERS {
        let (api, phase, next) = (api.clone(), Arc::clone(phase), Arc::clone(&next));
        writers.spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= phase.acked.len() {
                    return;
                }
                let name = object_name(index);
                if update {
                    let patch = json!({"metadata": {"labels": {"round": phase.round}}});
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .expect("update");
                } else {
                    let mut foo = Foo::new(
                        &name,
                        FooSpec {
                            deployment_name: format!("web-{index}"),
                            replicas: Some(1),
                        },
                    );
                    foo.metadata.labels = Some([("round".to_owned(), phase.round.clone())].into());
                    api.create(&PostParams::default(), &foo)
                        .await
                        .expect("create");
                }
                phase.acked(index);
            }
        });
    }
    while let Some(joined) = writers.join_next().await {
        joined.expect("writer");
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Ctrlkit,
    KubeRuntime,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Ctrlkit => "ctrlkit",
            Kind::KubeRuntime => "kube-runtime",
        }
    }
}

/// ctrlkit's trivial reconcile: the Foo from the informer's cache, and the time.
struct Trivial {
    foos: Indexer<Foo>,
    recorder: Arc<Recorder>,
}

impl Reconciler for Trivial {
    async fn reconcile(&self, key: &str, _ctx: &Context) -> Result<Action, ReconcileError> {
        self.recorder.saw(self.foos.get_by_key(key).as_deref());
        Ok(Action::done())
    }
}

/// kube-runtime's trivial reconcile: the Foo its controller read from its store, and the time.
async fn kube_reconcile(
    foo: Arc<Foo>,
    recorder: Arc<Recorder>,
) -> Result<kube_controller::Action, std::io::Error> {
    recorder.saw(Some(&foo));
    Ok(kube_controller::Action::await_change())
}

fn kube_error_policy(_: Arc<Foo>, _: &std::io::Error, _: Arc<Recorder>) -> kube_controller::Action {
    kube_controller::Action::requeue(Duration::from_secs(1))
}

/// A controller running for one row.
struct Running {
    cancel: CancellationToken,
    task: JoinHandle<()>,
    factory: Option<SharedInformerFactory>,
}

impl Running {
    async fn stop(self) {
        progress("stopping the controller");
        self.cancel.cancel();
        self.task.abort();
        let _ = self.task.await;
        if let Some(factory) = self.factory {
            factory.shutdown().await;
        }
    }
}

/// Starts a controller of `kind` on `namespace` and returns once it is ready to reconcile
/// (caches synced, workers running).
async fn start(
    kind: Kind,
    workers: usize,
    client: Client,
    namespace: &str,
    recorder: &Arc<Recorder>,
) -> Running {
    progress(&format!("starting {} with {workers} workers", kind.label()));
    let cancel = CancellationToken::new();
    match kind {
        Kind::Ctrlkit => {
            let factory = SharedInformerFactory::new(client, Duration::ZERO);
            let informer = factory.namespaced_informer::<Foo>(namespace);
            informer
                .set_watch_error_handler(Arc::new(|error: &ReflectorError| {
                    eprintln!("ctrlkit watch: {error}");
                }))
                .expect("error handler");
            let reconciler = Trivial {
                foos: informer.get_indexer(),
                recorder: Arc::clone(recorder),
            };
            let controller = Controller::new("bench", informer).workers(workers);
            let health = controller.health_handle().clone();
            factory.start(&cancel);
            let task = tokio::spawn({
                let cancel = cancel.clone();
                async move {
                    controller
                        .run(reconciler, cancel)
                        .await
                        .expect("controller")
                }
            });
            ready(&format!("ctrlkit, {workers} workers"), async {
                while !health.is_ready() {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
            .await;
            Running {
                cancel,
                task,
                factory: Some(factory),
            }
        }
        Kind::KubeRuntime => {
            let controller = kube_controller::Controller::new(
                Api::<Foo>::namespaced(client, namespace),
                watcher::Config::default(),
            )
            .with_config(
                kube_controller::Config::default()
                    .concurrency(u16::try_from(workers).expect("concurrency")),
            );
            let store = controller.store();
            let recorder = Arc::clone(recorder);
            let task = tokio::spawn(async move {
                controller
                    .run(kube_reconcile, kube_error_policy, recorder)
                    .for_each(|result| {
                        if let Err(error) = result {
                            eprintln!("kube-runtime controller: {error}");
                        }
                        std::future::ready(())
                    })
                    .await;
            });
            // Not `store.wait_until_ready()`: awaited beside the controller's own wait for the
            // same store, one of the two wakeups is lost (kube-runtime 5's `DelayedInit` keeps
            // one waker), and this wait then ends only when something else polls it. kube-runtime
            // fills its store at once when the initial list is complete: the sentinel is there
            // when the store is ready.
            let sentinel = ObjectRef::<Foo>::new(SENTINEL).within(namespace);
            ready(&format!("kube-runtime, concurrency {workers}"), async {
                while store.get(&sentinel).is_none() {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
            .await;
            Running {
                cancel,
                task,
                factory: None,
            }
        }
    }
}

/// Waits for `what` to be ready, or stops the benchmark.
async fn ready(what: &str, ready: impl Future<Output = ()>) {
    if tokio::time::timeout(PHASE_TIMEOUT, ready).await.is_err() {
        panic!("{what}: not ready within {PHASE_TIMEOUT:?}");
    }
}

fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

fn milliseconds(ms: f64) -> String {
    if ms.abs() >= 100.0 {
        format!("{} ms", thousands(ms))
    } else {
        format!("{ms:.2} ms")
    }
}

/// The figures of one phase of one row.
#[derive(Clone, Copy)]
struct Measured {
    writes_per_s: f64,
    reconciles_per_s: f64,
    total_ms: f64,
    /// Under load: ack → reconcile p50 and p99 (ms), and the share of objects reconciled
    /// before the writer read the response (%).
    latency: Option<(f64, f64, f64)>,
}

/// The phases of a row, as [`row`] returns them.
const PHASES: [&str; 3] = ["create", "update", "initial list (start → all)"];

/// One controller configuration in namespaces of its own: creates and updates under load, then
/// the initial list.
async fn row(url: &str, kind: Kind, workers: usize, objects: usize, round: usize) -> [Measured; 3] {
    let label = kind.label();
    let measured = |writes: &Phase, reconciles: &Phase, under_load: bool| {
        let total = reconciles.last_reconcile();
        Measured {
            writes_per_s: objects as f64 / writes.last_ack(),
            reconciles_per_s: objects as f64 / total,
            total_ms: total * 1e3,
            latency: under_load.then(|| {
                let sorted = reconciles.latencies();
                let early = sorted.iter().filter(|&&ms| ms < 0.0).count();
                (
                    percentile(&sorted, 0.50),
                    percentile(&sorted, 0.99),
                    early as f64 * 100.0 / sorted.len() as f64,
                )
            }),
        }
    };

    // Under load: the controller runs while the writers create, then update, every Foo.
    let namespace = format!("bench-{label}-{workers}-{round}");
    create_namespace(url, &namespace).await;
    let api = Api::<Foo>::namespaced(client(url), &namespace);
    let recorder = Recorder::idle();
    let running = start(kind, workers, client(url), &namespace, &recorder).await;
    let mut under_load = Vec::new();
    for (value, update) in [("0", false), ("1", true)] {
        let phase = Phase::new(value, objects);
        recorder.begin(&phase);
        write_all(&api, &phase, update).await;
        phase.wait_all(label).await;
        under_load.push(measured(&phase, &phase, true));
    }
    running.stop().await;

    // The controller alone: every Foo exists before it starts.
    let namespace = format!("bench-{label}-{workers}-{round}-list");
    create_namespace(url, &namespace).await;
    let writing = Phase::new("0", objects);
    write_all(&Api::namespaced(client(url), &namespace), &writing, false).await;
    let phase = Phase::new("0", objects);
    recorder.begin(&phase);
    let running = start(kind, workers, client(url), &namespace, &recorder).await;
    phase.wait_all(label).await;
    running.stop().await;
    [
        under_load[0],
        under_load[1],
        measured(&writing, &phase, false),
    ]
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One line of the table: each figure the median of `rounds`.
fn print_row(kind: Kind, workers: usize, phase: &str, rounds: &[Measured]) {
    let of = |figure: fn(&Measured) -> f64| median(rounds.iter().map(figure).collect());
    let (p50, p99, early) = if rounds[0].latency.is_some() {
        let latency = |pick: fn((f64, f64, f64)) -> f64| {
            median(
                rounds
                    .iter()
                    .filter_map(|measured| measured.latency.map(pick))
                    .collect(),
            )
        };
        (
            milliseconds(latency(|l| l.0)),
            milliseconds(latency(|l| l.1)),
            format!("{:.1} %", latency(|l| l.2)),
        )
    } else {
        ("–".to_owned(), "–".to_owned(), "–".to_owned())
    };
    println!(
        "| {} | {workers} | {phase} | {} | {} | {} | {p50} | {p99} | {early} |",
        kind.label(),
        thousands(of(|m| m.writes_per_s)),
        thousands(of(|m| m.reconciles_per_s)),
        milliseconds(of(|m| m.total_ms)),
    );
}

fn election(name: &str) -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_millis(500),
        name: name.to_owned(),
        ..LeaderElectionConfig::default()
    }
}

/// A leader-elected replica: its informers start at boot (`Controller::leader_election`).
fn warm_replica(
    url: &str,
    namespace: &str,
    lock: &str,
    identity: &str,
    recorder: &Arc<Recorder>,
) -> (Running, Health) {
    let client = client(url);
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.namespaced_informer::<Foo>(namespace);
    let reconciler = Trivial {
        foos: informer.get_indexer(),
        recorder: Arc::clone(recorder),
    };
    let controller = Controller::new("bench", informer)
        .workers(FAILOVER_WORKERS)
        .leader_election(
            LeaseLock::new(client, namespace, lock, identity),
            election(lock),
        );
    let health = controller.health_handle().clone();
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let task = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            controller
                .run(reconciler, cancel)
                .await
                .expect("controller")
        }
    });
    let running = Running {
        cancel,
        task,
        factory: Some(factory),
    };
    (running, health)
}

/// A leader-elected replica without a cache until it leads: `on_started_leading` starts its
/// informers, then runs a controller without leader election.
fn cold_replica(
    url: &str,
    namespace: &str,
    lock: &str,
    identity: &str,
    recorder: &Arc<Recorder>,
) -> (Running, Health) {
    let client = client(url);
    let health = Health::default();
    let metrics = LeaderElectionMetrics::new(&mut health.registry().lock());
    let leading_client = client.clone();
    let (namespace_owned, recorder) = (namespace.to_owned(), Arc::clone(recorder));
    let callbacks = LeaderCallbacks::new(
        move |leading: CancellationToken| {
            let factory = SharedInformerFactory::new(leading_client.clone(), Duration::ZERO);
            let informer = factory.namespaced_informer::<Foo>(&namespace_owned);
            let reconciler = Trivial {
                foos: informer.get_indexer(),
                recorder: Arc::clone(&recorder),
            };
            let controller = Controller::new("bench", informer).workers(FAILOVER_WORKERS);
            factory.start(&leading);
            async move {
                controller
                    .run(reconciler, leading)
                    .await
                    .expect("controller");
                factory.shutdown().await;
            }
        },
        || {},
    );
    let elector = LeaderElector::new(
        LeaseLock::new(client, namespace, lock, identity),
        election(lock),
        callbacks,
    )
    .expect("elector")
    .with_metrics(metrics);
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let cancel = cancel.clone();
        async move { elector.run(cancel).await }
    });
    let running = Running {
        cancel,
        task,
        factory: None,
    };
    (running, health)
}

/// When `health` first reports leadership of `lock`, polled every 5 ms.
fn leadership(health: Health, lock: &str) -> JoinHandle<Instant> {
    let needle = format!("leader_election_master_status{{name=\"{lock}\"}} 1");
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(5));
        loop {
            tick.tick().await;
            if health.metrics_text().contains(&needle) {
                return Instant::now();
            }
        }
    })
}

/// One failover: replica A leads and reconciles every Foo; standby B starts (warm or cold) and
/// follows for a second; A crashes; B takes over and reconciles every Foo.
async fn failover(url: &str, namespace: &str, objects: usize, warm: bool, round: usize) {
    let variant = if warm { "warm" } else { "cold" };
    let lock = format!("bench-{variant}-{round}");
    let leader_phase = Phase::new("0", objects);
    let (leader, _) = warm_replica(
        url,
        namespace,
        &lock,
        "replica-a",
        &Recorder::new(Arc::clone(&leader_phase)),
    );
    leader_phase.wait_all("leader").await;

    let standby_phase = Phase::new("0", objects);
    let standby_recorder = Recorder::new(Arc::clone(&standby_phase));
    let (standby, health) = if warm {
        let (standby, health) = warm_replica(url, namespace, &lock, "replica-b", &standby_recorder);
        ready("warm standby", async {
            while !health.is_ready() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        (standby, health)
    } else {
        cold_replica(url, namespace, &lock, "replica-b", &standby_recorder)
    };
    // The standby observes the lease and a renewal or two.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        standby_phase.count.load(Ordering::Acquire),
        0,
        "standby reconciled while following"
    );
    let leads = leadership(health, &lock);

    progress("killing the leader");
    let killed = Instant::now();
    leader.task.abort();
    leader.cancel.cancel();
    let _ = leader.task.await;
    if let Some(factory) = leader.factory {
        factory.shutdown().await;
    }

    let leads = leads.await.expect("leadership");
    standby_phase.wait_all("standby").await;
    let (first, all) = (
        standby_phase.first_reconcile(),
        standby_phase.all_reconciled(),
    );
    let ms = |from: Instant, to: Instant| {
        milliseconds(to.saturating_duration_since(from).as_secs_f64() * 1e3)
    };
    // Leadership is seen up to one poll late: a first reconcile before it was seen came
    // within one poll of it.
    let leader_to_first = if first < leads {
        "< 5 ms".to_owned()
    } else {
        ms(leads, first)
    };
    println!(
        "| {variant} | {round} | {} | {leader_to_first} | {} | {} |",
        ms(killed, leads),
        ms(killed, first),
        ms(killed, all),
    );
    standby.stop().await;
}
