//! `LeaderElector` end to end against the embedded API server, over its in-process transport on
//! Tokio's paused clock: every lock kind acquires, records events, releases and hands over;
//! callbacks, metrics and the health check report what happened; a leader cut off from the
//! server steps down by its renew deadline; damaged locks are taken over; and of two candidates
//! that start together exactly one leads.

use std::sync::Arc;
use std::time::Duration;

use ctrlkit_apiserver::faults::Fault;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use ctrlkit_leaderelection::resource_lock::{self, AnyLock};
use ctrlkit_leaderelection::{
    CheckError, HealthzAdaptor, JITTER_FACTOR, LEADER_ANNOTATION, LeaderCallbacks,
    LeaderElectionConfig, LeaderElectionMetrics, LeaderElectionRecord, LeaderElector,
};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Event};
use kube::Api;
use kube::api::{
    ApiResource, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

const NAMESPACE: &str = "default";
const LOCK: &str = "e2e-lock";
const ELECTION: &str = "e2e";

const KINDS: [&str; 5] = [
    "leases",
    "configmaps",
    "endpoints",
    "configmapsleases",
    "endpointsleases",
];

const LEASE: Duration = Duration::from_secs(15);
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);

/// The longest a polling candidate waits between attempts: the retry period stretched by
/// the full jitter.
fn jittered_retry() -> Duration {
    RETRY.mul_f64(1.0 + JITTER_FACTOR)
}

fn config() -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_duration: LEASE,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY,
        release_on_cancel: true,
        name: ELECTION.to_owned(),
        watch_lock: true,
        coordinated: false,
    }
}

async fn server() -> ApiServer {
    ApiServer::start(ApiServerConfig::default()).await.unwrap()
}

fn client(server: &ApiServer) -> kube::Client {
    kube::Client::new(server.service(), NAMESPACE)
}

/// What one candidate's callbacks were called with, and when.
#[derive(Default)]
struct Seen {
    leaders: Mutex<Vec<String>>,
    started: Mutex<Vec<Instant>>,
    token_cancelled: Mutex<Vec<Instant>>,
    stopped: Mutex<u32>,
}

struct Candidate {
    elector: LeaderElector<AnyLock>,
    seen: Arc<Seen>,
    cancel: CancellationToken,
    run: Option<JoinHandle<()>>,
}

impl Candidate {
    /// A candidate for the lock `kind` on the object `name`, with an event recorder, running
    /// from now on.
    fn start(
        server: &ApiServer,
        kind: &str,
        name: &str,
        identity: &str,
        metrics: Option<LeaderElectionMetrics>,
    ) -> Self {
        Self::start_with(server, kind, name, identity, config(), metrics)
    }

    fn start_with(
        server: &ApiServer,
        kind: &str,
        name: &str,
        identity: &str,
        config: LeaderElectionConfig,
        metrics: Option<LeaderElectionMetrics>,
    ) -> Self {
        let lock = resource_lock::new(kind, client(server), NAMESPACE, name, identity)
            .unwrap()
            .with_event_recorder("e2e");
        let seen = Arc::new(Seen::default());
        let callbacks = LeaderCallbacks::new(
            {
                let seen = Arc::clone(&seen);
                move |token: CancellationToken| {
                    seen.started.lock().push(Instant::now());
                    let seen = Arc::clone(&seen);
                    async move {
                        token.cancelled().await;
                        seen.token_cancelled.lock().push(Instant::now());
                    }
                }
            },
            {
                let seen = Arc::clone(&seen);
                move || *seen.stopped.lock() += 1
            },
        )
        .on_new_leader({
            let seen = Arc::clone(&seen);
            move |leader| seen.leaders.lock().push(leader.to_owned())
        });
        let mut elector = LeaderElector::new(lock, config, callbacks).unwrap();
        if let Some(metrics) = metrics {
            elector = elector.with_metrics(metrics);
        }
        let mut candidate = Self {
            elector,
            seen,
            cancel: CancellationToken::new(),
            run: None,
        };
        candidate.run_again();
        candidate
    }

    /// Starts another run of the same elector.
    fn run_again(&mut self) {
        assert!(self.run.is_none(), "still running");
        self.cancel = CancellationToken::new();
        let (elector, cancel) = (self.elector.clone(), self.cancel.clone());
        self.run = Some(tokio::spawn(async move { elector.run(cancel).await }));
    }

    /// Cancels the run and waits for it to end; the instant it was cancelled.
    async fn stop(&mut self) -> Instant {
        let cancelled_at = Instant::now();
        self.cancel.cancel();
        self.run.take().unwrap().await.unwrap();
        cancelled_at
    }

    /// Whether `on_started_leading` runs and its token has not fired.
    fn acting(&self) -> bool {
        self.seen.started.lock().len() > self.seen.token_cancelled.lock().len()
    }

    fn leaders(&self) -> Vec<String> {
        self.seen.leaders.lock().clone()
    }

    fn started(&self) -> Vec<Instant> {
        self.seen.started.lock().clone()
    }

    fn token_cancelled(&self) -> Vec<Instant> {
        self.seen.token_cancelled.lock().clone()
    }

    fn stopped(&self) -> u32 {
        *self.seen.stopped.lock()
    }

    fn finished(&self) -> bool {
        self.run.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

/// Lets virtual time pass in small steps until `condition` holds, failing after `limit`.
async fn wait_until(limit: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    loop {
        if condition() {
            return;
        }
        assert!(
            Instant::now() < end,
            "gave up after {limit:?} waiting for {what}"
        );
        sleep(Duration::from_millis(10)).await;
    }
}

/// The objects a lock kind keeps its record in: the primary, then the Lease of a MultiLock.
fn lock_objects(kind: &str) -> Vec<ApiResource> {
    let lease = ApiResource::erase::<Lease>(&());
    let config_map = ApiResource::erase::<ConfigMap>(&());
    let endpoints = ApiResource::erase::<Endpoints>(&());
    match kind {
        "leases" => vec![lease],
        "configmaps" => vec![config_map],
        "endpoints" => vec![endpoints],
        "configmapsleases" => vec![config_map, lease],
        "endpointsleases" => vec![endpoints, lease],
        other => panic!("no lock kind {other}"),
    }
}

fn is_multi(kind: &str) -> bool {
    lock_objects(kind).len() == 2
}

/// The record an object holds: a Lease's spec, or the leader annotation parsed with
/// `LeaderElectionRecord::from_annotation`.
fn record_in(resource: &ApiResource, object: DynamicObject) -> LeaderElectionRecord {
    if resource.kind == "Lease" {
        let lease: Lease = object.try_parse().unwrap();
        LeaderElectionRecord::from_lease_spec(&lease.spec.unwrap())
    } else {
        let annotations = object.metadata.annotations.unwrap();
        LeaderElectionRecord::from_annotation(&annotations[LEADER_ANNOTATION]).unwrap()
    }
}

/// Reads the record of the object `name` of `resource`, and its resourceVersion.
async fn read_record(
    server: &ApiServer,
    resource: &ApiResource,
    name: &str,
) -> (LeaderElectionRecord, String) {
    let api: Api<DynamicObject> = Api::namespaced_with(client(server), NAMESPACE, resource);
    let object = api.get(name).await.unwrap();
    let version = object.metadata.resource_version.clone().unwrap();
    (record_in(resource, object), version)
}

/// The records the object `name` held after `version`, from the server's history, up to and
/// including the first held by `last_holder`.
async fn history_until(
    server: &ApiServer,
    resource: &ApiResource,
    name: &str,
    version: &str,
    last_holder: &str,
) -> Vec<LeaderElectionRecord> {
    let api: Api<DynamicObject> = Api::namespaced_with(client(server), NAMESPACE, resource);
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut events = api.watch(&params, version).await.unwrap().boxed();
    let mut records = Vec::new();
    while let Some(event) = events.try_next().await.unwrap() {
        match event {
            WatchEvent::Modified(object) => {
                let record = record_in(resource, object);
                let done = record.holder_identity == last_holder;
                records.push(record);
                if done {
                    return records;
                }
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected change of {name}: {other:?}"),
        }
    }
    panic!("the watch ended before {last_holder} held {name}");
}

/// A leader election event, as the fields that identify it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct EventSeen {
    message: String,
    kind: String,
    api_version: String,
    name: String,
    reason: String,
    type_: String,
    component: String,
}

fn event(message: &str, resource: &ApiResource) -> EventSeen {
    EventSeen {
        message: message.to_owned(),
        kind: resource.kind.clone(),
        api_version: resource.api_version.clone(),
        name: LOCK.to_owned(),
        reason: "LeaderElection".to_owned(),
        type_: "Normal".to_owned(),
        component: "e2e".to_owned(),
    }
}

async fn events(server: &ApiServer) -> Vec<EventSeen> {
    let api: Api<Event> = Api::namespaced(client(server), NAMESPACE);
    let mut events: Vec<EventSeen> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|event| EventSeen {
            message: event.message.unwrap_or_default(),
            kind: event.involved_object.kind.unwrap_or_default(),
            api_version: event.involved_object.api_version.unwrap_or_default(),
            name: event.involved_object.name.unwrap_or_default(),
            reason: event.reason.unwrap_or_default(),
            type_: event.type_.unwrap_or_default(),
            component: event
                .source
                .and_then(|source| source.component)
                .unwrap_or_default(),
        })
        .collect();
    events.sort();
    events
}

/// Waits until the server holds `count` events (they are sent in the background), then
/// returns them sorted.
async fn await_events(server: &ApiServer, count: usize) -> Vec<EventSeen> {
    let end = Instant::now() + Duration::from_secs(1);
    loop {
        let events = events(server).await;
        if events.len() >= count || Instant::now() >= end {
            return events;
        }
        sleep(Duration::from_millis(10)).await;
    }
}

fn metrics_text(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

/// The sample lines of the metric `name` in an exposition.
fn samples(text: &str, name: &str) -> Vec<String> {
    text.lines()
        .filter(|line| line.starts_with(&format!("{name}{{")))
        .map(str::to_owned)
        .collect()
}

/// 1. and 2.: for every lock kind, "a" acquires and the lock object(s) name it, events record
/// it, and when "a" is cancelled it releases the lock (holder "", a 1 s lease) and the
/// already running "b" takes over: for watched locks in the same instant, for the polled
/// MultiLocks within one jittered retry period.
#[tokio::test(start_paused = true)]
async fn every_lock_kind_acquires_records_events_releases_and_hands_over() {
    for kind in KINDS {
        let server = server().await;
        let objects = lock_objects(kind);
        let start = Instant::now();

        let mut a = Candidate::start(&server, kind, LOCK, "a", None);
        wait_until(Duration::from_secs(1), "a to lead", || a.acting()).await;
        assert_eq!(a.started(), vec![start], "{kind}: a acquires at once");
        assert!(a.elector.is_leader(), "{kind}");
        assert_eq!(a.elector.get_leader(), "a", "{kind}");
        assert_eq!(a.leaders(), vec!["a"], "{kind}");

        let mut versions = Vec::new();
        for resource in &objects {
            let (record, version) = read_record(&server, resource, LOCK).await;
            assert_eq!(record.holder_identity, "a", "{kind}: {}", resource.kind);
            assert_eq!(record.lease_duration_seconds, 15, "{kind}");
            assert_eq!(record.leader_transitions, 0, "{kind}");
            assert!(record.acquire_time.is_some(), "{kind}");
            assert_eq!(record.acquire_time, record.renew_time, "{kind}");
            versions.push(version);
        }
        let mut expected: Vec<EventSeen> = objects
            .iter()
            .map(|resource| event("a became leader", resource))
            .collect();
        expected.sort();
        assert_eq!(
            await_events(&server, expected.len()).await,
            expected,
            "{kind}"
        );

        // "b" joins and follows: the watch (or, for a MultiLock, its first poll) shows it "a".
        let mut b = Candidate::start(&server, kind, LOCK, "b", None);
        wait_until(Duration::from_secs(1), "b to see a", || {
            b.leaders() == ["a"]
        })
        .await;
        assert!(!b.elector.is_leader(), "{kind}");
        assert_eq!(b.elector.get_leader(), "a", "{kind}");
        // Nothing was written meanwhile: the versions read are still current.
        for (resource, version) in objects.iter().zip(&versions) {
            assert_eq!(&read_record(&server, resource, LOCK).await.1, version);
        }

        let released_at = a.stop().await;
        assert_eq!(a.token_cancelled(), vec![released_at], "{kind}");
        assert_eq!(a.stopped(), 1, "{kind}");
        assert_eq!(a.leaders(), vec!["a"], "{kind}");

        // Each lock object went from "a" to released to "b", and nothing else.
        for (resource, version) in objects.iter().zip(&versions) {
            let history = history_until(&server, resource, LOCK, version, "b").await;
            let holders: Vec<(&str, i32, i32)> = history
                .iter()
                .map(|record| {
                    (
                        record.holder_identity.as_str(),
                        record.lease_duration_seconds,
                        record.leader_transitions,
                    )
                })
                .collect();
            assert_eq!(
                holders,
                vec![("", 1, 0), ("b", 15, 1)],
                "{kind}: {}",
                resource.kind
            );
            assert_eq!(history[0].acquire_time, history[0].renew_time, "{kind}");
        }

        wait_until(jittered_retry(), "b to lead", || b.acting()).await;
        let took = b.started()[0] - released_at;
        if is_multi(kind) {
            // Polled: the release is seen at b's next attempt.
            assert!(took <= jittered_retry(), "{kind}: b took {took:?}");
            assert_eq!(b.leaders(), vec!["a", "b"], "{kind}");
        } else {
            // Watched: the release wakes b, which takes the lock in the same instant.
            assert_eq!(took, Duration::ZERO, "{kind}");
            assert_eq!(b.leaders(), vec!["a", "", "b"], "{kind}");
        }
        assert!(b.elector.is_leader(), "{kind}");
        assert_eq!(b.stopped(), 0, "{kind}");
        for resource in &objects {
            let (record, _) = read_record(&server, resource, LOCK).await;
            assert_eq!(record.holder_identity, "b", "{kind}");
            assert_eq!(record.leader_transitions, 1, "{kind}");
        }

        let mut expected: Vec<EventSeen> = objects
            .iter()
            .flat_map(|resource| {
                [
                    event("a became leader", resource),
                    event("a stopped leading", resource),
                    event("b became leader", resource),
                ]
            })
            .collect();
        expected.sort();
        assert_eq!(
            await_events(&server, expected.len()).await,
            expected,
            "{kind}"
        );

        let b_stopped_at = b.stop().await;
        assert_eq!(b.token_cancelled(), vec![b_stopped_at], "{kind}");
        assert_eq!(b.stopped(), 1, "{kind}");
        server.shutdown().await;
    }
}

/// 2.: `on_new_leader` reports each holder once, in order; `on_stopped_leading` runs once per
/// run, also for a run that never led; the leader's token fires when it stops.
#[tokio::test(start_paused = true)]
async fn callbacks_report_each_holder_once_and_each_run_stops_once() {
    let server = server().await;
    let mut a = Candidate::start(&server, "leases", LOCK, "a", None);
    wait_until(Duration::from_secs(1), "a to lead", || a.acting()).await;
    let mut b = Candidate::start(&server, "leases", LOCK, "b", None);
    let mut c = Candidate::start(&server, "leases", LOCK, "c", None);
    wait_until(Duration::from_secs(1), "b and c to see a", || {
        b.leaders() == ["a"] && c.leaders() == ["a"]
    })
    .await;

    // A while of renewals changes no holder: nothing more is reported.
    sleep(Duration::from_secs(30)).await;
    assert_eq!(
        (a.leaders(), b.leaders(), c.leaders()),
        (
            vec!["a".to_owned()],
            vec!["a".to_owned()],
            vec!["a".to_owned()]
        )
    );

    // A candidate cancelled before it ever led stops once, and never started.
    c.stop().await;
    assert_eq!((c.started().len(), c.stopped()), (0, 1));
    // Run again and cancelled again: once more.
    c.run_again();
    sleep(Duration::from_secs(1)).await;
    c.stop().await;
    assert_eq!((c.started().len(), c.stopped()), (0, 2));
    assert_eq!(c.leaders(), vec!["a"]);

    let released_at = a.stop().await;
    assert_eq!(a.token_cancelled(), vec![released_at]);
    assert_eq!(a.stopped(), 1);
    wait_until(Duration::from_secs(1), "b to lead", || b.acting()).await;
    assert_eq!(b.started(), vec![released_at]);
    assert_eq!(b.leaders(), vec!["a", "", "b"]);
    // The leader reported itself once and nothing after its release.
    assert_eq!(a.leaders(), vec!["a"]);

    sleep(Duration::from_secs(30)).await;
    assert_eq!(b.leaders(), vec!["a", "", "b"]);
    assert_eq!((b.started().len(), b.token_cancelled().len()), (1, 0));
    let stopped_at = b.stop().await;
    assert_eq!(b.token_cancelled(), vec![stopped_at]);
    assert_eq!((a.stopped(), b.stopped(), c.stopped()), (1, 1, 2));
}

/// 3.: `leader_election_master_status` is 1 while leading and 0 once leadership is lost (here
/// to a usurper that overwrote the Lease); a renewal that had to read first counts in
/// `leader_election_slowpath_total`; the token fires exactly at the renew deadline.
#[tokio::test(start_paused = true)]
async fn metrics_follow_leadership_and_the_token_fires_when_it_is_lost() {
    let server = server().await;
    let mut registry = Registry::default();
    let metrics = LeaderElectionMetrics::new(&mut registry);
    let status = "leader_election_master_status";
    let slowpath = "leader_election_slowpath_total";
    assert!(samples(&metrics_text(&registry), status).is_empty());

    let start = Instant::now();
    let mut a = Candidate::start(&server, "leases", LOCK, "a", Some(metrics));
    wait_until(Duration::from_secs(1), "a to lead", || a.acting()).await;
    assert_eq!(a.started(), vec![start]);
    let text = metrics_text(&registry);
    assert_eq!(
        samples(&text, status),
        vec![r#"leader_election_master_status{name="e2e"} 1"#]
    );
    assert!(samples(&text, slowpath).is_empty(), "{text}");

    // Someone else touches the Lease (a label): the next optimistic renewal conflicts and
    // reads the lock first.
    let leases: Api<Lease> = Api::namespaced(client(&server), NAMESPACE);
    sleep_until(start + Duration::from_secs(1)).await;
    leases
        .patch(
            LOCK,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "labels": { "touched": "yes" } } })),
        )
        .await
        .unwrap();
    sleep_until(start + Duration::from_secs(3)).await;
    let text = metrics_text(&registry);
    assert_eq!(
        samples(&text, slowpath),
        vec![r#"leader_election_slowpath_total{name="e2e"} 1"#]
    );
    assert_eq!(
        samples(&text, status),
        vec![r#"leader_election_master_status{name="e2e"} 1"#]
    );
    assert_eq!(
        leases
            .get(LOCK)
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("a")
    );

    // A usurper overwrites the Lease at 3 s. The renewal of 4 s fails, and its read shows
    // another holder with a valid lease: leadership ends then (client-go would retry until its
    // deadline, 4 s + 10 s, acting as leader all the while).
    let mut usurped = leases.get(LOCK).await.unwrap();
    let spec = usurped.spec.as_mut().unwrap();
    spec.holder_identity = Some("usurper".to_owned());
    spec.lease_transitions = Some(1);
    leases
        .replace(LOCK, &PostParams::default(), &usurped)
        .await
        .unwrap();
    wait_until(Duration::from_secs(20), "a to lose", || !a.acting()).await;
    assert_eq!(a.token_cancelled(), vec![start + Duration::from_secs(4)]);
    wait_until(Duration::from_secs(1), "a's run to end", || a.finished()).await;
    assert_eq!(a.stopped(), 1);
    assert_eq!(a.leaders(), vec!["a", "usurper"]);
    assert!(!a.elector.is_leader());
    let text = metrics_text(&registry);
    assert_eq!(
        samples(&text, status),
        vec![r#"leader_election_master_status{name="e2e"} 0"#]
    );
    assert_eq!(
        samples(&text, slowpath),
        vec![r#"leader_election_slowpath_total{name="e2e"} 1"#]
    );
    // It released nothing: the lock it lost is not its own to empty.
    let spec = leases.get(LOCK).await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("usurper"));
    assert_eq!(spec.lease_transitions, Some(1));
    a.run.take().unwrap().await.unwrap();
}

/// 4.: the health check passes while the leader renews. When the server is cut off, the
/// leader's token fires by its renew deadline (at most `renew_deadline + retry_period` after
/// the cut), the followers do not lead while the server is unreachable, and once it is back
/// exactly one of them leads within a jittered retry period.
#[tokio::test(start_paused = true)]
async fn a_leader_cut_off_steps_down_and_followers_wait_for_the_server() {
    let server = server().await;
    let tolerance = Duration::from_secs(20);
    let healthz = HealthzAdaptor::new(tolerance);
    let start = Instant::now();
    let a = Candidate::start(&server, "leases", LOCK, "a", None);
    healthz.set_leader_election(Arc::new(a.elector.clone()));
    wait_until(Duration::from_secs(1), "a to lead", || a.acting()).await;
    let b = Candidate::start(&server, "leases", LOCK, "b", None);
    let c = Candidate::start(&server, "leases", LOCK, "c", None);
    assert_eq!(healthz.check(), Ok(()));

    // Renewing every 2 s, healthy throughout.
    for second in 1..=31 {
        sleep_until(start + Duration::from_secs(second)).await;
        assert_eq!(healthz.check(), Ok(()), "at {second} s");
        assert!(a.acting() && a.elector.is_leader());
    }
    let renewed = leases_renew_time(&server).await;

    let cut = Instant::now();
    let partition = Duration::from_secs(60);
    server.partition(partition);
    let healed = cut + partition;

    // The renewal of 32 s fails, and its retries, until its deadline at 42 s.
    wait_until(RENEW_DEADLINE + RETRY, "a to step down", || !a.acting()).await;
    let stepped_down = a.token_cancelled()[0];
    assert!(stepped_down - cut <= RENEW_DEADLINE + RETRY);
    assert_eq!(
        stepped_down,
        start + Duration::from_secs(32) + RENEW_DEADLINE
    );
    wait_until(Duration::from_secs(1), "a's run to end", || a.finished()).await;
    assert_eq!(a.stopped(), 1);

    // The elector still reads its own record (it could not read anything else), so the check
    // goes on treating it as the leader: healthy until its last renewal (30 s) is older than
    // the lease plus the tolerance, then failing, so that a process left running is restarted.
    let last_renewal = start + Duration::from_secs(30);
    sleep_until(last_renewal + LEASE + tolerance).await;
    assert_eq!(healthz.check(), Ok(()));
    sleep(Duration::from_millis(1)).await;
    assert_eq!(
        healthz.check(),
        Err(CheckError::RenewalOverdue(ELECTION.to_owned()))
    );

    // Nobody acts as leader while the server is unreachable; the followers still name "a".
    wait_until(partition, "the partition to end", || {
        assert!(!b.acting() && !c.acting(), "a follower led while cut off");
        assert_eq!(
            (b.elector.get_leader(), c.elector.get_leader()),
            ("a".to_owned(), "a".to_owned())
        );
        Instant::now() >= healed - Duration::from_millis(10)
    })
    .await;
    assert_eq!((b.started().len(), c.started().len()), (0, 0));

    wait_until(
        jittered_retry() + Duration::from_millis(20),
        "a new leader",
        || b.acting() || c.acting(),
    )
    .await;
    let (leader, follower) = if b.acting() { (&b, &c) } else { (&c, &b) };
    let identity = if b.acting() { "b" } else { "c" };
    let took = leader.started()[0] - healed;
    assert!(
        took <= jittered_retry(),
        "took {took:?} after the partition"
    );
    assert!(leader.started()[0] >= healed);
    assert!(!follower.acting());
    wait_until(Duration::from_secs(1), "the follower to see it", || {
        follower.elector.get_leader() == identity
    })
    .await;
    assert_eq!(leader.leaders(), vec!["a", identity]);
    assert_eq!(follower.leaders(), vec!["a", identity]);
    let (record, _) = read_record(&server, &ApiResource::erase::<Lease>(&()), LOCK).await;
    assert_eq!(record.holder_identity, identity);
    assert_eq!(record.leader_transitions, 1);
    assert!(record.renew_time > renewed);
    assert_eq!(a.token_cancelled().len(), 1);
}

async fn leases_renew_time(server: &ApiServer) -> Option<jiff::Timestamp> {
    read_record(server, &ApiResource::erase::<Lease>(&()), LOCK)
        .await
        .0
        .renew_time
}

/// 5.: a ConfigMap lock whose record is not JSON, or JSON of the wrong types, and a Lease whose
/// spec has the wrong types, are taken over as if empty: one transition, the candidate's record.
#[tokio::test(start_paused = true)]
async fn damaged_records_are_taken_over() {
    let server = server().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client(&server), NAMESPACE);
    for (name, annotation) in [
        ("not-json", "not json"),
        ("wrong-types", r#"{"holderIdentity": 7}"#),
    ] {
        let damaged = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                annotations: Some([(LEADER_ANNOTATION.to_owned(), annotation.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        config_maps
            .create(&PostParams::default(), &damaged)
            .await
            .unwrap();
        let mut a = Candidate::start(&server, "configmaps", name, "a", None);
        wait_until(Duration::from_secs(1), "a to lead", || a.acting()).await;
        let stored = config_maps
            .get(name)
            .await
            .unwrap()
            .metadata
            .annotations
            .unwrap();
        let record = LeaderElectionRecord::from_annotation(&stored[LEADER_ANNOTATION]).unwrap();
        assert_eq!(record.holder_identity, "a", "{name}");
        assert_eq!(record.leader_transitions, 1, "{name}");
        assert_eq!(record.lease_duration_seconds, 15, "{name}");
        a.stop().await;
        assert_eq!(a.stopped(), 1);
    }

    // The server refuses a Lease whose fields have the wrong type, as kube-apiserver does; but
    // one can be in storage (written before that check, or by another writer of the data), and
    // the elector must not be stuck on it.
    let resource = ApiResource::erase::<Lease>(&());
    let leases: Api<DynamicObject> = Api::namespaced_with(client(&server), NAMESPACE, &resource);
    let mut damaged = DynamicObject::new("wrong-lease", &resource).within(NAMESPACE);
    damaged.data = serde_json::json!({
        "spec": { "holderIdentity": "x", "leaseDurationSeconds": "soon", "leaseTransitions": 4 }
    });
    match leases.create(&PostParams::default(), &damaged).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 400),
        other => panic!("a Lease of the wrong field types was accepted: {other:?}"),
    }
    let lease_kind = ctrlkit_apiserver::resource::builtin_resources()
        .into_iter()
        .find(|kind| kind.plural == "leases")
        .unwrap();
    server
        .store()
        .create(
            &lease_kind,
            NAMESPACE,
            serde_json::to_value(&damaged).unwrap(),
        )
        .unwrap();
    let typed: Api<Lease> = Api::namespaced(client(&server), NAMESPACE);
    assert!(
        matches!(
            typed.get("wrong-lease").await,
            Err(kube::Error::SerdeError(_))
        ),
        "a typed client cannot read it either"
    );
    let mut a = Candidate::start(&server, "leases", "wrong-lease", "a", None);
    wait_until(Duration::from_secs(1), "a to lead", || a.acting()).await;
    let spec = typed.get("wrong-lease").await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    // It renews what it wrote.
    sleep(Duration::from_secs(5)).await;
    assert!(a.acting());
    a.stop().await;
    assert_eq!(
        typed
            .get("wrong-lease")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("")
    );
}

/// Whether exactly one of two candidates acts as leader and both name it.
fn agree_on_one_leader(x: &Candidate, y: &Candidate) -> bool {
    let leader = match (x.acting(), y.acting()) {
        (true, false) => "x",
        (false, true) => "y",
        _ => return false,
    };
    x.elector.get_leader() == leader && y.elector.get_leader() == leader
}

/// 6.: two candidates that start in the same instant: exactly one leads, and the other names
/// it, for every lock kind, watching or polling.
#[tokio::test(start_paused = true)]
async fn of_two_candidates_starting_together_exactly_one_leads() {
    for kind in KINDS {
        for watch_lock in [true, false] {
            let case = format!("{kind}, watch_lock {watch_lock}");
            let server = server().await;
            let config = LeaderElectionConfig {
                watch_lock,
                ..config()
            };
            let start = Instant::now();
            let mut x = Candidate::start_with(&server, kind, LOCK, "x", config.clone(), None);
            let mut y = Candidate::start_with(&server, kind, LOCK, "y", config, None);
            wait_until(
                jittered_retry() + Duration::from_millis(20),
                "both to agree",
                || agree_on_one_leader(&x, &y),
            )
            .await;
            let (leader, follower, identity) = if x.acting() {
                (&x, &y, "x")
            } else {
                (&y, &x, "y")
            };
            assert_eq!(leader.started(), vec![start], "{case}");
            assert!(follower.started().is_empty(), "{case}");
            assert!(leader.elector.is_leader(), "{case}");
            assert!(!follower.elector.is_leader(), "{case}");
            assert_eq!(follower.elector.get_leader(), identity, "{case}");
            for resource in lock_objects(kind) {
                let (record, _) = read_record(&server, &resource, LOCK).await;
                assert_eq!(
                    record.holder_identity, identity,
                    "{case}: {}",
                    resource.kind
                );
                assert_eq!(record.leader_transitions, 0, "{case}");
            }
            // And it stays that way.
            sleep(LEASE * 2).await;
            assert_eq!(leader.started(), vec![start], "{case}");
            assert!(leader.acting() && follower.started().is_empty(), "{case}");
            assert_eq!(follower.elector.get_leader(), identity, "{case}");
            x.stop().await;
            y.stop().await;
            assert_eq!((x.stopped(), y.stopped()), (1, 1), "{case}");
            server.shutdown().await;
        }
    }
}

/// 6., as a real race: both candidates read the lock before either has created it (their reads
/// are slowed down to overlap), and the first creator's writes are the slower ones. Still exactly
/// one leads, the other names it, and leadership does not lapse.
#[tokio::test(start_paused = true)]
async fn of_two_candidates_that_both_saw_no_lock_exactly_one_leads() {
    for kind in KINDS {
        let server = server().await;
        let primary = lock_objects(kind)[0].plural.clone();
        let delay = Fault::Delay(Duration::from_millis(1));
        // Both reads of the primary wait 1 ms, so both find no lock.
        server
            .faults()
            .fail_next(2, Some("get"), Some(&primary), delay);
        // The first create of the last object written (the Lease of a MultiLock) waits 1 ms,
        // so the second candidate's writes overtake the first's.
        let last = lock_objects(kind).pop().unwrap().plural;
        server
            .faults()
            .fail_next(1, Some("create"), Some(&last), delay);
        let start = Instant::now();
        let mut x = Candidate::start(&server, kind, LOCK, "x", None);
        let mut y = Candidate::start(&server, kind, LOCK, "y", None);
        wait_until(
            jittered_retry() + Duration::from_millis(20),
            "both to agree",
            || agree_on_one_leader(&x, &y),
        )
        .await;
        let (leader, follower, identity) = if x.acting() {
            (&x, &y, "x")
        } else {
            (&y, &x, "y")
        };
        // Of single locks, the faster create wins; of a MultiLock, the candidate that
        // created the primary, once its secondary is created too.
        let expected = if is_multi(kind) {
            ("x", start + Duration::from_millis(2))
        } else {
            ("y", start + Duration::from_millis(1))
        };
        assert_eq!((identity, leader.started()[0]), expected, "{kind}");
        assert_eq!(leader.leaders(), vec![identity], "{kind}");
        assert_eq!(follower.leaders(), vec![identity], "{kind}");
        assert_eq!(follower.elector.get_leader(), identity, "{kind}");
        for resource in lock_objects(kind) {
            let (record, _) = read_record(&server, &resource, LOCK).await;
            assert_eq!(
                record.holder_identity, identity,
                "{kind}: {}",
                resource.kind
            );
            assert_eq!(record.leader_transitions, 0, "{kind}");
        }
        sleep(LEASE * 2).await;
        assert_eq!(leader.started().len(), 1, "{kind}: leadership lapsed");
        assert!(leader.acting() && follower.started().is_empty(), "{kind}");
        assert_eq!(follower.elector.get_leader(), identity, "{kind}");
        x.stop().await;
        y.stop().await;
        server.shutdown().await;
    }
}
