//! Chaos: informers, a controller and leader election candidates against the embedded API
//! server while writers change objects and the fault hooks cut watches, compact history, fail
//! requests with 429/500/503, slow them down, partition and restart the listener. Once the faults
//! stop, every cache must equal a fresh list, every handler must have seen each object's final
//! state (a deletion as a delete or a tombstone), no key's resourceVersion may go backwards,
//! the controller must have reconciled every object at its final state, and no two candidates
//! may ever have led at once.
//!
//! `CHAOS_RUNS=<n>` runs more seeds (default 200, what CI runs); `CHAOS_SEED=<n>` replays one.
//! All of it runs on the paused clock through the server's in-process transport.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use ctrlkit::apiserver::faults::Fault;
use ctrlkit::apiserver::in_process::InProcessBody;
use ctrlkit::apiserver::{ApiServer, ApiServerConfig, InProcessService};
use ctrlkit::cache::{ObjectOrTombstone, ResourceEventHandlerFuncs, SharedInformerFactory};
use ctrlkit::controller::{Action, Context, Controller, ReconcileError, Reconciler};
use ctrlkit::leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use parking_lot::Mutex;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
const NAMESPACE: &str = "chaos";

/// The in-process transport, counting lists and watches of ConfigMaps.
#[derive(Clone)]
struct Counted {
    inner: InProcessService,
    counts: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    lists: AtomicU64,
    watches: AtomicU64,
}

impl tower_service::Service<http::Request<kube::client::Body>> for Counted {
    type Response = http::Response<InProcessBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), BoxError>> {
        tower_service::Service::<http::Request<kube::client::Body>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        if request.uri().path().ends_with("/configmaps") {
            let watch = request
                .uri()
                .query()
                .is_some_and(|query| query.contains("watch=true"));
            let counter = if watch {
                &self.counts.watches
            } else {
                &self.counts.lists
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        Box::pin(self.inner.call(request))
    }
}

/// What one handler saw, per key: the resourceVersions in order, and whether the last event
/// was a deletion.
#[derive(Default)]
struct HandlerLog {
    per_key: Mutex<HashMap<String, KeyLog>>,
    events: AtomicUsize,
    backwards: Mutex<Vec<String>>,
}

#[derive(Default, Clone)]
struct KeyLog {
    last_version: u64,
    deleted: bool,
}

fn version(object: &ConfigMap) -> u64 {
    object
        .resource_version()
        .and_then(|version| version.parse().ok())
        .unwrap_or(0)
}

fn key(object: &ConfigMap) -> String {
    format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

impl HandlerLog {
    fn saw(&self, key: String, version: u64, deleted: bool) {
        self.events.fetch_add(1, Ordering::Relaxed);
        let mut per_key = self.per_key.lock();
        let entry = per_key.entry(key.clone()).or_default();
        // A tombstone may carry the last state the cache had: not newer, but never older.
        let regressed = if deleted {
            version < entry.last_version && version != 0
        } else {
            version <= entry.last_version
        };
        if regressed {
            self.backwards
                .lock()
                .push(format!("{key}: {} then {version}", entry.last_version));
        }
        entry.last_version = entry.last_version.max(version);
        entry.deleted = deleted;
    }
}

/// The controller's reconciles: the version of each key its lister showed last (0: gone).
struct Recorder {
    lister: ctrlkit::cache::Lister<ConfigMap>,
    seen: Arc<Mutex<HashMap<String, u64>>>,
}

impl Reconciler for Recorder {
    async fn reconcile(&self, key: &str, _: &Context) -> Result<Action, ReconcileError> {
        let (namespace, name) = ctrlkit::cache::split_meta_namespace_key(key)?;
        let version = self
            .lister
            .get(namespace, name)
            .map_or(0, |object| version(&object));
        self.seen.lock().insert(key.to_owned(), version);
        Ok(Action::done())
    }
}

#[derive(Default, Debug, Clone)]
struct Figures {
    faults: BTreeMap<&'static str, u64>,
    writes: u64,
    lists: u64,
    watches: u64,
    handler_events: u64,
    reconciles: u64,
    leader_terms: u64,
    convergence: Duration,
}

#[derive(Default)]
struct Leadership {
    live: Mutex<BTreeSet<String>>,
    overlaps: AtomicUsize,
    terms: AtomicU64,
}

struct Acting(Arc<Leadership>, String);

impl Drop for Acting {
    fn drop(&mut self) {
        self.0.live.lock().remove(&self.1);
    }
}

fn config_map(name: &str, value: u64) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_owned(), value.to_string())])),
        ..ConfigMap::default()
    }
}

/// Log lines stamped with virtual time (`CHAOS_TRACE=<filter>`).
struct VirtualTime(Instant);

impl tracing_subscriber::fmt::time::FormatTime for VirtualTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        write!(w, "{:>9.3}", self.0.elapsed().as_secs_f64())
    }
}

async fn run_seed(seed: u64) -> Result<Figures, String> {
    if let Ok(filter) = std::env::var("CHAOS_TRACE") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_timer(VirtualTime(Instant::now()))
            .try_init();
    }
    fastrand::seed(seed);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut figures = Figures::default();
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let counts = Arc::new(Counts::default());
    let client = kube::Client::new(
        Counted {
            inner: server.service(),
            counts: Arc::clone(&counts),
        },
        NAMESPACE,
    );
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace = k8s_openapi::api::core::v1::Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let cancel = CancellationToken::new();

    // Two informers with their own factories (own reflectors), each with a logging handler.
    let mut logs = Vec::new();
    let mut indexers = Vec::new();
    for _ in 0..2 {
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let informer = factory.namespaced_informer::<ConfigMap>(NAMESPACE);
        let log = Arc::new(HandlerLog::default());
        let (on_add, on_update, on_delete) = (Arc::clone(&log), Arc::clone(&log), Arc::clone(&log));
        informer
            .add_event_handler(
                ResourceEventHandlerFuncs::new()
                    .on_add(move |object: &Arc<ConfigMap>, _| {
                        on_add.saw(key(object), version(object), false);
                    })
                    .on_update(move |_, object: &Arc<ConfigMap>| {
                        on_update.saw(key(object), version(object), false);
                    })
                    .on_delete(move |gone: &ObjectOrTombstone<ConfigMap>| match gone {
                        ObjectOrTombstone::Object(object) => {
                            on_delete.saw(key(object), version(object), true);
                        }
                        ObjectOrTombstone::Tombstone(tombstone) => {
                            let version = tombstone.obj.as_deref().map_or(0, version);
                            on_delete.saw(tombstone.key.clone(), version, true);
                        }
                    }),
            )
            .unwrap();
        indexers.push(informer.get_indexer());
        logs.push(log);
        factory.start(&cancel);
    }

    // A controller over the same objects, two workers.
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.namespaced_informer::<ConfigMap>(NAMESPACE);
    let reconciled = Arc::new(Mutex::new(HashMap::new()));
    let recorder = Recorder {
        lister: ctrlkit::cache::Lister::new(informer.get_indexer()),
        seen: Arc::clone(&reconciled),
    };
    let reconciles = Arc::new(AtomicU64::new(0));
    let controller = Controller::new("chaos", informer).workers(2);
    factory.start(&cancel);
    let controller_run = tokio::spawn({
        let cancel = cancel.clone();
        let reconciles = Arc::clone(&reconciles);
        async move {
            struct Counting(Recorder, Arc<AtomicU64>);
            impl Reconciler for Counting {
                async fn reconcile(
                    &self,
                    key: &str,
                    ctx: &Context,
                ) -> Result<Action, ReconcileError> {
                    self.1.fetch_add(1, Ordering::Relaxed);
                    self.0.reconcile(key, ctx).await
                }
            }
            controller
                .run(Counting(recorder, reconciles), cancel)
                .await
                .unwrap();
        }
    });

    // Three leader election candidates on a Lease.
    let leadership = Arc::new(Leadership::default());
    let mut candidates = Vec::new();
    for n in 0..3 {
        let id = format!("candidate-{n}");
        let lock = LeaseLock::new(client.clone(), NAMESPACE, "chaos", &id);
        let (leadership, me) = (Arc::clone(&leadership), id.clone());
        let callbacks = LeaderCallbacks::new(
            move |token: CancellationToken| {
                let leadership = Arc::clone(&leadership);
                let me = me.clone();
                {
                    let mut live = leadership.live.lock();
                    if !live.is_empty() {
                        leadership.overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    live.insert(me.clone());
                }
                leadership.terms.fetch_add(1, Ordering::Relaxed);
                let acting = Acting(leadership, me);
                async move {
                    token.cancelled().await;
                    drop(acting);
                }
            },
            || {},
        );
        let config = LeaderElectionConfig {
            release_on_cancel: true,
            name: "chaos".into(),
            ..LeaderElectionConfig::default()
        };
        let elector = LeaderElector::new(lock, config, callbacks).unwrap();
        let token = cancel.child_token();
        // A candidate whose election ended (leadership lost) stands again, as a restarted
        // process would.
        candidates.push(tokio::spawn(async move {
            while !token.is_cancelled() {
                elector.run(token.clone()).await;
                sleep(Duration::from_millis(100)).await;
            }
        }));
    }

    // Writers and faults for a minute of virtual time.
    let writer = kube::Client::new(server.service(), NAMESPACE);
    let writes: Api<ConfigMap> = Api::namespaced(writer, NAMESPACE);
    let end = Instant::now() + Duration::from_secs(60);
    let mut next_fault = Instant::now() + Duration::from_millis(rng.u64(500..5_000));
    while Instant::now() < end {
        let name = format!("cm-{}", rng.u32(0..30));
        let value = rng.u64(..);
        let wrote = match rng.u32(0..10) {
            0..4 => writes
                .create(&PostParams::default(), &config_map(&name, value))
                .await
                .is_ok(),
            4..8 => match writes.get(&name).await {
                Ok(mut current) => {
                    current.data = config_map(&name, value).data;
                    writes
                        .replace(&name, &PostParams::default(), &current)
                        .await
                        .is_ok()
                }
                Err(_) => false,
            },
            _ => writes.delete(&name, &DeleteParams::default()).await.is_ok(),
        };
        figures.writes += u64::from(wrote);
        if Instant::now() >= next_fault {
            let kind = match rng.u32(0..8) {
                0 => {
                    server.faults().cut_watches();
                    "cut watches"
                }
                1 => {
                    let now = server.store().resource_version();
                    server.store().compact(now);
                    server.faults().cut_watches();
                    "compact history + cut"
                }
                2 => {
                    let fault = [
                        Fault::TooManyRequests {
                            retry_after_seconds: 1,
                        },
                        Fault::InternalError,
                        Fault::ServiceUnavailable,
                    ][rng.usize(0..3)];
                    let verb = ["list", "watch", "get", "update"][rng.usize(0..4)];
                    server
                        .faults()
                        .fail_next(rng.usize(1..6), Some(verb), None, fault);
                    "429/500/503"
                }
                3 => {
                    server.faults().fail_next(
                        rng.usize(1..4),
                        None,
                        None,
                        Fault::Delay(Duration::from_millis(rng.u64(100..5_000))),
                    );
                    "delay"
                }
                4 => {
                    server.partition(Duration::from_millis(rng.u64(500..8_000)));
                    "partition"
                }
                5 => {
                    server.restart_listener();
                    "restart listener"
                }
                6 => {
                    server.faults().hold_watches();
                    "hold watches"
                }
                _ => {
                    server.faults().release_watches();
                    "release watches"
                }
            };
            *figures.faults.entry(kind).or_default() += 1;
            next_fault = Instant::now() + Duration::from_millis(rng.u64(500..5_000));
        }
        sleep(Duration::from_millis(rng.u64(1..200))).await;
    }

    // The faults stop; everything must converge. A reflector may be sitting out a backoff
    // (up to twice its 30 s cap with client-go's jitter) before it watches or lists again, so
    // convergence is awaited for up to five minutes of virtual time and its time recorded.
    server.faults().clear();
    let quiet = Instant::now();
    let deadline = quiet + Duration::from_secs(300);
    let mut problems = loop {
        let problems = check(&writes, &indexers, &logs, &reconciled).await?;
        if problems.is_empty() || Instant::now() >= deadline {
            break problems;
        }
        sleep(Duration::from_secs(1)).await;
    };
    figures.convergence = quiet.elapsed();
    for log in &logs {
        figures.handler_events += log.events.load(Ordering::Relaxed) as u64;
    }
    let overlaps = leadership.overlaps.load(Ordering::SeqCst);
    if overlaps > 0 {
        problems.push(format!("{overlaps} instants with two leaders"));
    }
    figures.lists = counts.lists.load(Ordering::Relaxed);
    figures.watches = counts.watches.load(Ordering::Relaxed);
    figures.reconciles = reconciles.load(Ordering::Relaxed);
    figures.leader_terms = leadership.terms.load(Ordering::Relaxed);

    cancel.cancel();
    let _ = controller_run.await;
    for candidate in candidates {
        let _ = candidate.await;
    }
    drop(server);
    if problems.is_empty() {
        Ok(figures)
    } else {
        problems.truncate(20);
        Err(problems.join("\n"))
    }
}

/// What differs from the truth after the faults: an empty list when everything converged.
async fn check(
    api: &Api<ConfigMap>,
    indexers: &[ctrlkit::cache::Indexer<ConfigMap>],
    logs: &[Arc<HandlerLog>],
    reconciled: &Mutex<HashMap<String, u64>>,
) -> Result<Vec<String>, String> {
    // A partition may outlast the faults by a few seconds: a failed list is one more reason to
    // look again.
    let truth: BTreeMap<String, u64> = match api.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .iter()
            .map(|object| (key(object), version(object)))
            .collect(),
        Err(error) => return Ok(vec![format!("the list of the truth failed: {error}")]),
    };
    let mut problems = Vec::new();
    for (n, (indexer, log)) in indexers.iter().zip(logs).enumerate() {
        let cached: BTreeMap<String, u64> = indexer
            .list()
            .iter()
            .map(|object| (key(object), version(object)))
            .collect();
        if cached != truth {
            problems.push(format!("informer {n}: cache differs from a fresh list"));
        }
        let per_key = log.per_key.lock().clone();
        for (key, seen) in &per_key {
            match truth.get(key) {
                Some(version) if seen.deleted || seen.last_version != *version => {
                    problems.push(format!(
                        "informer {n}: {key} last seen at {} (deleted {}), is at {version}",
                        seen.last_version, seen.deleted
                    ))
                }
                None if !seen.deleted => {
                    problems.push(format!("informer {n}: {key} deleted, no delete delivered"))
                }
                _ => {}
            }
        }
        for key in truth.keys() {
            if !per_key.contains_key(key) {
                problems.push(format!("informer {n}: {key} never delivered"));
            }
        }
        problems.extend(
            log.backwards
                .lock()
                .iter()
                .map(|b| format!("informer {n}: backwards {b}")),
        );
    }
    let reconciled = reconciled.lock().clone();
    for (key, version) in &truth {
        if reconciled.get(key) != Some(version) {
            problems.push(format!(
                "controller: {key} last reconciled at {:?}, is at {version}",
                reconciled.get(key)
            ));
        }
    }
    for (key, version) in &reconciled {
        if !truth.contains_key(key) && *version != 0 {
            problems.push(format!(
                "controller: {key} is gone but last reconciled at {version}"
            ));
        }
    }
    Ok(problems)
}

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![seed];
    }
    let runs = std::env::var("CHAOS_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(200);
    (1..=runs).collect()
}

#[test]
fn caches_converge_handlers_see_every_final_state_and_leaders_never_overlap() {
    let mut total = Figures::default();
    let mut failures = Vec::new();
    let seeds = seeds();
    for &seed in &seeds {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        match runtime.block_on(run_seed(seed)) {
            Ok(figures) => {
                for (kind, count) in figures.faults {
                    *total.faults.entry(kind).or_default() += count;
                }
                total.writes += figures.writes;
                total.lists += figures.lists;
                total.watches += figures.watches;
                total.handler_events += figures.handler_events;
                total.reconciles += figures.reconciles;
                total.leader_terms += figures.leader_terms;
                total.convergence = total.convergence.max(figures.convergence);
            }
            Err(problems) => failures.push(format!(
                "seed {seed} failed (replay: CHAOS_SEED={seed} cargo test -p ctrlkit --test it -- chaos::):\n{problems}"
            )),
        }
    }
    eprintln!(
        "chaos: {} seeds; faults {:?}; writes {}; ConfigMap lists {} and watches {} (initial: {} each); handler events {}; reconciles {}; leader terms {}; slowest convergence after the faults {:?}; divergences {}",
        seeds.len(),
        total.faults,
        total.writes,
        total.lists,
        total.watches,
        3 * seeds.len(),
        total.handler_events,
        total.reconciles,
        total.leader_terms,
        total.convergence,
        failures.len(),
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The runs did something: objects were written, delivered, reconciled, and led.
    assert!(total.writes > 0 && total.handler_events > 0 && total.reconciles > 0);
    assert!(total.leader_terms >= seeds.len() as u64);
}
