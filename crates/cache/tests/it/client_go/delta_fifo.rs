//! `delta_fifo_test.go`: what a DeltaFIFO queues for each add, update, delete, relist and
//! resync, in which order keys come out, and when it reports itself synced.
//!
//! Deltas are compared as short strings: `Added alpha@10` is an `Added` delta carrying the
//! object named `alpha` at resourceVersion 10, and `Deleted tombstone(ns/beta, beta@6)` a
//! deletion inferred by a relist whose last known state is `beta@6`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_cache::{
    Delta, DeltaFifo, DeltaFifoOptions, DeltaType, Deltas, FifoClosed, Indexer, KnownObjects,
    ListedKeys, ObjectOrTombstone, TransformFunc,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

const NAMESPACE: &str = "ns";
/// The label the counting transformer bumps.
const TRANSFORMED: &str = "transformed";

/// A ConfigMap `ns/<name>` at resourceVersion `rv`.
pub(super) fn cm(name: &str, rv: u32) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            resource_version: Some(rv.to_string()),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub(super) fn key(name: &str) -> String {
    format!("{NAMESPACE}/{name}")
}

pub(super) fn arcs(objs: &[ConfigMap]) -> Vec<Arc<ConfigMap>> {
    objs.iter().cloned().map(Arc::new).collect()
}

pub(super) fn rv(obj: &ConfigMap) -> u32 {
    obj.metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

fn times_transformed(obj: &ConfigMap) -> u32 {
    obj.metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(TRANSFORMED))
        .map_or(0, |n| n.parse().unwrap())
}

pub(super) fn render_object(obj: &ConfigMap) -> String {
    format!("{}@{}", obj.metadata.name.as_deref().unwrap(), rv(obj))
}

pub(super) fn render(delta: &Delta<ConfigMap>) -> String {
    match delta {
        Delta::Added(obj) => format!("Added {}", render_object(obj)),
        Delta::Updated(obj) => format!("Updated {}", render_object(obj)),
        Delta::Replaced(obj) => format!("Replaced {}", render_object(obj)),
        Delta::Sync(obj) => format!("Sync {}", render_object(obj)),
        Delta::Deleted(ObjectOrTombstone::Object(obj)) => format!("Deleted {}", render_object(obj)),
        Delta::Deleted(ObjectOrTombstone::Tombstone(tombstone)) => {
            let last = tombstone
                .obj
                .as_deref()
                .map_or_else(|| "-".to_owned(), render_object);
            format!("Deleted tombstone({}, {last})", tombstone.key)
        }
    }
}

fn render_all(deltas: &Deltas<ConfigMap>) -> Vec<String> {
    deltas.iter().map(render).collect()
}

/// What one pop handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Popped {
    key: String,
    deltas: Vec<String>,
    in_initial_list: bool,
}

/// Pops one key; the queue must not be empty.
async fn pop(fifo: &DeltaFifo<ConfigMap>) -> Popped {
    let popped = fifo.pop(|key, deltas, in_initial_list| Popped {
        key: key.to_owned(),
        deltas: render_all(&deltas),
        in_initial_list,
    });
    tokio::time::timeout(Duration::from_secs(10), popped)
        .await
        .expect("pop blocked on a queue expected to hold a key")
        .expect("fifo closed")
}

/// Pops until the queue is empty.
async fn drain(fifo: &DeltaFifo<ConfigMap>) -> Vec<Popped> {
    let mut popped = Vec::new();
    while !fifo.is_empty() {
        popped.push(pop(fifo).await);
    }
    popped
}

/// The deltas of each popped key, in pop order.
fn deltas_of(popped: &[Popped]) -> Vec<Vec<String>> {
    popped.iter().map(|p| p.deltas.clone()).collect()
}

/// Whether a pop would block: it does not finish within a (paused-clock) second.
async fn pop_blocks(fifo: &DeltaFifo<ConfigMap>) -> bool {
    tokio::time::timeout(Duration::from_secs(1), fifo.pop(|_, _, _| ()))
        .await
        .is_err()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Known objects listed in a fixed order, so that the order in which a relist tombstones them
/// is predictable (an `Indexer` lists in hash order).
pub(super) struct FixedKnown(pub(super) Vec<Arc<ConfigMap>>);

impl KnownObjects<ConfigMap> for FixedKnown {
    fn list_keys(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|obj| format!("{NAMESPACE}/{}", obj.metadata.name.as_deref().unwrap()))
            .collect()
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<ConfigMap>> {
        self.0
            .iter()
            .find(|obj| format!("{NAMESPACE}/{}", obj.metadata.name.as_deref().unwrap()) == key)
            .cloned()
    }
}

fn plain_fifo() -> DeltaFifo<ConfigMap> {
    DeltaFifo::new(DeltaFifoOptions::default())
}

fn fifo_knowing(known: &[ConfigMap]) -> DeltaFifo<ConfigMap> {
    DeltaFifo::new(DeltaFifoOptions {
        known_objects: Some(Arc::new(FixedKnown(arcs(known)))),
        ..Default::default()
    })
}

fn replacing_fifo_knowing(known: &[ConfigMap]) -> DeltaFifo<ConfigMap> {
    DeltaFifo::new(DeltaFifoOptions {
        known_objects: Some(Arc::new(FixedKnown(arcs(known)))),
        emit_delta_type_replaced: true,
        ..Default::default()
    })
}

/// Two producers add distinct keys concurrently; each producer's keys come out in the order it
/// added them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_producers_keep_their_own_order() {
    const PER_PRODUCER: u32 = 500;
    let fifo = Arc::new(plain_fifo());
    let producers: Vec<_> = ["left", "right"]
        .into_iter()
        .map(|prefix| {
            let fifo = Arc::clone(&fifo);
            std::thread::spawn(move || {
                for i in 0..PER_PRODUCER {
                    fifo.add(cm(&format!("{prefix}-{i}"), i + 1)).unwrap();
                }
            })
        })
        .collect();

    let mut last_seen: HashMap<String, u32> = HashMap::new();
    for _ in 0..2 * PER_PRODUCER {
        let (prefix, version) = fifo
            .pop(|_, deltas, _| {
                assert_eq!(deltas.len(), 1, "every key is added once");
                let obj = deltas.newest().and_then(Delta::object).unwrap();
                let name = obj.metadata.name.clone().unwrap();
                let prefix = name.split('-').next().unwrap().to_owned();
                (prefix, rv(obj))
            })
            .await
            .unwrap();
        let last = last_seen.entry(prefix.clone()).or_default();
        assert!(version > *last, "{prefix}: got {version} after {last}");
        *last = version;
    }
    for producer in producers {
        producer.join().unwrap();
    }
    assert_eq!(last_seen.get("left"), Some(&PER_PRODUCER));
    assert_eq!(last_seen.get("right"), Some(&PER_PRODUCER));
    assert!(fifo.is_empty());
}

/// A relist that lists an object whose deletion is still queued queues a `Sync` after the
/// `Deleted`, so a consumer sees the object come back (kubernetes#83810).
#[tokio::test]
async fn relist_after_queued_delete_syncs_the_object_again() {
    let fifo = fifo_knowing(&[cm("alpha", 1)]);
    fifo.delete(cm("alpha", 1)).unwrap();
    fifo.replace(arcs(&[cm("alpha", 2)])).unwrap();

    assert_eq!(
        pop(&fifo).await.deltas,
        strings(&["Deleted alpha@1", "Sync alpha@2"])
    );
    assert!(fifo.is_empty());
}

/// A relist tombstones keys that are only queued (not known), carrying the newest queued
/// object, and never queues a second deletion for a key whose newest delta is one; with or
/// without known objects the outcome is the same.
#[tokio::test]
async fn relist_tombstones_keys_only_in_the_queue_once() {
    type Ops = fn(&DeltaFifo<ConfigMap>);
    let cases: [(&str, bool, Ops, &[&str]); 6] = [
        (
            "an added key missing from the relist",
            false,
            |fifo| {
                fifo.add(cm("alpha", 2)).unwrap();
                fifo.replace(arcs(&[])).unwrap();
            },
            &["Added alpha@2", "Deleted tombstone(ns/alpha, alpha@2)"],
        ),
        (
            "a replaced key missing from the next relist",
            true,
            |fifo| {
                fifo.add(cm("alpha", 2)).unwrap();
                fifo.replace(arcs(&[cm("alpha", 2)])).unwrap();
                fifo.replace(arcs(&[])).unwrap();
            },
            &[
                "Added alpha@2",
                "Replaced alpha@2",
                "Deleted tombstone(ns/alpha, alpha@2)",
            ],
        ),
        (
            "a deleted key keeps its observed deletion",
            false,
            |fifo| {
                fifo.add(cm("alpha", 2)).unwrap();
                fifo.delete(cm("alpha", 2)).unwrap();
                fifo.replace(arcs(&[])).unwrap();
            },
            &["Added alpha@2", "Deleted alpha@2"],
        ),
        (
            "a key synced twice then missing",
            false,
            |fifo| {
                fifo.add(cm("alpha", 2)).unwrap();
                fifo.replace(arcs(&[cm("alpha", 2)])).unwrap();
                fifo.replace(arcs(&[cm("alpha", 2)])).unwrap();
                fifo.replace(arcs(&[])).unwrap();
            },
            &[
                "Added alpha@2",
                "Sync alpha@2",
                "Sync alpha@2",
                "Deleted tombstone(ns/alpha, alpha@2)",
            ],
        ),
        (
            "an added key missing from two relists",
            false,
            |fifo| {
                fifo.add(cm("alpha", 2)).unwrap();
                fifo.replace(arcs(&[])).unwrap();
                fifo.replace(arcs(&[])).unwrap();
            },
            &["Added alpha@2", "Deleted tombstone(ns/alpha, alpha@2)"],
        ),
        (
            "a key added, deleted and added again",
            false,
            |fifo| {
                fifo.add(cm("alpha", 2)).unwrap();
                fifo.delete(cm("alpha", 2)).unwrap();
                fifo.add(cm("alpha", 3)).unwrap();
                fifo.replace(arcs(&[])).unwrap();
            },
            &[
                "Added alpha@2",
                "Deleted alpha@2",
                "Added alpha@3",
                "Deleted tombstone(ns/alpha, alpha@3)",
            ],
        ),
    ];
    for (case, emit_replaced, ops, expected) in cases {
        let nothing_known: Arc<dyn KnownObjects<ConfigMap>> =
            Arc::new(Indexer::<ConfigMap>::new(Default::default()));
        for known in [Some(nothing_known), None] {
            let with_known = known.is_some();
            let fifo = DeltaFifo::new(DeltaFifoOptions {
                known_objects: known,
                emit_delta_type_replaced: emit_replaced,
                ..Default::default()
            });
            ops(&fifo);
            let popped = pop(&fifo).await;
            assert_eq!(
                popped.key,
                key("alpha"),
                "{case} (known objects: {with_known})"
            );
            assert_eq!(
                popped.deltas,
                strings(expected),
                "{case} (known objects: {with_known})"
            );
            assert!(fifo.is_empty(), "{case} (known objects: {with_known})");
            assert!(
                fifo.list_keys().is_empty(),
                "{case} (known objects: {with_known})"
            );
        }
    }
}

/// Add, update and delete of one key queue three deltas under one key; `list` shows the
/// newest object; one pop takes them all and nothing is left.
#[tokio::test(start_paused = true)]
async fn add_update_delete_come_out_as_one_pop() {
    let fifo = plain_fifo();
    fifo.add(cm("alpha", 10)).unwrap();
    fifo.update(cm("alpha", 12)).unwrap();
    let before_delete = fifo.get(&cm("alpha", 0)).unwrap().unwrap();
    fifo.delete(cm("alpha", 15)).unwrap();

    // `get` hands out a copy, untouched by later changes.
    assert_eq!(
        render_all(&before_delete),
        strings(&["Added alpha@10", "Updated alpha@12"])
    );
    let listed: Vec<String> = fifo.list().iter().map(|obj| render_object(obj)).collect();
    assert_eq!(listed, strings(&["alpha@15"]));
    assert_eq!(fifo.list_keys(), vec![key("alpha")]);
    assert_eq!(fifo.len(), 1);

    let popped = pop(&fifo).await;
    assert_eq!(popped.key, key("alpha"));
    assert_eq!(
        popped.deltas,
        strings(&["Added alpha@10", "Updated alpha@12", "Deleted alpha@15"])
    );
    assert!(pop_blocks(&fifo).await, "a second pop found something");
    assert!(fifo.get(&cm("alpha", 0)).unwrap().is_none());
    assert!(fifo.get_by_key(&key("alpha")).is_none());
}

/// The transformer runs once on every object that is queued, including relisted ones, but
/// never on the tombstones a relist makes: they carry objects that were transformed already.
#[tokio::test]
async fn transformer_runs_once_per_object_and_never_on_tombstones() {
    let transform: TransformFunc<ConfigMap> = Arc::new(|mut obj: ConfigMap| {
        let count = times_transformed(&obj) + 1;
        obj.metadata
            .labels
            .get_or_insert_default()
            .insert(TRANSFORMED.to_owned(), count.to_string());
        obj
    });
    let fifo = DeltaFifo::new(DeltaFifoOptions {
        transformer: Some(transform),
        ..Default::default()
    });
    fifo.add(cm("alpha", 10)).unwrap();
    fifo.add(cm("beta", 11)).unwrap();
    fifo.update(cm("alpha", 12)).unwrap();
    fifo.delete(cm("alpha", 15)).unwrap();
    fifo.replace(arcs(&[])).unwrap();
    fifo.add(cm("beta", 16)).unwrap();
    fifo.replace(arcs(&[])).unwrap();

    assert_eq!(fifo.list_keys(), vec![key("alpha"), key("beta")]);

    let alpha = fifo.pop(|_, deltas, _| deltas.into_vec()).await.unwrap();
    let types: Vec<DeltaType> = alpha.iter().map(Delta::delta_type).collect();
    assert_eq!(
        types,
        [DeltaType::Added, DeltaType::Updated, DeltaType::Deleted]
    );
    for delta in &alpha {
        assert_eq!(
            times_transformed(delta.object().unwrap()),
            1,
            "{}",
            render(delta)
        );
    }
    let Some(Delta::Deleted(ObjectOrTombstone::Object(deleted))) = alpha.last() else {
        panic!("alpha should end with its observed deletion: {alpha:?}");
    };
    assert_eq!(rv(deleted), 15);

    let beta = fifo.pop(|_, deltas, _| deltas.into_vec()).await.unwrap();
    let rendered: Vec<String> = beta.iter().map(render).collect();
    assert_eq!(
        rendered,
        strings(&[
            "Added beta@11",
            "Deleted tombstone(ns/beta, beta@11)",
            "Added beta@16",
            "Deleted tombstone(ns/beta, beta@16)",
        ])
    );
    for delta in &beta {
        assert_eq!(
            times_transformed(delta.object().unwrap()),
            1,
            "{}",
            render(delta)
        );
    }
    assert!(fifo.is_empty());
}

/// The transformer is not applied to what a resync queues, nor to a tombstone built from the
/// known objects: both carry the very stored object.
#[tokio::test]
async fn transformer_skips_resyncs_and_known_tombstones() {
    let transform: TransformFunc<ConfigMap> = Arc::new(|mut obj: ConfigMap| {
        let count = times_transformed(&obj) + 1;
        obj.metadata
            .labels
            .get_or_insert_default()
            .insert(TRANSFORMED.to_owned(), count.to_string());
        obj
    });
    let store = Indexer::<ConfigMap>::new(Default::default());
    let stored_alpha = Arc::new(transform(cm("alpha", 5)));
    let stored_beta = Arc::new(transform(cm("beta", 6)));
    store.add(Arc::clone(&stored_alpha)).unwrap();
    store.add(Arc::clone(&stored_beta)).unwrap();
    let fifo = DeltaFifo::new(DeltaFifoOptions {
        known_objects: Some(Arc::new(store)),
        transformer: Some(transform),
        ..Default::default()
    });

    fifo.resync();
    let mut synced = Vec::new();
    while !fifo.is_empty() {
        synced.push(fifo.pop(|_, deltas, _| deltas.into_vec()).await.unwrap());
    }
    assert_eq!(synced.len(), 2);
    for deltas in &synced {
        let [Delta::Sync(obj)] = deltas.as_slice() else {
            panic!("expected one Sync: {deltas:?}");
        };
        assert_eq!(times_transformed(obj), 1);
        assert!(Arc::ptr_eq(obj, &stored_alpha) || Arc::ptr_eq(obj, &stored_beta));
    }

    // A relist lists alpha (transformed again, as client-go does) and tombstones beta.
    fifo.replace(arcs(&[cm("alpha", 7)])).unwrap();
    let popped: HashMap<String, Vec<Delta<ConfigMap>>> = [
        fifo.pop(|key, deltas, _| (key.to_owned(), deltas.into_vec()))
            .await
            .unwrap(),
        fifo.pop(|key, deltas, _| (key.to_owned(), deltas.into_vec()))
            .await
            .unwrap(),
    ]
    .into_iter()
    .collect();
    let [Delta::Sync(relisted)] = popped[&key("alpha")].as_slice() else {
        panic!("expected one Sync for alpha: {popped:?}");
    };
    assert_eq!((rv(relisted), times_transformed(relisted)), (7, 1));
    let [Delta::Deleted(ObjectOrTombstone::Tombstone(tombstone))] = popped[&key("beta")].as_slice()
    else {
        panic!("expected a tombstone for beta: {popped:?}");
    };
    assert_eq!(tombstone.key, key("beta"));
    assert!(Arc::ptr_eq(tombstone.obj.as_ref().unwrap(), &stored_beta));
}

/// Without known objects, deleting a key that is not queued queues nothing (it is taken to be
/// gone already); queued keys come out in order with their newest state.
#[tokio::test]
async fn delete_of_an_unqueued_key_is_dropped_without_known_objects() {
    let fifo = plain_fifo();
    fifo.add(cm("alpha", 10)).unwrap();
    fifo.update(cm("beta", 15)).unwrap();
    fifo.add(cm("gamma", 17)).unwrap();
    fifo.delete(cm("gamma", 18)).unwrap();
    fifo.delete(cm("delta", 20)).unwrap();

    let popped = drain(&fifo).await;
    let newest: Vec<&str> = popped
        .iter()
        .map(|p| p.deltas.last().unwrap().as_str())
        .collect();
    assert_eq!(
        newest,
        ["Added alpha@10", "Updated beta@15", "Deleted gamma@18"]
    );
}

/// With known objects, deleting a key that is known but not queued does queue the deletion.
#[tokio::test]
async fn delete_of_a_known_key_is_queued() {
    let fifo = fifo_knowing(&[cm("alpha", 5), cm("beta", 6), cm("gamma", 7)]);
    fifo.add(cm("alpha", 10)).unwrap();
    fifo.update(cm("beta", 15)).unwrap();
    fifo.delete(cm("gamma", 20)).unwrap();
    fifo.delete(cm("delta", 21)).unwrap();

    assert_eq!(
        deltas_of(&drain(&fifo).await),
        [
            strings(&["Added alpha@10"]),
            strings(&["Updated beta@15"]),
            strings(&["Deleted gamma@20"]),
        ]
    );
}

/// A relist that lists a queued key appends its listed state; the key is popped once.
#[tokio::test(start_paused = true)]
async fn relist_of_a_queued_key_appends_to_it() {
    let fifo = plain_fifo();
    fifo.add(cm("alpha", 10)).unwrap();
    fifo.replace(arcs(&[cm("alpha", 15)])).unwrap();

    let popped = pop(&fifo).await;
    assert_eq!(popped.deltas, strings(&["Added alpha@10", "Sync alpha@15"]));
    assert!(pop_blocks(&fifo).await, "a second pop found something");
    assert!(fifo.get(&cm("alpha", 0)).unwrap().is_none());
}

/// A resync does not add a `Sync` behind a queued deletion of the same key.
#[tokio::test]
async fn resync_skips_a_key_with_a_queued_deletion() {
    let fifo = fifo_knowing(&[cm("alpha", 5)]);
    fifo.delete(cm("alpha", 10)).unwrap();
    fifo.resync();

    let queued = fifo.get_by_key(&key("alpha")).unwrap();
    assert_eq!(render_all(&queued), strings(&["Deleted alpha@10"]));
}

/// A resync queues a `Sync` with the stored object for every known key.
#[tokio::test]
async fn resync_queues_a_sync_per_known_key() {
    let fifo = fifo_knowing(&[cm("alpha", 5)]);
    fifo.resync();

    let queued = fifo.get_by_key(&key("alpha")).unwrap();
    assert_eq!(render_all(&queued), strings(&["Sync alpha@5"]));
    assert!(
        !fifo.has_synced(),
        "a resync alone does not populate the queue"
    );
}

/// A resync with no known objects does nothing.
#[tokio::test]
async fn resync_without_known_objects_queues_nothing() {
    let fifo = plain_fifo();
    fifo.resync();
    assert!(fifo.is_empty());
}

/// Deleting a key that is queued but not known still queues the deletion after the add.
#[tokio::test]
async fn delete_of_a_queued_but_unknown_key_is_queued() {
    let fifo = fifo_knowing(&[]);
    fifo.add(cm("alpha", 5)).unwrap();
    fifo.delete(cm("alpha", 6)).unwrap();

    let queued = fifo.get_by_key(&key("alpha")).unwrap();
    assert_eq!(
        render_all(&queued),
        strings(&["Added alpha@5", "Deleted alpha@6"])
    );
}

/// A relist against known objects: listed keys get `Sync`, known keys it no longer lists get
/// tombstones carrying the newest queued state or else the stored one, and an observed
/// deletion is never doubled by a tombstone.
#[tokio::test]
async fn relist_makes_deletions_for_known_and_queued_keys() {
    let known = [cm("alpha", 5), cm("beta", 6), cm("gamma", 7)];

    // An observed deletion of gamma is kept; beta, not listed, is tombstoned from the store.
    let fifo = fifo_knowing(&known);
    fifo.delete(cm("gamma", 10)).unwrap();
    fifo.replace(arcs(&[cm("alpha", 5)])).unwrap();
    assert_eq!(
        deltas_of(&drain(&fifo).await),
        [
            strings(&["Deleted gamma@10"]),
            strings(&["Sync alpha@5"]),
            strings(&["Deleted tombstone(ns/beta, beta@6)"]),
        ]
    );

    // A queued add of gamma is followed by a tombstone with the added object.
    let fifo = fifo_knowing(&known);
    fifo.add(cm("gamma", 10)).unwrap();
    fifo.replace(arcs(&[cm("alpha", 5)])).unwrap();
    assert_eq!(
        deltas_of(&drain(&fifo).await),
        [
            strings(&["Added gamma@10", "Deleted tombstone(ns/gamma, gamma@10)"]),
            strings(&["Sync alpha@5"]),
            strings(&["Deleted tombstone(ns/beta, beta@6)"]),
        ]
    );

    // beta deleted and recreated in the queue: the tombstone carries the queued state, newer
    // than the stored one.
    let fifo = fifo_knowing(&known);
    fifo.delete(cm("beta", 6)).unwrap();
    fifo.add(cm("beta", 100)).unwrap();
    fifo.replace(arcs(&[cm("alpha", 5)])).unwrap();
    assert_eq!(
        deltas_of(&drain(&fifo).await),
        [
            strings(&[
                "Deleted beta@6",
                "Added beta@100",
                "Deleted tombstone(ns/beta, beta@100)",
            ]),
            strings(&["Sync alpha@5"]),
            strings(&["Deleted tombstone(ns/gamma, gamma@7)"]),
        ]
    );

    // beta synced at a newer version, then missing: the tombstone carries the synced state,
    // and gamma's tombstone from the first relist is not doubled by the second.
    let fifo = fifo_knowing(&known);
    fifo.replace(arcs(&[cm("beta", 100), cm("alpha", 5)]))
        .unwrap();
    fifo.replace(arcs(&[cm("alpha", 5)])).unwrap();
    assert_eq!(
        deltas_of(&drain(&fifo).await),
        [
            strings(&["Sync beta@100", "Deleted tombstone(ns/beta, beta@100)"]),
            strings(&["Sync alpha@5", "Sync alpha@5"]),
            strings(&["Deleted tombstone(ns/gamma, gamma@7)"]),
        ]
    );

    // Without known objects only queued keys can be tombstoned.
    let fifo = plain_fifo();
    fifo.add(cm("gamma", 10)).unwrap();
    fifo.replace(arcs(&[cm("alpha", 5)])).unwrap();
    assert_eq!(
        deltas_of(&drain(&fifo).await),
        [
            strings(&["Added gamma@10", "Deleted tombstone(ns/gamma, gamma@10)"]),
            strings(&["Sync alpha@5"]),
        ]
    );
}

/// The same relist with `emit_delta_type_replaced` queues `Replaced` instead of `Sync`.
#[tokio::test]
async fn relist_emits_replaced_when_asked() {
    let fifo = replacing_fifo_knowing(&[cm("alpha", 5), cm("beta", 6), cm("gamma", 7)]);
    fifo.delete(cm("gamma", 10)).unwrap();
    fifo.replace(arcs(&[cm("alpha", 6)])).unwrap();
    assert_eq!(
        deltas_of(&drain(&fifo).await),
        [
            strings(&["Deleted gamma@10"]),
            strings(&["Replaced alpha@6"]),
            strings(&["Deleted tombstone(ns/beta, beta@6)"]),
        ]
    );

    let fifo = replacing_fifo_knowing(&[cm("alpha", 5)]);
    fifo.replace(arcs(&[cm("alpha", 5)])).unwrap();
    assert_eq!(
        deltas_of(&drain(&fifo).await),
        [strings(&["Replaced alpha@5"])]
    );
}

/// A resync right after an update does not queue the stale stored object behind it.
#[tokio::test]
async fn resync_does_not_race_a_queued_update() {
    let fifo = fifo_knowing(&[cm("alpha", 5)]);
    fifo.update(cm("alpha", 6)).unwrap();
    fifo.resync();
    assert_eq!(
        deltas_of(&drain(&fifo).await),
        [strings(&["Updated alpha@6"])]
    );
}

/// The first relist's tombstones count toward the initial population: the queue reports
/// synced only after the last of them is popped, and each pop is flagged as initial.
#[tokio::test]
async fn has_synced_waits_for_initial_tombstones() {
    let fifo = fifo_knowing(&[cm("alpha", 5), cm("beta", 6), cm("gamma", 7)]);
    fifo.replace(arcs(&[cm("alpha", 5)])).unwrap();

    let expected = [
        "Sync alpha@5",
        "Deleted tombstone(ns/beta, beta@6)",
        "Deleted tombstone(ns/gamma, gamma@7)",
    ];
    for delta in expected {
        assert!(!fifo.has_synced(), "synced before {delta} was popped");
        let popped = pop(&fifo).await;
        assert_eq!(popped.deltas, strings(&[delta]));
        assert!(
            popped.in_initial_list,
            "{delta} belongs to the initial list"
        );
    }
    assert!(fifo.has_synced());

    fifo.add(cm("delta", 8)).unwrap();
    assert!(!pop(&fifo).await.in_initial_list);
}

/// A key that changes again keeps its place in line: it does not move to the back.
#[tokio::test]
async fn a_requeued_key_keeps_its_place() {
    let fifo = plain_fifo();
    fifo.add(cm("alpha", 10)).unwrap();
    fifo.add(cm("beta", 1)).unwrap();
    fifo.add(cm("alpha", 11)).unwrap();
    fifo.add(cm("alpha", 13)).unwrap();
    fifo.add(cm("gamma", 30)).unwrap();
    assert_eq!(
        fifo.list_keys(),
        vec![key("alpha"), key("beta"), key("gamma")]
    );

    assert_eq!(pop(&fifo).await.deltas.last().unwrap(), "Added alpha@13");
    // Popped keys go to the back when they change again.
    fifo.add(cm("alpha", 14)).unwrap();
    let newest: Vec<String> = drain(&fifo)
        .await
        .into_iter()
        .map(|p| p.deltas.last().unwrap().clone())
        .collect();
    assert_eq!(
        newest,
        strings(&["Added beta@1", "Added gamma@30", "Added alpha@14"])
    );
}

/// Keys are `namespace/name`, or `name` for an object without a namespace.
#[test]
fn keys_are_namespace_slash_name() {
    let fifo = plain_fifo();
    assert_eq!(fifo.key_of(&cm("alpha", 1)).unwrap(), "ns/alpha");
    let mut cluster_scoped = cm("alpha", 1);
    cluster_scoped.metadata.namespace = None;
    assert_eq!(fifo.key_of(&cluster_scoped).unwrap(), "alpha");
    let mut nameless = cm("alpha", 1);
    nameless.metadata.name = None;
    assert!(fifo.key_of(&nameless).is_err());
    assert!(fifo.add(nameless).is_err());
    assert!(fifo.is_empty());
}

/// One step of a has_synced scenario.
enum Step {
    Add(Arc<ConfigMap>),
    Replace(Vec<ConfigMap>),
    Pop,
}

/// When `has_synced` turns true: after any add, after an empty first relist, or once every
/// key of the first relist has been popped (a key listed twice counts once).
#[tokio::test]
async fn has_synced_follows_the_first_relist() {
    let two = || vec![cm("alpha", 1), cm("beta", 2)];
    let cases = [
        ("nothing happened", vec![], false),
        ("an add", vec![Step::Add(Arc::new(cm("alpha", 1)))], true),
        ("an empty relist", vec![Step::Replace(vec![])], true),
        (
            "a relist of two, none popped",
            vec![Step::Replace(two())],
            false,
        ),
        (
            "a relist of two, one popped",
            vec![Step::Replace(two()), Step::Pop],
            false,
        ),
        (
            "a relist of two, both popped",
            vec![Step::Replace(two()), Step::Pop, Step::Pop],
            true,
        ),
        (
            "a relist listing one key twice, popped once",
            vec![
                Step::Replace(vec![cm("alpha", 1), cm("alpha", 2)]),
                Step::Pop,
            ],
            true,
        ),
    ];
    for (case, steps, synced) in cases {
        let fifo = plain_fifo();
        for step in steps {
            match step {
                Step::Add(obj) => fifo.add(obj).unwrap(),
                Step::Replace(list) => fifo.replace(arcs(&list)).unwrap(),
                Step::Pop => {
                    pop(&fifo).await;
                }
            }
        }
        assert_eq!(fifo.has_synced(), synced, "{case}");
    }
}

/// Pops waiting on an empty queue all return `FifoClosed` once it is closed.
#[tokio::test(start_paused = true)]
async fn close_unblocks_every_waiting_pop() {
    let fifo = Arc::new(fifo_knowing(&[cm("alpha", 5)]));
    let waiting: Vec<_> = (0..10)
        .map(|_| {
            let fifo = Arc::clone(&fifo);
            tokio::spawn(async move { fifo.pop(|_, _, _| ()).await })
        })
        .collect();
    // Let every pop reach its wait; none returns while the queue is open and empty.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(waiting.iter().all(|task| !task.is_finished()));

    fifo.close();
    assert!(fifo.is_closed());
    for task in waiting {
        let result = tokio::time::timeout(Duration::from_millis(500), task)
            .await
            .expect("pop still blocked after close")
            .unwrap();
        assert_eq!(result, Err(FifoClosed));
    }
}

/// A closed queue still hands out what it holds, then reports `FifoClosed`.
#[tokio::test(start_paused = true)]
async fn close_lets_queued_keys_drain_first() {
    let fifo = plain_fifo();
    fifo.add(cm("alpha", 1)).unwrap();
    fifo.close();
    assert_eq!(pop(&fifo).await.key, key("alpha"));
    let next = tokio::time::timeout(Duration::from_secs(1), fifo.pop(|_, _, _| ())).await;
    assert_eq!(
        next.expect("pop on a closed empty queue blocked"),
        Err(FifoClosed)
    );
}

/// A pop blocked on an empty queue wakes up for the next add.
#[tokio::test(start_paused = true)]
async fn a_waiting_pop_wakes_for_an_add() {
    let fifo = Arc::new(plain_fifo());
    let waiting = {
        let fifo = Arc::clone(&fifo);
        tokio::spawn(async move { fifo.pop(|key, _, _| key.to_owned()).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiting.is_finished());
    fifo.add(cm("alpha", 1)).unwrap();
    let popped = tokio::time::timeout(Duration::from_secs(1), waiting)
        .await
        .expect("pop did not wake for the add")
        .unwrap();
    assert_eq!(popped, Ok(key("alpha")));
}

/// The store of an informer is a valid `KnownObjects`: a consumer that applies each pop to it
/// sees a relist turn a vanished object into a tombstone, and a later delete of that object
/// (already gone from store and queue) is dropped.
#[tokio::test]
async fn an_indexer_serves_as_known_objects() {
    let store = Indexer::<ConfigMap>::new(Default::default());
    let fifo = DeltaFifo::new(DeltaFifoOptions {
        known_objects: Some(Arc::new(store.clone())),
        ..Default::default()
    });
    let apply = |key: &str, deltas: Deltas<ConfigMap>, _: bool| {
        for delta in deltas.iter() {
            match delta {
                Delta::Deleted(deleted) => store.delete_object_or_tombstone(deleted).unwrap(),
                other => store.update(Arc::clone(other.object().unwrap())).unwrap(),
            }
        }
        (key.to_owned(), render_all(&deltas))
    };

    fifo.replace(arcs(&[cm("alpha", 1), cm("beta", 2)]))
        .unwrap();
    while !fifo.is_empty() {
        fifo.pop(apply).await.unwrap();
    }
    assert!(fifo.has_synced());
    let mut keys = store.list_keys();
    keys.sort();
    assert_eq!(keys, [key("alpha"), key("beta")]);

    fifo.replace(arcs(&[cm("alpha", 3)])).unwrap();
    assert_eq!(
        fifo.pop(apply).await.unwrap(),
        (key("alpha"), strings(&["Sync alpha@3"]))
    );
    assert_eq!(
        fifo.pop(apply).await.unwrap(),
        (
            key("beta"),
            strings(&["Deleted tombstone(ns/beta, beta@2)"])
        )
    );
    assert_eq!(store.list_keys(), [key("alpha")]);
    assert_eq!(rv(&store.get_by_key(&key("alpha")).unwrap()), 3);

    fifo.delete(cm("beta", 4)).unwrap();
    assert!(
        fifo.is_empty(),
        "a deletion of an object gone everywhere is not queued"
    );

    fifo.resync();
    assert_eq!(
        fifo.pop(apply).await.unwrap(),
        (key("alpha"), strings(&["Sync alpha@3"]))
    );
}

/// Runs a relist of `list` against `fifo`, in one call or in pages of `page_size`.
fn relist(fifo: &DeltaFifo<ConfigMap>, list: &[ConfigMap], page_size: Option<usize>) {
    match page_size {
        None => fifo.replace(arcs(list)).unwrap(),
        Some(size) => {
            let mut listed = ListedKeys::new();
            for page in list.chunks(size) {
                fifo.replace_page(arcs(page), &mut listed).unwrap();
            }
            fifo.replace_finish(listed);
        }
    }
}

/// Drains `fifo`, noting `has_synced` before every pop and at the end.
async fn drain_noting_synced(fifo: &DeltaFifo<ConfigMap>) -> (Vec<Popped>, Vec<bool>) {
    let mut synced = vec![fifo.has_synced()];
    let mut popped = Vec::new();
    while !fifo.is_empty() {
        popped.push(pop(fifo).await);
        synced.push(fifo.has_synced());
    }
    (popped, synced)
}

/// A relist fed page by page (then finished) queues exactly what a one-shot relist queues,
/// in the same order, with the same initial-list flags and the same has_synced transitions,
/// whatever the page size and whatever was queued before.
#[tokio::test]
async fn paged_relist_matches_one_shot_relist() {
    type Setup = fn(&DeltaFifo<ConfigMap>);
    let known = [cm("alpha", 5), cm("beta", 6), cm("gamma", 7)];
    let list = [
        cm("alpha", 8),
        cm("delta", 9),
        cm("epsilon", 10),
        cm("delta", 11),
        cm("zeta", 12),
    ];
    let setups: [(&str, Setup); 4] = [
        ("nothing queued", |_| {}),
        ("a resync before the first relist", |fifo| fifo.resync()),
        ("a queued delete and add", |fifo| {
            fifo.delete(cm("gamma", 20)).unwrap();
            fifo.add(cm("eta", 21)).unwrap();
        }),
        ("an earlier relist", |fifo| {
            fifo.replace(arcs(&[cm("beta", 30), cm("theta", 31)]))
                .unwrap();
        }),
    ];
    for emit_replaced in [false, true] {
        for (setup_name, setup) in setups {
            let make = || {
                let fifo = DeltaFifo::new(DeltaFifoOptions {
                    known_objects: Some(Arc::new(FixedKnown(arcs(&known)))),
                    emit_delta_type_replaced: emit_replaced,
                    ..Default::default()
                });
                setup(&fifo);
                fifo
            };
            let one_shot = make();
            relist(&one_shot, &list, None);
            let expected_keys = one_shot.list_keys();
            let expected = drain_noting_synced(&one_shot).await;
            for page_size in [1, 2, 3, list.len()] {
                let case = format!("{setup_name}, pages of {page_size}, replaced: {emit_replaced}");
                let paged = make();
                relist(&paged, &list, Some(page_size));
                assert_eq!(paged.list_keys(), expected_keys, "{case}");
                assert_eq!(drain_noting_synced(&paged).await, expected, "{case}");
            }
        }
    }
}

/// Keys popped while later pages are still arriving count as processed: the queue reports
/// synced only after the relist is finished and every remaining key of it (tombstones
/// included) is popped, and every one of those pops is flagged as initial.
#[tokio::test]
async fn pops_between_pages_count_toward_has_synced() {
    let fifo = fifo_knowing(&[cm("gamma", 7)]);
    let mut listed = ListedKeys::new();
    fifo.replace_page(arcs(&[cm("alpha", 1), cm("beta", 2)]), &mut listed)
        .unwrap();
    assert!(!fifo.has_synced());

    let first = pop(&fifo).await;
    assert_eq!(
        (first.key.as_str(), first.in_initial_list),
        ("ns/alpha", true)
    );
    assert!(!fifo.has_synced(), "synced in the middle of a relist");

    fifo.replace_page(arcs(&[cm("delta", 3)]), &mut listed)
        .unwrap();
    assert_eq!(listed.len(), 3);
    assert!(listed.contains("ns/alpha") && !listed.contains("ns/gamma"));
    assert!(!fifo.has_synced(), "synced before the relist was finished");
    fifo.replace_finish(listed);

    for expected in ["ns/beta", "ns/delta", "ns/gamma"] {
        assert!(!fifo.has_synced(), "synced before {expected} was popped");
        let popped = pop(&fifo).await;
        assert_eq!(popped.key, expected);
        assert!(
            popped.in_initial_list,
            "{expected} belongs to the initial list"
        );
    }
    assert!(fifo.has_synced());
}

/// A key listed again after it was popped (as when an expired continue token makes the
/// reflector list everything again into the same `ListedKeys`) is queued again and still
/// belongs to the initial list: the queue is not synced until it, too, has been popped.
#[tokio::test]
async fn a_key_relisted_after_its_pop_still_counts_toward_has_synced() {
    let fifo = plain_fifo();
    let mut listed = ListedKeys::new();
    fifo.replace_page(arcs(&[cm("alpha", 1), cm("beta", 2)]), &mut listed)
        .unwrap();
    assert_eq!(pop(&fifo).await.key, key("alpha"));
    fifo.replace_page(
        arcs(&[cm("alpha", 3), cm("beta", 4), cm("gamma", 5)]),
        &mut listed,
    )
    .unwrap();
    fifo.replace_finish(listed);

    let expected = [
        ("beta", strings(&["Sync beta@2", "Sync beta@4"])),
        ("alpha", strings(&["Sync alpha@3"])),
        ("gamma", strings(&["Sync gamma@5"])),
    ];
    for (name, deltas) in expected {
        assert!(!fifo.has_synced(), "synced before {name} was popped");
        let popped = pop(&fifo).await;
        assert_eq!((popped.key, popped.deltas), (key(name), deltas));
        assert!(popped.in_initial_list, "{name} belongs to the initial list");
    }
    assert!(fifo.has_synced());
}

/// A relist abandoned half way (its `ListedKeys` dropped) and started over with fresh keys
/// does not count the keys of both attempts: the queue is synced once every queued key has
/// been popped.
#[tokio::test]
async fn a_restarted_relist_does_not_overcount_has_synced() {
    let fifo = plain_fifo();
    let mut abandoned = ListedKeys::new();
    fifo.replace_page(arcs(&[cm("alpha", 1), cm("beta", 2)]), &mut abandoned)
        .unwrap();
    drop(abandoned);

    let mut listed = ListedKeys::new();
    fifo.replace_page(arcs(&[cm("alpha", 3), cm("beta", 4)]), &mut listed)
        .unwrap();
    fifo.replace_page(arcs(&[cm("gamma", 5)]), &mut listed)
        .unwrap();
    fifo.replace_finish(listed);

    assert_eq!(fifo.len(), 3);
    for name in ["alpha", "beta", "gamma"] {
        assert!(!fifo.has_synced(), "synced before {name} was popped");
        let popped = pop(&fifo).await;
        assert_eq!(popped.key, key(name));
        assert!(popped.in_initial_list);
    }
    assert!(fifo.has_synced(), "every key of the relist was popped");
}

/// A page with an object that has no key queues the rest of the page and reports the error.
#[tokio::test]
async fn a_keyless_object_does_not_stop_a_relist() {
    let fifo = plain_fifo();
    let mut nameless = cm("alpha", 1);
    nameless.metadata.name = None;
    assert!(fifo.replace(arcs(&[nameless, cm("beta", 2)])).is_err());
    assert_eq!(fifo.list_keys(), [key("beta")]);
    assert!(!fifo.has_synced());
    pop(&fifo).await;
    assert!(fifo.has_synced());
}
