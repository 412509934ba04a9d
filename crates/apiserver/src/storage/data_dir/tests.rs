use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::resource::{ResourceKind, builtin_resources};
use crate::storage::{
    Deleted, EventType, PersistError, Store, StoreConfig, StoreError, WatchStart,
};

fn kind(plural: &str) -> ResourceKind {
    builtin_resources()
        .into_iter()
        .find(|kind| kind.plural == plural)
        .unwrap()
}

fn configmap(name: &str, value: &str) -> serde_json::Value {
    json!({"metadata": {"name": name}, "data": {"value": value}})
}

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(prefix))
        })
        .collect();
    found.sort();
    found
}

/// A store that keeps 10 changes of history, and so snapshots every 10 changes.
fn small_history() -> StoreConfig {
    StoreConfig {
        history: 10,
        ..StoreConfig::default()
    }
}

fn newest_segment(dir: &Path) -> PathBuf {
    files(dir, "wal-").pop().unwrap()
}

#[test]
fn a_reopened_store_has_every_object_with_its_resource_version() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let (kept, changed, version) = {
        let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
        assert_eq!(store.recovery().unwrap().resource_version, 0);
        let kept = store
            .create(&configmaps, "default", configmap("kept", "1"))
            .unwrap();
        let changed = store
            .create(&configmaps, "default", configmap("changed", "1"))
            .unwrap();
        let mut next = (*changed).clone();
        next["data"]["value"] = json!("2");
        let (changed, _) = store
            .update(&configmaps, "default", "changed", next, false)
            .unwrap();
        store
            .create(&configmaps, "default", configmap("gone", "1"))
            .unwrap();
        store.delete(&configmaps, "default", "gone", None).unwrap();
        (kept, changed, store.resource_version())
    };

    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    let recovery = store.recovery().unwrap();
    assert_eq!(recovery.resource_version, version);
    assert_eq!(recovery.snapshot, 0);
    assert_eq!(
        recovery.replayed, version,
        "every change since the empty start"
    );
    assert_eq!(recovery.truncated, None);
    assert_eq!(store.resource_version(), version);
    assert_eq!(store.get(&configmaps, "default", "kept").unwrap(), kept);
    assert_eq!(
        store.get(&configmaps, "default", "changed").unwrap(),
        changed
    );
    assert!(matches!(
        store.get(&configmaps, "default", "gone"),
        Err(StoreError::NotFound { .. })
    ));
    // The default namespaces were created once, not again on reopening.
    let (namespaces, _) = store.list(&kind("namespaces"), None);
    assert_eq!(namespaces.len(), 4);

    // The next write continues the resourceVersion sequence, and survives the next reopening.
    let after = store
        .create(&configmaps, "default", configmap("after", "1"))
        .unwrap();
    assert_eq!(
        after["metadata"]["resourceVersion"],
        (version + 1).to_string()
    );
    drop(store);
    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    assert_eq!(store.get(&configmaps, "default", "after").unwrap(), after);
}

#[tokio::test]
async fn a_watch_resumes_across_a_reopening_with_exactly_the_later_events() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let resume_from = {
        let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
        store
            .create(&configmaps, "default", configmap("a", "1"))
            .unwrap();
        let from = store.resource_version();
        let b = store
            .create(&configmaps, "default", configmap("b", "1"))
            .unwrap();
        let mut next = (*b).clone();
        next["data"]["value"] = json!("2");
        store
            .update(&configmaps, "default", "b", next, false)
            .unwrap();
        store.delete(&configmaps, "default", "a", None).unwrap();
        from
    };
    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    let mut watch = store
        .watch(&configmaps, Some("default"), WatchStart::After(resume_from))
        .unwrap();
    assert_eq!(watch.owed_len(), 3);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let event = watch.next().await.unwrap().unwrap();
        seen.push((
            event.event_type,
            event.object["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
            event.resource_version,
        ));
    }
    assert_eq!(
        seen,
        vec![
            (EventType::Added, "b".to_string(), resume_from + 1),
            (EventType::Modified, "b".to_string(), resume_from + 2),
            (EventType::Deleted, "a".to_string(), resume_from + 3),
        ]
    );
}

#[test]
fn a_torn_tail_is_truncated_to_the_last_good_record_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let version = {
        let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
        store
            .create(&configmaps, "default", configmap("a", "1"))
            .unwrap();
        store.resource_version()
    };
    let segment = newest_segment(dir.path());
    let good_length = fs::metadata(&segment).unwrap().len();
    // Half a record, as a crash in the middle of a write leaves it.
    let mut frame = Vec::new();
    crate::storage::wal::encode_frame(b"{\"rv\":99}\n{}", &mut frame);
    fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap()
        .write_all(&frame[..frame.len() / 2])
        .unwrap();

    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    let tail = store.recovery().unwrap().truncated.clone().unwrap();
    assert_eq!(tail.segment, segment);
    assert_eq!(tail.offset, good_length);
    assert_eq!(tail.discarded, (frame.len() / 2) as u64);
    assert!(tail.reason.contains("cut short"), "{}", tail.reason);
    assert_eq!(fs::metadata(&segment).unwrap().len(), good_length);
    assert_eq!(store.resource_version(), version);
    assert!(store.get(&configmaps, "default", "a").is_ok());
    // Writing goes on after the cut, and a third opening finds nothing to truncate.
    store
        .create(&configmaps, "default", configmap("b", "1"))
        .unwrap();
    drop(store);
    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    assert_eq!(store.recovery().unwrap().truncated, None);
    assert_eq!(store.resource_version(), version + 1);
}

#[test]
fn a_corrupt_last_record_is_cut_and_the_ones_before_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let before_last = {
        let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
        store
            .create(&configmaps, "default", configmap("a", "1"))
            .unwrap();
        let length = fs::metadata(newest_segment(dir.path())).unwrap().len();
        store
            .create(&configmaps, "default", configmap("b", "1"))
            .unwrap();
        length
    };
    let segment = newest_segment(dir.path());
    let mut bytes = fs::read(&segment).unwrap();
    let last = bytes.len() - 10;
    bytes[last] ^= 0x01;
    fs::write(&segment, &bytes).unwrap();

    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    let tail = store.recovery().unwrap().truncated.clone().unwrap();
    assert_eq!(tail.offset, before_last);
    assert!(tail.reason.contains("checksum"), "{}", tail.reason);
    assert!(store.get(&configmaps, "default", "a").is_ok());
    assert!(store.get(&configmaps, "default", "b").is_err());
}

#[test]
fn snapshots_bound_the_log_and_keep_enough_history_for_watches() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let config = small_history();
    let version = {
        let store = Store::open(config, dir.path()).unwrap();
        for round in 0..50 {
            let name = format!("cm-{}", round % 7);
            match store.get(&configmaps, "default", &name) {
                Ok(current) => {
                    let mut next = (*current).clone();
                    next["data"]["value"] = json!(round.to_string());
                    store
                        .update(&configmaps, "default", &name, next, false)
                        .unwrap();
                }
                Err(_) => {
                    store
                        .create(&configmaps, "default", configmap(&name, "0"))
                        .unwrap();
                }
            }
        }
        store.resource_version()
    };
    assert_eq!(version, 54, "4 namespaces and 50 writes");
    let snapshots = files(dir.path(), "snapshot-");
    assert_eq!(snapshots.len(), 2, "{snapshots:?}");
    // Snapshots at 50 and 40; the segments after 40 stay, those before go.
    assert!(snapshots[0].ends_with("snapshot-00000000000000000040.snap"));
    assert!(snapshots[1].ends_with("snapshot-00000000000000000050.snap"));
    let segments = files(dir.path(), "wal-");
    assert_eq!(segments.len(), 2, "{segments:?}");
    assert!(segments[0].ends_with("wal-00000000000000000041.log"));

    let store = Store::open(config, dir.path()).unwrap();
    let recovery = store.recovery().unwrap();
    assert_eq!(recovery.snapshot, 40);
    assert_eq!(recovery.replayed, 14);
    assert_eq!(store.resource_version(), version);
    for name in 0..7 {
        assert!(
            store
                .get(&configmaps, "default", &format!("cm-{name}"))
                .is_ok()
        );
    }
    // History: the 10 newest changes; older ones are compacted.
    assert_eq!(store.compacted(), version - 10);
    assert!(
        store
            .watch(&configmaps, None, WatchStart::After(version - 10))
            .is_ok()
    );
    assert!(matches!(
        store.watch(&configmaps, None, WatchStart::After(version - 11)),
        Err(StoreError::Expired { .. })
    ));
}

#[test]
fn damage_before_the_tail_is_an_error_not_a_silent_loss() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let config = small_history();
    {
        let store = Store::open(config, dir.path()).unwrap();
        for index in 0..12 {
            store
                .create(
                    &configmaps,
                    "default",
                    configmap(&format!("cm-{index}"), "0"),
                )
                .unwrap();
        }
    }
    // Segments: 1..=10 (closed by the snapshot at 10) and 11.. (the newest).
    let segments = files(dir.path(), "wal-");
    assert_eq!(segments.len(), 2, "{segments:?}");
    let mut bytes = fs::read(&segments[0]).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    fs::write(&segments[0], &bytes).unwrap();

    match Store::open(config, dir.path()) {
        Err(PersistError::Corrupt { path, reason, .. }) => {
            assert_eq!(path, segments[0]);
            assert!(!reason.is_empty());
        }
        other => panic!("expected a corrupt-log error, got {other:?}"),
    }
}

#[test]
fn a_second_server_cannot_open_the_same_directory() {
    let dir = tempfile::tempdir().unwrap();
    let first = Store::open(StoreConfig::default(), dir.path()).unwrap();
    assert!(matches!(
        Store::open(StoreConfig::default(), dir.path()),
        Err(PersistError::Locked(_))
    ));
    drop(first);
    assert!(Store::open(StoreConfig::default(), dir.path()).is_ok());
}

#[test]
fn a_write_that_takes_two_changes_is_logged_as_both() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    {
        let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
        let mut held = configmap("held", "1");
        held["metadata"]["finalizers"] = json!(["example.com/hold"]);
        store.create(&configmaps, "default", held).unwrap();
        let Deleted::Finalizing(marked) =
            store.delete(&configmaps, "default", "held", None).unwrap()
        else {
            panic!("a finalizer holds the object");
        };
        let mut released = (*marked).clone();
        released["metadata"]["finalizers"] = json!([]);
        // Removing the last finalizer of a deleted object: MODIFIED then DELETED.
        let before = store.resource_version();
        store
            .update(&configmaps, "default", "held", released, false)
            .unwrap();
        assert_eq!(store.resource_version(), before + 2);
    }
    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    assert!(store.get(&configmaps, "default", "held").is_err());
}

#[test]
fn leftover_temporary_snapshots_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(StoreConfig::default(), dir.path()).unwrap());
    let tmp = dir.path().join("snapshot-00000000000000000009.snap.tmp");
    fs::write(&tmp, b"half a snapshot").unwrap();
    drop(Store::open(StoreConfig::default(), dir.path()).unwrap());
    assert!(!tmp.exists());
}

#[test]
fn an_unreadable_snapshot_is_passed_over_for_a_readable_one() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let config = small_history();
    let version = {
        let store = Store::open(config, dir.path()).unwrap();
        for index in 0..30 {
            store
                .create(
                    &configmaps,
                    "default",
                    configmap(&format!("cm-{index}"), "0"),
                )
                .unwrap();
        }
        store.resource_version()
    };
    let snapshots = files(dir.path(), "snapshot-");
    fs::write(&snapshots[0], b"garbage").unwrap();
    let store = Store::open(config, dir.path()).unwrap();
    let recovery = store.recovery().unwrap();
    assert_eq!(recovery.skipped_snapshots.len(), 1);
    assert_eq!(recovery.skipped_snapshots[0].0, snapshots[0]);
    assert_eq!(store.resource_version(), version);
    assert_eq!(store.list(&configmaps, Some("default")).0.len(), 30);
}

#[test]
fn after_a_reopening_the_next_snapshot_counts_from_the_newest_one() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let config = small_history();
    let create = |store: &Store, index: usize| {
        store
            .create(
                &configmaps,
                "default",
                configmap(&format!("cm-{index}"), "0"),
            )
            .unwrap();
    };
    {
        let store = Store::open(config, dir.path()).unwrap();
        // 4 namespaces and 21 ConfigMaps: snapshots at 10 and 20, rv 25.
        (0..21).for_each(|index| create(&store, index));
    }
    let store = Store::open(config, dir.path()).unwrap();
    assert_eq!(store.recovery().unwrap().snapshot, 10);
    // Four more (rv 29): no snapshot yet, though 19 changes follow the snapshot loaded.
    (21..25).for_each(|index| create(&store, index));
    let names: Vec<_> = files(dir.path(), "snapshot-")
        .iter()
        .map(|path| path.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "snapshot-00000000000000000010.snap",
            "snapshot-00000000000000000020.snap"
        ]
    );
    // The tenth change after the newest snapshot (rv 30) takes the next (written once the
    // store closes, at the latest).
    create(&store, 25);
    drop(store);
    assert!(
        dir.path()
            .join("snapshot-00000000000000000030.snap")
            .exists()
    );
}

#[cfg(unix)]
#[test]
fn the_directory_and_its_files_are_for_their_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let configmaps = kind("configmaps");
    let store = Store::open(small_history(), &dir).unwrap();
    // Enough changes for a snapshot beside the log.
    for index in 0..12 {
        store
            .create(
                &configmaps,
                "default",
                configmap(&format!("cm-{index}"), "secret"),
            )
            .unwrap();
    }
    // Closing the store waits for the snapshot, which is written off the lock.
    drop(store);
    let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let entries: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert!(
        entries
            .iter()
            .any(|path| path.to_string_lossy().contains("snapshot")),
        "{entries:?}"
    );
    for path in entries {
        assert_eq!(mode(&path), 0o600, "{path:?}");
    }
}

#[test]
fn a_write_the_log_refuses_is_never_seen_and_the_next_one_goes_through() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let (kept, later) = {
        let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
        let kept = store
            .create(&configmaps, "default", configmap("kept", "1"))
            .unwrap();
        let mut watch = store
            .watch(&configmaps, Some("default"), WatchStart::Current)
            .unwrap();
        let initial = watch
            .try_next()
            .unwrap()
            .expect("the existing object, first");
        assert_eq!(initial.object["metadata"]["name"], "kept");
        // The next append writes half its records and finds the disk full (ENOSPC).
        let disk_full = || {
            let mut state = store.state.lock();
            let data = state.data.as_mut().unwrap();
            data.fail_next_append(std::io::Error::from_raw_os_error(28));
        };
        disk_full();
        let refused = store
            .create(&configmaps, "default", configmap("refused", "1"))
            .unwrap_err();
        assert_eq!(refused.code(), 500, "{refused}");
        // An update refused the same way leaves the object as it was.
        let mut changed = (*kept).clone();
        changed["data"]["value"] = json!("2");
        disk_full();
        assert!(
            store
                .update(&configmaps, "default", "kept", changed.clone(), false)
                .is_err()
        );
        assert_eq!(store.get(&configmaps, "default", "kept").unwrap(), kept);
        assert!(matches!(
            store.get(&configmaps, "default", "refused"),
            Err(StoreError::NotFound { .. })
        ));
        let (listed, _) = store.list(&configmaps, Some("default"));
        assert!(
            listed
                .iter()
                .all(|object| object["metadata"]["name"] != "refused")
        );
        let seen = watch.try_next();
        assert!(
            matches!(seen, Ok(None)),
            "a watcher saw a refused write: {seen:?}"
        );

        // The disk has room again: writes go through, with the resourceVersion nobody saw.
        let later = store
            .create(&configmaps, "default", configmap("later", "1"))
            .unwrap();
        let event = watch.try_next().unwrap().expect("the next write is seen");
        assert_eq!(event.object["metadata"]["name"], "later");
        let version = |object: &serde_json::Value| {
            object["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        };
        assert_eq!(version(&later), version(&kept) + 1);
        (kept, later)
    };
    // After a restart: what was acknowledged, nothing refused, and a log with no torn tail.
    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    assert_eq!(store.recovery().unwrap().truncated, None);
    assert_eq!(store.get(&configmaps, "default", "kept").unwrap(), kept);
    assert_eq!(store.get(&configmaps, "default", "later").unwrap(), later);
    assert!(store.get(&configmaps, "default", "refused").is_err());
}

fn names(objects: &[std::sync::Arc<crate::storage::StoredObject>]) -> Vec<String> {
    objects
        .iter()
        .map(|object| object["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_pending_write_is_seen_by_no_reader_until_it_is_durable() {
    use crate::storage::durability::deferring;
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    let kept = store
        .create(&configmaps, "default", configmap("kept", "1"))
        .unwrap();
    let before = store.resource_version();
    let mut watch = store
        .watch(&configmaps, Some("default"), WatchStart::After(before))
        .unwrap();

    // The next sync waits: what is written meanwhile stays pending.
    let release = store.state.lock().data.as_mut().unwrap().hold_next_sync();
    let (created, created_durable) =
        deferring(|| store.create(&configmaps, "default", configmap("new", "1")));
    let created = created.unwrap();
    // Later writes build on pending ones: an update of the pending object, and a delete.
    let mut changed = (*created).clone();
    changed["data"]["value"] = json!("2");
    let (updated, updated_durable) =
        deferring(|| store.update(&configmaps, "default", "new", changed, false));
    let (updated, _) = updated.unwrap();
    let (deleted, deleted_durable) =
        deferring(|| store.delete(&configmaps, "default", "kept", None));
    assert!(matches!(deleted.unwrap(), Deleted::Gone(_)));
    assert_eq!(
        store.get_latest(&configmaps, "default", "new").unwrap(),
        updated
    );

    // Readers see the store as it was before them.
    assert_eq!(store.resource_version(), before);
    assert_eq!(store.get(&configmaps, "default", "kept").unwrap(), kept);
    assert!(matches!(
        store.get(&configmaps, "default", "new"),
        Err(StoreError::NotFound { .. })
    ));
    let (listed, version) = store.list(&configmaps, Some("default"));
    assert_eq!(
        (names(&listed), version),
        (vec!["kept".to_string()], before)
    );
    let page = store.list_page(&configmaps, None, None, 1, true, |_| true);
    assert_eq!(names(&page.items), ["kept"]);
    assert_eq!((page.more, page.resource_version), (false, before));
    let mut from_now = store
        .watch(&configmaps, Some("default"), WatchStart::Current)
        .unwrap();
    let initial = from_now.try_next().unwrap().expect("the visible object");
    assert_eq!(initial.object["metadata"]["name"], "kept");
    assert!(matches!(from_now.try_next(), Ok(None)));
    assert!(matches!(watch.try_next(), Ok(None)));
    assert!(matches!(
        store.watch(&configmaps, None, WatchStart::After(before + 1)),
        Err(StoreError::TooLargeResourceVersion { .. })
    ));

    release.send(()).unwrap();
    created_durable.wait().await.unwrap();
    updated_durable.wait().await.unwrap();
    deleted_durable.wait().await.unwrap();
    assert_eq!(store.resource_version(), before + 3);
    assert_eq!(store.get(&configmaps, "default", "new").unwrap(), updated);
    assert!(store.get(&configmaps, "default", "kept").is_err());
    let seen: Vec<(EventType, String)> = std::iter::from_fn(|| watch.try_next().unwrap())
        .map(|event| {
            let name = event.object["metadata"]["name"].as_str().unwrap();
            (event.event_type, name.to_string())
        })
        .collect();
    assert_eq!(
        seen,
        [
            (EventType::Added, "new".to_string()),
            (EventType::Modified, "new".to_string()),
            (EventType::Deleted, "kept".to_string())
        ]
    );
}

#[tokio::test]
async fn a_failed_sync_takes_back_every_pending_write_and_the_next_goes_through() {
    use crate::storage::durability::deferring;
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let later = {
        let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
        let before = store.resource_version();
        let mut watch = store
            .watch(&configmaps, None, WatchStart::After(before))
            .unwrap();
        let release = {
            let mut state = store.state.lock();
            let data = state.data.as_mut().unwrap();
            data.fail_next_sync(std::io::Error::from_raw_os_error(5)); // EIO
            data.hold_next_sync()
        };
        let (first, first_durable) =
            deferring(|| store.create(&configmaps, "default", configmap("first", "1")));
        let (second, second_durable) =
            deferring(|| store.create(&configmaps, "default", configmap("second", "1")));
        first.unwrap();
        second.unwrap();
        release.send(()).unwrap();
        for durable in [first_durable, second_durable] {
            let refused = durable.wait().await.unwrap_err();
            assert_eq!(refused.code(), 500, "{refused}");
        }
        for name in ["first", "second"] {
            assert!(store.get(&configmaps, "default", name).is_err());
            assert!(store.get_latest(&configmaps, "default", name).is_err());
        }
        assert!(matches!(watch.try_next(), Ok(None)));
        assert_eq!(store.resource_version(), before);

        // The next write goes through, with the first resourceVersion nobody saw.
        let later = store
            .create(&configmaps, "default", configmap("later", "1"))
            .unwrap();
        assert_eq!(
            later["metadata"]["resourceVersion"],
            (before + 1).to_string()
        );
        let event = watch.try_next().unwrap().expect("the next write is seen");
        assert_eq!(event.object["metadata"]["name"], "later");
        later
    };
    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    assert_eq!(store.recovery().unwrap().truncated, None);
    assert_eq!(store.get(&configmaps, "default", "later").unwrap(), later);
    assert!(store.get(&configmaps, "default", "first").is_err());
    assert!(store.get(&configmaps, "default", "second").is_err());
}

#[test]
fn writers_on_several_threads_all_land_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let config = small_history();
    let written: Vec<u64> = {
        let store = Store::open(config, dir.path()).unwrap();
        let mut versions: Vec<u64> = std::thread::scope(|scope| {
            let writers: Vec<_> = (0..8)
                .map(|writer| {
                    let (store, configmaps) = (&store, &configmaps);
                    scope.spawn(move || {
                        (0..40)
                            .map(|index| {
                                let name = format!("cm-{writer}-{index}");
                                let created = store
                                    .create(configmaps, "default", configmap(&name, "1"))
                                    .unwrap();
                                created["metadata"]["resourceVersion"]
                                    .as_str()
                                    .unwrap()
                                    .parse::<u64>()
                                    .unwrap()
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            writers
                .into_iter()
                .flat_map(|writer| writer.join().unwrap())
                .collect()
        });
        versions.sort_unstable();
        versions.dedup();
        assert_eq!(
            versions.len(),
            320,
            "every create has its own resourceVersion"
        );
        assert_eq!(store.resource_version(), 4 + 320);
        versions
    };
    let store = Store::open(config, dir.path()).unwrap();
    let (listed, version) = store.list(&configmaps, Some("default"));
    assert_eq!(listed.len(), 320);
    assert_eq!(version, 4 + 320);
    let mut stored: Vec<u64> = listed
        .iter()
        .map(|object| {
            object["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    stored.sort_unstable();
    assert_eq!(stored, written);
}

#[test]
fn under_disk_faults_no_refused_write_is_seen_and_no_resource_version_is_issued_twice() {
    use std::collections::{BTreeMap, HashMap};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let configmaps = kind("configmaps");
    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    let mut watch = store
        .watch(
            &configmaps,
            None,
            WatchStart::After(store.resource_version()),
        )
        .unwrap();
    let stop = AtomicBool::new(false);
    let faults = AtomicU64::new(0);
    // Per writer: every acknowledged write (resourceVersion → the object's value, or None for
    // a delete), and how many were refused.
    let writers: Vec<(BTreeMap<u64, Option<String>>, u64)> = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_micros(300 + round % 7 * 200));
                round += 1;
                let mut state = store.state.lock();
                let Some(data) = state.data.as_mut() else {
                    break;
                };
                if round.is_multiple_of(2) {
                    data.fail_next_append(std::io::Error::from_raw_os_error(28)); // ENOSPC
                } else {
                    data.fail_next_sync(std::io::Error::from_raw_os_error(5)); // EIO
                }
                faults.fetch_add(1, Ordering::Relaxed);
            }
        });
        let handles: Vec<_> = (0..4)
            .map(|writer| {
                let (store, configmaps) = (&store, &configmaps);
                scope.spawn(move || {
                    let name = format!("cm-{writer}");
                    let mut acknowledged = BTreeMap::new();
                    let mut refused = 0;
                    let mut exists = false;
                    for round in 0..300u32 {
                        let value = format!("{writer}-{round}");
                        let written = if !exists {
                            store
                                .create(configmaps, "default", configmap(&name, &value))
                                .map(|object| (object, Some(value)))
                        } else if round.is_multiple_of(3) {
                            store
                                .delete(configmaps, "default", &name, None)
                                .map(|deleted| match deleted {
                                    Deleted::Gone(object) | Deleted::Finalizing(object) => {
                                        (object, None)
                                    }
                                })
                        } else {
                            store
                                .update(
                                    configmaps,
                                    "default",
                                    &name,
                                    configmap(&name, &value),
                                    false,
                                )
                                .map(|(object, _)| (object, Some(value)))
                        };
                        match written {
                            Ok((object, value)) => {
                                let version = object["metadata"]["resourceVersion"]
                                    .as_str()
                                    .unwrap()
                                    .parse::<u64>()
                                    .unwrap();
                                exists = value.is_some();
                                acknowledged.insert(version, value);
                            }
                            Err(StoreError::Storage(_)) => refused += 1,
                            Err(other) => panic!("unexpected refusal: {other}"),
                        }
                    }
                    (acknowledged, refused)
                })
            })
            .collect();
        let results = handles.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        results
    });
    let acknowledged: HashMap<u64, Option<String>> = writers
        .iter()
        .flat_map(|(acknowledged, _)| acknowledged.clone())
        .collect();
    let acknowledged_count: usize = writers.iter().map(|(a, _)| a.len()).sum();
    let refused: u64 = writers.iter().map(|(_, refused)| refused).sum();
    assert_eq!(
        acknowledged.len(),
        acknowledged_count,
        "a resourceVersion was issued to two acknowledged writes"
    );
    assert!(refused > 0, "no write was refused: the faults did not bite");

    // The watcher saw exactly the acknowledged writes, each once, in order.
    let mut seen = Vec::new();
    while let Some(event) = watch.try_next().unwrap() {
        let value = match event.event_type {
            EventType::Deleted => None,
            _ => event.object["data"]["value"].as_str().map(str::to_string),
        };
        seen.push((event.resource_version, value));
    }
    let refused_seen = seen
        .iter()
        .filter(|(version, value)| acknowledged.get(version) != Some(value))
        .count();
    assert_eq!(
        refused_seen, 0,
        "writes that were refused were seen: {seen:?}"
    );
    assert!(seen.windows(2).all(|pair| pair[0].0 < pair[1].0));
    assert_eq!(seen.len(), acknowledged.len());

    // After a restart: each object as its last acknowledged write left it.
    drop(watch);
    drop(store);
    let store = Store::open(StoreConfig::default(), dir.path()).unwrap();
    for (writer, (writes, _)) in writers.iter().enumerate() {
        let last = writes.values().next_back().cloned().flatten();
        let found = store
            .get(&configmaps, "default", &format!("cm-{writer}"))
            .ok()
            .and_then(|object| object["data"]["value"].as_str().map(str::to_string));
        assert_eq!(found, last, "writer {writer}");
    }
    println!(
        "{} faults, {} acknowledged writes, {refused} refused, 0 refused seen, 0 resourceVersions issued twice",
        faults.load(Ordering::Relaxed),
        acknowledged.len()
    );
}
