//! The elector against a scripted API server, case for case with client-go's
//! `leaderelection_test.go`: what one round of acquire-or-renew does to each kind of lock
//! (Lease, ConfigMap, Endpoints, and the ConfigMap/Endpoints-then-Lease `MultiLock`), how a
//! leader releases, what it does when cancelled, and when a renewal skips the read.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::LeaderElector;
use crate::callbacks::LeaderCallbacks;
use crate::config::{ConfigError, LeaderElectionConfig};
use crate::record::{LEADER_ANNOTATION, LeaderElectionRecord};
use crate::resource_lock::{self, AnyLock, UNKNOWN_LEADER};
use crate::test_support::{Call, FakeApi, Kind, Reply, record_in};

const NAMESPACE: &str = "foo";
const NAME: &str = "bar";
const IDENTITY: &str = "baz";

fn held_by(holder: &str) -> LeaderElectionRecord {
    LeaderElectionRecord {
        holder_identity: holder.to_owned(),
        ..LeaderElectionRecord::default()
    }
}

fn held_for(holder: &str, seconds: i32) -> LeaderElectionRecord {
    LeaderElectionRecord {
        lease_duration_seconds: seconds,
        ..held_by(holder)
    }
}

/// The raw form a lock reports for `record` (the record's JSON, for every kind).
fn raw(record: &LeaderElectionRecord) -> Vec<u8> {
    record.to_annotation().into_bytes()
}

/// The raw form a `MultiLock` reports when both locks hold `record`.
fn raw_twice(record: &LeaderElectionRecord) -> Vec<u8> {
    [raw(record), b",".to_vec(), raw(record)].concat()
}

fn object(kind: Kind, record: &LeaderElectionRecord) -> Reply {
    Reply::Object(kind.object(NAMESPACE, NAME, Some(record)))
}

/// When this candidate last saw the record change.
#[derive(Debug, Clone, Copy)]
enum Seen {
    /// Never: any lease it saw has run out.
    Past,
    /// Far ahead: any lease it saw is still running.
    Future,
    /// Just now.
    Now,
}

impl Seen {
    fn instant(self) -> Option<Instant> {
        match self {
            Seen::Past => None,
            Seen::Future => Some(Instant::now() + Duration::from_secs(1000 * 3600)),
            Seen::Now => Some(Instant::now()),
        }
    }
}

type Reported = Arc<Mutex<Vec<String>>>;

fn config(lease: u64, renew: u64, retry: u64) -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_duration: Duration::from_secs(lease),
        renew_deadline: Duration::from_secs(renew),
        retry_period: Duration::from_secs(retry),
        name: NAME.to_owned(),
        // client-go polls only; so do these tests, and every call is scripted.
        watch_lock: false,
        ..LeaderElectionConfig::default()
    }
}

fn lock(api: &FakeApi, lock_kind: &str) -> AnyLock {
    resource_lock::new(lock_kind, api.client(), NAMESPACE, NAME, IDENTITY)
        .expect("a known lock kind")
        .with_event_recorder("leader-election-tests")
}

/// A candidate `baz` on `lock_kind`, with a lease of 10 s, that last observed `record` (as
/// `raw`) at `seen`.
fn candidate(
    api: &FakeApi,
    lock_kind: &str,
    record: LeaderElectionRecord,
    raw: Vec<u8>,
    seen: Seen,
) -> (LeaderElector<AnyLock>, Reported) {
    let reported = Reported::default();
    let report = Arc::clone(&reported);
    let callbacks = LeaderCallbacks::new(|_| async {}, || {})
        .on_new_leader(move |leader| report.lock().push(leader.to_owned()));
    let elector = LeaderElector::new(lock(api, lock_kind), config(10, 5, 2), callbacks)
        .expect("a valid configuration");
    {
        let mut observed = elector.shared.observed.lock();
        observed.record = record;
        observed.raw = raw;
        observed.time = seen.instant();
    }
    (elector, reported)
}

fn observed(elector: &LeaderElector<AnyLock>) -> LeaderElectionRecord {
    elector.shared.observed.lock().record.clone()
}

/// Lets the events the lock sends in the background arrive (the paused clock only moves once
/// nothing else can run).
async fn settle() {
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// One of client-go's try-acquire-or-renew cases.
struct Case {
    name: &'static str,
    /// (verb, resource, reply) for each call expected, in order.
    script: Vec<(&'static str, &'static str, Reply)>,
    observed: LeaderElectionRecord,
    observed_raw: Vec<u8>,
    seen: Seen,
    /// When the first round does not give the expected result, wait this long and try again.
    retry_after: Option<Duration>,
    succeeds: bool,
    transitions: i32,
    holder: &'static str,
}

impl Case {
    fn new(name: &'static str, script: Vec<(&'static str, &'static str, Reply)>) -> Self {
        Self {
            name,
            script,
            observed: LeaderElectionRecord::default(),
            observed_raw: raw(&LeaderElectionRecord::default()),
            seen: Seen::Past,
            retry_after: None,
            succeeds: true,
            transitions: 0,
            holder: IDENTITY,
        }
    }

    fn observed(mut self, record: LeaderElectionRecord, raw: Vec<u8>, seen: Seen) -> Self {
        self.observed = record;
        self.observed_raw = raw;
        self.seen = seen;
        self
    }

    fn seen(mut self, seen: Seen) -> Self {
        self.seen = seen;
        self
    }

    fn retry_after(mut self, wait: Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }

    fn transitions(mut self, transitions: i32) -> Self {
        self.transitions = transitions;
        self
    }

    fn fails_held_by(mut self, holder: &'static str) -> Self {
        self.succeeds = false;
        self.holder = holder;
        self
    }

    async fn run(self, lock_kind: &str) {
        let label = format!("{lock_kind}: {}", self.name);
        let expected_calls: Vec<String> = self
            .script
            .iter()
            .map(|(verb, resource, _)| format!("{verb} {resource}/{NAME}"))
            .collect();
        let api = FakeApi::scripted(self.script);
        let (elector, reported) =
            candidate(&api, lock_kind, self.observed, self.observed_raw, self.seen);

        let mut acquired = elector.try_acquire_or_renew().await;
        if acquired != self.succeeds
            && let Some(wait) = self.retry_after
        {
            tokio::time::sleep(wait).await;
            acquired = elector.try_acquire_or_renew().await;
        }
        assert_eq!(acquired, self.succeeds, "{label}: result");

        let record = observed(&elector);
        assert_eq!(record.holder_identity, self.holder, "{label}: holder");
        assert_eq!(
            record.leader_transitions, self.transitions,
            "{label}: transitions"
        );
        assert_eq!(api.calls(), expected_calls, "{label}: calls");
        assert_eq!(api.unused(), 0, "{label}: replies left");
        if self.succeeds {
            let written = api.last_written();
            assert_eq!(written.holder_identity, IDENTITY, "{label}: written holder");
            assert_eq!(written.lease_duration_seconds, 10, "{label}: written lease");
            assert_eq!(
                written.leader_transitions, self.transitions,
                "{label}: written transitions"
            );
            assert!(written.renew_time.is_some(), "{label}: written renew time");
        }

        elector.maybe_report_transition();
        assert_eq!(*reported.lock(), [self.holder], "{label}: reported leader");
        settle().await;
        assert_eq!(api.events(), Vec::<String>::new(), "{label}: events");
    }
}

/// client-go's eight cases for one object lock.
fn single_lock_cases(kind: Kind) -> Vec<Case> {
    let resource = kind.resource();
    let bing_for_3s = held_for("bing", 3);
    vec![
        Case::new(
            "acquire from no object",
            vec![
                ("get", resource, Reply::NotFound),
                ("create", resource, Reply::Echo),
            ],
        ),
        Case::new(
            "acquire from an object without a record",
            vec![
                (
                    "get",
                    resource,
                    Reply::Object(kind.object(NAMESPACE, NAME, None)),
                ),
                ("update", resource, Reply::Echo),
            ],
        )
        .transitions(1),
        Case::new(
            "acquire from a led object once its lease duration seconds run out",
            vec![
                ("get", resource, object(kind, &bing_for_3s)),
                ("get", resource, object(kind, &bing_for_3s)),
                ("update", resource, Reply::Echo),
            ],
        )
        .retry_after(Duration::from_secs(3))
        .transitions(1),
        Case::new(
            "acquire from an unled object",
            vec![
                (
                    "get",
                    resource,
                    object(kind, &LeaderElectionRecord::default()),
                ),
                ("update", resource, Reply::Echo),
            ],
        )
        .transitions(1),
        Case::new(
            "acquire from a led object whose holder was never seen renewing",
            vec![
                ("get", resource, object(kind, &held_by("bing"))),
                ("update", resource, Reply::Echo),
            ],
        )
        .observed(held_by("bing"), raw(&held_by("bing")), Seen::Past)
        .transitions(1),
        Case::new(
            "acquire from an object with an empty holder, recently seen",
            vec![
                ("get", resource, object(kind, &held_by(""))),
                ("update", resource, Reply::Echo),
            ],
        )
        .seen(Seen::Future)
        .transitions(1),
        Case::new(
            "leave a led object whose holder was seen renewing",
            vec![("get", resource, object(kind, &held_by("bing")))],
        )
        .seen(Seen::Future)
        .fails_held_by("bing"),
        Case::new(
            "renew an object this candidate holds",
            vec![
                ("get", resource, object(kind, &held_by(IDENTITY))),
                ("update", resource, Reply::Echo),
            ],
        )
        .observed(held_by(IDENTITY), raw(&held_by(IDENTITY)), Seen::Future),
    ]
}

async fn try_acquire_or_renew_on(kind: Kind) {
    for case in single_lock_cases(kind) {
        case.run(kind.resource()).await;
    }
}

#[tokio::test(start_paused = true)]
async fn try_acquire_or_renew_lease() {
    try_acquire_or_renew_on(Kind::Lease).await;
}

#[tokio::test(start_paused = true)]
async fn try_acquire_or_renew_config_map() {
    try_acquire_or_renew_on(Kind::ConfigMap).await;
}

#[tokio::test(start_paused = true)]
async fn try_acquire_or_renew_endpoints() {
    try_acquire_or_renew_on(Kind::Endpoints).await;
}

/// client-go's `MultiLock` cases, with `primary` (ConfigMap or Endpoints) then a Lease.
fn multi_lock_cases(primary: Kind) -> Vec<Case> {
    let old = primary.resource();
    let new = Kind::Lease.resource();
    let lease = Kind::Lease;
    let unled = LeaderElectionRecord::default();
    let bing = held_by("bing");
    let own = held_by(IDENTITY);
    let unknown = held_by(UNKNOWN_LEADER);
    vec![
        Case::new(
            "acquire from no object",
            vec![
                ("get", old, Reply::NotFound),
                ("create", old, Reply::Echo),
                ("create", new, Reply::Echo),
            ],
        )
        .observed(LeaderElectionRecord::default(), Vec::new(), Seen::Past),
        Case::new(
            "acquire from an unled old lock, creating the new one",
            vec![
                ("get", old, object(primary, &unled)),
                ("get", new, Reply::NotFound),
                ("update", old, Reply::Echo),
                ("get", new, Reply::NotFound),
                ("create", new, Reply::Echo),
            ],
        )
        .observed(LeaderElectionRecord::default(), Vec::new(), Seen::Past)
        .transitions(1),
        Case::new(
            "acquire from an unled pair of locks",
            vec![
                ("get", old, object(primary, &unled)),
                ("get", new, object(lease, &unled)),
                ("update", old, Reply::Echo),
                ("get", new, object(lease, &unled)),
                ("update", new, Reply::Echo),
            ],
        )
        .observed(LeaderElectionRecord::default(), Vec::new(), Seen::Past)
        .transitions(1),
        Case::new(
            "acquire from an old lock whose holder was never seen renewing",
            vec![
                ("get", old, object(primary, &bing)),
                ("get", new, Reply::NotFound),
                ("update", old, Reply::Echo),
                ("get", new, Reply::NotFound),
                ("create", new, Reply::Echo),
            ],
        )
        .observed(bing.clone(), raw(&bing), Seen::Past)
        .transitions(1),
        Case::new(
            "acquire from a pair whose holder was never seen renewing",
            vec![
                ("get", old, object(primary, &bing)),
                ("get", new, object(lease, &bing)),
                ("update", old, Reply::Echo),
                ("get", new, object(lease, &bing)),
                ("update", new, Reply::Echo),
            ],
        )
        .observed(bing.clone(), raw_twice(&bing), Seen::Past)
        .transitions(1),
        Case::new(
            "leave a pair whose locks name different holders",
            vec![
                ("get", old, object(primary, &bing)),
                ("get", new, object(lease, &own)),
            ],
        )
        .observed(bing.clone(), raw_twice(&bing), Seen::Future)
        .fails_held_by(UNKNOWN_LEADER),
        Case::new(
            "acquire from a pair held by the unknown leader, never seen renewing",
            vec![
                ("get", old, object(primary, &unknown)),
                ("get", new, object(lease, &unknown)),
                ("update", old, Reply::Echo),
                ("get", new, object(lease, &unknown)),
                ("update", new, Reply::Echo),
            ],
        )
        .observed(unknown.clone(), raw_twice(&unknown), Seen::Past)
        .transitions(1),
        Case::new(
            "leave an old lock whose holder was seen renewing",
            vec![
                ("get", old, object(primary, &bing)),
                ("get", new, Reply::NotFound),
            ],
        )
        .observed(bing.clone(), raw(&bing), Seen::Future)
        .fails_held_by("bing"),
        Case::new(
            "leave a pair that starts disagreeing, seeing the unknown leader",
            vec![
                ("get", old, object(primary, &own)),
                ("get", new, object(lease, &bing)),
            ],
        )
        .observed(bing.clone(), raw(&bing), Seen::Future)
        .fails_held_by(UNKNOWN_LEADER),
        Case::new(
            "leave a pair whose holder was seen renewing",
            vec![
                ("get", old, object(primary, &bing)),
                ("get", new, object(lease, &bing)),
            ],
        )
        .observed(bing.clone(), raw_twice(&bing), Seen::Future)
        .fails_held_by("bing"),
        Case::new(
            "renew a pair this candidate holds",
            vec![
                ("get", old, object(primary, &own)),
                ("get", new, object(lease, &own)),
                ("update", old, Reply::Echo),
                ("get", new, object(lease, &own)),
                ("update", new, Reply::Echo),
            ],
        )
        .observed(own.clone(), raw_twice(&own), Seen::Future),
    ]
}

#[tokio::test(start_paused = true)]
async fn try_acquire_or_renew_config_maps_then_leases() {
    for case in multi_lock_cases(Kind::ConfigMap) {
        case.run(resource_lock::CONFIGMAPS_LEASES_RESOURCE_LOCK)
            .await;
    }
}

#[tokio::test(start_paused = true)]
async fn try_acquire_or_renew_endpoints_then_leases() {
    for case in multi_lock_cases(Kind::Endpoints) {
        case.run(resource_lock::ENDPOINTS_LEASES_RESOURCE_LOCK)
            .await;
    }
}

/// An object whose record cannot be read: an annotation that is not JSON, a Lease spec with a
/// number for the holder.
fn unreadable(kind: Kind) -> Value {
    let mut object = kind.object(NAMESPACE, NAME, None);
    match kind {
        Kind::Lease => object["spec"] = json!({ "holderIdentity": 7 }),
        Kind::ConfigMap | Kind::Endpoints => {
            object["metadata"]["annotations"] = json!({ LEADER_ANNOTATION: "not json" });
        }
    }
    object
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_record_is_read_as_empty_and_taken_over() {
    for kind in Kind::ALL {
        let resource = kind.resource();
        Case::new(
            "take over an unreadable record",
            vec![
                ("get", resource, Reply::Object(unreadable(kind))),
                ("update", resource, Reply::Echo),
            ],
        )
        .transitions(1)
        .run(resource)
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn losing_the_race_to_create_the_lock_loses_the_round() {
    for kind in Kind::ALL {
        let resource = kind.resource();
        let api = FakeApi::scripted([
            ("get", resource, Reply::NotFound),
            ("create", resource, Reply::AlreadyExists),
        ]);
        let (elector, reported) = candidate(
            &api,
            resource,
            LeaderElectionRecord::default(),
            raw(&LeaderElectionRecord::default()),
            Seen::Past,
        );
        assert!(!elector.try_acquire_or_renew().await, "{resource}");
        assert_eq!(
            observed(&elector),
            LeaderElectionRecord::default(),
            "{resource}"
        );
        assert_eq!(api.calls(), calls(resource, &["get", "create"]));
        elector.maybe_report_transition();
        assert_eq!(*reported.lock(), Vec::<String>::new(), "{resource}");
    }
}

/// The API server's side of a lock that keeps what is written to it: reads return the last
/// write, or NotFound before the first.
#[derive(Default)]
struct Store {
    object: Option<Value>,
    version: u64,
}

impl Store {
    fn answer(&mut self, call: &Call) -> Reply {
        match call.verb.as_str() {
            "get" => self.object.clone().map_or(Reply::NotFound, Reply::Object),
            "create" | "update" => {
                self.version += 1;
                let mut object = call.body.clone().expect("a write sends the object");
                object["metadata"]["resourceVersion"] = json!(format!("{}", self.version));
                self.object = Some(object.clone());
                Reply::Object(object)
            }
            _ => panic!("a lock does not {call}"),
        }
    }
}

/// Calls of the lock `resource`, as `FakeApi::calls` lists them.
fn calls(resource: &str, verbs: &[&str]) -> Vec<String> {
    verbs
        .iter()
        .map(|verb| format!("{verb} {resource}/{NAME}"))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn release_empties_the_holder_and_keeps_the_transitions() {
    for kind in Kind::ALL {
        let resource = kind.resource();
        let api = FakeApi::scripted([
            ("get", resource, object(kind, &own_record())),
            ("update", resource, Reply::Echo),
            ("get", resource, object(kind, &own_record())),
            ("update", resource, Reply::Echo),
        ]);
        let (elector, reported) = candidate(
            &api,
            resource,
            LeaderElectionRecord::default(),
            raw(&LeaderElectionRecord::default()),
            Seen::Past,
        );
        assert!(elector.try_acquire_or_renew().await, "{resource}: acquire");
        elector.maybe_report_transition();
        assert!(elector.release().await, "{resource}: release");

        let record = observed(&elector);
        assert_eq!(record.holder_identity, "", "{resource}");
        assert_eq!(record.leader_transitions, 0, "{resource}");
        assert_eq!(record.lease_duration_seconds, 1, "{resource}");
        assert_eq!(
            api.calls(),
            calls(resource, &["get", "update", "get", "update"])
        );
        let written = api.last_written();
        assert_eq!(
            (
                written.holder_identity.as_str(),
                written.lease_duration_seconds
            ),
            ("", 1),
            "{resource}"
        );
        assert_eq!(written.leader_transitions, 0, "{resource}");
        elector.maybe_report_transition();
        assert_eq!(*reported.lock(), [IDENTITY, ""], "{resource}");
        assert!(!elector.is_leader(), "{resource}");
        settle().await;
        assert_eq!(api.events(), Vec::<String>::new(), "{resource}");
    }
}

fn own_record() -> LeaderElectionRecord {
    held_by(IDENTITY)
}

#[tokio::test(start_paused = true)]
async fn release_of_a_lock_this_candidate_created() {
    for kind in Kind::ALL {
        let resource = kind.resource();
        let mut store = Store::default();
        let api = FakeApi::handled(move |call| store.answer(call));
        let (elector, reported) = candidate(
            &api,
            resource,
            LeaderElectionRecord::default(),
            raw(&LeaderElectionRecord::default()),
            Seen::Past,
        );
        assert!(elector.try_acquire_or_renew().await, "{resource}: acquire");
        elector.maybe_report_transition();
        assert!(elector.release().await, "{resource}: release");
        assert_eq!(
            api.calls(),
            calls(resource, &["get", "create", "get", "update"])
        );
        let written = api.last_written();
        assert_eq!(written.holder_identity, "", "{resource}");
        assert_eq!(written.lease_duration_seconds, 1, "{resource}");
        assert_eq!(written.leader_transitions, 0, "{resource}");
        elector.maybe_report_transition();
        assert_eq!(*reported.lock(), [IDENTITY, ""], "{resource}");
    }
}

#[tokio::test(start_paused = true)]
async fn release_reads_the_lock_first() {
    for kind in Kind::ALL {
        let resource = kind.resource();
        let api = FakeApi::scripted([
            ("get", resource, object(kind, &held_for(IDENTITY, 10))),
            ("update", resource, Reply::Echo),
        ]);
        let (elector, _) = candidate(&api, resource, own_record(), raw(&own_record()), Seen::Now);
        assert!(elector.release().await, "{resource}");
        assert_eq!(api.calls(), calls(resource, &["get", "update"]));
        assert_eq!(api.last_written().holder_identity, "", "{resource}");
    }
}

#[tokio::test(start_paused = true)]
async fn release_retries_after_a_conflict() {
    for kind in Kind::ALL {
        let resource = kind.resource();
        let api = FakeApi::scripted([
            ("get", resource, object(kind, &held_for(IDENTITY, 10))),
            ("update", resource, Reply::Conflict),
            ("get", resource, object(kind, &held_for(IDENTITY, 10))),
            ("update", resource, Reply::Echo),
        ]);
        let (elector, _) = candidate(&api, resource, own_record(), raw(&own_record()), Seen::Now);
        assert!(elector.release().await, "{resource}");
        assert_eq!(
            api.calls(),
            calls(resource, &["get", "update", "get", "update"])
        );
        assert_eq!(api.last_written().holder_identity, "", "{resource}");
        assert_eq!(observed(&elector).holder_identity, "", "{resource}");
    }
}

#[tokio::test(start_paused = true)]
async fn release_by_a_follower_reads_and_writes_nothing() {
    for kind in Kind::ALL {
        let resource = kind.resource();
        let api = FakeApi::scripted([("get", resource, object(kind, &held_for("bing", 10)))]);
        let (elector, _) = candidate(
            &api,
            resource,
            held_by("bing"),
            raw(&held_by("bing")),
            Seen::Now,
        );
        assert!(elector.release().await, "{resource}");
        assert_eq!(api.calls(), calls(resource, &["get"]));
        assert_eq!(observed(&elector).holder_identity, "bing", "{resource}");
    }
}

/// What a whole election run did.
struct Ran {
    started: usize,
    stopped: usize,
    reported: Vec<String>,
}

/// Runs a whole election for `baz` on `kind` (lease 15 s, renew deadline 2 s, retry 1 s) until
/// `cancel` fires.
async fn run_election(
    api: &FakeApi,
    kind: Kind,
    release_on_cancel: bool,
    cancel: CancellationToken,
) -> Ran {
    let started = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicUsize::new(0));
    let reported = Reported::default();
    let (on_start, on_stop, report) = (
        Arc::clone(&started),
        Arc::clone(&stopped),
        Arc::clone(&reported),
    );
    let callbacks = LeaderCallbacks::new(
        move |leading: CancellationToken| {
            on_start.fetch_add(1, Ordering::SeqCst);
            async move { leading.cancelled().await }
        },
        move || {
            on_stop.fetch_add(1, Ordering::SeqCst);
        },
    )
    .on_new_leader(move |leader| report.lock().push(leader.to_owned()));
    let config = LeaderElectionConfig {
        release_on_cancel,
        ..config(15, 2, 1)
    };
    let elector = LeaderElector::new(lock(api, kind.resource()), config, callbacks)
        .expect("a valid configuration");
    elector.run(cancel).await;
    settle().await;
    let reported = reported.lock().clone();
    Ran {
        started: started.load(Ordering::SeqCst),
        stopped: stopped.load(Ordering::SeqCst),
        reported,
    }
}

const LEADER_EVENTS: [&str; 2] = [
    "Normal LeaderElection baz became leader",
    "Normal LeaderElection baz stopped leading",
];

#[tokio::test(start_paused = true)]
async fn cancelled_during_a_renewal_write_the_leader_releases() {
    for kind in Kind::ALL {
        let resource = kind.resource();
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let mut store = Store::default();
        let mut updates = 0;
        let api = FakeApi::handled(move |call| {
            if call.verb == "update" {
                updates += 1;
                // The second renewal is in flight when the elector is cancelled.
                if updates == 2 {
                    token.cancel();
                    return Reply::Hang;
                }
            }
            store.answer(call)
        });
        let ran = run_election(&api, kind, true, cancel).await;

        assert_eq!(
            api.calls(),
            calls(
                resource,
                &["get", "create", "update", "update", "get", "update"]
            )
        );
        let released = api.last_written();
        assert_eq!(released.holder_identity, "", "{resource}");
        assert_eq!(released.lease_duration_seconds, 1, "{resource}");
        assert_eq!(released.leader_transitions, 0, "{resource}");
        assert_eq!(api.events(), LEADER_EVENTS, "{resource}");
        assert_eq!((ran.started, ran.stopped), (1, 1), "{resource}");
        assert_eq!(ran.reported, [IDENTITY], "{resource}");
    }
}

#[tokio::test(start_paused = true)]
async fn cancelled_during_a_renewal_read_the_leader_releases() {
    for kind in Kind::ALL {
        let resource = kind.resource();
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let mut store = Store::default();
        let (mut gets, mut updates) = (0, 0);
        let api = FakeApi::handled(move |call| {
            match call.verb.as_str() {
                "get" => {
                    gets += 1;
                    // The read of the second renewal is in flight when the elector is
                    // cancelled.
                    if gets == 3 {
                        token.cancel();
                        return Reply::Hang;
                    }
                }
                "update" => {
                    updates += 1;
                    // Every renewal's optimistic write loses, so each one reads the lock.
                    if updates % 2 == 1 && updates < 4 {
                        return Reply::Conflict;
                    }
                }
                _ => {}
            }
            store.answer(call)
        });
        let ran = run_election(&api, kind, true, cancel).await;

        assert_eq!(
            api.calls(),
            calls(
                resource,
                &[
                    "get", "create", "update", "get", "update", "update", "get", "get", "update"
                ]
            )
        );
        let released = api.last_written();
        assert_eq!(released.holder_identity, "", "{resource}");
        assert_eq!(released.lease_duration_seconds, 1, "{resource}");
        assert_eq!(released.leader_transitions, 0, "{resource}");
        assert_eq!(api.events(), LEADER_EVENTS, "{resource}");
        assert_eq!((ran.started, ran.stopped), (1, 1), "{resource}");
    }
}

#[tokio::test(start_paused = true)]
async fn renewals_after_acquiring_write_without_reading() {
    for kind in Kind::ALL {
        let resource = kind.resource();
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let mut store = Store::default();
        let mut updates = 0;
        let api = FakeApi::handled(move |call| {
            if call.verb == "update" {
                updates += 1;
                if updates == 2 {
                    token.cancel();
                }
            }
            store.answer(call)
        });
        let ran = run_election(&api, kind, false, cancel).await;

        assert_eq!(
            api.calls(),
            calls(resource, &["get", "create", "update", "update"])
        );
        // Without release on cancel, the lock still names the leader.
        assert_eq!(api.last_written().holder_identity, IDENTITY, "{resource}");
        assert_eq!(api.events(), LEADER_EVENTS, "{resource}");
        assert_eq!((ran.started, ran.stopped), (1, 1), "{resource}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_conflicting_optimistic_renewal_reads_the_lock_and_retries() {
    for kind in Kind::ALL {
        let resource = kind.resource();
        let cancel = CancellationToken::new();
        let token = cancel.clone();
        let mut store = Store::default();
        let mut updates = 0;
        let api = FakeApi::handled(move |call| {
            if call.verb == "update" {
                updates += 1;
                match updates {
                    2 => return Reply::Conflict,
                    4 => token.cancel(),
                    _ => {}
                }
            }
            store.answer(call)
        });
        let ran = run_election(&api, kind, false, cancel).await;

        assert_eq!(
            api.calls(),
            calls(
                resource,
                &[
                    "get", "create", "update", "update", "get", "update", "update"
                ]
            )
        );
        assert_eq!(api.last_written().holder_identity, IDENTITY, "{resource}");
        assert_eq!(api.events(), LEADER_EVENTS, "{resource}");
        assert_eq!((ran.started, ran.stopped), (1, 1), "{resource}");
    }
}

#[tokio::test]
async fn an_elector_needs_a_valid_configuration_and_an_identity() {
    let api = FakeApi::default();
    let callbacks = || LeaderCallbacks::new(|_| async {}, || {});
    let valid = config(15, 2, 1);
    assert!(LeaderElector::new(lock(&api, "leases"), valid.clone(), callbacks()).is_ok());

    let nameless =
        resource_lock::new("leases", api.client(), NAMESPACE, NAME, "").expect("a known lock kind");
    let refused = LeaderElector::new(nameless, valid, callbacks()).expect_err("an empty identity");
    assert_eq!(refused, ConfigError::EmptyIdentity);
    assert_eq!(refused.to_string(), "Lock identity is empty");
    assert_eq!(api.calls(), Vec::<String>::new());
}

#[test]
fn objects_without_a_record_hold_none() {
    // The scripted objects themselves: a Lease without a record has an empty spec, the others
    // no annotation, and a written record reads back.
    let lease = Kind::Lease.object(NAMESPACE, NAME, None);
    assert_eq!(lease["spec"], json!({}));
    let config_map = Kind::ConfigMap.object(NAMESPACE, NAME, None);
    assert!(config_map["metadata"].get("annotations").is_none());
    for kind in Kind::ALL {
        let object = kind.object(NAMESPACE, NAME, Some(&held_for("bing", 3)));
        assert_eq!(record_in(&object), held_for("bing", 3), "{kind:?}");
    }
}
