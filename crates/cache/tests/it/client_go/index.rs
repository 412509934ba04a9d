//! `index_test.go`, the Indexer half of `store_test.go`, and the index part of
//! `shared_informer_test.go`: an object-keyed store whose indexes stay exact through adds,
//! updates, deletes and replaces, and can grow new indexes while populated.

use std::collections::BTreeMap;
use std::sync::Arc;

use ctrlkit_cache::{
    DeletedFinalStateUnknown, IndexError, IndexFunc, Indexer, Indexers, KeyError, NAMESPACE_INDEX,
    ObjectOrTombstone, meta_namespace_index_func, namespace_indexers,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ObjectMeta;

/// A pod `name` (cluster-wide when `namespace` is empty) at resourceVersion `rv`.
fn pod(namespace: &str, name: &str, rv: u32) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
            resource_version: Some(rv.to_string()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn with_labels(mut pod: Pod, labels: &[(&str, &str)]) -> Pod {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    pod.metadata.labels = Some(labels);
    pod
}

fn with_users(mut pod: Pod, users: &str) -> Pod {
    pod.metadata.annotations = Some(BTreeMap::from([("users".to_owned(), users.to_owned())]));
    pod
}

/// Indexes a pod by the value of one of its labels (nothing when it lacks the label).
fn by_label(label: &'static str) -> IndexFunc<Pod> {
    Arc::new(move |pod: &Pod| {
        pod.metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(label))
            .map(|value| vec![value.clone()])
            .unwrap_or_default()
    })
}

/// Indexes a pod by each name in its comma-separated `users` annotation.
fn by_users() -> IndexFunc<Pod> {
    Arc::new(|pod: &Pod| {
        pod.metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get("users"))
            .map(|users| users.split(',').map(str::to_owned).collect())
            .unwrap_or_default()
    })
}

/// Indexes a pod by the names of its labels.
fn by_label_names() -> IndexFunc<Pod> {
    Arc::new(|pod: &Pod| {
        pod.metadata
            .labels
            .iter()
            .flat_map(|labels| labels.keys().cloned())
            .collect()
    })
}

fn indexers(entries: &[(&str, IndexFunc<Pod>)]) -> Indexers<Pod> {
    entries
        .iter()
        .map(|(name, func)| ((*name).to_owned(), Arc::clone(func)))
        .collect()
}

fn sorted(mut items: Vec<String>) -> Vec<String> {
    items.sort();
    items
}

/// The names of `pods`, sorted.
fn names(pods: Vec<Arc<Pod>>) -> Vec<String> {
    sorted(
        pods.iter()
            .map(|pod| pod.metadata.name.clone().unwrap())
            .collect(),
    )
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn rv(pod: &Pod) -> u32 {
    pod.metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

/// Each distinct index value is listed once, however many objects yield it.
#[test]
fn index_values_are_listed_once_each() {
    let indexer = Indexer::new(indexers(&[("tier", by_label("tier"))]));
    indexer
        .add(with_labels(pod("", "one", 1), &[("tier", "web")]))
        .unwrap();
    indexer
        .add(with_labels(pod("", "two", 1), &[("tier", "web")]))
        .unwrap();
    indexer
        .add(with_labels(pod("", "tre", 1), &[("tier", "db")]))
        .unwrap();

    assert_eq!(
        sorted(indexer.list_index_func_values("tier")),
        ["db", "web"]
    );
}

/// An index function may yield several values; `by_index` finds an object under each of
/// them, and deletes and updates take the object out of the values it no longer yields,
/// dropping values no object yields any more.
#[test]
fn multi_valued_index_follows_adds_updates_and_deletes() {
    let indexer = Indexer::new(indexers(&[("by-user", by_users())]));
    let two = with_users(pod("", "two", 1), "bert,oscar");
    let tre = with_users(pod("", "tre", 1), "ernie,elmo");
    indexer
        .add(with_users(pod("", "one", 1), "ernie,bert"))
        .unwrap();
    indexer.add(two.clone()).unwrap();
    indexer.add(tre.clone()).unwrap();

    let expected = [
        ("ernie", &["one", "tre"][..]),
        ("bert", &["one", "two"]),
        ("elmo", &["tre"]),
        ("oscar", &["two"]),
        ("nobody", &[]),
    ];
    for (user, pods) in expected {
        assert_eq!(
            names(indexer.by_index("by-user", user).unwrap()),
            strings(pods),
            "{user}"
        );
        assert_eq!(
            sorted(indexer.index_keys("by-user", user).unwrap()),
            strings(pods),
            "{user}"
        );
    }

    indexer.delete(&tre).unwrap();
    assert_eq!(
        names(indexer.by_index("by-user", "ernie").unwrap()),
        ["one"]
    );
    assert!(indexer.by_index("by-user", "elmo").unwrap().is_empty());
    assert_eq!(
        sorted(indexer.list_index_func_values("by-user")),
        ["bert", "ernie", "oscar"],
        "elmo no longer has objects"
    );

    indexer.update(with_users(two, "oscar")).unwrap();
    assert_eq!(names(indexer.by_index("by-user", "bert").unwrap()), ["one"]);
    assert_eq!(
        names(indexer.by_index("by-user", "oscar").unwrap()),
        ["two"]
    );
    assert_eq!(
        sorted(indexer.list_index_func_values("by-user")),
        ["bert", "ernie", "oscar"]
    );
}

/// The indexer is a store: add, get, update, delete, list and replace by object key.
#[test]
fn indexer_works_as_a_plain_store() {
    let indexer = Indexer::<Pod>::new(Indexers::new());
    indexer.add(pod("ns", "alpha", 1)).unwrap();
    assert_eq!(
        rv(&indexer.get(&pod("ns", "alpha", 0)).unwrap().unwrap()),
        1
    );
    indexer.update(pod("ns", "alpha", 2)).unwrap();
    assert_eq!(rv(&indexer.get_by_key("ns/alpha").unwrap()), 2);
    indexer.delete(&pod("ns", "alpha", 0)).unwrap();
    assert!(indexer.get(&pod("ns", "alpha", 0)).unwrap().is_none());
    assert!(indexer.is_empty());

    for name in ["a", "c", "e"] {
        indexer.add(pod("ns", name, 1)).unwrap();
    }
    assert_eq!(names(indexer.list()), ["a", "c", "e"]);
    assert_eq!(sorted(indexer.list_keys()), ["ns/a", "ns/c", "ns/e"]);
    assert_eq!(indexer.len(), 3);

    indexer
        .replace([
            Arc::new(pod("ns", "gamma", 1)),
            Arc::new(pod("", "delta", 1)),
        ])
        .unwrap();
    assert_eq!(names(indexer.list()), ["delta", "gamma"]);
    assert_eq!(sorted(indexer.list_keys()), ["delta", "ns/gamma"]);
}

/// `index` finds every object sharing a value with a probe object (which need not be
/// stored), each object once even when it shares several values.
#[test]
fn index_finds_objects_sharing_a_value_with_a_probe() {
    let indexer = Indexer::new(indexers(&[
        ("by-val", by_label("val")),
        ("by-user", by_users()),
    ]));
    for (name, value) in [("a", "b"), ("c", "b"), ("e", "f"), ("g", "h")] {
        indexer
            .add(with_labels(pod("", name, 1), &[("val", value)]))
            .unwrap();
    }
    for (value, expected) in [
        ("b", &["a", "c"][..]),
        ("f", &["e"]),
        ("h", &["g"]),
        ("z", &[]),
    ] {
        let probe = with_labels(pod("", "probe", 1), &[("val", value)]);
        assert_eq!(
            names(indexer.index("by-val", &probe).unwrap()),
            strings(expected),
            "{value}"
        );
    }

    indexer
        .add(with_users(pod("", "one", 1), "ernie,bert"))
        .unwrap();
    indexer
        .add(with_users(pod("", "two", 1), "bert,oscar"))
        .unwrap();
    indexer
        .add(with_users(pod("", "tre", 1), "ernie,elmo"))
        .unwrap();
    let probe = with_users(pod("", "probe", 1), "ernie,bert,nobody");
    assert_eq!(
        names(indexer.index("by-user", &probe).unwrap()),
        ["one", "tre", "two"]
    );
    let probe = with_users(pod("", "probe", 1), "");
    assert!(indexer.index("by-user", &probe).unwrap().is_empty());
}

/// The namespace index files namespaced objects under their namespace and cluster-scoped ones
/// under nothing; a namespace whose last object goes is dropped from the index.
#[test]
fn namespace_index_files_objects_by_namespace() {
    assert_eq!(meta_namespace_index_func(&pod("a", "x", 1)), ["a"]);
    assert!(meta_namespace_index_func(&pod("", "x", 1)).is_empty());

    let indexer = Indexer::new(namespace_indexers::<Pod>());
    indexer.add(pod("a", "one", 1)).unwrap();
    indexer.add(pod("a", "two", 1)).unwrap();
    indexer.add(pod("b", "one", 1)).unwrap();
    indexer.add(pod("", "global", 1)).unwrap();

    assert_eq!(
        names(indexer.by_index(NAMESPACE_INDEX, "a").unwrap()),
        ["one", "two"]
    );
    assert_eq!(
        sorted(indexer.index_keys(NAMESPACE_INDEX, "a").unwrap()),
        ["a/one", "a/two"]
    );
    assert_eq!(indexer.index_keys(NAMESPACE_INDEX, "b").unwrap(), ["b/one"]);
    assert!(indexer.index_keys(NAMESPACE_INDEX, "").unwrap().is_empty());
    assert_eq!(
        sorted(indexer.list_index_func_values(NAMESPACE_INDEX)),
        ["a", "b"]
    );

    indexer.delete(&pod("b", "one", 0)).unwrap();
    assert_eq!(indexer.list_index_func_values(NAMESPACE_INDEX), ["a"]);
    assert!(indexer.by_index(NAMESPACE_INDEX, "b").unwrap().is_empty());
}

/// An update that changes an object's index value moves its key, and the emptied value goes.
#[test]
fn an_update_moves_the_key_between_index_values() {
    let indexer = Indexer::new(indexers(&[("tier", by_label("tier"))]));
    indexer
        .add(with_labels(pod("ns", "one", 1), &[("tier", "web")]))
        .unwrap();
    indexer
        .add(with_labels(pod("ns", "two", 1), &[("tier", "db")]))
        .unwrap();

    indexer
        .update(with_labels(pod("ns", "one", 2), &[("tier", "db")]))
        .unwrap();
    assert_eq!(
        sorted(indexer.index_keys("tier", "db").unwrap()),
        ["ns/one", "ns/two"]
    );
    assert!(indexer.index_keys("tier", "web").unwrap().is_empty());
    assert_eq!(indexer.list_index_func_values("tier"), ["db"]);

    // The index hands out the updated object.
    let db = indexer.by_index("tier", "db").unwrap();
    let one = db
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("one"))
        .unwrap();
    assert_eq!(rv(one), 2);

    // An object that stops yielding any value leaves the index altogether.
    indexer.update(pod("ns", "two", 2)).unwrap();
    assert_eq!(indexer.index_keys("tier", "db").unwrap(), ["ns/one"]);
}

/// Indexes registered on a populated indexer are built over what it holds at once, and kept
/// up to date from then on like the others.
#[test]
fn indexes_added_later_cover_stored_objects() {
    let indexer = Indexer::new(indexers(&[("labels", by_label_names())]));
    let pod1 = with_labels(pod("", "pod1", 1), &[("a", "a-val"), ("b", "b-val1")]);
    let pod2 = with_labels(pod("", "pod2", 1), &[("b", "b-val2")]);
    let pod3 = with_labels(pod("", "pod3", 1), &[("a", "a-val2")]);
    indexer.add(pod1).unwrap();
    indexer.add(pod2).unwrap();
    assert_eq!(names(indexer.by_index("labels", "a").unwrap()), ["pod1"]);

    indexer.add(pod3).unwrap();
    assert_eq!(
        names(indexer.by_index("labels", "a").unwrap()),
        ["pod1", "pod3"]
    );

    indexer
        .add_indexers(indexers(&[("labels-again", by_label_names())]))
        .unwrap();
    assert_eq!(
        names(indexer.by_index("labels-again", "a").unwrap()),
        ["pod1", "pod3"]
    );
    assert_eq!(
        names(indexer.by_index("labels-again", "b").unwrap()),
        ["pod1", "pod2"]
    );
    assert_eq!(sorted(indexer.list_index_func_values("labels")), ["a", "b"]);
    assert_eq!(
        sorted(indexer.list_index_func_values("labels-again")),
        ["a", "b"]
    );
    assert_eq!(
        sorted(indexer.get_indexers().into_keys().collect()),
        ["labels", "labels-again"]
    );

    indexer.delete(&pod("", "pod2", 0)).unwrap();
    assert_eq!(
        names(indexer.by_index("labels-again", "b").unwrap()),
        ["pod1"]
    );
}

/// Registering an index under a name that is taken fails, names the clash, and registers
/// nothing from that call.
#[test]
fn an_index_name_clash_fails_and_adds_nothing() {
    let indexer = Indexer::new(indexers(&[("labels", by_label_names())]));
    indexer
        .add(with_labels(pod("", "pod1", 1), &[("a", "x")]))
        .unwrap();

    let err = indexer
        .add_indexers(indexers(&[
            ("labels", by_label("a")),
            ("fresh", by_label("a")),
        ]))
        .unwrap_err();
    assert_eq!(err, IndexError::Conflict("labels".to_owned()));
    assert_eq!(
        indexer.by_index("fresh", "x").unwrap_err(),
        IndexError::NoSuchIndex("fresh".to_owned())
    );
    assert_eq!(
        sorted(indexer.get_indexers().into_keys().collect()),
        ["labels"]
    );
    // The existing index is untouched.
    assert_eq!(indexer.list_index_func_values("labels"), ["a"]);
}

/// Querying an index that is not registered is an error (listing its values yields nothing).
#[test]
fn an_unknown_index_is_an_error() {
    let indexer = Indexer::new(namespace_indexers::<Pod>());
    indexer.add(pod("a", "one", 1)).unwrap();
    let missing = || IndexError::NoSuchIndex("missing".to_owned());
    assert_eq!(indexer.by_index("missing", "a").unwrap_err(), missing());
    assert_eq!(indexer.index_keys("missing", "a").unwrap_err(), missing());
    assert_eq!(
        indexer.index("missing", &pod("a", "one", 1)).unwrap_err(),
        missing()
    );
    assert!(indexer.list_index_func_values("missing").is_empty());
}

/// A replace rebuilds the indexes from the new content only; a list with an object that has
/// no key is refused and leaves content and indexes as they were.
#[test]
fn replace_rebuilds_indexes_and_refuses_keyless_objects() {
    let indexer = Indexer::new(namespace_indexers::<Pod>());
    indexer.add(pod("a", "one", 1)).unwrap();
    indexer.add(pod("b", "two", 1)).unwrap();

    indexer
        .replace([
            Arc::new(pod("b", "three", 1)),
            Arc::new(pod("c", "four", 1)),
        ])
        .unwrap();
    assert_eq!(
        sorted(indexer.list_index_func_values(NAMESPACE_INDEX)),
        ["b", "c"]
    );
    assert_eq!(
        indexer.index_keys(NAMESPACE_INDEX, "b").unwrap(),
        ["b/three"]
    );
    assert!(indexer.index_keys(NAMESPACE_INDEX, "a").unwrap().is_empty());

    let mut nameless = pod("d", "x", 1);
    nameless.metadata.name = None;
    let err = indexer
        .replace([Arc::new(pod("d", "five", 1)), Arc::new(nameless)])
        .unwrap_err();
    assert_eq!(err, KeyError::MissingName);
    assert_eq!(sorted(indexer.list_keys()), ["b/three", "c/four"]);
    assert_eq!(
        sorted(indexer.list_index_func_values(NAMESPACE_INDEX)),
        ["b", "c"]
    );
}

/// A deletion handed over as a tombstone removes the object filed under the tombstone's key,
/// even when the tombstone carries no object; a plain deletion removes by the object's key.
#[test]
fn deletions_remove_by_object_or_tombstone_key() {
    let indexer = Indexer::new(namespace_indexers::<Pod>());
    indexer.add(pod("a", "one", 1)).unwrap();
    indexer.add(pod("a", "two", 1)).unwrap();

    let tombstone = ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
        key: "a/one".to_owned(),
        obj: None,
    });
    indexer.delete_object_or_tombstone(&tombstone).unwrap();
    assert_eq!(indexer.list_keys(), ["a/two"]);

    let deleted = ObjectOrTombstone::Object(Arc::new(pod("a", "two", 2)));
    indexer.delete_object_or_tombstone(&deleted).unwrap();
    assert!(indexer.is_empty());
    assert!(indexer.list_index_func_values(NAMESPACE_INDEX).is_empty());
}

/// Objects are shared, not copied: what a read hands out is the stored allocation.
#[test]
fn reads_share_the_stored_object() {
    let indexer = Indexer::new(namespace_indexers::<Pod>());
    let stored = Arc::new(pod("a", "one", 1));
    indexer.add(Arc::clone(&stored)).unwrap();
    assert!(Arc::ptr_eq(&indexer.get_by_key("a/one").unwrap(), &stored));
    assert!(Arc::ptr_eq(
        &indexer.by_index(NAMESPACE_INDEX, "a").unwrap()[0],
        &stored
    ));
    let clone = indexer.clone();
    assert!(
        Arc::ptr_eq(&clone.list()[0], &stored),
        "clones share one store"
    );
}
