//! `thread_safe_store_test.go`: a caller-keyed store whose index sets stay exact (no stale
//! keys, no empty sets) through adds, updates, deletes and replaces.

use std::collections::BTreeMap;
use std::sync::Arc;

use ctrlkit_cache::{IndexError, IndexFunc, Indexers, ThreadSafeStore};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

const INDEX: &str = "by-value";
/// The label holding an object's comma-separated index values.
const VALUES: &str = "values";

/// A ConfigMap whose index values are `values` (comma-separated; empty means none).
fn cm(name: &str, values: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("ns".to_owned()),
            labels: Some(BTreeMap::from([(VALUES.to_owned(), values.to_owned())])),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn by_values() -> IndexFunc<ConfigMap> {
    Arc::new(|obj: &ConfigMap| {
        let values = obj
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(VALUES))
            .map(String::as_str)
            .unwrap_or_default();
        values
            .split(',')
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect()
    })
}

fn store() -> ThreadSafeStore<ConfigMap> {
    ThreadSafeStore::new(Indexers::from([(INDEX.to_owned(), by_values())]))
}

/// The keys filed under `value`, sorted.
fn keys_under(store: &ThreadSafeStore<ConfigMap>, value: &str) -> Vec<String> {
    let mut keys = store.index_keys(INDEX, value).unwrap();
    keys.sort();
    keys
}

/// The values the index holds keys for, sorted.
fn values(store: &ThreadSafeStore<ConfigMap>) -> Vec<String> {
    let mut values = store.list_index_func_values(INDEX);
    values.sort();
    values
}

fn add(store: &ThreadSafeStore<ConfigMap>, key: &str, values: &str) {
    store.add(key.to_owned(), Arc::new(cm(key, values)));
}

fn update(store: &ThreadSafeStore<ConfigMap>, key: &str, values: &str) {
    store.update(key.to_owned(), Arc::new(cm(key, values)));
}

/// Deleting the only key under an index value removes the value itself.
#[test]
fn deleting_the_last_key_of_a_value_drops_the_value() {
    let store = store();
    add(&store, "only", "solo");
    assert_eq!(keys_under(&store, "solo"), ["only"]);

    store.delete("only");
    assert!(keys_under(&store, "solo").is_empty());
    assert!(
        values(&store).is_empty(),
        "an emptied value must not linger"
    );
}

/// Deleting one of two keys under a value keeps the value with the other key.
#[test]
fn deleting_one_of_two_keys_keeps_the_value() {
    let store = store();
    add(&store, "retain", "shared");
    add(&store, "delete", "shared");
    assert_eq!(keys_under(&store, "shared"), ["delete", "retain"]);

    store.delete("delete");
    assert_eq!(keys_under(&store, "shared"), ["retain"]);
    assert_eq!(values(&store), ["shared"]);

    // Deleting a key that is not stored changes nothing.
    store.delete("never-stored");
    assert_eq!(keys_under(&store, "shared"), ["retain"]);
}

/// An index function yielding several values: every add, update and delete leaves exactly the
/// right keys under every value.
#[test]
fn multi_valued_index_sets_stay_exact() {
    let store = store();
    let check = |step: &str, expected: &[(&str, &[&str])]| {
        for (value, keys) in expected {
            assert_eq!(keys_under(&store, value), *keys, "{step}: {value}");
        }
        let mut present: Vec<&str> = expected
            .iter()
            .filter(|(_, keys)| !keys.is_empty())
            .map(|(value, _)| *value)
            .collect();
        present.sort_unstable();
        assert_eq!(values(&store), present, "{step}: values with keys");
    };

    add(&store, "key1", "red");
    add(&store, "key2", "green");
    check("two adds", &[("red", &["key1"]), ("green", &["key2"])]);

    update(&store, "key2", "red,green");
    check(
        "key2 gains red",
        &[("red", &["key1", "key2"]), ("green", &["key2"])],
    );

    update(&store, "key1", "red,green");
    check(
        "key1 gains green",
        &[("red", &["key1", "key2"]), ("green", &["key1", "key2"])],
    );

    add(&store, "key3", "red,green,blue");
    check(
        "key3 added",
        &[
            ("red", &["key1", "key2", "key3"]),
            ("green", &["key1", "key2", "key3"]),
            ("blue", &["key3"]),
        ],
    );

    update(&store, "key1", "red");
    check(
        "key1 drops green",
        &[
            ("red", &["key1", "key2", "key3"]),
            ("green", &["key2", "key3"]),
            ("blue", &["key3"]),
        ],
    );

    update(&store, "key2", "green");
    check(
        "key2 drops red",
        &[
            ("red", &["key1", "key3"]),
            ("green", &["key2", "key3"]),
            ("blue", &["key3"]),
        ],
    );

    store.delete("key1");
    check(
        "key1 deleted",
        &[
            ("red", &["key3"]),
            ("green", &["key2", "key3"]),
            ("blue", &["key3"]),
        ],
    );

    store.delete("key3");
    check(
        "key3 deleted",
        &[("red", &[]), ("green", &["key2"]), ("blue", &[])],
    );

    // Yielding no value at all takes the key out of the index.
    update(&store, "key2", "");
    check("key2 yields nothing", &[("green", &[])]);
    assert!(store.contains_key("key2"));
}

/// An update that yields the same values keeps the index but stores the new object.
#[test]
fn an_update_with_the_same_values_swaps_the_object() {
    let store = store();
    add(&store, "key1", "red");
    let mut changed = cm("key1", "red");
    changed.data = Some(BTreeMap::from([("setting".to_owned(), "on".to_owned())]));
    let changed = Arc::new(changed);
    store.update("key1".to_owned(), Arc::clone(&changed));

    assert!(Arc::ptr_eq(&store.get("key1").unwrap(), &changed));
    let indexed = store.by_index(INDEX, "red").unwrap();
    assert_eq!(indexed.len(), 1);
    assert!(Arc::ptr_eq(&indexed[0], &changed));
}

/// Keys are the caller's: they need not be derived from the object.
#[test]
fn keys_are_chosen_by_the_caller() {
    let store = store();
    store.add("custom-key".to_owned(), Arc::new(cm("some-name", "red")));
    assert!(store.get("ns/some-name").is_none());
    assert_eq!(store.list_keys(), ["custom-key"]);
    assert_eq!(keys_under(&store, "red"), ["custom-key"]);
    assert_eq!(store.len(), 1);
    assert!(!store.is_empty());
}

/// A replace swaps the whole content and rebuilds the index from it alone.
#[test]
fn replace_rebuilds_the_index() {
    let store = store();
    add(&store, "key1", "red");
    add(&store, "key2", "red,green");

    store.replace([
        ("key2".to_owned(), Arc::new(cm("key2", "blue"))),
        ("key3".to_owned(), Arc::new(cm("key3", "blue,green"))),
    ]);
    assert!(store.get("key1").is_none());
    assert_eq!(values(&store), ["blue", "green"]);
    assert_eq!(keys_under(&store, "blue"), ["key2", "key3"]);
    assert_eq!(keys_under(&store, "green"), ["key3"]);
    assert!(keys_under(&store, "red").is_empty());

    store.replace([]);
    assert!(store.is_empty());
    assert!(values(&store).is_empty());
}

/// Indexes added to a populated store are built at once; names already taken are refused
/// (all of them named, sorted) and nothing from that call is registered.
#[test]
fn add_indexers_builds_over_stored_objects_and_refuses_clashes() {
    let store = ThreadSafeStore::<ConfigMap>::new(Indexers::new());
    add(&store, "key1", "red,green");
    add(&store, "key2", "green");
    assert_eq!(
        store.index_keys(INDEX, "green").unwrap_err(),
        IndexError::NoSuchIndex(INDEX.to_owned())
    );

    store
        .add_indexers(Indexers::from([(INDEX.to_owned(), by_values())]))
        .unwrap();
    assert_eq!(keys_under(&store, "green"), ["key1", "key2"]);
    assert_eq!(values(&store), ["green", "red"]);

    // Kept current from then on.
    store.delete("key1");
    assert_eq!(values(&store), ["green"]);

    let clash = store.add_indexers(Indexers::from([
        ("other".to_owned(), by_values()),
        (INDEX.to_owned(), by_values()),
        ("another".to_owned(), by_values()),
    ]));
    assert_eq!(clash, Err(IndexError::Conflict(INDEX.to_owned())));
    assert_eq!(
        store.get_indexers().into_keys().collect::<Vec<_>>(),
        [INDEX]
    );

    store
        .add_indexers(Indexers::from([("other".to_owned(), by_values())]))
        .unwrap();
    let clash = store.add_indexers(Indexers::from([
        ("other".to_owned(), by_values()),
        (INDEX.to_owned(), by_values()),
    ]));
    assert_eq!(
        clash,
        Err(IndexError::Conflict(format!("{INDEX}, other"))),
        "every clashing name, sorted"
    );
}

/// Writers on several threads never leave a stale key or an empty set behind.
#[test]
fn concurrent_writers_leave_exact_indexes() {
    let store = Arc::new(store());
    let writers: Vec<_> = (0..2)
        .map(|writer| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for round in 0..200 {
                    for key in 0..10 {
                        let key = format!("w{writer}-{key}");
                        let colour = ["red", "green", "blue"][(round + writer) % 3];
                        update(&store, &key, colour);
                        let _ = store.by_index(INDEX, colour).unwrap();
                    }
                }
                for key in 0..5 {
                    store.delete(&format!("w{writer}-{key}"));
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    // The last round was 199: writer 0 ended on green ((199 + 0) % 3 = 1), writer 1 on blue.
    assert_eq!(
        keys_under(&store, "green"),
        ["w0-5", "w0-6", "w0-7", "w0-8", "w0-9"]
    );
    assert_eq!(
        keys_under(&store, "blue"),
        ["w1-5", "w1-6", "w1-7", "w1-8", "w1-9"]
    );
    assert_eq!(values(&store), ["blue", "green"]);
    assert_eq!(store.len(), 10);
}
