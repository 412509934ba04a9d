//! The store's semantics, as a client can see them through the API.

use serde_json::json;

use super::*;

fn kind(plural: &str) -> ResourceKind {
    builtin_resources()
        .into_iter()
        .find(|kind| kind.plural == plural)
        .unwrap()
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}})
}

fn rv(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn create_sets_server_fields_and_bumps_the_resource_version() {
    let store = Store::default();
    let start = store.resource_version();
    assert_eq!(start, 4, "the four initial namespaces");
    let created = store
        .create(&kind("configmaps"), "default", configmap("a"))
        .unwrap();
    let metadata = &created["metadata"];
    assert_eq!(rv(&created), start + 1);
    assert_eq!(metadata["namespace"], "default");
    assert_eq!(metadata["uid"].as_str().unwrap().len(), 36);
    assert!(
        metadata["creationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert!(
        metadata.get("generation").is_none(),
        "configmaps do not track generation"
    );

    let deployment = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1}});
    let created = store
        .create(&kind("deployments"), "default", deployment)
        .unwrap();
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(store.resource_version(), start + 2);
}

#[test]
fn create_refusals() {
    let store = Store::default();
    let configmaps = kind("configmaps");
    store
        .create(&configmaps, "default", configmap("a"))
        .unwrap();
    assert_eq!(
        store
            .create(&configmaps, "default", configmap("a"))
            .unwrap_err()
            .to_string(),
        "configmaps \"a\" already exists"
    );
    let missing = store
        .create(&configmaps, "nope", configmap("a"))
        .unwrap_err();
    assert_eq!(missing.to_string(), "namespaces \"nope\" not found");
    assert_eq!(missing.code(), 404);
    let invalid = store
        .create(&configmaps, "default", configmap("Bad_Name"))
        .unwrap_err();
    assert_eq!(invalid.code(), 422);
    assert!(invalid.to_string().starts_with(
        "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\""
    ));
    let mut with_version = configmap("b");
    with_version["metadata"]["resourceVersion"] = json!("3");
    assert_eq!(
        store
            .create(&configmaps, "default", with_version)
            .unwrap_err()
            .code(),
        400
    );
    assert_eq!(
        store
            .create(&configmaps, "default", json!([1]))
            .unwrap_err()
            .code(),
        400
    );
    let nameless = store
        .create(&configmaps, "default", json!({"metadata": {}}))
        .unwrap_err();
    assert_eq!(nameless.code(), 422);
}

#[test]
fn generate_name_expands() {
    let store = Store::default();
    let created = store
        .create(
            &kind("configmaps"),
            "default",
            json!({"metadata": {"generateName": "job-"}}),
        )
        .unwrap();
    let name = created["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("job-") && name.len() == 9, "{name}");
}

#[test]
fn update_with_a_stale_version_conflicts_and_a_no_op_changes_nothing() {
    let store = Store::default();
    let leases = kind("leases");
    let created = store
        .create(
            &leases,
            "default",
            json!({"metadata": {"name": "lock"}, "spec": {"holderIdentity": "a"}}),
        )
        .unwrap();
    let mut next = (*created).clone();
    next["spec"]["holderIdentity"] = json!("b");
    let (updated, created_now) = store
        .update(&leases, "default", "lock", next.clone(), false)
        .unwrap();
    assert!(!created_now);
    assert_eq!(rv(&updated), rv(&created) + 1);
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);

    // `next` still carries the old resourceVersion.
    let conflict = store
        .update(&leases, "default", "lock", next, false)
        .unwrap_err();
    assert_eq!(
        conflict.to_string(),
        "Operation cannot be fulfilled on leases.coordination.k8s.io \"lock\": the object has been modified; please apply your changes to the latest version and try again"
    );

    let before = store.resource_version();
    let (same, _) = store
        .update(&leases, "default", "lock", (*updated).clone(), false)
        .unwrap();
    assert_eq!(same, updated);
    assert_eq!(
        store.resource_version(),
        before,
        "a no-op update issues no resourceVersion"
    );

    let mut unversioned = (*updated).clone();
    unversioned["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let missing = store
        .update(&leases, "default", "lock", unversioned, false)
        .unwrap_err();
    assert_eq!(
        missing.to_string(),
        "Lease.coordination.k8s.io \"lock\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );
}

#[test]
fn leases_are_created_by_an_update_configmaps_are_not() {
    let store = Store::default();
    let (lease, created) = store
        .update(
            &kind("leases"),
            "default",
            "new",
            json!({"metadata": {"name": "new"}}),
            false,
        )
        .unwrap();
    assert!(created);
    assert_eq!(lease["metadata"]["name"], "new");
    assert_eq!(
        store
            .update(
                &kind("configmaps"),
                "default",
                "new",
                configmap("new"),
                false
            )
            .unwrap_err()
            .code(),
        404
    );
}

#[test]
fn generation_follows_spec_changes_only() {
    let store = Store::default();
    let deployments = kind("deployments");
    let created = store
        .create(
            &deployments,
            "default",
            json!({"metadata": {"name": "web"}, "spec": {"replicas": 1}}),
        )
        .unwrap();
    let mut labelled = (*created).clone();
    labelled["metadata"]["labels"] = json!({"app": "web"});
    let (labelled, _) = store
        .update(&deployments, "default", "web", labelled, false)
        .unwrap();
    assert_eq!(labelled["metadata"]["generation"], 1);

    let mut scaled = (*labelled).clone();
    scaled["spec"]["replicas"] = json!(3);
    scaled["status"] = json!({"replicas": 99}); // ignored: status has its own subresource
    let (scaled, _) = store
        .update(&deployments, "default", "web", scaled, false)
        .unwrap();
    assert_eq!(scaled["metadata"]["generation"], 2);
    assert!(scaled.get("status").is_none());

    let mut status = (*scaled).clone();
    status["status"] = json!({"availableReplicas": 3});
    status["spec"]["replicas"] = json!(7); // ignored by a status write
    let (with_status, _) = store
        .update(&deployments, "default", "web", status, true)
        .unwrap();
    assert_eq!(with_status["status"]["availableReplicas"], 3);
    assert_eq!(with_status["spec"]["replicas"], 3);
    assert_eq!(with_status["metadata"]["generation"], 2);

    // Marking it deleted is a change its controllers must see (kube's markAsDeleting).
    let mut held = (*with_status).clone();
    held["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    store
        .update(&deployments, "default", "web", held, false)
        .unwrap();
    let Deleted::Finalizing(marked) = store.delete(&deployments, "default", "web", None).unwrap()
    else {
        panic!("an object with finalizers must stay");
    };
    assert_eq!(marked["metadata"]["generation"], 3);
}

#[test]
fn finalizers_hold_a_deleted_object_until_removed() {
    let store = Store::default();
    let configmaps = kind("configmaps");
    let mut object = configmap("held");
    object["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    store.create(&configmaps, "default", object).unwrap();

    let Deleted::Finalizing(marked) = store.delete(&configmaps, "default", "held", None).unwrap()
    else {
        panic!("an object with finalizers must stay");
    };
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0);
    assert!(store.get(&configmaps, "default", "held").is_ok());

    let mut released = (*marked).clone();
    released["metadata"]["finalizers"] = json!([]);
    store
        .update(&configmaps, "default", "held", released, false)
        .unwrap();
    assert_eq!(
        store
            .get(&configmaps, "default", "held")
            .unwrap_err()
            .code(),
        404
    );
}

#[test]
fn delete_removes_and_honours_preconditions() {
    let store = Store::default();
    let configmaps = kind("configmaps");
    let created = store
        .create(&configmaps, "default", configmap("a"))
        .unwrap();
    assert_eq!(
        store
            .delete(&configmaps, "default", "a", Some("999"))
            .unwrap_err()
            .code(),
        409
    );
    let version = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let wrong_uid = Preconditions {
        uid: Some("other"),
        resource_version: Some(version.as_str()),
    };
    assert_eq!(
        store
            .delete(&configmaps, "default", "a", wrong_uid)
            .unwrap_err()
            .to_string(),
        format!(
            "Operation cannot be fulfilled on ConfigMap \"a\": the UID in the precondition (other) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    assert_eq!(
        store
            .delete(&configmaps, "default", "a", Some("999"))
            .unwrap_err()
            .to_string(),
        format!(
            "Operation cannot be fulfilled on ConfigMap \"a\": the ResourceVersion in the precondition (999) does not match the ResourceVersion in record ({version}). The object might have been modified"
        )
    );
    let both = Preconditions {
        uid: Some(uid.as_str()),
        resource_version: Some(version.as_str()),
    };
    let Deleted::Gone(last) = store.delete(&configmaps, "default", "a", both).unwrap() else {
        panic!("no finalizers: removed at once");
    };
    assert_eq!(rv(&last), rv(&created) + 1);
    assert_eq!(
        store
            .delete(&configmaps, "default", "a", None)
            .unwrap_err()
            .code(),
        404
    );
}

#[test]
fn lists_are_sorted_and_filtered_by_namespace() {
    let store = Store::default();
    let configmaps = kind("configmaps");
    for (namespace, name) in [("kube-system", "b"), ("default", "c"), ("default", "a")] {
        store
            .create(&configmaps, namespace, configmap(name))
            .unwrap();
    }
    let names = |items: Vec<Arc<StoredObject>>| -> Vec<String> {
        items
            .iter()
            .map(|item| item["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let (all, version) = store.list(&configmaps, None);
    assert_eq!(names(all), ["a", "c", "b"]);
    assert_eq!(version, store.resource_version());
    assert_eq!(
        names(store.list(&configmaps, Some("default")).0),
        ["a", "c"]
    );
    assert_eq!(names(store.list(&configmaps, Some("kube-system")).0), ["b"]);
    assert!(store.list(&configmaps, Some("kube-public")).0.is_empty());
}

#[test]
fn pages_stay_in_their_namespace_and_count_what_follows() {
    let store = Store::default();
    let configmaps = kind("configmaps");
    // "default2" sorts right after "default": a page of "default" must stop before it.
    store
        .create(
            &kind("namespaces"),
            "",
            json!({"metadata": {"name": "default2"}}),
        )
        .unwrap();
    for (namespace, name) in [("default", "a"), ("default", "b"), ("default", "c")] {
        store
            .create(&configmaps, namespace, configmap(name))
            .unwrap();
    }
    store
        .create(&configmaps, "default2", configmap("a"))
        .unwrap();
    let mut pages = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.list_page(
            &configmaps,
            Some("default"),
            after.as_deref().map(|name| ("default", name)),
            1,
            true,
            |_| true,
        );
        let name = page.items[0]["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        pages.push((name.clone(), page.more, page.remaining));
        if !page.more {
            break;
        }
        after = Some(name);
    }
    assert_eq!(
        pages,
        [
            ("a".to_string(), true, 2),
            ("b".to_string(), true, 1),
            ("c".to_string(), false, 0)
        ]
    );
    // Across namespaces, everything that follows counts.
    let all = store.list_page(&configmaps, None, None, 1, true, |_| true);
    assert_eq!((all.more, all.remaining), (true, 3));
    // A continue key from another namespace selects nothing, without panicking.
    let foreign = store.list_page(
        &configmaps,
        Some("default"),
        Some(("zzz", "a")),
        1,
        true,
        |_| true,
    );
    assert!(foreign.items.is_empty() && !foreign.more);
}

#[tokio::test]
async fn watch_from_a_version_sends_exactly_the_later_events() {
    let store = Store::default();
    let configmaps = kind("configmaps");
    let a = store
        .create(&configmaps, "default", configmap("a"))
        .unwrap();
    let from = rv(&a);
    store
        .create(&configmaps, "kube-system", configmap("b"))
        .unwrap();
    store
        .create(
            &kind("secrets"),
            "default",
            json!({"metadata": {"name": "s"}}),
        )
        .unwrap();

    let mut all = store
        .watch(&configmaps, None, WatchStart::After(from))
        .unwrap();
    let mut default_only = store
        .watch(&configmaps, Some("default"), WatchStart::After(from))
        .unwrap();
    // Owed from history: b only (a is not after `from`, the secret is another resource).
    let event = all.next().await.unwrap().unwrap();
    assert_eq!(
        (event.event_type, event.resource_version),
        (EventType::Added, from + 1)
    );

    store.delete(&configmaps, "default", "a", None).unwrap();
    let deleted = all.next().await.unwrap().unwrap();
    assert_eq!(deleted.event_type, EventType::Deleted);
    assert_eq!(deleted.resource_version, from + 3);
    assert_eq!(rv(&deleted.object), from + 3);
    let deleted = default_only.next().await.unwrap().unwrap();
    assert_eq!(deleted.event_type, EventType::Deleted);
}

#[tokio::test]
async fn watch_from_current_starts_with_synthetic_adds() {
    let store = Store::default();
    let configmaps = kind("configmaps");
    store
        .create(&configmaps, "default", configmap("a"))
        .unwrap();
    store
        .create(&configmaps, "default", configmap("b"))
        .unwrap();
    let mut watch = store
        .watch(&configmaps, Some("default"), WatchStart::Current)
        .unwrap();
    store
        .create(&configmaps, "default", configmap("c"))
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let event = watch.next().await.unwrap().unwrap();
        assert_eq!(event.event_type, EventType::Added);
        seen.push(
            event.object["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(seen, ["a", "b", "c"]);
}

#[test]
fn watch_history_limits() {
    // By count alone: no change is kept for its age.
    let store = Store::new(StoreConfig {
        history: 3,
        history_age: std::time::Duration::ZERO,
        watch_buffer: 16,
        ..StoreConfig::default()
    });
    let configmaps = kind("configmaps");
    for name in ["a", "b", "c", "d", "e"] {
        store
            .create(&configmaps, "default", configmap(name))
            .unwrap();
    }
    let current = store.resource_version();
    assert_eq!(current, 9);
    // History keeps 7, 8, 9: a watch from 6 is owed 7..9; from 5 it would miss 6.
    assert!(store.watch(&configmaps, None, WatchStart::After(6)).is_ok());
    let expired = store
        .watch(&configmaps, None, WatchStart::After(5))
        .unwrap_err();
    assert_eq!(expired.to_string(), "too old resource version: 5 (7)");
    assert_eq!(expired.code(), 410);
    let too_large = store
        .watch(&configmaps, None, WatchStart::After(10))
        .unwrap_err();
    assert_eq!(
        too_large.to_string(),
        "Timeout: Too large resource version: 10, current: 9"
    );
    assert_eq!(too_large.code(), 504);

    store.compact(8);
    assert_eq!(
        store
            .watch(&configmaps, None, WatchStart::After(7))
            .unwrap_err()
            .code(),
        410
    );
    assert!(store.watch(&configmaps, None, WatchStart::After(8)).is_ok());
}

#[tokio::test(start_paused = true)]
async fn history_keeps_recent_changes_past_its_count_and_never_more_than_its_bytes() {
    use std::time::Duration;
    let store = Store::new(StoreConfig {
        history: 2,
        history_age: Duration::from_secs(75),
        history_bytes: 60_000,
        ..StoreConfig::default()
    });
    let configmaps = kind("configmaps");
    let sized = |name: &str, bytes: usize| json!({"metadata": {"name": name}, "data": {"blob": "x".repeat(bytes)}});
    let start = store.resource_version();
    // Three changes 30 s apart: all kept, though the count is 2, as they are within 75 s.
    for name in ["a", "b", "c"] {
        store
            .create(&configmaps, "default", sized(name, 1_000))
            .unwrap();
        tokio::time::advance(Duration::from_secs(30)).await;
    }
    assert_eq!(store.history_usage().changes, start as usize + 3);
    assert!(
        store
            .watch(&configmaps, None, WatchStart::After(start))
            .is_ok()
    );
    // A change 60 s after the last: those made more than 75 s before it go ("a", 120 s before,
    // "b", 90 s before, and the namespaces); "c", 60 s before, stays.
    tokio::time::advance(Duration::from_secs(30)).await;
    store
        .create(&configmaps, "default", sized("d", 1_000))
        .unwrap();
    assert_eq!(store.history_usage().changes, 2);
    assert_eq!(store.compacted(), start + 2);
    assert!(
        store
            .watch(&configmaps, None, WatchStart::After(start + 2))
            .is_ok()
    );
    assert!(matches!(
        store.watch(&configmaps, None, WatchStart::After(start + 1)),
        Err(StoreError::Expired { .. })
    ));
    // Large changes (about 24 KB each: the blob's heap block and its JSON): however recent, no
    // more than 60,000 bytes of them are kept.
    for name in ["e", "f", "g"] {
        store
            .create(&configmaps, "default", sized(name, 12_000))
            .unwrap();
    }
    let usage = store.history_usage();
    assert!(usage.bytes <= 60_000, "{usage:?}");
    assert_eq!(usage.changes, 2, "{usage:?}");
    assert_eq!(store.compacted(), store.resource_version() - 2);
}

#[tokio::test]
async fn a_watcher_that_falls_more_bytes_behind_than_its_buffer_is_cut_and_holds_nothing() {
    let store = Store::new(StoreConfig {
        watch_buffer_bytes: 25_000,
        ..StoreConfig::default()
    });
    let (configmaps, secrets) = (kind("configmaps"), kind("secrets"));
    let from = WatchStart::After(store.resource_version());
    let mut stalled = store.watch(&configmaps, None, from).unwrap();
    let mut reading = store.watch(&configmaps, None, from).unwrap();
    let mut elsewhere = store.watch(&secrets, None, from).unwrap();
    let mut first = None;
    for index in 0..5 {
        let object = json!({"metadata": {"name": format!("cm-{index}")}, "data": {"blob": "x".repeat(3_000)}});
        store.create(&configmaps, "default", object).unwrap();
        let event = reading.next().await.unwrap().unwrap();
        first.get_or_insert(event);
    }
    // The third change (about 9 KB each: the blob's heap block, its JSON, the tree's maps)
    // would have put over 25,000 bytes in the stalled watcher's buffer.
    assert_eq!(stalled.next().await.unwrap_err(), WatchError::Lagged(3));
    // What it had not read is let go: the first event is held by the history and the reader.
    let first = first.unwrap();
    assert_eq!(Arc::strong_count(&first), 2);
    // A watcher of another resource was handed nothing.
    assert!(matches!(elsewhere.try_next(), Ok(None)));
}

#[tokio::test]
async fn a_watcher_that_falls_behind_is_closed_not_silently_skipped() {
    let store = Store::new(StoreConfig {
        history: 100,
        watch_buffer: 2,
        ..StoreConfig::default()
    });
    let configmaps = kind("configmaps");
    let mut watch = store.watch(&configmaps, None, WatchStart::Current).unwrap();
    for name in ["a", "b", "c", "d"] {
        store
            .create(&configmaps, "default", configmap(name))
            .unwrap();
    }
    assert!(matches!(watch.next().await, Err(WatchError::Lagged(_))));
}

#[tokio::test]
async fn every_watcher_gets_the_same_serialized_event() {
    let store = Store::default();
    let configmaps = kind("configmaps");
    let mut first = store
        .watch(
            &configmaps,
            None,
            WatchStart::After(store.resource_version()),
        )
        .unwrap();
    let mut second = store
        .watch(
            &configmaps,
            None,
            WatchStart::After(store.resource_version()),
        )
        .unwrap();
    store
        .create(&configmaps, "default", configmap("a"))
        .unwrap();
    let a = first.next().await.unwrap().unwrap().line();
    let b = second.next().await.unwrap().unwrap().line();
    assert_eq!(a.as_ptr(), b.as_ptr());
    assert!(a.starts_with(b"{\"type\":\"ADDED\",\"object\":{"));
}

#[test]
fn nothing_is_created_in_a_terminating_namespace() {
    let store = Store::default();
    let namespaces = kind("namespaces");
    let mut ns = json!({"metadata": {"name": "going", "finalizers": ["example.com/hold"]}});
    ns["spec"] = json!({});
    store.create(&namespaces, "", ns).unwrap();
    store.delete(&namespaces, "", "going", None).unwrap();
    let refused = store
        .create(&kind("configmaps"), "going", configmap("a"))
        .unwrap_err();
    assert_eq!(refused.code(), 403);
    assert_eq!(
        refused.to_string(),
        "configmaps \"a\" is forbidden: unable to create new content in namespace going because it is being terminated"
    );
}

#[test]
fn a_namespace_whose_spec_is_not_an_object_is_refused() {
    let store = Store::default();
    let refused = store
        .create(
            &kind("namespaces"),
            "",
            json!({"metadata": {"name": "team-b"}, "spec": "x"}),
        )
        .unwrap_err();
    assert_eq!(refused.code(), 400);
    assert!(store.get(&kind("namespaces"), "", "team-b").is_err());
}

#[test]
fn a_namespace_whose_status_is_not_an_object_can_be_deleted() {
    let store = Store::default();
    let namespaces = kind("namespaces");
    store
        .create(&namespaces, "", json!({"metadata": {"name": "odd"}}))
        .unwrap();
    let odd = json!({"metadata": {"name": "odd"}, "status": "Terminating"});
    store.update(&namespaces, "", "odd", odd, true).unwrap();
    let Deleted::Finalizing(marked) = store.delete(&namespaces, "", "odd", None).unwrap() else {
        panic!("the kubernetes finalizer holds a namespace");
    };
    assert_eq!(marked["status"], json!({"phase": "Terminating"}));
}

#[test]
fn a_namespace_updated_to_a_non_object_spec_is_still_finalized() {
    let store = Store::default();
    let namespaces = kind("namespaces");
    store
        .create(&namespaces, "", json!({"metadata": {"name": "odd"}}))
        .unwrap();
    // An update may leave `spec` a number; finalizing must not index into it.
    let odd = json!({"metadata": {"name": "odd", "finalizers": ["example.com/hold"]}, "spec": 5});
    store.update(&namespaces, "", "odd", odd, false).unwrap();
    store.delete(&namespaces, "", "odd", None).unwrap();
    store.finalize_namespace("odd").unwrap();
    let held = store.get(&namespaces, "", "odd").unwrap();
    assert_eq!(held["metadata"]["finalizers"], json!(["example.com/hold"]));
}

#[test]
fn an_object_too_large_for_etcd_loses_its_managed_fields_or_is_refused() {
    let store = Store::default();
    let configmaps = kind("configmaps");
    let big = |name: &str, data: usize, managed: usize| {
        json!({
            "metadata": {
                "name": name,
                "managedFields": [{"manager": "m".repeat(managed), "operation": "Update"}],
            },
            "data": {"blob": "x".repeat(data)},
        })
    };
    // Fits with its managed fields: kept whole.
    let whole = store
        .create(&configmaps, "default", big("whole", 1_000_000, 100))
        .unwrap();
    assert!(whole["metadata"].get("managedFields").is_some());
    // Fits only without them: stored without them, as kube-apiserver retries.
    let stripped = store
        .create(
            &configmaps,
            "default",
            big("stripped", MAX_OBJECT_BYTES - 1_000, 10_000),
        )
        .unwrap();
    assert!(stripped["metadata"].get("managedFields").is_none());
    // Too large either way: etcd's refusal, nothing stored.
    let refused = store
        .create(
            &configmaps,
            "default",
            big("refused", MAX_OBJECT_BYTES + 1, 10),
        )
        .unwrap_err();
    assert_eq!(refused, StoreError::RequestTooLarge);
    assert_eq!(
        (
            refused.code(),
            refused.reason(),
            refused.to_string().as_str()
        ),
        (500, "", "etcdserver: request is too large")
    );
    assert!(store.get(&configmaps, "default", "refused").is_err());
    // Too large under a name that is taken: etcd's size check comes before its transaction's.
    assert_eq!(
        store.create(
            &configmaps,
            "default",
            big("whole", MAX_OBJECT_BYTES + 1, 10)
        ),
        Err(StoreError::RequestTooLarge)
    );
    // An update that grows an object past the limit is refused the same way.
    let mut grown = (*whole).clone();
    grown["data"]["blob"] = json!("y".repeat(MAX_OBJECT_BYTES));
    assert_eq!(
        store.update(&configmaps, "default", "whole", grown, false),
        Err(StoreError::RequestTooLarge)
    );
    assert_eq!(store.get(&configmaps, "default", "whole").unwrap(), whole);
}

/// Any JSON value: scalars of every kind (strings with escapes and multi-byte characters,
/// extreme numbers) nested in lists and maps.
fn arbitrary_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |x| x.is_finite())
            .prop_map(Value::from),
        ".*".prop_map(Value::String),
        "[\\x00-\\x1f\"\\\\<>&\u{2028}é]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map(".*", inner, 0..8)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    #[test]
    fn the_size_bound_is_never_below_the_json_length(value in arbitrary_json()) {
        let length = serde_json::to_vec(&value).unwrap().len();
        proptest::prop_assert_eq!(json_len(&value), length);
        proptest::prop_assert!(footprint::estimate(&value).json_bound >= length);
    }
}

#[test]
fn a_written_object_keeps_the_estimate_made_when_it_was_checked() {
    let store = Store::new(StoreConfig::default());
    let kind = kind("configmaps");
    let object = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
    let created = store.create(&kind, "default", object).unwrap();
    // Made before the resourceVersion was set, and brought up to date with it.
    assert_eq!(created.estimate(), footprint::estimate(created.value()));
    let mut changed = created.value().clone();
    changed["data"]["k"] = json!("w");
    let (updated, _) = store.update(&kind, "default", "a", changed, false).unwrap();
    assert_eq!(updated.estimate(), footprint::estimate(updated.value()));
}
