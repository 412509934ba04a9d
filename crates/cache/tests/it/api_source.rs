//! The kube-client source (`Api<K>` as a `ListerWatcher`) against the embedded API server: a
//! paginated list whose next page is requested while the current one decodes comes out whole
//! and in order; a continuation that expires mid-list ends the pages with 410; the objects are
//! the ones serde_json decodes; a watch delivers a burst in order; a `Deserialize` that panics
//! fails its page or its watch with an error and leaves nothing broken behind.

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use ctrlkit_cache::ListerWatcher;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, ObjectMeta, PostParams, WatchEvent, WatchParams};
use kube::{Client, Config};

const NAMESPACE: &str = "pages";

async fn server_with(objects: usize) -> (ApiServer, Api<ConfigMap>) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let api = Api::<ConfigMap>::namespaced(client, NAMESPACE);
    // The namespace holds only the test's objects: without the CA ConfigMap every namespace of
    // a cluster has.
    api.delete("kube-root-ca.crt", &Default::default())
        .await
        .unwrap();
    for i in 0..objects {
        create(&api, i).await;
    }
    (server, api)
}

async fn create(api: &Api<ConfigMap>, i: usize) {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("cm-{i:05}")),
            labels: Some([("i".to_owned(), i.to_string())].into()),
            ..Default::default()
        },
        data: Some([("line".to_owned(), format!("value \"{i}\"\nnext"))].into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &cm).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefetched_paginated_list_comes_out_whole_and_in_order() {
    let (server, api) = server_with(1_234).await;
    let pages: Vec<_> = ListerWatcher::list_pages(&api, ListParams::default().limit(100))
        .collect()
        .await;
    assert_eq!(pages.len(), 13);
    let pages: Vec<_> = pages.into_iter().map(Result::unwrap).collect();
    let names: Vec<String> = pages
        .iter()
        .flat_map(|page| page.items.iter())
        .map(|cm| cm.metadata.name.clone().unwrap())
        .collect();
    let expected: Vec<String> = (0..1_234).map(|i| format!("cm-{i:05}")).collect();
    assert_eq!(names, expected);
    // Every page is of the same list: one version, continue tokens on all but the last.
    let version = pages[0].metadata.resource_version.clone();
    assert!(pages.iter().all(|p| p.metadata.resource_version == version));
    assert!(pages[..12].iter().all(|p| p.metadata.continue_.is_some()));
    assert!(
        pages[12]
            .metadata
            .continue_
            .as_deref()
            .is_none_or(str::is_empty)
    );
    // The objects are those kube-client's own decoding gives.
    let theirs = api.list(&ListParams::default()).await.unwrap();
    let ours: Vec<std::sync::Arc<ConfigMap>> =
        pages.into_iter().flat_map(|page| page.items).collect();
    assert!(ours.iter().map(|cm| &**cm).eq(theirs.items.iter()));
    // Each in an `Arc` of its own, for the store to keep as it is.
    assert!(ours.iter().all(|cm| std::sync::Arc::strong_count(cm) == 1));
    // The same list in one page: a body of several hundred kilobytes, read into a mapping.
    let whole = ListerWatcher::list(&api, &ListParams::default())
        .await
        .unwrap();
    assert_eq!(whole.items, theirs.items);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_continuation_ends_the_pages_with_410() {
    let (server, api) = server_with(600).await;
    let mut pages = ListerWatcher::list_pages(&api, ListParams::default().limit(100));
    let first = pages.next().await.unwrap().unwrap();
    assert_eq!(first.items.len(), 100);
    // Move on and compact the history past the list's version: its continue tokens expire.
    for i in 600..610 {
        create(&api, i).await;
    }
    let store = server.store();
    store.compact(store.resource_version());
    let mut ok_pages = 1;
    let error = loop {
        match pages.next().await {
            Some(Ok(_)) => ok_pages += 1,
            Some(Err(err)) => break err,
            None => panic!("the list finished although its version was compacted"),
        }
    };
    // The pages requested before the compaction may have come (the source reads one page
    // ahead of the one it hands on, and requests the next); the ones after cannot.
    assert!(ok_pages <= 3, "{ok_pages} pages");
    match error {
        kube::Error::Api(status) => assert_eq!(status.code, 410, "{status:?}"),
        other => panic!("{other:?}"),
    }
    assert!(pages.next().await.is_none(), "the pages end with the error");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_burst_arrives_in_order() {
    let (server, api) = server_with(1).await;
    let list = api.list(&ListParams::default()).await.unwrap();
    let version = list.metadata.resource_version.unwrap();
    // The burst is written before the watch starts, so it is replayed in one go.
    for i in 1..500 {
        create(&api, i).await;
    }
    let mut events = ListerWatcher::watch(&api, &WatchParams::default(), &version)
        .await
        .unwrap();
    for i in 1..500 {
        match events.next().await.unwrap().unwrap() {
            WatchEvent::Added(cm) => {
                assert_eq!(cm.metadata.name, Some(format!("cm-{i:05}")));
                assert_eq!(cm.data.unwrap()["line"], format!("value \"{i}\"\nnext"));
            }
            other => panic!("{other:?}"),
        }
    }
    server.shutdown().await;
}

/// A ConfigMap whose `Deserialize` panics on the one named `cm-00042`, as a user's type with a
/// faulty hand-written impl could.
#[derive(Clone, Debug)]
struct Fragile(ConfigMap);

impl<'de> serde::Deserialize<'de> for Fragile {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let cm = ConfigMap::deserialize(deserializer)?;
        assert_ne!(
            cm.metadata.name.as_deref(),
            Some("cm-00042"),
            "a faulty Deserialize"
        );
        Ok(Self(cm))
    }
}

impl kube::Resource for Fragile {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::kind(dt)
    }
    fn group(dt: &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::group(dt)
    }
    fn version(dt: &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::version(dt)
    }
    fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_deserialize_fails_its_page_or_watch_and_decoding_goes_on() {
    let (server, api) = server_with(1).await;
    let version = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    for i in 1..200 {
        create(&api, i).await;
    }
    let fragile: Api<Fragile> = Api::namespaced(api.clone().into_client(), NAMESPACE);
    // Pages of 100 are decoded in shares, one by the reading task: the first page holds
    // cm-00042.
    let pages: Vec<_> = ListerWatcher::list_pages(&fragile, ListParams::default().limit(100))
        .collect()
        .await;
    let error = pages
        .iter()
        .find_map(|page| page.as_ref().err())
        .expect("the page with cm-00042 fails");
    assert!(
        error.to_string().contains("panicked"),
        "the error says what happened: {error}"
    );
    // The failed page ends the list: the page read ahead of it is not handed on.
    let outcomes: Vec<bool> = pages.iter().map(Result::is_ok).collect();
    assert_eq!(outcomes, [false], "pages handed on (ok or not)");
    // The watch replays the 199 creates in a burst. It hands on the events before cm-00042's in
    // order, then an error (the reflector resumes from the last event handed on).
    let mut events = ListerWatcher::watch(&fragile, &WatchParams::default(), &version)
        .await
        .unwrap();
    let mut next = 1;
    let error = loop {
        match events.next().await.expect("the watch ends with an error") {
            Ok(WatchEvent::Added(cm)) => {
                assert_eq!(cm.0.metadata.name, Some(format!("cm-{next:05}")));
                next += 1;
            }
            Ok(other) => panic!("{other:?}"),
            Err(err) => break err,
        }
    };
    assert_eq!(
        next, 42,
        "every event before cm-00042 was handed on, and not it"
    );
    assert!(error.to_string().contains("panicked"), "{error}");
    // The panics left nothing behind: a list of the same objects decodes whole.
    let pages: Vec<_> = ListerWatcher::list_pages(&api, ListParams::default().limit(100))
        .collect()
        .await;
    let names: usize = pages
        .iter()
        .map(|page| page.as_ref().unwrap().items.len())
        .sum();
    assert_eq!(names, 200);
    server.shutdown().await;
}
