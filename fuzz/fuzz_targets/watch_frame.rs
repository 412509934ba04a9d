//! A watch stream, one JSON event per line, decoded as ctrlkit's kube-client source decodes it
//! (`decode_watch_event`: simd-json, the reflector's decoder for `Api<K>`) and applied the way
//! ctrlkit's reflector applies events: to an `Indexer` with the namespace index (the plain store
//! of a reflector without handlers) and to a `DeltaFifo` (an informer's queue), after going
//! through the key functions.
//!
//! Checked: nothing panics; where serde_json (kube-client's own decoder) also decodes a line, both
//! decode the same event; an object that has a key is stored under it and found in the namespace
//! index under its namespace; a key made by `meta_namespace_key` splits back into the object's
//! namespace and name.
#![no_main]

use std::sync::Arc;

use ctrlkit_cache::{
    DeltaFifo, DeltaFifoOptions, Indexer, NAMESPACE_INDEX, ObjectOrTombstone,
    decode_watch_event, deletion_handling_meta_namespace_key, drop_managed_fields, meta_namespace_key,
    namespace_indexers, split_meta_namespace_key,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::WatchEvent;
use libfuzzer_sys::fuzz_target;

fn check_key(obj: &ConfigMap) -> Option<String> {
    let key = meta_namespace_key(obj).ok()?;
    let tombstone_key =
        deletion_handling_meta_namespace_key(&ObjectOrTombstone::Object(Arc::new(obj.clone())));
    assert_eq!(tombstone_key.as_deref(), Ok(key.as_str()));
    // A name or namespace with a '/' makes a key that does not split back (client-go's keys
    // are ambiguous the same way; the API server refuses such names).
    let meta = &obj.metadata;
    let plain = |part: &Option<String>| part.as_deref().is_none_or(|part| !part.contains('/'));
    if plain(&meta.name) && plain(&meta.namespace) {
        let (namespace, name) = split_meta_namespace_key(&key).expect("a key without '/' splits");
        assert_eq!(Some(name), meta.name.as_deref());
        let expected_namespace = meta.namespace.as_deref().filter(|ns| !ns.is_empty());
        assert_eq!(namespace, expected_namespace);
    }
    Some(key)
}

fuzz_target!(|data: &[u8]| {
    let indexer = Indexer::new(namespace_indexers::<ConfigMap>());
    let fifo = DeltaFifo::new(DeltaFifoOptions::<ConfigMap> {
        known_objects: Some(Arc::new(indexer.clone())),
        transformer: Some(Arc::new(drop_managed_fields)),
        ..Default::default()
    });
    for line in data.split(|&byte| byte == b'\n') {
        let ours = decode_watch_event::<ConfigMap>(line);
        if let (Ok(ours), Ok(theirs)) = (&ours, serde_json::from_slice::<WatchEvent<ConfigMap>>(line)) {
            assert_eq!(format!("{ours:?}"), format!("{theirs:?}"));
        }
        let Ok(event) = ours else {
            continue;
        };
        match event {
            WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                let key = check_key(&obj);
                let added = indexer.add(obj.clone());
                assert_eq!(added.is_ok(), key.is_some());
                let _ = fifo.update(obj);
                if let Some(key) = key {
                    let stored = indexer.get_by_key(&key);
                    assert!(stored.is_some(), "{key} was added but is not stored");
                    let namespace = stored
                        .as_ref()
                        .and_then(|obj| obj.metadata.namespace.clone())
                        .filter(|ns| !ns.is_empty());
                    if let Some(namespace) = namespace {
                        let keys = indexer.index_keys(NAMESPACE_INDEX, &namespace);
                        assert!(keys.is_ok_and(|keys| keys.contains(&key)));
                    }
                }
            }
            WatchEvent::Deleted(obj) => {
                let key = check_key(&obj);
                let deleted = indexer.delete(&obj);
                assert_eq!(deleted.is_ok(), key.is_some());
                let _ = fifo.delete(obj);
                if let Some(key) = key {
                    assert!(indexer.get_by_key(&key).is_none());
                }
            }
            WatchEvent::Bookmark(bookmark) => {
                let _ = bookmark.metadata.resource_version.parse::<u64>();
            }
            WatchEvent::Error(status) => {
                let _ = status.code;
            }
        }
    }
    // The namespace index is exact: every key it files under a namespace holds an object of that
    // namespace, and every stored object of a namespace is filed under it.
    for namespace in indexer.list_index_func_values(NAMESPACE_INDEX) {
        let objects = indexer
            .by_index(NAMESPACE_INDEX, &namespace)
            .expect("the namespace index exists");
        assert!(!objects.is_empty(), "empty index value {namespace:?} kept");
        for obj in objects {
            assert_eq!(obj.metadata.namespace.as_deref(), Some(namespace.as_str()));
        }
    }
    for obj in indexer.list() {
        if let Some(namespace) = obj
            .metadata
            .namespace
            .as_deref()
            .filter(|ns| !ns.is_empty())
        {
            let key = indexer.key_of(&obj).expect("a stored object has a key");
            let keys = indexer.index_keys(NAMESPACE_INDEX, namespace);
            assert!(keys.is_ok_and(|keys| keys.contains(&key)));
        }
    }
    fifo.resync();
    let _ = fifo.list_keys();
});
