//! `the_real_fifo_test.go`: a RealFIFO hands out every change on its own, in arrival order;
//! what a relist, a resync and a close queue, and when it reports itself synced.
//!
//! Deltas are rendered as in `delta_fifo.rs`. One difference from client-go is stated where it
//! shows: a relist's pages are queued as they arrive, so the tombstones of keys it did not list
//! follow its `Replaced` objects, where client-go (holding the whole list) queues them first.
//! Each key's own sequence is client-go's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_cache::{DeltaFifoOptions, FifoClosed, ListedKeys, RealFifo};
use k8s_openapi::api::core::v1::ConfigMap;

use super::delta_fifo::{FixedKnown, arcs, cm, key, render, rv};

fn plain_fifo() -> RealFifo<ConfigMap> {
    RealFifo::new(DeltaFifoOptions::default())
}

fn fifo_knowing(known: &[ConfigMap]) -> RealFifo<ConfigMap> {
    RealFifo::new(DeltaFifoOptions {
        known_objects: Some(Arc::new(FixedKnown(arcs(known)))),
        ..Default::default()
    })
}

/// client-go's `Replace`: one page holding `objs`, then the end of the relist.
fn replace(fifo: &RealFifo<ConfigMap>, objs: &[ConfigMap]) {
    let mut listed = ListedKeys::new();
    fifo.replace_page(arcs(objs), &mut listed).unwrap();
    fifo.replace_finish(listed);
}

/// Pops one change: its rendering and whether it belonged to the initial list.
async fn pop(fifo: &RealFifo<ConfigMap>) -> (String, bool) {
    let popped = fifo.pop(|_, deltas, initial| {
        assert_eq!(deltas.len(), 1, "a RealFIFO pops one change at a time");
        (render(deltas.newest().unwrap()), initial)
    });
    tokio::time::timeout(Duration::from_secs(10), popped)
        .await
        .expect("pop blocked on a queue expected to hold a change")
        .expect("fifo closed")
}

/// Pops every queued change.
async fn drain(fifo: &RealFifo<ConfigMap>) -> Vec<String> {
    let mut popped = Vec::new();
    while !fifo.is_empty() {
        popped.push(pop(fifo).await.0);
    }
    popped
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// `TestRealFIFO_basic`: two producers' changes interleave, each producer's in its own order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_producers_changes_come_out_each_in_its_order() {
    const EACH: u32 = 500;
    let fifo = Arc::new(plain_fifo());
    let producers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|prefix| {
            let fifo = Arc::clone(&fifo);
            std::thread::spawn(move || {
                for i in 0..EACH {
                    fifo.add(cm(&format!("{prefix}{i}"), i + 1)).unwrap();
                }
            })
        })
        .collect();
    let mut last: HashMap<String, u32> = HashMap::new();
    for _ in 0..2 * EACH {
        let (prefix, version) = fifo
            .pop(|_, deltas, _| {
                let obj = deltas.newest().and_then(|delta| delta.object()).unwrap();
                let name = obj.metadata.name.clone().unwrap();
                (name[..1].to_owned(), rv(obj))
            })
            .await
            .unwrap();
        let previous = last.insert(prefix.clone(), version).unwrap_or(0);
        assert!(version > previous, "{prefix}: {version} after {previous}");
    }
    for producer in producers {
        producer.join().unwrap();
    }
}

/// `TestRealFIFO_addUpdate` and `TestRealFIFO_detectLineJumpers`: nothing is merged; a key's
/// later change waits its turn behind other keys' earlier ones.
#[tokio::test(start_paused = true)]
async fn every_change_is_popped_alone_and_none_jumps_the_line() {
    let fifo = plain_fifo();
    fifo.add(cm("foo", 10)).unwrap();
    fifo.update(cm("foo", 12)).unwrap();
    fifo.delete(cm("foo", 15)).unwrap();
    assert_eq!(fifo.list_keys(), [key("foo"), key("foo"), key("foo")]);
    assert_eq!(
        drain(&fifo).await,
        strings(&["Added foo@10", "Updated foo@12", "Deleted foo@15"])
    );

    fifo.add(cm("foo", 10)).unwrap();
    fifo.add(cm("bar", 1)).unwrap();
    fifo.add(cm("foo", 11)).unwrap();
    fifo.add(cm("foo", 13)).unwrap();
    fifo.add(cm("zab", 30)).unwrap();
    assert_eq!(pop(&fifo).await.0, "Added foo@10");
    fifo.add(cm("foo", 14)).unwrap();
    assert_eq!(
        drain(&fifo).await,
        strings(&[
            "Added bar@1",
            "Added foo@11",
            "Added foo@13",
            "Added zab@30",
            "Added foo@14"
        ])
    );
}

/// `TestRealFIFO_replaceWithDeleteDeltaIn`: a key whose deletion is queued and that the relist
/// lists again gets its `Replaced` change after the deletion (the informer must see it come
/// back).
#[tokio::test(start_paused = true)]
async fn a_relisted_key_whose_deletion_is_queued_is_replaced_after_it() {
    let fifo = fifo_knowing(&[cm("foo", 1)]);
    fifo.delete(cm("foo", 1)).unwrap();
    replace(&fifo, &[cm("foo", 2)]);
    assert_eq!(
        drain(&fifo).await,
        strings(&["Deleted foo@1", "Replaced foo@2"])
    );
}

/// What a case does to a FIFO.
type Operations<'a> = Box<dyn Fn(&RealFifo<ConfigMap>) + 'a>;

/// `TestRealFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue`: a key only queued, not listed,
/// gets one tombstone carrying its last queued state, never a second.
#[tokio::test(start_paused = true)]
async fn keys_only_in_the_queue_get_one_tombstone() {
    let obj = cm("foo", 2);
    let cases: Vec<(&str, Operations, Vec<&str>)> = vec![
        (
            "added, then a relist without it",
            Box::new(|f| {
                f.add(obj.clone()).unwrap();
                replace(f, &[]);
            }),
            vec!["Added foo@2", "Deleted tombstone(ns/foo, foo@2)"],
        ),
        (
            "added and deleted: the deletion is enough",
            Box::new(|f| {
                f.add(obj.clone()).unwrap();
                f.delete(obj.clone()).unwrap();
                replace(f, &[]);
            }),
            vec!["Added foo@2", "Deleted foo@2"],
        ),
        (
            "listed twice, then not",
            Box::new(|f| {
                f.add(obj.clone()).unwrap();
                replace(f, std::slice::from_ref(&obj));
                replace(f, std::slice::from_ref(&obj));
                replace(f, &[]);
            }),
            vec![
                "Added foo@2",
                "Replaced foo@2",
                "Replaced foo@2",
                "Deleted tombstone(ns/foo, foo@2)",
            ],
        ),
        (
            "two relists without it",
            Box::new(|f| {
                f.add(obj.clone()).unwrap();
                replace(f, &[]);
                replace(f, &[]);
            }),
            vec!["Added foo@2", "Deleted tombstone(ns/foo, foo@2)"],
        ),
        (
            "added, deleted, added again",
            Box::new(|f| {
                f.add(obj.clone()).unwrap();
                f.delete(obj.clone()).unwrap();
                f.add(cm("foo", 3)).unwrap();
                replace(f, &[]);
            }),
            vec![
                "Added foo@2",
                "Deleted foo@2",
                "Added foo@3",
                "Deleted tombstone(ns/foo, foo@3)",
            ],
        ),
    ];
    for (name, operations, expected) in cases {
        let fifo = fifo_knowing(&[]);
        operations(&fifo);
        assert_eq!(drain(&fifo).await, strings(&expected), "{name}");
        assert!(fifo.is_empty(), "{name}");
    }
}

/// `TestRealFIFO_addReplace`: a queued add and the relist's replacement both come out.
#[tokio::test(start_paused = true)]
async fn a_queued_add_and_its_relist_both_come_out() {
    let fifo = fifo_knowing(&[]);
    fifo.add(cm("foo", 10)).unwrap();
    replace(&fifo, &[cm("foo", 15)]);
    assert_eq!(
        drain(&fifo).await,
        strings(&["Added foo@10", "Replaced foo@15"])
    );
    assert!(
        tokio::time::timeout(Duration::from_secs(1), fifo.pop(|_, _, _| ()))
            .await
            .is_err(),
        "a third change"
    );
}

/// `TestRealFIFO_Resync`, `TestRealFIFO_ResyncNonExisting` and `TestRealFIFO_UpdateResyncRace`:
/// a resync queues `Sync` only for known keys with nothing queued.
#[tokio::test(start_paused = true)]
async fn a_resync_syncs_only_known_keys_with_nothing_queued() {
    let fifo = fifo_knowing(&[cm("foo", 5)]);
    fifo.resync();
    assert_eq!(drain(&fifo).await, strings(&["Sync foo@5"]));

    let fifo = fifo_knowing(&[cm("foo", 5)]);
    fifo.delete(cm("foo", 10)).unwrap();
    fifo.resync();
    assert_eq!(drain(&fifo).await, strings(&["Deleted foo@10"]));

    let fifo = fifo_knowing(&[cm("foo", 5)]);
    fifo.update(cm("foo", 6)).unwrap();
    fifo.resync();
    assert_eq!(drain(&fifo).await, strings(&["Updated foo@6"]));
}

/// `TestRealFIFO_DeleteExistingNonPropagated`: deleting a key with an add queued queues the
/// deletion after it.
#[tokio::test(start_paused = true)]
async fn a_deletion_is_queued_behind_the_add() {
    let fifo = fifo_knowing(&[]);
    fifo.add(cm("foo", 5)).unwrap();
    fifo.delete(cm("foo", 6)).unwrap();
    assert_eq!(
        drain(&fifo).await,
        strings(&["Added foo@5", "Deleted foo@6"])
    );
}

/// `TestRealFIFO_ReplaceMakesDeletions` and `…Replaced`: known keys the relist does not list
/// are tombstoned with their known state, queued ones with their last queued state; a key whose
/// last queued change is a deletion gets none.
#[tokio::test(start_paused = true)]
async fn a_relist_tombstones_every_known_or_queued_key_it_did_not_list() {
    let known = [cm("foo", 5), cm("bar", 6), cm("baz", 7)];

    let fifo = fifo_knowing(&known);
    fifo.delete(cm("baz", 10)).unwrap();
    replace(&fifo, &[cm("foo", 5)]);
    assert_eq!(
        drain(&fifo).await,
        strings(&[
            "Deleted baz@10",
            "Replaced foo@5",
            "Deleted tombstone(ns/bar, bar@6)",
        ])
    );

    let fifo = fifo_knowing(&known);
    fifo.add(cm("baz", 10)).unwrap();
    replace(&fifo, &[cm("foo", 5)]);
    assert_eq!(
        drain(&fifo).await,
        strings(&[
            "Added baz@10",
            "Replaced foo@5",
            "Deleted tombstone(ns/baz, baz@10)",
            "Deleted tombstone(ns/bar, bar@6)",
        ])
    );

    let fifo = fifo_knowing(&known);
    fifo.delete(cm("bar", 6)).unwrap();
    fifo.add(cm("bar", 100)).unwrap();
    replace(&fifo, &[cm("foo", 5)]);
    assert_eq!(
        drain(&fifo).await,
        strings(&[
            "Deleted bar@6",
            "Added bar@100",
            "Replaced foo@5",
            "Deleted tombstone(ns/bar, bar@100)",
            "Deleted tombstone(ns/baz, baz@7)",
        ])
    );

    // Two relists in a row: the second tombstones what the first listed.
    let fifo = fifo_knowing(&known);
    replace(&fifo, &[cm("bar", 100), cm("foo", 5)]);
    replace(&fifo, &[cm("foo", 5)]);
    assert_eq!(
        drain(&fifo).await,
        strings(&[
            "Replaced bar@100",
            "Replaced foo@5",
            "Deleted tombstone(ns/baz, baz@7)",
            "Replaced foo@5",
            "Deleted tombstone(ns/bar, bar@100)",
        ])
    );

    // Without known objects, only what is queued can be tombstoned.
    let fifo = plain_fifo();
    fifo.add(cm("baz", 10)).unwrap();
    replace(&fifo, &[cm("foo", 5)]);
    assert_eq!(
        drain(&fifo).await,
        strings(&[
            "Added baz@10",
            "Replaced foo@5",
            "Deleted tombstone(ns/baz, baz@10)",
        ])
    );
}

/// `TestRealFIFO_HasSyncedCorrectOnDeletion`: the first relist's tombstones count towards the
/// initial population; synced only once the last of them is popped.
#[tokio::test(start_paused = true)]
async fn synced_once_the_first_relists_tombstones_are_popped_too() {
    let fifo = fifo_knowing(&[cm("foo", 5), cm("bar", 6), cm("baz", 7)]);
    replace(&fifo, &[cm("foo", 5)]);
    let mut popped = Vec::new();
    for _ in 0..3 {
        assert!(!fifo.has_synced());
        let (change, initial) = pop(&fifo).await;
        assert!(initial, "{change} is part of the initial list");
        popped.push(change);
    }
    assert!(fifo.has_synced());
    assert_eq!(
        popped,
        strings(&[
            "Replaced foo@5",
            "Deleted tombstone(ns/bar, bar@6)",
            "Deleted tombstone(ns/baz, baz@7)",
        ])
    );
}

/// `TestRealFIFO_HasSynced`, case by case.
#[tokio::test(start_paused = true)]
async fn has_synced_after_each_sequence() {
    let synced_after = |fifo: &RealFifo<ConfigMap>| fifo.has_synced();
    let fifo = fifo_knowing(&[]);
    assert!(!synced_after(&fifo), "nothing yet");

    let fifo = fifo_knowing(&[]);
    fifo.add(cm("a", 1)).unwrap();
    assert!(synced_after(&fifo), "an add before any list");

    let fifo = fifo_knowing(&[]);
    replace(&fifo, &[]);
    assert!(synced_after(&fifo), "an empty first list");

    let fifo = fifo_knowing(&[]);
    replace(&fifo, &[cm("a", 1), cm("b", 2)]);
    assert!(!synced_after(&fifo), "a list of two, none popped");
    pop(&fifo).await;
    assert!(!synced_after(&fifo), "one of two popped");
    pop(&fifo).await;
    assert!(synced_after(&fifo), "both popped");

    // A list naming a key twice (a broken server): both changes count.
    let fifo = fifo_knowing(&[]);
    replace(&fifo, &[cm("a", 1), cm("a", 2)]);
    pop(&fifo).await;
    assert!(!synced_after(&fifo));
    pop(&fifo).await;
    assert!(synced_after(&fifo));
}

/// `TestRealFIFO_PopShouldUnblockWhenClosed`: every pop waiting on an empty queue returns once
/// it is closed.
#[tokio::test(start_paused = true)]
async fn closing_unblocks_every_waiting_pop() {
    let fifo = Arc::new(fifo_knowing(&[cm("foo", 5)]));
    let waiting: Vec<_> = (0..10)
        .map(|_| {
            let fifo = Arc::clone(&fifo);
            tokio::spawn(async move { fifo.pop(|_, _, _| ()).await })
        })
        .collect();
    tokio::task::yield_now().await;
    fifo.close();
    for pop in waiting {
        let result = tokio::time::timeout(Duration::from_millis(500), pop)
            .await
            .expect("a pop still waits after close")
            .unwrap();
        assert_eq!(result, Err(FifoClosed));
    }
}
