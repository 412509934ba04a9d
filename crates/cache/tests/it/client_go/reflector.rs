//! `reflector_test.go`: what a reflector asks the server for, in which order, and what it
//! leaves in its store, on Tokio's paused clock (backoffs pass instantly and are measured
//! exactly). Every server answer is scripted; every request is recorded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_cache::{
    Backoff, DeltaFifo, DeltaFifoOptions, DeltaType, INITIAL_EVENTS_END_ANNOTATION, Indexer,
    ListerWatcher, Reflector, ReflectorError, ReflectorOptions, ReflectorStore, Request,
    ScriptedListerWatcher, WatchStream,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListMeta, ListParams, ObjectList, ObjectMeta, TypeMeta, WatchEvent, WatchParams};
use kube::core::Status;
use kube::core::response::{StatusCause, StatusDetails};
use kube::core::watch::{Bookmark, BookmarkMeta};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

const TICK: Duration = Duration::from_millis(10);
const MS: Duration = Duration::from_millis(1);

// ---------------------------------------------------------------------------------------------
// Objects and server answers.

fn pod(name: &str, resource_version: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            resource_version: Some(resource_version.to_owned()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

fn nameless_pod(resource_version: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            resource_version: Some(resource_version.to_owned()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

/// `count` pods named `pod-<i>` from `first` on.
fn numbered_pods(first: usize, count: usize) -> Vec<Pod> {
    (first..first + count)
        .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
        .collect()
}

fn page(
    resource_version: Option<&str>,
    continue_token: Option<&str>,
    items: Vec<Pod>,
) -> ObjectList<Pod> {
    ObjectList {
        types: TypeMeta::list::<Pod>(),
        metadata: ListMeta {
            resource_version: resource_version.map(str::to_owned),
            continue_: continue_token.map(str::to_owned),
            ..ListMeta::default()
        },
        items,
    }
}

fn listed(resource_version: &str, items: Vec<Pod>) -> Result<ObjectList<Pod>, kube::Error> {
    Ok(page(Some(resource_version), None, items))
}

fn api_status(code: u16, reason: &str, message: &str) -> Box<Status> {
    Status::failure(message, reason).with_code(code).boxed()
}

fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
    kube::Error::Api(api_status(code, reason, message))
}

fn expired() -> kube::Error {
    api_error(
        410,
        "Expired",
        "The resourceVersion for the provided watch is too old.",
    )
}

fn gone() -> kube::Error {
    api_error(410, "Gone", "too old resource version")
}

fn too_many_requests() -> kube::Error {
    api_error(429, "TooManyRequests", "too many requests")
}

fn internal_error() -> kube::Error {
    api_error(500, "InternalError", "etcdserver: no leader")
}

fn connection_refused() -> kube::Error {
    kube::Error::Service(Box::new(std::io::Error::from(
        std::io::ErrorKind::ConnectionRefused,
    )))
}

fn undecodable() -> kube::Error {
    let err = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
    kube::Error::SerdeError(err)
}

/// Empty status details.
fn details() -> StatusDetails {
    StatusDetails {
        name: String::new(),
        group: String::new(),
        kind: String::new(),
        uid: String::new(),
        causes: Vec::new(),
        retry_after_seconds: 0,
    }
}

/// A 504 carrying a cause, as servers from 1.18.6 on say "resourceVersion too large".
fn too_large_by_cause_reason() -> kube::Error {
    let mut status = api_status(
        504,
        "Timeout",
        "Timeout: Too large resource version: 20, current: 10",
    );
    status.details = Some(StatusDetails {
        causes: vec![StatusCause {
            reason: "ResourceVersionTooLarge".to_owned(),
            message: "Too large resource version".to_owned(),
            field: String::new(),
        }],
        ..details()
    });
    kube::Error::Api(status)
}

/// The 1.17.0–1.18.5 shape: only the cause's message says it.
fn too_large_by_cause_message() -> kube::Error {
    let mut status = api_status(504, "Timeout", "Timeout: request did not complete");
    status.details = Some(StatusDetails {
        causes: vec![StatusCause {
            reason: String::new(),
            message: "Too large resource version".to_owned(),
            field: String::new(),
        }],
        ..details()
    });
    kube::Error::Api(status)
}

/// Before 1.17.0: only the status message says it.
fn too_large_by_message() -> kube::Error {
    api_error(504, "Timeout", "Too large resource version")
}

fn bookmark(resource_version: &str) -> WatchEvent<Pod> {
    WatchEvent::Bookmark(Bookmark {
        types: TypeMeta::resource::<Pod>(),
        metadata: BookmarkMeta {
            resource_version: resource_version.to_owned(),
            annotations: BTreeMap::new(),
        },
    })
}

fn initial_events_end(resource_version: &str) -> WatchEvent<Pod> {
    WatchEvent::Bookmark(Bookmark {
        types: TypeMeta::resource::<Pod>(),
        metadata: BookmarkMeta {
            resource_version: resource_version.to_owned(),
            annotations: BTreeMap::from([(
                INITIAL_EVENTS_END_ANNOTATION.to_owned(),
                "true".to_owned(),
            )]),
        },
    })
}

// ---------------------------------------------------------------------------------------------
// A scripted lister-watcher that also notes when each request came.

#[derive(Clone)]
struct Clocked {
    script: ScriptedListerWatcher<Pod>,
    times: Arc<Mutex<Vec<Instant>>>,
}

impl Clocked {
    fn new() -> Self {
        Self {
            script: ScriptedListerWatcher::new(),
            times: Arc::default(),
        }
    }

    /// Every request with the moment it was made.
    fn timed_requests(&self) -> Vec<(Instant, Request)> {
        let times = self.times.lock().clone();
        let requests = self.script.requests();
        assert_eq!(times.len(), requests.len());
        times.into_iter().zip(requests).collect()
    }

    fn watch_times(&self) -> Vec<Instant> {
        self.timed_requests()
            .into_iter()
            .filter_map(|(at, request)| matches!(request, Request::Watch(..)).then_some(at))
            .collect()
    }

    fn list_params(&self) -> Vec<ListParams> {
        self.script
            .requests()
            .into_iter()
            .filter_map(|request| match request {
                Request::List(params) => Some(params),
                Request::Watch(..) => None,
            })
            .collect()
    }

    fn watch_params(&self) -> Vec<(WatchParams, String)> {
        self.script
            .requests()
            .into_iter()
            .filter_map(|request| match request {
                Request::Watch(params, resource_version) => Some((params, resource_version)),
                Request::List(_) => None,
            })
            .collect()
    }

    fn lists(&self) -> Vec<String> {
        self.script.list_resource_versions()
    }

    fn watches(&self) -> Vec<String> {
        self.script.watch_resource_versions()
    }

    fn list_limits(&self) -> Vec<Option<u32>> {
        self.list_params()
            .into_iter()
            .map(|params| params.limit)
            .collect()
    }
}

impl ListerWatcher<Pod> for Clocked {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Pod>, kube::Error> {
        self.times.lock().push(Instant::now());
        self.script.list(params).await
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<Pod>, kube::Error> {
        self.times.lock().push(Instant::now());
        self.script.watch(params, resource_version).await
    }
}

// ---------------------------------------------------------------------------------------------
// What the watch-error handler was told.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// A failed list, with the API status code if any.
    List(Option<u16>),
    /// A failed watch (start or stream item), with the API status code if any.
    Watch(Option<u16>),
    /// A watch stream item that did not decode.
    Undecodable,
    /// An ERROR event with this code.
    ErrorEvent(u16),
    VeryShortWatch,
    NoKey,
    NoResourceVersion,
}

fn classify(err: &ReflectorError) -> Seen {
    let code = err.status().map(|status| status.code);
    match err {
        ReflectorError::List { .. } => Seen::List(code),
        ReflectorError::Watch {
            source: kube::Error::SerdeError(_),
            ..
        } => Seen::Undecodable,
        ReflectorError::Watch { .. } => Seen::Watch(code),
        ReflectorError::WatchStatus { status, .. } => Seen::ErrorEvent(status.code),
        ReflectorError::VeryShortWatch { .. } => Seen::VeryShortWatch,
        ReflectorError::Key { .. } => Seen::NoKey,
        ReflectorError::MissingResourceVersion { .. } => Seen::NoResourceVersion,
    }
}

#[derive(Clone, Default)]
struct Reports(Arc<Mutex<Vec<(Seen, String)>>>);

impl Reports {
    fn handler(&self) -> ctrlkit_cache::WatchErrorHandler {
        let reports = Arc::clone(&self.0);
        Arc::new(move |err: &ReflectorError| reports.lock().push((classify(err), err.to_string())))
    }

    fn seen(&self) -> Vec<Seen> {
        self.0.lock().iter().map(|(seen, _)| *seen).collect()
    }

    fn messages(&self) -> Vec<String> {
        self.0
            .lock()
            .iter()
            .map(|(_, message)| message.clone())
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Running a reflector.

type PodReflector = Reflector<Pod, Clocked>;

fn options() -> ReflectorOptions {
    ReflectorOptions {
        name: "pods".to_owned(),
        ..ReflectorOptions::default()
    }
}

fn new_reflector(
    lw: &Clocked,
    store: Arc<dyn ReflectorStore<Pod>>,
    options: ReflectorOptions,
) -> (Arc<PodReflector>, Reports) {
    let reports = Reports::default();
    let reflector =
        Reflector::new(lw.clone(), store, options).with_watch_error_handler(reports.handler());
    (Arc::new(reflector), reports)
}

/// A reflector running in its own task until [`stop`](Self::stop).
struct Running {
    reflector: Arc<PodReflector>,
    reports: Reports,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl Running {
    fn start(lw: &Clocked, store: Arc<dyn ReflectorStore<Pod>>, options: ReflectorOptions) -> Self {
        let (reflector, reports) = new_reflector(lw, store, options);
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let reflector = Arc::clone(&reflector);
            let cancel = cancel.clone();
            async move { reflector.run(cancel).await }
        });
        Self {
            reflector,
            reports,
            cancel,
            task,
        }
    }

    fn last_sync(&self) -> String {
        self.reflector.last_sync_resource_version()
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.unwrap();
    }
}

/// Waits (on the paused clock) until `condition` holds.
async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..100_000 {
        if condition() {
            return;
        }
        sleep(TICK).await;
    }
    panic!("timed out waiting for {what}");
}

/// One `list_and_watch` round, cancelled as soon as `stop` holds (client-go's tests cancel from
/// inside their watch function).
async fn round<L: ListerWatcher<Pod>>(
    reflector: &Reflector<Pod, L>,
    mut stop: impl FnMut() -> bool,
) -> Result<(), ReflectorError> {
    let cancel = CancellationToken::new();
    let work = reflector.list_and_watch(&cancel);
    tokio::pin!(work);
    loop {
        tokio::select! {
            result = &mut work => return result,
            () = sleep(TICK) => if stop() { cancel.cancel() },
        }
    }
}

fn indexer() -> Indexer<Pod> {
    Indexer::new(Default::default())
}

fn fifo() -> Arc<DeltaFifo<Pod>> {
    Arc::new(DeltaFifo::new(DeltaFifoOptions::default()))
}

fn rv_of(pod: &Pod) -> String {
    pod.metadata.resource_version.clone().unwrap_or_default()
}

/// name → resourceVersion of everything stored.
fn contents(indexer: &Indexer<Pod>) -> BTreeMap<String, String> {
    indexer
        .list()
        .iter()
        .map(|pod| (pod.metadata.name.clone().unwrap_or_default(), rv_of(pod)))
        .collect()
}

fn expect_contents(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(name, rv)| ((*name).to_owned(), (*rv).to_owned()))
        .collect()
}

/// Pops everything queued: each key with its deltas' types and resource versions.
async fn drain(fifo: &DeltaFifo<Pod>) -> Vec<(String, Vec<(DeltaType, String)>)> {
    let mut popped = Vec::new();
    while !fifo.is_empty() {
        let item = fifo
            .pop(|key, deltas, _| {
                let deltas = deltas
                    .iter()
                    .map(|delta| {
                        (
                            delta.delta_type(),
                            delta.object().map(|pod| rv_of(pod)).unwrap_or_default(),
                        )
                    })
                    .collect();
                (key.to_owned(), deltas)
            })
            .await
            .unwrap();
        popped.push(item);
    }
    popped
}

fn timeout_in(params: &WatchParams, min_secs: u32) {
    let timeout = params.timeout.expect("watch without a timeout");
    assert!(
        (min_secs..2 * min_secs).contains(&timeout),
        "timeout {timeout}s outside [{min_secs}, {})",
        2 * min_secs
    );
}

// ---------------------------------------------------------------------------------------------
// List, then watch.

#[tokio::test(start_paused = true)]
async fn lists_at_zero_then_watches_from_the_lists_version() {
    let lw = Clocked::new();
    lw.script.push_list(listed("1", vec![pod("foo", "1")]));
    let feed = lw.script.push_watch();
    let store = fifo();
    let running = Running::start(&lw, store.clone(), options());

    wait_for("the watch", || lw.watches().len() == 1).await;
    feed.send(WatchEvent::Modified(pod("foo", "2")));
    for (name, rv) in [("bar", "3"), ("baz", "4"), ("qux", "5"), ("zoo", "6")] {
        feed.send(WatchEvent::Added(pod(name, rv)));
    }
    wait_for("the last event", || running.last_sync() == "6").await;

    // One list: the first at "0" (served from the watch cache), paginated by 500.
    assert_eq!(
        lw.list_params(),
        [ListParams {
            resource_version: Some("0".to_owned()),
            limit: Some(500),
            ..ListParams::default()
        }]
    );
    // One watch, from the list's version, with bookmarks and a randomised timeout.
    let watches = lw.watch_params();
    assert_eq!(watches.len(), 1);
    let (params, resource_version) = &watches[0];
    assert_eq!(resource_version, "1");
    assert!(params.bookmarks);
    assert!(!params.send_initial_events);
    assert_eq!(
        (
            params.label_selector.as_ref(),
            params.field_selector.as_ref()
        ),
        (None, None)
    );
    timeout_in(params, 300);

    // The FIFO holds each object once, at its newest version, in first-change order.
    let popped = drain(&store).await;
    let newest: Vec<(&str, &str)> = popped
        .iter()
        .map(|(key, deltas)| (key.as_str(), deltas.last().unwrap().1.as_str()))
        .collect();
    assert_eq!(
        newest,
        [
            ("foo", "2"),
            ("bar", "3"),
            ("baz", "4"),
            ("qux", "5"),
            ("zoo", "6")
        ]
    );
    assert_eq!(
        popped[0].1,
        [
            (DeltaType::Sync, "1".to_owned()),
            (DeltaType::Updated, "2".to_owned())
        ]
    );
    assert!(running.reports.seen().is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_events_reach_the_store_and_every_event_and_bookmark_advances_the_version() {
    let lw = Clocked::new();
    lw.script
        .push_list(listed("10", vec![pod("foo", "8"), pod("bar", "9")]));
    let feed = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), options());
    wait_for("the list", || running.last_sync() == "10").await;
    assert_eq!(
        contents(&store),
        expect_contents(&[("foo", "8"), ("bar", "9")])
    );

    let steps = [
        (WatchEvent::Deleted(pod("foo", "11")), "11"),
        (WatchEvent::Modified(pod("bar", "20")), "20"),
        (bookmark("30"), "30"),
        (WatchEvent::Added(pod("baz", "40")), "40"),
        (bookmark("45"), "45"),
        (WatchEvent::Added(pod("qux", "50")), "50"),
    ];
    for (event, resource_version) in steps {
        feed.send(event);
        wait_for("the event's version", || {
            running.last_sync() == resource_version
        })
        .await;
    }
    assert_eq!(
        contents(&store),
        expect_contents(&[("bar", "20"), ("baz", "40"), ("qux", "50")])
    );
    assert_eq!(lw.lists(), ["0"]);
    assert_eq!(lw.watches(), ["10"]);
    assert!(running.reports.seen().is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_ends_is_resumed_from_the_last_version_without_relisting() {
    let lw = Clocked::new();
    lw.script.push_list(listed("10", vec![pod("a", "10")]));
    lw.script.push_watch_events(vec![
        Ok(WatchEvent::Added(pod("b", "11"))),
        Ok(WatchEvent::Modified(pod("a", "12"))),
    ]);
    lw.script.push_watch_events(vec![
        Ok(bookmark("13")),
        Ok(WatchEvent::Added(pod("c", "14"))),
    ]);
    let _open = lw.script.push_watch();
    let store = fifo();
    let running = Running::start(&lw, store.clone(), options());

    wait_for("the third watch", || lw.watches().len() == 3).await;
    assert_eq!(lw.lists(), ["0"]);
    assert_eq!(lw.watches(), ["10", "12", "14"]);
    assert_eq!(running.last_sync(), "14");

    // Nothing was delivered twice.
    let v = |delta_type, rv: &str| (delta_type, rv.to_owned());
    assert_eq!(
        drain(&store).await,
        [
            (
                "a".to_owned(),
                vec![v(DeltaType::Sync, "10"), v(DeltaType::Updated, "12")]
            ),
            ("b".to_owned(), vec![v(DeltaType::Added, "11")]),
            ("c".to_owned(), vec![v(DeltaType::Added, "14")]),
        ]
    );
    assert!(running.reports.seen().is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_timeouts_are_random_between_the_minimum_and_twice_it() {
    // As client-go's: a minimum under 5 minutes is not honored.
    for (min, expected_min_secs) in [
        (None, 300),
        (Some(Duration::from_secs(30 * 60)), 30 * 60),
        (Some(Duration::from_secs(10)), 300),
    ] {
        let lw = Clocked::new();
        lw.script.push_list(listed("10", vec![]));
        for i in 0..5 {
            lw.script
                .push_watch_events(vec![Ok(WatchEvent::Added(pod("a", &(11 + i).to_string())))]);
        }
        let _open = lw.script.push_watch();
        let mut options = options();
        if let Some(min) = min {
            options.min_watch_timeout = min;
        }
        let running = Running::start(&lw, Arc::new(indexer()), options);
        wait_for("six watches", || lw.watches().len() == 6).await;
        for (params, _) in lw.watch_params() {
            timeout_in(&params, expected_min_secs);
        }
        running.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn selectors_go_with_every_list_and_watch() {
    let lw = Clocked::new();
    lw.script
        .push_list(Ok(page(Some("5"), Some("next"), vec![pod("a", "1")])));
    lw.script.push_list(listed("5", vec![pod("b", "2")]));
    let _open = lw.script.push_watch();
    let options = ReflectorOptions {
        label_selector: Some("app=web".to_owned()),
        field_selector: Some("status.phase=Running".to_owned()),
        ..options()
    };
    let running = Running::start(&lw, Arc::new(indexer()), options);
    wait_for("the watch", || lw.watches().len() == 1).await;

    let lists = lw.list_params();
    assert_eq!(lists.len(), 2);
    for params in &lists {
        assert_eq!(params.label_selector.as_deref(), Some("app=web"));
        assert_eq!(
            params.field_selector.as_deref(),
            Some("status.phase=Running")
        );
    }
    let (watch, _) = &lw.watch_params()[0];
    assert_eq!(watch.label_selector.as_deref(), Some("app=web"));
    assert_eq!(
        watch.field_selector.as_deref(),
        Some("status.phase=Running")
    );
    running.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Rounds of list and watch, with errors.

#[tokio::test(start_paused = true)]
async fn each_round_lists_what_the_previous_ones_left_in_the_store() {
    struct Round {
        list: Result<ObjectList<Pod>, kube::Error>,
        watch: Result<Vec<WatchEvent<Pod>>, kube::Error>,
        /// The round's outcome: `None` for `Ok`, else what it reported.
        fails_with: Option<Seen>,
    }
    let rounds = vec![
        Round {
            list: listed("1", vec![]),
            watch: Ok(vec![
                WatchEvent::Added(pod("foo", "2")),
                WatchEvent::Added(pod("bar", "3")),
            ]),
            fails_with: None,
        },
        Round {
            list: listed("3", vec![pod("foo", "2"), pod("bar", "3")]),
            watch: Ok(vec![
                WatchEvent::Deleted(pod("foo", "4")),
                WatchEvent::Added(pod("qux", "5")),
            ]),
            fails_with: None,
        },
        Round {
            list: Err(api_error(500, "InternalError", "a list error")),
            watch: Ok(vec![]),
            fails_with: Some(Seen::List(Some(500))),
        },
        Round {
            list: listed("5", vec![pod("bar", "3"), pod("qux", "5")]),
            watch: Err(api_error(500, "InternalError", "a watch error")),
            fails_with: Some(Seen::Watch(Some(500))),
        },
        Round {
            list: listed("5", vec![pod("bar", "3"), pod("qux", "5")]),
            watch: Ok(vec![WatchEvent::Added(pod("baz", "6"))]),
            fails_with: None,
        },
        Round {
            list: listed("6", vec![pod("bar", "3"), pod("qux", "5"), pod("baz", "6")]),
            watch: Ok(vec![]),
            fails_with: None,
        },
    ];

    let store = indexer();
    for (i, round_script) in rounds.into_iter().enumerate() {
        // What this round lists is what the earlier rounds left behind.
        if let Ok(list) = &round_script.list {
            let expected: BTreeMap<String, String> = list
                .items
                .iter()
                .map(|pod| (pod.metadata.name.clone().unwrap(), rv_of(pod)))
                .collect();
            assert_eq!(contents(&store), expected, "store before round {i}");
        }
        let lw = Clocked::new();
        let list_version = round_script
            .list
            .as_ref()
            .ok()
            .and_then(|l| l.metadata.resource_version.clone());
        let with_events = matches!(&round_script.watch, Ok(events) if !events.is_empty());
        lw.script.push_list(round_script.list);
        // A watch without events stays open until the round is stopped.
        let _open = match round_script.watch {
            Ok(events) if events.is_empty() => Some(lw.script.push_watch()),
            Ok(events) => {
                lw.script
                    .push_watch_events(events.into_iter().map(Ok).collect());
                None
            }
            Err(err) => {
                lw.script.push_watch_error(err);
                None
            }
        };
        let (reflector, _) = new_reflector(&lw, Arc::new(store.clone()), options());
        // A round whose watch delivered events ends when the reflector comes back to watch on.
        let stop_after = if with_events { 2 } else { 1 };
        let result = round(&reflector, || lw.watches().len() >= stop_after).await;
        match (&result, &round_script.fails_with) {
            (Ok(()), None) => {}
            (Err(err), Some(expected)) => assert_eq!(&classify(err), expected, "round {i}"),
            _ => panic!("round {i}: unexpected outcome {result:?}"),
        }
        if with_events {
            // The resumed watch starts where the events left off.
            assert_eq!(
                lw.watches()[1],
                reflector.last_sync_resource_version(),
                "round {i}"
            );
            assert_ne!(Some(lw.watches()[1].clone()), list_version, "round {i}");
        }
    }
    assert_eq!(
        contents(&store),
        expect_contents(&[("bar", "3"), ("qux", "5"), ("baz", "6")])
    );
}

// ---------------------------------------------------------------------------------------------
// Relists and resource versions.

#[tokio::test(start_paused = true)]
async fn a_relist_asks_for_the_last_synced_version() {
    let lw = Clocked::new();
    lw.script.push_list(listed("10", numbered_pods(0, 4)));
    lw.script.push_list(listed("11", numbered_pods(0, 8)));
    let store = indexer();
    let (reflector, _) = new_reflector(&lw, Arc::new(store.clone()), options());

    round(&reflector, || lw.watches().len() == 1).await.unwrap();
    assert_eq!(store.len(), 4);
    round(&reflector, || lw.watches().len() == 2).await.unwrap();
    assert_eq!(store.len(), 8);
    // Never back in time: the relist asks for at least what was seen.
    assert_eq!(lw.lists(), ["0", "10"]);
    assert_eq!(lw.watches(), ["10", "11"]);
}

#[tokio::test(start_paused = true)]
async fn an_expired_exact_version_relists_from_the_latest() {
    let lw = Clocked::new();
    lw.script.push_list(listed("10", numbered_pods(0, 4)));
    lw.script.push_list(Err(expired()));
    lw.script.push_list(listed("11", numbered_pods(0, 8)));
    let store = indexer();
    let (reflector, reports) = new_reflector(&lw, Arc::new(store.clone()), options());

    round(&reflector, || lw.watches().len() == 1).await.unwrap();
    assert_eq!(store.len(), 4);
    round(&reflector, || lw.watches().len() == 2).await.unwrap();
    assert_eq!(store.len(), 8);
    assert_eq!(lw.lists(), ["0", "10", ""]);
    assert_eq!(reflector.last_sync_resource_version(), "11");
    // The 410 was handled, not reported.
    assert!(reports.seen().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_too_large_version_relists_from_the_latest_in_all_three_error_shapes() {
    let lw = Clocked::new();
    lw.script.push_list(listed("20", vec![]));
    for (error, next) in [
        (too_large_by_cause_reason(), "30"),
        (too_large_by_cause_message(), "40"),
        (too_large_by_message(), "50"),
    ] {
        lw.script.push_list(Err(error));
        lw.script.push_list(listed(next, vec![]));
    }
    let (reflector, reports) = new_reflector(&lw, Arc::new(indexer()), options());
    for watches in 1..=4 {
        round(&reflector, || lw.watches().len() == watches)
            .await
            .unwrap();
    }
    assert_eq!(lw.lists(), ["0", "20", "", "30", "", "40", ""]);
    assert_eq!(lw.watches(), ["20", "30", "40", "50"]);
    assert!(reports.seen().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_410_event_relists_at_the_last_synced_version_unpaginated() {
    let lw = Clocked::new();
    lw.script.push_list(listed("5", vec![pod("a", "5")]));
    lw.script.push_watch_events(vec![
        Ok(WatchEvent::Added(pod("b", "6"))),
        Ok(WatchEvent::Modified(pod("a", "7"))),
        Ok(WatchEvent::Error(api_status(
            410,
            "Expired",
            "too old resource version: 5 (7)",
        ))),
    ]);
    lw.script.push_list(listed(
        "12",
        vec![pod("a", "7"), pod("b", "6"), pod("c", "11")],
    ));
    let _open = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), options());

    wait_for("the second watch", || lw.watches().len() == 2).await;
    assert_eq!(lw.lists(), ["0", "7"]);
    assert_eq!(lw.list_limits(), [Some(500), None]);
    assert_eq!(lw.watches(), ["5", "12"]);
    assert_eq!(
        contents(&store),
        expect_contents(&[("a", "7"), ("b", "6"), ("c", "11")])
    );
    assert!(running.reports.seen().is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_gone_watch_relists_at_the_last_version_then_at_the_latest() {
    let lw = Clocked::new();
    lw.script.push_list(listed("5", vec![pod("a", "5")]));
    lw.script.push_watch_error(gone());
    // The relist at "5" is too old as well, so the reflector lists the latest state.
    lw.script.push_list(Err(expired()));
    lw.script
        .push_list(listed("9", vec![pod("a", "5"), pod("b", "8")]));
    let _open = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), options());

    wait_for("the second watch", || lw.watches().len() == 2).await;
    assert_eq!(lw.lists(), ["0", "5", ""]);
    assert_eq!(lw.list_limits(), [Some(500), None, None]);
    assert_eq!(lw.watches(), ["5", "9"]);
    assert_eq!(contents(&store), expect_contents(&[("a", "5"), ("b", "8")]));
    assert_eq!(running.last_sync(), "9");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn after_a_list_at_the_latest_the_next_relist_uses_a_version_again() {
    let lw = Clocked::new();
    lw.script.push_list(listed("5", vec![]));
    lw.script.push_list(Err(expired()));
    lw.script.push_list(listed("9", vec![]));
    lw.script.push_list(listed("12", vec![]));
    let (reflector, _) = new_reflector(&lw, Arc::new(indexer()), options());
    for watches in 1..=3 {
        round(&reflector, || lw.watches().len() == watches)
            .await
            .unwrap();
    }
    // The successful list at "" made "9" usable again.
    assert_eq!(lw.lists(), ["0", "5", "", "9"]);
}

// ---------------------------------------------------------------------------------------------
// Pagination.

fn continuation(params: &ListParams) -> (Option<&str>, Option<&str>, Option<u32>) {
    (
        params.resource_version.as_deref(),
        params.continue_token.as_deref(),
        params.limit,
    )
}

#[tokio::test(start_paused = true)]
async fn pages_are_followed_and_a_paged_first_list_keeps_relists_paged() {
    let lw = Clocked::new();
    // The first list at "0" comes back in three pages: the server does not serve it from a
    // watch cache, so relists at a version are paginated too.
    lw.script
        .push_list(Ok(page(Some("10"), Some("c1"), numbered_pods(0, 4))));
    lw.script
        .push_list(Ok(page(Some("10"), Some("c2"), numbered_pods(4, 4))));
    lw.script
        .push_list(Ok(page(Some("10"), None, numbered_pods(8, 2))));
    lw.script
        .push_list(Ok(page(Some("11"), Some("c3"), numbered_pods(0, 4))));
    lw.script
        .push_list(Ok(page(Some("11"), None, numbered_pods(4, 3))));
    let store = indexer();
    let (reflector, _) = new_reflector(&lw, Arc::new(store.clone()), options());

    round(&reflector, || lw.watches().len() == 1).await.unwrap();
    assert_eq!(store.len(), 10);
    round(&reflector, || lw.watches().len() == 2).await.unwrap();
    // The second list dropped pods 7 to 9.
    assert_eq!(store.len(), 7);

    let params = lw.list_params();
    let sequence: Vec<_> = params.iter().map(continuation).collect();
    assert_eq!(
        sequence,
        [
            (Some("0"), None, Some(500)),
            // A continuation carries its version in the token: no resourceVersion.
            (None, Some("c1"), Some(500)),
            (None, Some("c2"), Some(500)),
            (Some("10"), None, Some(500)),
            (None, Some("c3"), Some(500)),
        ]
    );
    assert!(params.iter().all(|params| params.version_match.is_none()));
    assert_eq!(lw.watches(), ["10", "11"]);
}

#[tokio::test(start_paused = true)]
async fn a_relist_at_a_version_is_unpaginated_when_the_first_list_came_whole() {
    let lw = Clocked::new();
    lw.script.push_list(listed("10", numbered_pods(0, 10)));
    lw.script.push_list(listed("10", numbered_pods(0, 10)));
    let store = indexer();
    let (reflector, _) = new_reflector(&lw, Arc::new(store.clone()), options());
    round(&reflector, || lw.watches().len() == 1).await.unwrap();
    round(&reflector, || lw.watches().len() == 2).await.unwrap();
    assert_eq!(store.len(), 10);
    // Served whole from the watch cache: no limit (a limit would send it to etcd).
    assert_eq!(lw.lists(), ["0", "10"]);
    assert_eq!(lw.list_limits(), [Some(500), None]);
}

#[tokio::test(start_paused = true)]
async fn a_configured_page_size_pages_a_relist_at_a_version_too() {
    // client-go's reflector: a set WatchListPageSize wins over listing whole from the cache.
    let lw = Clocked::new();
    lw.script.push_list(listed("10", numbered_pods(0, 3)));
    lw.script.push_list(listed("10", numbered_pods(0, 3)));
    let store = indexer();
    let options = ReflectorOptions {
        page_size: 7,
        ..options()
    };
    let (reflector, _) = new_reflector(&lw, Arc::new(store.clone()), options);
    round(&reflector, || lw.watches().len() == 1).await.unwrap();
    round(&reflector, || lw.watches().len() == 2).await.unwrap();
    assert_eq!(lw.lists(), ["0", "10"]);
    assert_eq!(lw.list_limits(), [Some(7), Some(7)]);
}

#[tokio::test(start_paused = true)]
async fn a_custom_page_size_is_used_for_every_page() {
    let lw = Clocked::new();
    lw.script
        .push_list(Ok(page(Some("10"), Some("c1"), numbered_pods(0, 4))));
    lw.script
        .push_list(Ok(page(Some("10"), Some("c2"), numbered_pods(4, 4))));
    lw.script
        .push_list(Ok(page(Some("10"), None, numbered_pods(8, 2))));
    let store = indexer();
    let options = ReflectorOptions {
        page_size: 4,
        ..options()
    };
    let (reflector, _) = new_reflector(&lw, Arc::new(store.clone()), options);
    round(&reflector, || lw.watches().len() == 1).await.unwrap();
    assert_eq!(store.len(), 10);
    assert_eq!(lw.list_limits(), [Some(4), Some(4), Some(4)]);
}

#[tokio::test(start_paused = true)]
async fn an_expired_continuation_falls_back_to_one_full_list_at_the_same_version() {
    let lw = Clocked::new();
    // First list, paged by 4: two pages, so relists are paged too.
    lw.script
        .push_list(Ok(page(Some("10"), Some("c0"), numbered_pods(0, 4))));
    lw.script
        .push_list(Ok(page(Some("10"), None, numbered_pods(4, 2))));
    // The relist at "10": its first page holds pod-3, then the token expires; the full list
    // that replaces the paged one no longer holds pod-3.
    lw.script
        .push_list(Ok(page(Some("11"), Some("c1"), numbered_pods(0, 4))));
    lw.script.push_list(Err(expired()));
    let mut full = numbered_pods(0, 8);
    full.remove(3);
    lw.script.push_list(listed("11", full));
    let store = indexer();
    let options = ReflectorOptions {
        page_size: 4,
        ..options()
    };
    let (reflector, reports) = new_reflector(&lw, Arc::new(store.clone()), options);

    round(&reflector, || lw.watches().len() == 1).await.unwrap();
    assert_eq!(store.len(), 6);
    round(&reflector, || lw.watches().len() == 2).await.unwrap();

    let params = lw.list_params();
    let sequence: Vec<_> = params.iter().map(continuation).collect();
    assert_eq!(
        sequence,
        [
            (Some("0"), None, Some(4)),
            (None, Some("c0"), Some(4)),
            (Some("10"), None, Some(4)),
            (None, Some("c1"), Some(4)),
            (Some("10"), None, None),
        ]
    );
    assert_eq!(lw.lists(), ["0", "", "10", "", "10"]);
    // The store is exactly the full list: nothing of the abandoned pages lingers.
    let names: Vec<String> = contents(&store).into_keys().collect();
    assert_eq!(
        names,
        [
            "pod-0", "pod-1", "pod-2", "pod-4", "pod-5", "pod-6", "pod-7"
        ]
    );
    assert_eq!(reflector.last_sync_resource_version(), "11");
    assert!(reports.seen().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_list_that_fails_halfway_is_settled_by_the_next_complete_list() {
    let lw = Clocked::new();
    lw.script.push_list(Ok(page(
        Some("10"),
        Some("c1"),
        vec![pod("a", "1"), pod("b", "2")],
    )));
    lw.script.push_list(Err(internal_error()));
    lw.script
        .push_list(listed("10", vec![pod("a", "1"), pod("c", "3")]));
    let _open = lw.script.push_watch();
    let store = fifo();
    let running = Running::start(&lw, store.clone(), options());
    wait_for("the watch", || lw.watches().len() == 1).await;
    assert_eq!(running.reports.seen(), [Seen::List(Some(500))]);
    assert_eq!(lw.lists(), ["0", "", "0"]);

    // Pages are queued as they arrive: the abandoned page's "a" and "b" are real states, and
    // the complete list decides what is gone, so "b" ends in a tombstone. Popping the three
    // keys makes the FIFO synced.
    let sync = |rv: &str| (DeltaType::Sync, rv.to_owned());
    assert!(!store.has_synced());
    assert_eq!(
        drain(&store).await,
        [
            ("a".to_owned(), vec![sync("1"), sync("1")]),
            (
                "b".to_owned(),
                vec![sync("2"), (DeltaType::Deleted, "2".to_owned())]
            ),
            ("c".to_owned(), vec![sync("3")]),
        ]
    );
    assert!(store.has_synced());
    running.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Backoff.

fn gaps(times: &[Instant]) -> Vec<Duration> {
    times.windows(2).map(|pair| pair[1] - pair[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn refused_watches_back_off_exponentially_with_jitter_up_to_the_cap() {
    let lw = Clocked::new();
    lw.script.push_list(listed("1", vec![]));
    let bases_ms = [
        800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000, 30_000,
    ];
    for _ in bases_ms {
        lw.script.push_watch_error(connection_refused());
    }
    let _open = lw.script.push_watch();
    let running = Running::start(&lw, Arc::new(indexer()), options());
    wait_for("the watch to open", || {
        lw.watches().len() == bases_ms.len() + 1
    })
    .await;

    // Each retry waits its base (800 ms doubling, capped at 30 s) plus up to 100 % jitter.
    for (gap, base) in gaps(&lw.watch_times()).into_iter().zip(bases_ms) {
        let base = base * MS;
        assert!(
            gap >= base && gap <= 2 * base + MS,
            "{gap:?} outside [{base:?}, {:?})",
            2 * base
        );
    }
    // The watch is retried at the same version; nothing is relisted or reported.
    assert_eq!(lw.lists(), ["0"]);
    assert!(lw.watches().iter().all(|rv| rv == "1"));
    assert!(running.reports.seen().is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_custom_backoff_without_jitter_waits_exactly() {
    let lw = Clocked::new();
    lw.script.push_list(listed("1", vec![]));
    for _ in 0..5 {
        lw.script.push_watch_error(connection_refused());
    }
    let _open = lw.script.push_watch();
    let options = ReflectorOptions {
        backoff: Backoff::new(10 * MS, 100 * MS, 2.0, 0.0, Duration::from_secs(60)),
        ..options()
    };
    let running = Running::start(&lw, Arc::new(indexer()), options);
    wait_for("the watch to open", || lw.watches().len() == 6).await;
    let times = lw.watch_times();
    assert_eq!(gaps(&times), [10 * MS, 20 * MS, 40 * MS, 80 * MS, 100 * MS]);
    assert_eq!(times[5] - times[0], 250 * MS);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn too_many_requests_on_watch_start_backs_off_without_relisting() {
    let lw = Clocked::new();
    lw.script.push_list(listed("1", vec![]));
    for _ in 0..4 {
        lw.script.push_watch_error(too_many_requests());
    }
    let _open = lw.script.push_watch();
    let running = Running::start(&lw, Arc::new(indexer()), options());
    wait_for("the fifth watch", || lw.watches().len() == 5).await;
    sleep(Duration::from_secs(60)).await;
    assert_eq!(lw.lists(), ["0"]);
    assert_eq!(lw.watches(), ["1"; 5]);
    let first = gaps(&lw.watch_times())[0];
    assert!(first >= 800 * MS && first <= 1601 * MS, "{first:?}");
    assert!(running.reports.seen().is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_too_many_requests_event_backs_off_and_rewatches_from_the_last_version() {
    let lw = Clocked::new();
    lw.script.push_list(listed("1", vec![]));
    lw.script.push_watch_events(vec![
        Ok(WatchEvent::Added(pod("a", "2"))),
        Ok(WatchEvent::Error(api_status(
            429,
            "TooManyRequests",
            "too many requests",
        ))),
    ]);
    let _open = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), options());
    wait_for("the second watch", || lw.watches().len() == 2).await;
    assert_eq!(lw.lists(), ["0"]);
    assert_eq!(lw.watches(), ["1", "2"]);
    let gap = gaps(&lw.watch_times())[0];
    assert!(gap >= 800 * MS && gap <= 1601 * MS, "{gap:?}");
    assert_eq!(contents(&store), expect_contents(&[("a", "2")]));
    assert!(running.reports.seen().is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_round_is_retried_after_a_backoff() {
    let lw = Clocked::new();
    lw.script.push_list(Err(internal_error()));
    lw.script.push_list(Err(internal_error()));
    lw.script.push_list(listed("3", vec![]));
    let _open = lw.script.push_watch();
    let running = Running::start(&lw, Arc::new(indexer()), options());
    wait_for("the watch", || lw.watches().len() == 1).await;
    let list_times: Vec<Instant> = lw
        .timed_requests()
        .into_iter()
        .filter_map(|(at, request)| matches!(request, Request::List(_)).then_some(at))
        .collect();
    let list_gaps = gaps(&list_times);
    assert!(
        list_gaps[0] >= 800 * MS && list_gaps[0] <= 1601 * MS,
        "{list_gaps:?}"
    );
    assert!(
        list_gaps[1] >= 1600 * MS && list_gaps[1] <= 3201 * MS,
        "{list_gaps:?}"
    );
    assert_eq!(lw.lists(), ["0", "0", "0"]);
    assert_eq!(
        running.reports.seen(),
        [Seen::List(Some(500)), Seen::List(Some(500))]
    );
    running.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Short and quiet watches.

#[tokio::test(start_paused = true)]
async fn a_watch_closing_at_once_without_events_is_a_very_short_watch() {
    let lw = Clocked::new();
    lw.script.push_list(listed("3", vec![pod("a", "3")]));
    lw.script.push_watch_events(vec![]);
    lw.script.push_list(listed("4", vec![pod("a", "4")]));
    let _open = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), options());
    wait_for("the second watch", || lw.watches().len() == 2).await;

    assert_eq!(running.reports.seen(), [Seen::VeryShortWatch]);
    assert!(running.reports.messages()[0].contains("very short watch"));
    // The server looks unhealthy: back off, then relist at the last version.
    assert_eq!(lw.lists(), ["0", "3"]);
    assert_eq!(lw.watches(), ["3", "4"]);
    let times = lw.timed_requests();
    assert!(times[2].0 - times[1].0 >= 800 * MS);
    assert_eq!(contents(&store), expect_contents(&[("a", "4")]));
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_quiet_watch_that_closes_after_a_while_is_simply_resumed() {
    let lw = Clocked::new();
    lw.script.push_list(listed("3", vec![]));
    let first = lw.script.push_watch();
    let _second = lw.script.push_watch();
    let running = Running::start(&lw, Arc::new(indexer()), options());
    wait_for("the watch", || lw.watches().len() == 1).await;
    sleep(Duration::from_secs(2)).await;
    drop(first);
    wait_for("the second watch", || lw.watches().len() == 2).await;
    assert_eq!(lw.lists(), ["0"]);
    assert_eq!(lw.watches(), ["3", "3"]);
    assert!(running.reports.seen().is_empty());
    running.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Stopping.

#[tokio::test(start_paused = true)]
async fn a_reflector_stopped_before_it_runs_asks_for_nothing() {
    let lw = Clocked::new();
    let (reflector, _) = new_reflector(&lw, Arc::new(indexer()), options());
    let cancel = CancellationToken::new();
    cancel.cancel();
    reflector.run(cancel.clone()).await;
    reflector.list_and_watch(&cancel).await.unwrap();
    assert!(lw.script.requests().is_empty());
}

#[tokio::test(start_paused = true)]
async fn stopping_closes_the_open_watch() {
    let lw = Clocked::new();
    lw.script.push_list(listed("3", vec![]));
    let feed = lw.script.push_watch();
    let running = Running::start(&lw, Arc::new(indexer()), options());
    wait_for("the watch", || lw.watches().len() == 1).await;
    assert!(!feed.is_closed());
    running.stop().await;
    assert!(feed.is_closed());
}

#[tokio::test(start_paused = true)]
async fn stopping_interrupts_a_backoff() {
    let lw = Clocked::new();
    lw.script.push_list(listed("3", vec![]));
    lw.script.push_watch_error(connection_refused());
    let running = Running::start(&lw, Arc::new(indexer()), options());
    wait_for("the refused watch", || lw.watches().len() == 1).await;
    let before = Instant::now();
    running.stop().await;
    // Not a millisecond of the (at least 800 ms) backoff was waited out.
    assert_eq!(Instant::now(), before);
    assert_eq!(lw.watches().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn stopping_while_waiting_for_the_list_returns_at_once() {
    let lw = Clocked::new();
    let (reflector, _) = new_reflector(&lw, Arc::new(indexer()), options());
    let result = round(&reflector, || lw.lists().len() == 1).await;
    assert!(result.is_ok());
    assert!(lw.watches().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Streaming the initial list.

fn streaming() -> ReflectorOptions {
    ReflectorOptions {
        use_watch_list: true,
        ..options()
    }
}

#[tokio::test(start_paused = true)]
async fn a_streamed_initial_list_replaces_the_store_and_the_stream_goes_on() {
    let lw = Clocked::new();
    let feed = lw.script.push_watch();
    let _next = lw.script.push_watch();
    let store = fifo();
    let running = Running::start(&lw, store.clone(), streaming());

    wait_for("the streaming watch", || lw.watches().len() == 1).await;
    feed.send(WatchEvent::Added(pod("foo", "1")));
    feed.send(WatchEvent::Added(pod("tmp", "2")));
    feed.send(WatchEvent::Deleted(pod("tmp", "3")));
    // An ordinary bookmark does not end the initial list.
    feed.send(bookmark("3"));
    sleep(Duration::from_secs(1)).await;
    assert!(
        store.is_empty(),
        "the store changed before the initial list ended"
    );
    assert_eq!(running.last_sync(), "");

    feed.send(initial_events_end("3"));
    wait_for("the end of the initial list", || running.last_sync() == "3").await;
    feed.send(WatchEvent::Modified(pod("foo", "4")));
    for (name, rv) in [("bar", "5"), ("baz", "6")] {
        feed.send(WatchEvent::Added(pod(name, rv)));
    }
    wait_for("the last event", || running.last_sync() == "6").await;
    drop(feed);
    wait_for("the plain watch", || lw.watches().len() == 2).await;

    // No list at all; a streaming watch from "", then a plain one from the last version.
    assert!(lw.lists().is_empty());
    let watches = lw.watch_params();
    let (first, first_rv) = &watches[0];
    assert_eq!(first_rv, "");
    assert!(first.send_initial_events && first.bookmarks);
    timeout_in(first, 300);
    let (second, second_rv) = &watches[1];
    assert_eq!(second_rv, "6");
    assert!(!second.send_initial_events && second.bookmarks);

    let v = |delta_type, rv: &str| (delta_type, rv.to_owned());
    assert_eq!(
        drain(&store).await,
        [
            (
                "foo".to_owned(),
                vec![v(DeltaType::Sync, "1"), v(DeltaType::Updated, "4")]
            ),
            ("bar".to_owned(), vec![v(DeltaType::Added, "5")]),
            ("baz".to_owned(), vec![v(DeltaType::Added, "6")]),
        ]
    );
    assert!(running.reports.seen().is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_streamed_list_falls_back_to_list_and_watch() {
    let lw = Clocked::new();
    lw.script.push_watch_events(vec![
        Ok(WatchEvent::Added(pod("a", "1"))),
        Ok(WatchEvent::Error(api_status(
            500,
            "InternalError",
            "etcdserver: no leader",
        ))),
    ]);
    lw.script
        .push_list(listed("7", vec![pod("a", "1"), pod("b", "6")]));
    let _open = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), streaming());
    wait_for("the plain watch", || lw.watches().len() == 2).await;

    let requests = lw.script.requests();
    assert!(
        matches!(&requests[0], Request::Watch(params, rv) if params.send_initial_events && rv.is_empty())
    );
    assert!(
        matches!(&requests[1], Request::List(params) if params.resource_version.as_deref() == Some("0") && params.limit == Some(500))
    );
    assert!(
        matches!(&requests[2], Request::Watch(params, rv) if !params.send_initial_events && rv == "7")
    );
    assert_eq!(requests.len(), 3);
    assert_eq!(contents(&store), expect_contents(&[("a", "1"), ("b", "6")]));
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_streamed_list_closing_at_once_falls_back_to_list_and_watch() {
    let lw = Clocked::new();
    lw.script.push_watch_events(vec![]);
    lw.script.push_list(listed("7", vec![pod("a", "1")]));
    let _open = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), streaming());
    wait_for("the plain watch", || lw.watches().len() == 2).await;
    assert_eq!(lw.lists(), ["0"]);
    assert_eq!(lw.watches(), ["", "7"]);
    assert_eq!(contents(&store), expect_contents(&[("a", "1")]));
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_refused_streamed_list_backs_off_and_streams_again() {
    let lw = Clocked::new();
    lw.script.push_watch_error(connection_refused());
    let feed = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), streaming());
    wait_for("the second streaming watch", || lw.watches().len() == 2).await;
    feed.send(WatchEvent::Added(pod("a", "1")));
    feed.send(initial_events_end("2"));
    wait_for("the end of the initial list", || running.last_sync() == "2").await;
    assert!(lw.lists().is_empty());
    assert!(
        lw.watch_params()
            .iter()
            .all(|(params, rv)| params.send_initial_events && rv.is_empty())
    );
    assert!(gaps(&lw.watch_times())[0] >= 800 * MS);
    assert_eq!(contents(&store), expect_contents(&[("a", "1")]));
    running.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Bad input: reported, recovered from, never a panic.

#[tokio::test(start_paused = true)]
async fn an_undecodable_stream_item_is_reported_and_the_reflector_relists() {
    let lw = Clocked::new();
    lw.script.push_list(listed("3", vec![pod("a", "3")]));
    lw.script.push_watch_events(vec![
        Ok(WatchEvent::Added(pod("b", "4"))),
        Err(undecodable()),
    ]);
    lw.script
        .push_list(listed("5", vec![pod("a", "3"), pod("b", "4")]));
    let _open = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), options());
    wait_for("the second watch", || lw.watches().len() == 2).await;
    assert_eq!(running.reports.seen(), [Seen::Undecodable]);
    assert!(running.reports.messages()[0].starts_with("pods: watch failed"));
    assert_eq!(lw.lists(), ["0", "4"]);
    assert_eq!(lw.watches(), ["3", "5"]);
    assert_eq!(contents(&store), expect_contents(&[("a", "3"), ("b", "4")]));
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_broken_connection_is_reported_and_the_watch_resumes_without_a_relist() {
    let lw = Clocked::new();
    lw.script.push_list(listed("3", vec![pod("a", "3")]));
    let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    lw.script.push_watch_events(vec![
        Ok(WatchEvent::Added(pod("b", "4"))),
        Err(kube::Error::ReadEvents(reset)),
    ]);
    let _open = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), options());
    wait_for("the second watch", || lw.watches().len() == 2).await;
    assert_eq!(running.reports.seen(), [Seen::Watch(None)]);
    assert_eq!(lw.lists(), ["0"]);
    assert_eq!(lw.watches(), ["3", "4"]);
    assert_eq!(contents(&store), expect_contents(&[("a", "3"), ("b", "4")]));
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn objects_without_a_name_are_reported_and_skipped() {
    let lw = Clocked::new();
    lw.script.push_list(listed(
        "3",
        vec![pod("a", "1"), nameless_pod("2"), pod("b", "3")],
    ));
    let feed = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), options());
    wait_for("the watch", || lw.watches().len() == 1).await;
    assert_eq!(contents(&store), expect_contents(&[("a", "1"), ("b", "3")]));
    assert_eq!(running.reports.seen(), [Seen::NoKey]);

    feed.send(WatchEvent::Added(nameless_pod("4")));
    wait_for("the nameless event's version", || {
        running.last_sync() == "4"
    })
    .await;
    feed.send(WatchEvent::Modified(nameless_pod("5")));
    feed.send(WatchEvent::Deleted(nameless_pod("6")));
    feed.send(WatchEvent::Added(pod("c", "7")));
    wait_for("the last event", || running.last_sync() == "7").await;
    assert_eq!(
        contents(&store),
        expect_contents(&[("a", "1"), ("b", "3"), ("c", "7")])
    );
    assert_eq!(running.reports.seen(), [Seen::NoKey; 4]);
    assert!(
        running
            .reports
            .messages()
            .iter()
            .all(|m| m.starts_with("pods: unable to store"))
    );
    // The watch kept going.
    assert_eq!(lw.lists(), ["0"]);
    assert_eq!(lw.watches(), ["3"]);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_nameless_object_in_a_streamed_list_is_reported_and_skipped() {
    let lw = Clocked::new();
    let feed = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), streaming());
    wait_for("the streaming watch", || lw.watches().len() == 1).await;
    feed.send(WatchEvent::Added(pod("a", "1")));
    feed.send(WatchEvent::Added(nameless_pod("2")));
    feed.send(initial_events_end("2"));
    wait_for("the end of the initial list", || running.last_sync() == "2").await;
    assert_eq!(contents(&store), expect_contents(&[("a", "1")]));
    assert_eq!(running.reports.seen(), [Seen::NoKey]);
    assert!(lw.lists().is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_error_event_is_reported_and_the_reflector_relists() {
    let lw = Clocked::new();
    lw.script.push_list(listed("3", vec![]));
    lw.script.push_watch_events(vec![
        Ok(WatchEvent::Added(pod("a", "4"))),
        Ok(WatchEvent::Error(api_status(
            500,
            "InternalError",
            "etcdserver: no leader",
        ))),
    ]);
    lw.script
        .push_list(listed("6", vec![pod("a", "4"), pod("b", "5")]));
    let _open = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), options());
    wait_for("the second watch", || lw.watches().len() == 2).await;
    assert_eq!(running.reports.seen(), [Seen::ErrorEvent(500)]);
    assert!(running.reports.messages()[0].contains("etcdserver: no leader"));
    assert_eq!(lw.lists(), ["0", "4"]);
    assert_eq!(lw.watches(), ["3", "6"]);
    assert_eq!(contents(&store), expect_contents(&[("a", "4"), ("b", "5")]));
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_list_without_a_version_is_reported_and_listed_again() {
    let lw = Clocked::new();
    lw.script
        .push_list(Ok(page(None, None, vec![pod("a", "1"), pod("stale", "1")])));
    lw.script.push_list(listed("2", vec![pod("a", "2")]));
    let _open = lw.script.push_watch();
    let store = indexer();
    let running = Running::start(&lw, Arc::new(store.clone()), options());
    wait_for("the watch", || lw.watches().len() == 1).await;
    assert_eq!(running.reports.seen(), [Seen::NoResourceVersion]);
    assert_eq!(lw.lists(), ["0", "0"]);
    assert_eq!(lw.watches(), ["2"]);
    assert_eq!(contents(&store), expect_contents(&[("a", "2")]));
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_watch_error_handler_hears_of_every_failed_list_and_watch() {
    let lw = Clocked::new();
    lw.script
        .push_list(Err(api_error(403, "Forbidden", "pods is forbidden")));
    lw.script.push_list(listed("3", vec![]));
    lw.script
        .push_watch_error(api_error(403, "Forbidden", "pods is forbidden"));
    lw.script.push_list(listed("3", vec![]));
    let _open = lw.script.push_watch();
    let running = Running::start(&lw, Arc::new(indexer()), options());
    wait_for("the second watch", || lw.watches().len() == 2).await;
    assert_eq!(
        running.reports.seen(),
        [Seen::List(Some(403)), Seen::Watch(Some(403))]
    );
    let messages = running.reports.messages();
    assert!(
        messages[0].starts_with("pods: failed to list"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].starts_with("pods: watch failed"),
        "{}",
        messages[1]
    );
    // A forbidden watch is not retried in place: the reflector relists after a backoff.
    assert_eq!(lw.lists(), ["0", "0", "3"]);
    running.stop().await;
}

#[test]
fn errors_say_whether_the_version_is_gone() {
    let watch = |source| ReflectorError::Watch {
        name: "pods".to_owned(),
        source,
    };
    assert!(watch(expired()).is_expired());
    assert!(watch(gone()).is_expired());
    assert!(!watch(too_many_requests()).is_expired());
    assert!(!watch(connection_refused()).is_expired());
    assert_eq!(
        watch(too_many_requests()).status().map(|s| s.code),
        Some(429)
    );
    assert!(watch(undecodable()).status().is_none());
    let event = ReflectorError::WatchStatus {
        name: "pods".to_owned(),
        status: api_status(410, "Expired", "too old"),
    };
    assert!(event.is_expired());
    assert!(event.to_string().contains("too old"));
}
