//! The informer against the embedded API server, under churn and disruption: 2,000 objects
//! created, updated and deleted while watches are cut and history compacted.
//!
//! The server is called in process on a paused clock: the reflector's backoffs, the held watch
//! and the waits below take virtual time, and a disruption is timed by the writes answered, not
//! by the machine's speed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctrlkit_apiserver::faults::Fault;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use std::sync::atomic::{AtomicUsize, Ordering};

use ctrlkit_cache::{
    Backoff, ListerWatcher, ObjectOrTombstone, ReflectorError, ReflectorOptions,
    ResourceEventHandler, SharedIndexInformer, WatchStream, meta_namespace_key,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, ObjectList, ObjectMeta, PostParams, WatchParams};
use tokio_util::sync::CancellationToken;

const OBJECTS: usize = 2_000;
const NAMESPACE: &str = "churn";

async fn server() -> (ApiServer, Client) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::new(server.service(), "default");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    // The namespace holds only the test's objects: without the CA ConfigMap every namespace of
    // a cluster has.
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .delete("kube-root-ca.crt", &Default::default())
        .await
        .unwrap();
    (server, client)
}

fn configmap(name: &str, generation: u32) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "generation".into(),
            generation.to_string(),
        )])),
        ..Default::default()
    }
}

fn rv(cm: &ConfigMap) -> u64 {
    cm.metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

/// Counts the requests an informer makes through an `Api`.
#[derive(Clone)]
struct Counting {
    api: Api<ConfigMap>,
    lists: Arc<AtomicUsize>,
    watches: Arc<AtomicUsize>,
    /// Watches the server answered since the last list began.
    opened_since_list: Arc<AtomicUsize>,
}

impl ListerWatcher<ConfigMap> for Counting {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<ConfigMap>, kube::Error> {
        if params.continue_token.is_none() {
            self.opened_since_list.store(0, Ordering::SeqCst);
            self.lists.fetch_add(1, Ordering::SeqCst);
        }
        self.api.list(params).await
    }
    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<ConfigMap>, kube::Error> {
        self.watches.fetch_add(1, Ordering::SeqCst);
        let stream = ListerWatcher::watch(&self.api, params, resource_version).await;
        if stream.is_ok() {
            self.opened_since_list.fetch_add(1, Ordering::SeqCst);
        }
        stream
    }
}

/// What one handler saw, per key.
#[derive(Default)]
struct Seen {
    /// key -> (resourceVersion of the last state seen, deleted since?)
    last: HashMap<String, (u64, bool)>,
    /// Keys whose resourceVersion went down between two notifications.
    regressions: Vec<String>,
    tombstones: usize,
    deletes: usize,
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Seen>>);

impl Recorder {
    fn observe(&self, cm: &ConfigMap, deleted: bool) {
        let key = meta_namespace_key(cm).unwrap();
        let version = rv(cm);
        let mut seen = self.0.lock().unwrap();
        if let Some(&(previous, _)) = seen.last.get(&key)
            && version < previous
        {
            seen.regressions
                .push(format!("{key}: {previous} -> {version}"));
        }
        seen.last.insert(key, (version, deleted));
    }
}

impl ResourceEventHandler<ConfigMap> for Recorder {
    fn on_add(&self, obj: &Arc<ConfigMap>, _: bool) {
        self.observe(obj, false);
    }
    fn on_update(&self, _old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        self.observe(new, false);
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<ConfigMap>) {
        match obj {
            ObjectOrTombstone::Object(cm) => {
                self.0.lock().unwrap().deletes += 1;
                self.observe(cm, true);
            }
            ObjectOrTombstone::Tombstone(tombstone) => {
                let mut seen = self.0.lock().unwrap();
                seen.tombstones += 1;
                let entry = seen.last.entry(tombstone.key.clone()).or_insert((0, true));
                entry.1 = true;
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn cache_converges_under_churn_cut_watches_and_compaction() {
    converges_under_churn(false).await;
}

/// The same, with client-go's RealFIFO between the reflector and the handlers.
#[tokio::test(start_paused = true)]
async fn cache_converges_under_churn_through_a_real_fifo() {
    converges_under_churn(true).await;
}

async fn converges_under_churn(real_fifo: bool) {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);

    let options = ReflectorOptions {
        name: "configmaps".into(),
        backoff: Backoff::new(
            Duration::from_millis(20),
            Duration::from_millis(200),
            2.0,
            0.5,
            Duration::from_secs(120),
        ),
        ..Default::default()
    };
    let counting = Counting {
        api: api.clone(),
        lists: Arc::default(),
        watches: Arc::default(),
        opened_since_list: Arc::default(),
    };
    let informer = SharedIndexInformer::with_options(
        counting.clone(),
        Duration::ZERO,
        Default::default(),
        options,
    );
    informer.set_real_fifo(real_fifo).unwrap();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    informer
        .set_watch_error_handler({
            let errors = Arc::clone(&errors);
            Arc::new(move |err: &ReflectorError| errors.lock().unwrap().push(err.to_string()))
        })
        .unwrap();
    let early = Recorder::default();
    let early_registration = informer.add_event_handler(early.clone()).unwrap();

    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });
    assert!(
        tokio::time::timeout(Duration::from_secs(10), informer.wait_for_sync(&cancel))
            .await
            .unwrap()
    );
    assert!(early_registration.has_synced());

    // Churn: create everything, update everything twice, delete every third; disrupt meanwhile.
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("cm-{i:05}")).collect();
    let late = Recorder::default();
    let mut late_registration = None;
    for (phase, generation) in [(0, 0u32), (1, 1), (2, 2), (3, 3)] {
        // The disruption starts once a third of the phase's writes are answered.
        let answered = AtomicUsize::new(0);
        let a_third_answered = tokio::sync::Notify::new();
        let writes = futures::stream::iter(names.iter().enumerate())
            .map(|(i, name)| {
                let api = api.clone();
                let (answered, a_third_answered) = (&answered, &a_third_answered);
                async move {
                    match phase {
                        0 => {
                            api.create(&PostParams::default(), &configmap(name, generation))
                                .await
                                .unwrap();
                        }
                        1 | 2 => {
                            let mut cm = api.get(name).await.unwrap();
                            cm.data = configmap(name, generation).data;
                            api.replace(name, &PostParams::default(), &cm)
                                .await
                                .unwrap();
                        }
                        _ => {
                            if i % 3 == 0 {
                                api.delete(name, &DeleteParams::default()).await.unwrap();
                            }
                        }
                    }
                    if answered.fetch_add(1, Ordering::SeqCst) + 1 == OBJECTS / 3 {
                        a_third_answered.notify_one();
                    }
                }
            })
            .buffer_unordered(16);
        // Waits until the informer has listed `lists` times and opened a watch since.
        let watching_after = |lists: usize| {
            let counting = counting.clone();
            async move {
                let wait = async {
                    while counting.lists.load(Ordering::SeqCst) < lists
                        || counting.opened_since_list.load(Ordering::SeqCst) == 0
                    {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                };
                // A bound for a hung informer (in virtual time; the reflector backs off up to
                // 200 ms between attempts here).
                tokio::time::timeout(Duration::from_secs(90), wait)
                    .await
                    .expect("the informer watches again");
            }
        };
        let disrupt = async {
            a_third_answered.notified().await;
            // The last phase's recovery may still be under way: the cut must find a watch open.
            let lists = counting.lists.load(Ordering::SeqCst);
            watching_after(lists).await;
            server.faults().cut_watches();
            // Hold the next watch back while writes go on and history is compacted past it:
            // the resume is at a compacted version, so the reflector must relist.
            server.faults().fail_next(
                1,
                Some("watch"),
                Some("configmaps"),
                Fault::Delay(Duration::from_millis(150)),
            );
            server.faults().cut_watches();
            // A write elsewhere moves the store's version past the held watch's, so that
            // compaction leaves it behind even when this phase's writes are all done.
            let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
            let mut marker = configmap(&format!("marker-{phase}"), generation);
            marker.metadata.namespace = Some("default".into());
            elsewhere
                .create(&PostParams::default(), &marker)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(75)).await;
            server.store().compact(server.store().resource_version());
            // The held watch resumes at a compacted version (410): a relist, then a watch.
            watching_after(lists + 1).await;
        };
        let (_, ()) = tokio::join!(writes.collect::<Vec<()>>(), disrupt);
        if phase == 1 {
            late_registration = Some(informer.add_event_handler(late.clone()).unwrap());
        }
    }

    // The truth, from a fresh list.
    let truth: HashMap<String, u64> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|cm| (meta_namespace_key(cm).unwrap(), rv(cm)))
        .collect();
    assert_eq!(truth.len(), OBJECTS - OBJECTS.div_ceil(3));

    let cache_matches = || {
        let cache: HashMap<String, u64> = informer
            .get_indexer()
            .list()
            .iter()
            .map(|cm| (meta_namespace_key(&**cm).unwrap(), rv(cm)))
            .collect();
        cache == truth
    };
    let handler_matches = |recorder: &Recorder| {
        let seen = recorder.0.lock().unwrap();
        truth
            .iter()
            .all(|(key, version)| seen.last.get(key) == Some(&(*version, false)))
            && seen
                .last
                .iter()
                .filter(|(key, _)| !truth.contains_key(*key))
                .all(|(_, (_, deleted))| *deleted)
    };
    let converged = async {
        while !(cache_matches() && handler_matches(&early) && handler_matches(&late)) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(30), converged)
        .await
        .is_err()
    {
        panic!(
            "no convergence: cache {} / truth {} objects; errors: {:?}",
            informer.get_indexer().len(),
            truth.len(),
            errors.lock().unwrap()
        );
    }

    for recorder in [&early, &late] {
        let seen = recorder.0.lock().unwrap();
        assert!(
            seen.regressions.is_empty(),
            "resourceVersions went down: {:?}",
            seen.regressions
        );
        // Every deleted key was seen deleted, by a delete event or a tombstone.
        let deleted = seen.last.values().filter(|(_, deleted)| *deleted).count();
        assert_eq!(deleted, OBJECTS.div_ceil(3));
        assert!(seen.deletes + seen.tombstones >= deleted);
    }
    assert!(late_registration.unwrap().has_synced());
    // Every cut was resumed with a new watch, and compaction forced relists (410 on resume).
    let (lists, watches) = (
        counting.lists.load(Ordering::SeqCst),
        counting.watches.load(Ordering::SeqCst),
    );
    assert!(lists >= 2, "no relist after compaction: {lists} lists");
    assert!(
        watches >= 8,
        "cut watches were not resumed: {watches} watches"
    );
    eprintln!(
        "{lists} lists, {watches} watches, errors reported: {:?}",
        errors.lock().unwrap()
    );
    assert!(
        informer
            .last_sync_resource_version()
            .parse::<u64>()
            .unwrap()
            >= truth.values().copied().max().unwrap()
    );

    cancel.cancel();
    run.await.unwrap().unwrap();
    assert!(informer.is_stopped());
}
