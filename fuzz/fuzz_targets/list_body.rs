//! A list response body, decoded as ctrlkit's kube-client source decodes a list page
//! (`decode_list`: the items found by a scan of strings and brackets, the rest of the envelope
//! parsed with serde_json, each item decoded with simd-json), and
//! stored the ways ctrlkit stores a list: all at once (`Indexer::replace`), page by page as the
//! reflector relists (`ReflectorStore::replace_page` / `replace_finish`, into an `Indexer` and a
//! `DeltaFifo` that knows the indexer), and key by key into a `ThreadSafeStore`, all with the
//! namespace index.
//!
//! Checked: nothing panics; where serde_json (kube-client's own decoder) also decodes the body,
//! both decode the same items; `replace` stores exactly the distinct keys of the list (or fails and
//! leaves the store alone when an item has no key); a paged relist ends with exactly the listed
//! keys; the namespace index answers for every stored namespace.
#![no_main]

use std::collections::BTreeSet;
use std::sync::Arc;

use ctrlkit_cache::{
    DeltaFifo, DeltaFifoOptions, Indexer, ListedKeys, NAMESPACE_INDEX, ReflectorStore,
    ThreadSafeStore, decode_list, meta_namespace_index_func, meta_namespace_key, namespace_indexers,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::ObjectList;
use libfuzzer_sys::fuzz_target;

fn check_index(indexer: &Indexer<ConfigMap>) {
    for obj in indexer.list() {
        for namespace in meta_namespace_index_func(&*obj) {
            let objects = indexer
                .by_index(NAMESPACE_INDEX, &namespace)
                .expect("the namespace index exists");
            assert!(objects.iter().any(|other| Arc::ptr_eq(other, &obj)));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let ours = decode_list::<ConfigMap>(data);
    if let (Ok(ours), Ok(theirs)) = (&ours, serde_json::from_slice::<ObjectList<ConfigMap>>(data)) {
        assert_eq!(ours.items, theirs.items);
        assert_eq!(ours.metadata, theirs.metadata);
    }
    let Ok(list) = ours else {
        return;
    };
    let _ = list
        .metadata
        .resource_version
        .as_deref()
        .map(str::parse::<u64>);
    let items: Vec<Arc<ConfigMap>> = list.items.into_iter().map(Arc::new).collect();
    let keys: Result<BTreeSet<String>, _> =
        items.iter().map(|obj| meta_namespace_key(&**obj)).collect();

    // All at once.
    let indexer = Indexer::new(namespace_indexers::<ConfigMap>());
    let seeded = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("already-there".into()),
            namespace: Some("seed".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    indexer.add(seeded).expect("a named object has a key");
    let replaced = indexer.replace(items.iter().cloned());
    match &keys {
        Ok(keys) => {
            assert!(replaced.is_ok());
            let stored: BTreeSet<String> = indexer.list_keys().into_iter().collect();
            assert_eq!(&stored, keys);
        }
        Err(_) => {
            assert!(replaced.is_err());
            assert_eq!(indexer.list_keys(), vec!["seed/already-there".to_owned()]);
        }
    }
    check_index(&indexer);

    // Page by page, as a reflector relists, into a plain indexer and into an informer's FIFO.
    let paged = Indexer::new(namespace_indexers::<ConfigMap>());
    let fifo = DeltaFifo::new(DeltaFifoOptions::<ConfigMap> {
        known_objects: Some(Arc::new(indexer.clone())),
        emit_delta_type_replaced: true,
        ..Default::default()
    });
    let mut listed = ListedKeys::new();
    let mut fifo_listed = ListedKeys::new();
    for page in items.chunks(3) {
        let _ = ReflectorStore::replace_page(&paged, page.to_vec(), &mut listed);
        let _ = ReflectorStore::replace_page(&fifo, page.to_vec(), &mut fifo_listed);
    }
    let keyed: BTreeSet<String> = items
        .iter()
        .filter_map(|obj| meta_namespace_key(&**obj).ok())
        .collect();
    assert_eq!(listed.len(), keyed.len());
    ReflectorStore::replace_finish(&paged, listed, "");
    ReflectorStore::replace_finish(&fifo, fifo_listed, "");
    let stored: BTreeSet<String> = paged.list_keys().into_iter().collect();
    assert_eq!(stored, keyed);
    check_index(&paged);
    let _ = fifo.list_keys();

    // Key by key into the store underneath, then every namespace's objects by index.
    let store = ThreadSafeStore::new(namespace_indexers::<ConfigMap>());
    for obj in &items {
        if let Ok(key) = meta_namespace_key(&**obj) {
            store.add(key, Arc::clone(obj));
        }
    }
    for namespace in store.list_index_func_values(NAMESPACE_INDEX) {
        let found = store.by_index(NAMESPACE_INDEX, &namespace);
        assert!(found.is_ok_and(|found| !found.is_empty()));
    }
    for obj in &items {
        let _ = store.index(NAMESPACE_INDEX, obj);
    }
    assert_eq!(store.len(), keyed.len());
});
