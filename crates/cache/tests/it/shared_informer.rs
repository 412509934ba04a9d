//! The shared informer's behaviour, scenario by scenario after client-go's
//! `shared_informer_test.go`: resync periods and the resync check period, handlers joining late
//! and leaving, the transform and the watch-error handler, watch disruption and relists, slow and
//! panicking handlers, sync and shutdown. The server is a [`ScriptedListerWatcher`] and the clock
//! is Tokio's paused one, so periods are checked to the tick. One last test runs a
//! [`SharedInformerFactory`] against the embedded API server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_cache::{
    Backoff, Delivery, HandlerOptions, InformerError, Lister, ObjectOrTombstone, ReflectorError,
    ReflectorOptions, ResourceEventHandler, ResourceEventHandlerFuncs, ScriptedListerWatcher,
    SharedIndexInformer, SharedInformerFactory, WatchFeed,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListMeta, ObjectList, ObjectMeta, TypeMeta, WatchEvent};
use kube::core::Status;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

const SECOND: Duration = Duration::from_secs(1);

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

fn labelled_pod(name: &str, resource_version: &str, labels: &[(&str, &str)]) -> Pod {
    let mut pod = pod(name, resource_version);
    pod.metadata.labels = Some(
        labels
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect(),
    );
    pod
}

fn listed(resource_version: &str, items: Vec<Pod>) -> Result<ObjectList<Pod>, kube::Error> {
    Ok(ObjectList {
        types: TypeMeta::list::<Pod>(),
        metadata: ListMeta {
            resource_version: Some(resource_version.to_owned()),
            ..ListMeta::default()
        },
        items,
    })
}

fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
    kube::Error::Api(Status::failure(message, reason).with_code(code).boxed())
}

fn expired_event() -> WatchEvent<Pod> {
    WatchEvent::Error(
        Status::failure("too old resource version", "Expired")
            .with_code(410)
            .boxed(),
    )
}

/// A scripted server whose first list answers with `items` at `resource_version`, and whose
/// first watch is open (its feed returned).
fn serving(
    resource_version: &str,
    items: Vec<Pod>,
) -> (ScriptedListerWatcher<Pod>, WatchFeed<Pod>) {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(listed(resource_version, items));
    let feed = lw.push_watch();
    (lw, feed)
}

/// Retries 10 ms apart, no jitter, so a relist lands well within the second it was provoked in.
fn quick_retries() -> ReflectorOptions {
    ReflectorOptions {
        name: "pods".to_owned(),
        backoff: Backoff::new(
            Duration::from_millis(10),
            Duration::from_millis(100),
            2.0,
            0.0,
            Duration::from_secs(120),
        ),
        ..ReflectorOptions::default()
    }
}

// ---------------------------------------------------------------------------------------------
// What handlers saw.

/// One notification, reduced to what the tests compare.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Seen {
    Added {
        name: String,
        initial: bool,
    },
    Updated {
        name: String,
        old_rv: String,
        new_rv: String,
    },
    Deleted {
        name: String,
        rv: String,
        tombstone: bool,
    },
}

fn added(name: &str, initial: bool) -> Seen {
    Seen::Added {
        name: name.to_owned(),
        initial,
    }
}

fn updated(name: &str, old_rv: &str, new_rv: &str) -> Seen {
    Seen::Updated {
        name: name.to_owned(),
        old_rv: old_rv.to_owned(),
        new_rv: new_rv.to_owned(),
    }
}

/// A resync: an update whose old and new states are one and the same version.
fn resynced(name: &str, rv: &str) -> Seen {
    updated(name, rv, rv)
}

fn deleted(name: &str, rv: &str) -> Seen {
    Seen::Deleted {
        name: name.to_owned(),
        rv: rv.to_owned(),
        tombstone: false,
    }
}

fn tombstoned(name: &str, rv: &str) -> Seen {
    Seen::Deleted {
        name: name.to_owned(),
        rv: rv.to_owned(),
        tombstone: true,
    }
}

fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

fn rv_of(pod: &Pod) -> String {
    pod.metadata.resource_version.clone().unwrap_or_default()
}

/// A handler that writes down every notification, in order.
#[derive(Clone, Default)]
struct Journal(Arc<Mutex<Vec<Seen>>>);

impl Journal {
    /// Everything seen since the last take, in order.
    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.0.lock())
    }

    /// Everything seen since the last take, sorted (for notifications whose order follows the
    /// cache's hash order: initial lists, resyncs).
    fn take_sorted(&self) -> Vec<Seen> {
        let mut seen = self.take();
        seen.sort();
        seen
    }

    fn len(&self) -> usize {
        self.0.lock().len()
    }
}

impl ResourceEventHandler<Pod> for Journal {
    fn on_add(&self, obj: &Arc<Pod>, is_in_initial_list: bool) {
        self.0.lock().push(added(&name_of(obj), is_in_initial_list));
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        self.0
            .lock()
            .push(updated(&name_of(new), &rv_of(old), &rv_of(new)));
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<Pod>) {
        let seen = match obj {
            ObjectOrTombstone::Object(pod) => deleted(&name_of(pod), &rv_of(pod)),
            ObjectOrTombstone::Tombstone(tombstone) => {
                let last = tombstone.obj.as_deref();
                tombstoned(
                    &last.map(name_of).unwrap_or_else(|| tombstone.key.clone()),
                    &last.map(rv_of).unwrap_or_default(),
                )
            }
        };
        self.0.lock().push(seen);
    }
}

// ---------------------------------------------------------------------------------------------
// Running an informer.

struct Running {
    cancel: CancellationToken,
    task: JoinHandle<Result<(), InformerError>>,
}

fn spawn_run(informer: &SharedIndexInformer<Pod>) -> Running {
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });
    Running { cancel, task }
}

impl Running {
    async fn stop(self) -> Result<(), InformerError> {
        self.cancel.cancel();
        self.task.await.unwrap()
    }
}

/// Lets every task run until all are idle. On the paused clock a sleep ends only once nothing
/// else can run, so this settles chains of wake-ups (reflector, FIFO, informer, listener tasks)
/// while moving the clock by a millisecond.
async fn settle() {
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    sleep(Duration::from_millis(1)).await;
}

// ---------------------------------------------------------------------------------------------
// Resync periods.

#[tokio::test(start_paused = true)]
async fn each_handler_is_resynced_on_its_own_period() {
    let (lw, _feed) = serving("2", vec![pod("pod-a", "1"), pod("pod-b", "2")]);
    let informer = SharedIndexInformer::new(lw, SECOND, Default::default());
    let never = Journal::default();
    let every_second = Journal::default();
    let every_two = Journal::default();
    let every_three = Journal::default();
    informer
        .add_event_handler_with_resync_period(never.clone(), Duration::ZERO)
        .unwrap();
    informer
        .add_event_handler_with_resync_period(every_second.clone(), SECOND)
        .unwrap();
    informer
        .add_event_handler_with_resync_period(every_two.clone(), 2 * SECOND)
        .unwrap();
    informer
        .add_event_handler_with_resync_period(every_three.clone(), 3 * SECOND)
        .unwrap();

    let start = Instant::now();
    let running = spawn_run(&informer);
    settle().await;
    let initial = vec![added("pod-a", true), added("pod-b", true)];
    for journal in [&never, &every_second, &every_two, &every_three] {
        assert_eq!(journal.take_sorted(), initial);
    }

    let resync = vec![resynced("pod-a", "1"), resynced("pod-b", "2")];
    // (second, whether each of never / 1 s / 2 s / 3 s is resynced at that tick)
    let schedule = [
        (1, [false, true, false, false]),
        (2, [false, true, true, false]),
        (3, [false, true, false, true]),
        (4, [false, true, true, false]),
        (5, [false, true, false, false]),
        (6, [false, true, true, true]),
    ];
    for (second, due) in schedule {
        // Half a second after the tick: everything it caused has been delivered.
        sleep_until(start + second * SECOND + SECOND / 2).await;
        for (journal, due) in [&never, &every_second, &every_two, &every_three]
            .into_iter()
            .zip(due)
        {
            let expected = if due { resync.clone() } else { Vec::new() };
            assert_eq!(journal.take_sorted(), expected, "at {second} s");
        }
    }
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_shorter_period_lowers_the_check_period_before_start_and_is_raised_after() {
    let (lw, _feed) = serving("1", vec![pod("pod-a", "1")]);
    // The informer would check every 10 s, but a handler asking for 3 s before start makes it
    // check every 3 s; a handler with the default period is then resynced at the first check
    // at or after 10 s.
    let informer = SharedIndexInformer::new(lw, 10 * SECOND, Default::default());
    let fast = Journal::default();
    let default_period = Journal::default();
    informer
        .add_event_handler_with_resync_period(fast.clone(), 3 * SECOND)
        .unwrap();
    informer.add_event_handler(default_period.clone()).unwrap();

    let start = Instant::now();
    let running = spawn_run(&informer);
    settle().await;
    fast.take();
    default_period.take();

    // After start a handler cannot lower the check period: its 1 s becomes 3 s. Added at 4.5 s,
    // it is due at 7.5 s, so first resynced at the 9 s check (at 1 s it would be the 6 s one).
    sleep_until(start + 4 * SECOND + SECOND / 2).await;
    let late = Journal::default();
    informer
        .add_event_handler_with_resync_period(late.clone(), SECOND)
        .unwrap();
    settle().await;
    assert_eq!(late.take(), [added("pod-a", true)]);

    let resync = vec![resynced("pod-a", "1")];
    // (second, whether fast / default / late is resynced at that check)
    let schedule = [
        (3, [true, false, false]),
        (6, [true, false, false]),
        (9, [true, false, true]),
        (12, [true, true, true]),
        (15, [true, false, true]),
        (18, [true, false, true]),
        (21, [true, false, true]),
        (24, [true, true, true]),
    ];
    for (second, due) in schedule {
        sleep_until(start + second * SECOND + SECOND / 2).await;
        for (journal, due) in [&fast, &default_period, &late].into_iter().zip(due) {
            let expected = if due { resync.clone() } else { Vec::new() };
            assert_eq!(journal.take(), expected, "at {second} s");
        }
    }
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_period_under_a_second_is_raised_to_one_second() {
    let (lw, _feed) = serving("1", vec![pod("pod-a", "1")]);
    let informer = SharedIndexInformer::new(lw, 10 * SECOND, Default::default());
    let eager = Journal::default();
    let never = Journal::default();
    informer
        .add_event_handler_with_resync_period(eager.clone(), Duration::from_millis(200))
        .unwrap();
    informer
        .add_event_handler_with_resync_period(never.clone(), Duration::ZERO)
        .unwrap();

    let start = Instant::now();
    let running = spawn_run(&informer);
    settle().await;
    eager.take();
    never.take();

    sleep_until(start + SECOND / 2).await;
    assert_eq!(eager.take(), []);
    for second in 1..=3 {
        sleep_until(start + second * SECOND + SECOND / 2).await;
        assert_eq!(eager.take(), [resynced("pod-a", "1")], "at {second} s");
    }
    assert_eq!(never.take(), []);
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_informer_without_a_resync_period_resyncs_nobody() {
    let (lw, _feed) = serving("1", vec![pod("pod-a", "1")]);
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    let asking = Journal::default();
    let defaulted = Journal::default();
    informer
        .add_event_handler_with_resync_period(asking.clone(), SECOND)
        .unwrap();
    informer.add_event_handler(defaulted.clone()).unwrap();

    let running = spawn_run(&informer);
    settle().await;
    assert_eq!(asking.take(), [added("pod-a", true)]);
    assert_eq!(defaulted.take(), [added("pod-a", true)]);

    sleep(10 * SECOND).await;
    // A handler added after start cannot turn resyncs on either.
    let late = Journal::default();
    informer
        .add_event_handler_with_resync_period(late.clone(), SECOND)
        .unwrap();
    sleep(10 * SECOND).await;
    assert_eq!(asking.take(), []);
    assert_eq!(defaulted.take(), []);
    assert_eq!(late.take(), [added("pod-a", true)]);
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn resyncs_of_objects_without_resource_version_go_only_to_due_handlers() {
    let bare = |name: &str| Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    };
    let (lw, _feed) = serving("1", vec![bare("pod-a"), bare("pod-b")]);
    let informer = SharedIndexInformer::new(lw, SECOND, Default::default());
    let due = Journal::default();
    let never = Journal::default();
    informer
        .add_event_handler_with_resync_period(due.clone(), SECOND)
        .unwrap();
    informer
        .add_event_handler_with_resync_period(never.clone(), Duration::ZERO)
        .unwrap();

    let start = Instant::now();
    let running = spawn_run(&informer);
    settle().await;
    due.take();
    never.take();

    sleep_until(start + SECOND + SECOND / 2).await;
    assert_eq!(
        due.take_sorted(),
        [updated("pod-a", "", ""), updated("pod-b", "", "")]
    );
    assert_eq!(never.take(), []);
    running.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Handlers joining and leaving.

#[tokio::test(start_paused = true)]
async fn a_late_handler_gets_the_cache_as_initial_adds_then_live_events() {
    let (lw, feed) = serving("2", vec![pod("pod-a", "1"), pod("pod-b", "2")]);
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    let early = Journal::default();
    let early_registration = informer.add_event_handler(early.clone()).unwrap();
    assert!(!early_registration.has_synced());

    let running = spawn_run(&informer);
    settle().await;
    assert!(informer.has_synced());
    assert!(early_registration.has_synced());
    assert_eq!(
        early.take_sorted(),
        [added("pod-a", true), added("pod-b", true)]
    );

    let late = Journal::default();
    let late_registration = informer.add_event_handler(late.clone()).unwrap();
    // The synthetic adds are queued but not yet handled.
    assert!(!late_registration.has_synced());
    settle().await;
    assert!(late_registration.has_synced());
    assert_eq!(
        late.take_sorted(),
        [added("pod-a", true), added("pod-b", true)]
    );

    feed.send(WatchEvent::Added(pod("pod-c", "3")));
    feed.send(WatchEvent::Modified(pod("pod-a", "4")));
    settle().await;
    let live = [added("pod-c", false), updated("pod-a", "1", "4")];
    assert_eq!(late.take(), live);
    assert_eq!(early.take(), live);
    assert!(late_registration.has_synced());
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_removed_handler_hears_nothing_more_and_cannot_be_removed_twice() {
    let (lw, feed) = serving("1", Vec::new());
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    let staying = Journal::default();
    let leaving = Journal::default();
    informer.add_event_handler(staying.clone()).unwrap();
    let leaving_registration = informer.add_event_handler(leaving.clone()).unwrap();
    let running = spawn_run(&informer);
    settle().await;

    feed.send(WatchEvent::Added(pod("pod-a", "2")));
    settle().await;
    assert_eq!(leaving.take(), [added("pod-a", false)]);

    informer
        .remove_event_handler(&leaving_registration)
        .unwrap();
    feed.send(WatchEvent::Added(pod("pod-b", "3")));
    settle().await;
    assert_eq!(leaving.take(), []);
    assert_eq!(
        staying.take(),
        [added("pod-a", false), added("pod-b", false)]
    );
    assert!(matches!(
        informer.remove_event_handler(&leaving_registration),
        Err(InformerError::UnknownRegistration(_))
    ));
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn one_handler_registered_twice_is_two_registrations() {
    let (lw, feed) = serving("1", Vec::new());
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    let journal = Journal::default();
    let first = informer.add_event_handler(journal.clone()).unwrap();
    let second = informer.add_event_handler(journal.clone()).unwrap();
    let running = spawn_run(&informer);
    settle().await;

    feed.send(WatchEvent::Added(pod("pod-a", "2")));
    settle().await;
    assert_eq!(
        journal.take(),
        [added("pod-a", false), added("pod-a", false)]
    );

    informer.remove_event_handler(&first).unwrap();
    feed.send(WatchEvent::Added(pod("pod-b", "3")));
    settle().await;
    assert_eq!(journal.take(), [added("pod-b", false)]);

    informer.remove_event_handler(&second).unwrap();
    feed.send(WatchEvent::Added(pod("pod-c", "4")));
    settle().await;
    assert_eq!(journal.take(), []);
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn another_informers_registration_is_refused_and_removes_nothing() {
    let (lw, feed) = serving("1", Vec::new());
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    let other = SharedIndexInformer::new(
        ScriptedListerWatcher::<Pod>::new(),
        Duration::ZERO,
        Default::default(),
    );
    let own = Journal::default();
    informer.add_event_handler(own.clone()).unwrap();
    let foreign = other.add_event_handler(Journal::default()).unwrap();

    assert!(matches!(
        informer.remove_event_handler(&foreign),
        Err(InformerError::UnknownRegistration(_))
    ));
    let running = spawn_run(&informer);
    settle().await;
    feed.send(WatchEvent::Added(pod("pod-a", "2")));
    settle().await;
    assert_eq!(own.take(), [added("pod-a", false)]);
    // The foreign registration is still on its own informer.
    other.remove_event_handler(&foreign).unwrap();
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_stopped_informer_refuses_new_handlers_but_lets_old_ones_go_once() {
    let (lw, _feed) = serving("1", vec![pod("pod-a", "1")]);
    let informer = SharedIndexInformer::new(lw, SECOND, Default::default());
    let registration = informer.add_event_handler(Journal::default()).unwrap();
    assert!(!informer.is_stopped());

    let running = spawn_run(&informer);
    settle().await;
    assert!(!informer.is_stopped());
    running.stop().await.unwrap();
    assert!(informer.is_stopped());

    let refused = informer.add_event_handler(Journal::default()).unwrap_err();
    assert!(matches!(refused, InformerError::Stopped(_)));
    assert!(refused.to_string().contains("stopped already"), "{refused}");
    informer.remove_event_handler(&registration).unwrap();
    assert!(matches!(
        informer.remove_event_handler(&registration),
        Err(InformerError::UnknownRegistration(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_registered_while_the_informer_starts_misses_nothing() {
    for round in 0..200 {
        let lw = ScriptedListerWatcher::new();
        lw.push_list(listed(
            "3",
            vec![pod("pod-a", "1"), pod("pod-b", "2"), pod("pod-c", "3")],
        ));
        let informer = SharedIndexInformer::new(lw, SECOND, Default::default());
        let journal = Journal::default();
        let registering = tokio::task::spawn_blocking({
            let informer = informer.clone();
            let journal = journal.clone();
            move || informer.add_event_handler(journal).unwrap()
        });
        let running = spawn_run(&informer);
        let registration = registering.await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), async {
            while !registration.has_synced() {
                sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("round {round}: the handler never synced"));
        let names: Vec<String> = journal
            .take_sorted()
            .into_iter()
            .map(|seen| match seen {
                Seen::Added { name, .. } => name,
                other => panic!("round {round}: unexpected {other:?}"),
            })
            .collect();
        assert_eq!(names, ["pod-a", "pod-b", "pod-c"], "round {round}");
        running.stop().await.unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration, transform and errors.

#[tokio::test(start_paused = true)]
async fn configuration_is_frozen_once_running_and_an_informer_runs_once() {
    let (lw, _feed) = serving("1", Vec::new());
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    informer.set_transform(Arc::new(|pod: Pod| pod)).unwrap();
    informer
        .set_watch_error_handler(Arc::new(|_: &ReflectorError| {}))
        .unwrap();

    let running = spawn_run(&informer);
    settle().await;
    assert!(matches!(
        informer.set_transform(Arc::new(|pod: Pod| pod)),
        Err(InformerError::AlreadyStarted(_))
    ));
    assert!(matches!(
        informer.set_watch_error_handler(Arc::new(|_: &ReflectorError| {})),
        Err(InformerError::AlreadyStarted(_))
    ));
    assert!(matches!(
        informer.run(CancellationToken::new()).await,
        Err(InformerError::AlreadyStarted(_))
    ));
    assert!(!informer.is_stopped());

    running.stop().await.unwrap();
    assert!(matches!(
        informer.run(CancellationToken::new()).await,
        Err(InformerError::AlreadyStarted(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn the_transform_shapes_what_handlers_and_the_cache_see() {
    let (lw, feed) = serving("2", vec![pod("pod-a", "1"), pod("pod-b", "2")]);
    let informer = SharedIndexInformer::new(lw, SECOND, Default::default());
    informer
        .set_transform(Arc::new(|mut pod: Pod| {
            pod.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert("transformed".to_owned(), "yes".to_owned());
            pod
        }))
        .unwrap();
    let marked = |pod: &Pod| {
        pod.metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get("transformed"))
            .is_some_and(|value| value == "yes")
    };
    // (notification kind, name, whether it carried the transform's mark)
    let seen = Arc::new(Mutex::new(Vec::<(&'static str, String, bool)>::new()));
    let handler = ResourceEventHandlerFuncs::new()
        .on_add({
            let seen = Arc::clone(&seen);
            move |pod: &Arc<Pod>, _| seen.lock().push(("add", name_of(pod), marked(pod)))
        })
        .on_update({
            let seen = Arc::clone(&seen);
            move |old: &Arc<Pod>, new: &Arc<Pod>| {
                seen.lock()
                    .push(("update", name_of(new), marked(old) && marked(new)));
            }
        })
        .on_delete({
            let seen = Arc::clone(&seen);
            move |pod: &ObjectOrTombstone<Pod>| {
                let pod = pod.object().unwrap();
                seen.lock().push(("delete", name_of(pod), marked(pod)));
            }
        });
    informer
        .add_event_handler_with_resync_period(handler, SECOND)
        .unwrap();

    let running = spawn_run(&informer);
    settle().await;
    feed.send(WatchEvent::Added(pod("pod-c", "3")));
    feed.send(WatchEvent::Modified(pod("pod-a", "4")));
    feed.send(WatchEvent::Deleted(pod("pod-b", "5")));
    settle().await;
    // A resync re-delivers the cached (already transformed) objects.
    sleep(SECOND).await;

    let mut seen = std::mem::take(&mut *seen.lock());
    seen.sort();
    let expected: Vec<(&str, String, bool)> = [
        ("add", "pod-a"),
        ("add", "pod-b"),
        ("add", "pod-c"),
        ("delete", "pod-b"),
        ("update", "pod-a"),
        ("update", "pod-a"),
        ("update", "pod-c"),
    ]
    .into_iter()
    .map(|(kind, name)| (kind, name.to_owned(), true))
    .collect();
    assert_eq!(seen, expected);
    let cached = informer.get_indexer().list();
    assert_eq!(cached.len(), 2);
    assert!(cached.iter().all(|pod| marked(pod)));
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn list_errors_reach_the_watch_error_handler_and_the_informer_recovers() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Err(api_error(403, "Forbidden", "Access Denied")));
    lw.push_list(listed("1", vec![pod("pod-a", "1")]));
    let _feed = lw.push_watch();
    let informer = SharedIndexInformer::new(lw.clone(), Duration::ZERO, Default::default());
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    informer
        .set_watch_error_handler({
            let errors = Arc::clone(&errors);
            Arc::new(move |err: &ReflectorError| {
                assert!(matches!(err, ReflectorError::List { .. }), "{err}");
                errors.lock().push(err.to_string());
            })
        })
        .unwrap();
    let journal = Journal::default();
    informer.add_event_handler(journal.clone()).unwrap();

    let running = spawn_run(&informer);
    settle().await;
    assert!(!informer.has_synced());
    {
        let errors = errors.lock();
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains("Access Denied"), "{}", errors[0]);
    }

    // The default backoff waits at most 1.6 s before listing again.
    sleep(2 * SECOND).await;
    assert!(informer.has_synced());
    assert_eq!(journal.take(), [added("pod-a", true)]);
    assert_eq!(lw.list_resource_versions(), ["0", "0"]);
    assert_eq!(errors.lock().len(), 1);
    running.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Watch disruption.

#[tokio::test(start_paused = true)]
async fn a_cut_watch_is_resumed_from_the_last_resource_version() {
    let (lw, feed) = serving("10", vec![pod("pod-a", "10")]);
    let informer = SharedIndexInformer::with_options(
        lw.clone(),
        Duration::ZERO,
        Default::default(),
        quick_retries(),
    );
    let journal = Journal::default();
    informer.add_event_handler(journal.clone()).unwrap();
    let running = spawn_run(&informer);
    settle().await;
    assert_eq!(journal.take(), [added("pod-a", true)]);

    feed.send(WatchEvent::Modified(pod("pod-a", "11")));
    feed.send(WatchEvent::Added(pod("pod-b", "12")));
    settle().await;
    drop(feed);
    let resumed = lw.push_watch();
    settle().await;
    assert_eq!(lw.watch_resource_versions(), ["10", "12"]);
    assert_eq!(lw.list_resource_versions(), ["0"]);
    assert_eq!(informer.last_sync_resource_version(), "12");

    resumed.send(WatchEvent::Deleted(pod("pod-a", "13")));
    settle().await;
    assert_eq!(
        journal.take(),
        [
            updated("pod-a", "10", "11"),
            added("pod-b", false),
            deleted("pod-a", "13"),
        ]
    );
    assert_eq!(informer.get_indexer().list_keys(), ["pod-b"]);
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_expired_watch_relists_and_tombstones_what_vanished() {
    let (lw, feed) = serving(
        "3",
        vec![pod("pod-1", "1"), pod("pod-2", "2"), pod("pod-gone", "3")],
    );
    let informer =
        SharedIndexInformer::with_options(lw.clone(), SECOND, Default::default(), quick_retries());
    let quiet = Journal::default();
    let resyncing = Journal::default();
    informer
        .add_event_handler_with_resync_period(quiet.clone(), Duration::ZERO)
        .unwrap();
    informer
        .add_event_handler_with_resync_period(resyncing.clone(), SECOND)
        .unwrap();

    let start = Instant::now();
    let running = spawn_run(&informer);
    settle().await;
    let initial = [
        added("pod-1", true),
        added("pod-2", true),
        added("pod-gone", true),
    ];
    assert_eq!(quiet.take_sorted(), initial);
    assert_eq!(resyncing.take_sorted(), initial);

    // The 1 s check resyncs only the resyncing handler, and marks it as the one in sync.
    sleep_until(start + SECOND + SECOND / 5).await;
    assert_eq!(quiet.take(), []);
    assert_eq!(resyncing.take().len(), 3);

    // Meanwhile pod-2 changed, pod-3 was created and pod-gone deleted, all unseen; the watch
    // then reports its version expired, and the relist brings the cache up to date.
    lw.push_list(listed(
        "5",
        vec![pod("pod-1", "1"), pod("pod-2", "4"), pod("pod-3", "5")],
    ));
    let _rewatch = lw.push_watch();
    feed.send(expired_event());
    sleep_until(start + SECOND + SECOND / 2).await;

    assert_eq!(lw.list_resource_versions(), ["0", "3"]);
    assert_eq!(lw.watch_resource_versions(), ["3", "5"]);
    // An unchanged object is a resync, for handlers in sync only; a vanished one is a
    // tombstone with its last known state.
    assert_eq!(
        quiet.take(),
        [
            updated("pod-2", "2", "4"),
            added("pod-3", false),
            tombstoned("pod-gone", "3"),
        ]
    );
    assert_eq!(
        resyncing.take(),
        [
            resynced("pod-1", "1"),
            updated("pod-2", "2", "4"),
            added("pod-3", false),
            tombstoned("pod-gone", "3"),
        ]
    );
    let mut keys = informer.get_indexer().list_keys();
    keys.sort();
    assert_eq!(keys, ["pod-1", "pod-2", "pod-3"]);
    assert_eq!(informer.last_sync_resource_version(), "5");
    running.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Inline handlers: called on the informer's own task.

const INLINE: HandlerOptions = HandlerOptions {
    resync_period: None,
    delivery: Delivery::Inline,
};

/// A journal that also notes, for each notification, whether the informer's cache already held
/// the object's newest state (or its absence, for a delete) when the handler was called.
#[derive(Clone)]
struct CacheWitness {
    journal: Journal,
    informer: SharedIndexInformer<Pod>,
    cache_was_ahead: Arc<Mutex<Vec<bool>>>,
}

impl CacheWitness {
    fn note(&self, name: &str, newest: Option<&Pod>) {
        let cached = self.informer.get_store().get_by_key(name);
        let ahead = match (cached, newest) {
            (Some(cached), Some(newest)) => rv_of(&cached) == rv_of(newest),
            (None, None) => true,
            _ => false,
        };
        self.cache_was_ahead.lock().push(ahead);
    }
}

impl ResourceEventHandler<Pod> for CacheWitness {
    fn on_add(&self, obj: &Arc<Pod>, is_in_initial_list: bool) {
        self.note(&name_of(obj), Some(obj));
        self.journal.on_add(obj, is_in_initial_list);
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        self.note(&name_of(new), Some(new));
        self.journal.on_update(old, new);
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<Pod>) {
        if let ObjectOrTombstone::Object(pod) = obj {
            self.note(&name_of(pod), None);
        }
        self.journal.on_delete(obj);
    }
}

#[tokio::test(start_paused = true)]
async fn an_inline_handler_sees_each_change_after_the_cache_and_in_order() {
    let (lw, feed) = serving("2", vec![pod("pod-a", "1"), pod("pod-b", "2")]);
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    let inline = CacheWitness {
        journal: Journal::default(),
        informer: informer.clone(),
        cache_was_ahead: Arc::default(),
    };
    let buffered = Journal::default();
    let registration = informer
        .add_event_handler_with_options(inline.clone(), INLINE)
        .unwrap();
    informer.add_event_handler(buffered.clone()).unwrap();
    let running = spawn_run(&informer);
    assert!(informer.wait_for_sync(&CancellationToken::new()).await);
    // Nothing is left pending for an inline handler once the informer has synced.
    assert!(registration.has_synced());
    assert_eq!(
        inline.journal.take_sorted(),
        [added("pod-a", true), added("pod-b", true)]
    );

    feed.send(WatchEvent::Added(pod("pod-c", "3")));
    feed.send(WatchEvent::Modified(pod("pod-a", "4")));
    feed.send(WatchEvent::Deleted(pod("pod-b", "5")));
    settle().await;
    let live = [
        added("pod-c", false),
        updated("pod-a", "1", "4"),
        deleted("pod-b", "5"),
    ];
    assert_eq!(inline.journal.take(), live);
    // The buffered handler hears the same, in the same order.
    buffered.take();
    feed.send(WatchEvent::Modified(pod("pod-c", "6")));
    settle().await;
    assert_eq!(inline.journal.take(), [updated("pod-c", "3", "6")]);
    assert_eq!(buffered.take(), [updated("pod-c", "3", "6")]);
    assert_eq!(*inline.cache_was_ahead.lock(), [true; 6]);
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_inline_handler_registered_late_has_the_cache_before_registration_returns() {
    let (lw, feed) = serving("2", vec![pod("pod-a", "1"), pod("pod-b", "2")]);
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    let running = spawn_run(&informer);
    assert!(informer.wait_for_sync(&CancellationToken::new()).await);

    let late = Journal::default();
    let registration = informer
        .add_event_handler_with_options(late.clone(), INLINE)
        .unwrap();
    // Called by the registering caller, not queued: nothing to wait for.
    assert!(registration.has_synced());
    assert_eq!(
        late.take_sorted(),
        [added("pod-a", true), added("pod-b", true)]
    );

    feed.send(WatchEvent::Modified(pod("pod-a", "3")));
    settle().await;
    assert_eq!(late.take(), [updated("pod-a", "1", "3")]);
    informer.remove_event_handler(&registration).unwrap();
    feed.send(WatchEvent::Modified(pod("pod-a", "4")));
    settle().await;
    assert_eq!(late.take(), []);
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_inline_handler_is_resynced_on_its_own_period() {
    let (lw, _feed) = serving("2", vec![pod("pod-a", "1")]);
    let informer = SharedIndexInformer::new(lw, 10 * SECOND, Default::default());
    let journal = Journal::default();
    let options = HandlerOptions {
        resync_period: Some(SECOND),
        delivery: Delivery::Inline,
    };
    informer
        .add_event_handler_with_options(journal.clone(), options)
        .unwrap();
    let running = spawn_run(&informer);
    settle().await;
    assert_eq!(journal.take(), [added("pod-a", true)]);
    sleep(SECOND).await;
    settle().await;
    assert_eq!(journal.take(), [resynced("pod-a", "1")]);
    sleep(SECOND).await;
    settle().await;
    assert_eq!(journal.take(), [resynced("pod-a", "1")]);
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_inline_handler_may_ask_whether_the_informer_has_synced() {
    let (lw, feed) = serving("2", vec![pod("pod-a", "1"), pod("pod-b", "2")]);
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    // Called while the informer applies the change: the answer must not wait on the informer.
    let answers = Arc::new(Mutex::new(Vec::new()));
    informer
        .add_event_handler_with_options(
            ResourceEventHandlerFuncs::new()
                .on_add({
                    let (informer, answers) = (informer.clone(), Arc::clone(&answers));
                    move |_: &Arc<Pod>, _| answers.lock().push(informer.has_synced())
                })
                .on_update({
                    let (informer, answers) = (informer.clone(), Arc::clone(&answers));
                    move |_: &Arc<Pod>, _: &Arc<Pod>| answers.lock().push(informer.has_synced())
                }),
            INLINE,
        )
        .unwrap();
    let running = spawn_run(&informer);
    settle().await;
    feed.send(WatchEvent::Modified(pod("pod-a", "3")));
    settle().await;
    // Synced once the last initial add has been handled, not while it is.
    assert_eq!(*answers.lock(), [false, false, true]);
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_panicking_inline_handler_loses_only_that_notification() {
    let (lw, feed) = serving("1", Vec::new());
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    let survivor = Journal::default();
    let bystander = Journal::default();
    informer
        .add_event_handler_with_options(
            ResourceEventHandlerFuncs::new().on_add({
                let survivor = survivor.clone();
                move |pod: &Arc<Pod>, initial| {
                    if name_of(pod) == "pod-a" {
                        panic!("handler fails on {}", name_of(pod));
                    }
                    survivor.on_add(pod, initial);
                }
            }),
            INLINE,
        )
        .unwrap();
    informer.add_event_handler(bystander.clone()).unwrap();
    let running = spawn_run(&informer);
    settle().await;
    feed.send(WatchEvent::Added(pod("pod-a", "2")));
    feed.send(WatchEvent::Added(pod("pod-b", "3")));
    settle().await;
    assert_eq!(survivor.take(), [added("pod-b", false)]);
    assert_eq!(
        bystander.take(),
        [added("pod-a", false), added("pod-b", false)]
    );
    assert_eq!(informer.get_store().len(), 2);
    running.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Slow and failing handlers.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_handler_does_not_hold_up_another() {
    let (lw, feed) = serving("2", vec![pod("pod-a", "1"), pod("pod-b", "2")]);
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    // Every call of the stuck handler blocks its thread on this channel until the sender is
    // dropped (nothing is ever sent).
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new(gate));
    let stuck = Journal::default();
    let brisk = Journal::default();
    let stuck_registration = informer
        .add_event_handler(ResourceEventHandlerFuncs::new().on_add({
            let gate = Arc::clone(&gate);
            let stuck = stuck.clone();
            move |pod: &Arc<Pod>, initial| {
                let _ = gate.lock().recv();
                stuck.on_add(pod, initial);
            }
        }))
        .unwrap();
    informer.add_event_handler(brisk.clone()).unwrap();

    let running = spawn_run(&informer);
    feed.send(WatchEvent::Added(pod("pod-c", "3")));
    feed.send(WatchEvent::Added(pod("pod-d", "4")));
    tokio::time::timeout(Duration::from_secs(10), async {
        while brisk.len() < 4 {
            sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the brisk handler was held up by the stuck one");
    assert!(informer.has_synced());
    assert_eq!(stuck.len(), 0);
    assert!(!stuck_registration.has_synced());

    drop(release);
    tokio::time::timeout(Duration::from_secs(10), async {
        while stuck.len() < 4 {
            sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the stuck handler never caught up");
    assert!(stuck_registration.has_synced());
    let mut initial = stuck.take();
    let live = initial.split_off(2);
    initial.sort();
    assert_eq!(initial, [added("pod-a", true), added("pod-b", true)]);
    assert_eq!(live, [added("pod-c", false), added("pod-d", false)]);
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_panicking_handler_loses_only_that_notification() {
    let (lw, feed) = serving("1", vec![pod("pod-a", "1")]);
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    let survivor = Journal::default();
    let bystander = Journal::default();
    let registration = informer
        .add_event_handler(ResourceEventHandlerFuncs::new().on_add({
            let survivor = survivor.clone();
            move |pod: &Arc<Pod>, initial| {
                if name_of(pod) != "pod-c" {
                    panic!("handler fails on {}", name_of(pod));
                }
                survivor.on_add(pod, initial);
            }
        }))
        .unwrap();
    informer.add_event_handler(bystander.clone()).unwrap();

    let running = spawn_run(&informer);
    settle().await;
    // Its initial add panicked, yet the handler counts as having handled it.
    assert!(registration.has_synced());
    feed.send(WatchEvent::Added(pod("pod-b", "2")));
    feed.send(WatchEvent::Added(pod("pod-c", "3")));
    settle().await;
    assert_eq!(survivor.take(), [added("pod-c", false)]);
    assert_eq!(
        bystander.take(),
        [
            added("pod-a", true),
            added("pod-b", false),
            added("pod-c", false)
        ]
    );
    running.stop().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Sync, indexes, shutdown.

#[tokio::test(start_paused = true)]
async fn has_synced_turns_true_once_the_initial_list_is_processed() {
    let lw = ScriptedListerWatcher::new();
    let informer = SharedIndexInformer::new(lw.clone(), Duration::ZERO, Default::default());
    let journal = Journal::default();
    let registration = informer.add_event_handler(journal.clone()).unwrap();
    assert!(!informer.has_synced());
    assert_eq!(informer.last_sync_resource_version(), "");

    let running = spawn_run(&informer);
    // Listing, but the server has not answered yet.
    settle().await;
    assert!(!informer.has_synced());
    assert!(!registration.has_synced());
    let impatient = CancellationToken::new();
    impatient.cancel();
    assert!(!informer.wait_for_sync(&impatient).await);

    lw.push_list(listed("7", vec![pod("pod-a", "6"), pod("pod-b", "7")]));
    let _feed = lw.push_watch();
    assert!(informer.wait_for_sync(&CancellationToken::new()).await);
    settle().await;
    assert!(registration.has_synced());
    assert_eq!(informer.get_store().len(), 2);
    assert_eq!(informer.last_sync_resource_version(), "7");
    assert_eq!(
        journal.take_sorted(),
        [added("pod-a", true), added("pod-b", true)]
    );
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_empty_initial_list_is_synced_at_once() {
    let (lw, _feed) = serving("1", Vec::new());
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    let registration = informer.add_event_handler(Journal::default()).unwrap();
    let running = spawn_run(&informer);
    settle().await;
    assert!(informer.has_synced());
    assert!(registration.has_synced());
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn indexes_can_be_added_before_and_after_start() {
    let label_keys = |pod: &Pod| -> Vec<String> {
        pod.metadata
            .labels
            .as_ref()
            .map(|labels| labels.keys().cloned().collect())
            .unwrap_or_default()
    };
    let (lw, feed) = serving(
        "2",
        vec![
            labelled_pod("pod-1", "1", &[("a", "a-val"), ("b", "b-val1")]),
            labelled_pod("pod-2", "2", &[("b", "b-val2")]),
        ],
    );
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    informer
        .add_indexers([("labels".to_owned(), Arc::new(label_keys) as _)].into())
        .unwrap();
    let running = spawn_run(&informer);
    settle().await;

    let names = |pods: Vec<Arc<Pod>>| {
        let mut names: Vec<String> = pods.iter().map(|pod| name_of(pod)).collect();
        names.sort();
        names
    };
    let indexer = informer.get_indexer();
    assert_eq!(names(indexer.by_index("labels", "a").unwrap()), ["pod-1"]);

    feed.send(WatchEvent::Added(labelled_pod(
        "pod-3",
        "3",
        &[("a", "a-val2")],
    )));
    settle().await;
    assert_eq!(
        names(indexer.by_index("labels", "a").unwrap()),
        ["pod-1", "pod-3"]
    );

    // An index added to a running informer covers the cache at once.
    informer
        .add_indexers([("labels-again".to_owned(), Arc::new(label_keys) as _)].into())
        .unwrap();
    assert_eq!(
        names(indexer.by_index("labels-again", "a").unwrap()),
        ["pod-1", "pod-3"]
    );
    for index in ["labels", "labels-again"] {
        let mut values = indexer.list_index_func_values(index);
        values.sort();
        assert_eq!(values, ["a", "b"]);
    }
    // A name clash is refused.
    assert!(
        informer
            .add_indexers([("labels".to_owned(), Arc::new(label_keys) as _)].into())
            .is_err()
    );
    running.stop().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn cancelling_stops_the_informer_and_its_watch() {
    let (lw, feed) = serving("1", vec![pod("pod-a", "1")]);
    let informer = SharedIndexInformer::new(lw, Duration::ZERO, Default::default());
    let journal = Journal::default();
    informer.add_event_handler(journal.clone()).unwrap();
    let running = spawn_run(&informer);
    settle().await;
    assert_eq!(journal.take(), [added("pod-a", true)]);
    assert!(!feed.is_closed());

    running.stop().await.unwrap();
    assert!(informer.is_stopped());
    assert!(feed.is_closed());
    assert!(!feed.send(WatchEvent::Added(pod("pod-b", "2"))));
    settle().await;
    assert_eq!(journal.take(), []);
    // The cache is kept as it was.
    assert_eq!(informer.get_indexer().list_keys(), ["pod-a"]);
}

// ---------------------------------------------------------------------------------------------
// The factory, against the embedded API server.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factory_shares_one_informer_per_kind_and_namespace() {
    use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::api::{Api, PostParams};
    use kube::core::{Expression, Selector};
    use kube::{Client, Config};

    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
    let meta = |namespace: Option<&str>, name: &str, app: &str| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: (!app.is_empty()).then(|| [("app".to_owned(), app.to_owned())].into()),
        ..ObjectMeta::default()
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for namespace in ["team-a", "team-b"] {
        let namespace = Namespace {
            metadata: meta(None, namespace, ""),
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    for (namespace, name, app) in [
        ("team-a", "web-1", "web"),
        ("team-a", "db-1", "db"),
        ("team-b", "web-2", "web"),
    ] {
        let config_map = ConfigMap {
            metadata: meta(Some(namespace), name, app),
            ..ConfigMap::default()
        };
        Api::<ConfigMap>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &config_map)
            .await
            .unwrap();
    }

    let factory = SharedInformerFactory::new(client, Duration::ZERO);
    let everywhere = factory.informer::<ConfigMap>();
    let again = factory.informer::<ConfigMap>();
    let team_a = factory.namespaced_informer::<ConfigMap>("team-a");
    let team_a_again = factory.namespaced_informer::<ConfigMap>("team-a");

    // Same informer, same cache; the namespaced one is another.
    let probe = ConfigMap {
        metadata: meta(Some("team-c"), "probe", ""),
        ..ConfigMap::default()
    };
    everywhere.get_indexer().add(probe.clone()).unwrap();
    assert!(again.get_indexer().get_by_key("team-c/probe").is_some());
    assert!(team_a.get_indexer().get_by_key("team-c/probe").is_none());
    again.get_indexer().delete(&probe).unwrap();
    assert!(everywhere.get_indexer().is_empty());
    team_a.get_indexer().add(probe.clone()).unwrap();
    assert!(
        team_a_again
            .get_indexer()
            .get_by_key("team-c/probe")
            .is_some()
    );
    team_a.get_indexer().delete(&probe).unwrap();

    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let synced = tokio::time::timeout(
        Duration::from_secs(10),
        factory.wait_for_cache_sync(&cancel),
    )
    .await
    .expect("the informers never synced");
    assert_eq!(synced.len(), 2, "{synced:?}");
    assert!(synced.values().all(|&synced| synced), "{synced:?}");
    assert!(everywhere.has_synced() && team_a.has_synced());
    // Ours, and the CA ConfigMap of each of the six namespaces (the cluster's four and two).
    assert_eq!(everywhere.get_indexer().len(), 3 + 6);
    assert_eq!(team_a.get_indexer().len(), 2 + 1);

    let names = |config_maps: Vec<Arc<ConfigMap>>| {
        let mut names: Vec<String> = config_maps
            .iter()
            .map(|config_map| config_map.metadata.name.clone().unwrap_or_default())
            .collect();
        names.sort();
        names
    };
    let web: Selector = Expression::Equal("app".into(), "web".into()).into();
    let lister = Lister::new(everywhere.get_indexer());
    assert_eq!(names(lister.list(&web)), ["web-1", "web-2"]);
    assert_eq!(names(lister.list(&Selector::default())).len(), 3 + 6);
    assert_eq!(names(lister.namespaced("team-a").list(&web)), ["web-1"]);
    assert_eq!(
        names(lister.namespaced("team-a").list(&Selector::default())),
        ["db-1", "kube-root-ca.crt", "web-1"]
    );
    assert!(lister.get(Some("team-b"), "web-2").is_some());
    assert!(lister.namespaced("team-b").get("web-1").is_none());
    let team_a_lister = Lister::new(team_a.get_indexer());
    assert!(team_a_lister.namespaced("team-b").list(&web).is_empty());

    factory.shutdown().await;
    assert!(everywhere.is_stopped());
    assert!(team_a.is_stopped());
    server.shutdown().await;
}
