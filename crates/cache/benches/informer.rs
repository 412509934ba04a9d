//! ctrlkit's informer beside kube-runtime's reflector, against one embedded API server.
//!
//! `cargo bench -p ctrlkit-cache --bench informer [-- --quick]`
//!
//! For 10,000 and 100,000 ConfigMaps and Pods (realistic bodies, managedFields included) the
//! parent process starts the embedded server and fills it, then runs each client in a child
//! process of its own: kube-runtime's `reflector(store, watcher(..))`, and ctrlkit's
//! `SharedIndexInformer` as is (its handler on the informer's task, as a controller's are), with
//! its handler behind a buffer and task of its own (client-go's way), with `drop_managed_fields`,
//! over a slim projection type (Pods), and metadata-only.
//!
//! A full run of a client reports its time to synced and the CPU it took, its live heap (a
//! counting allocator) and resident memory at their peak during the sync and once synced; then
//! the rate at which it hands a backlog of updates to its handler and its CPU per update (the
//! parent cuts and holds the watch, writes 20,000 updates into the store, and lets the resumed
//! watch replay them; five bursts, the median); then its CPU per event of a steady stream
//! (10,000 updates at 2,500 a second with the watch open; three streams, the median). Each
//! client has `--pairs N` full runs (3 by default), taken in turn across the clients; every
//! column is the median. The sync columns also count children that only sync, also in turn
//! (`--syncs N` in all: 7 at 10,000 objects, 3 at 100,000, at least the pairs).
//!
//! `--quick` runs 10,000 objects only; `--objects N` and `--kind pods|configmaps` pick one size
//! and kind; `--client NAME` (repeatable, a name of the table's client column) runs only those
//! clients; `--writers-during-sync` has two writers update objects (each at most 1,000 a second)
//! while each full run lists and syncs; `--batch-watch` has the server send the watch events
//! that are ready together (up to 64 KiB a chunk) instead of one per chunk, as kube-apiserver
//! does; `--sync-only` makes only the syncs and prints each client's median, fastest and
//! slowest, for comparing builds' sync times quickly.

// A benchmark harness: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cap::Cap;
use ctrlkit_apiserver::resource::builtin_resources;
use ctrlkit_apiserver::storage::StoreConfig;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use ctrlkit_cache::{
    Delivery, HandlerOptions, MetadataListerWatcher, ResourceEventHandlerFuncs,
    SharedIndexInformer, drop_managed_fields,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::ObjectMeta;
use kube::core::{NamespaceResourceScope, PartialObjectMeta};
use kube::runtime::{reflector, watcher};
use kube::{Api, Client, Config, Resource};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

// The live heap is counted by `cap` around the system allocator, for both clients alike. Its
// shared counter is updated by every allocation and free, which costs a client that allocates on
// several threads at once a little more CPU than one that allocates on one.
#[global_allocator]
static HEAP: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

/// The live heap at its peak and now, in bytes.
fn heap_peak_and_now() -> (usize, usize) {
    (HEAP.max_allocated(), HEAP.allocated())
}

const NAMESPACE: &str = "bench";
/// Updates of the steady stream, written at [`STEADY_PER_SECOND`] while the client watches: the
/// CPU a client spends per event when events come one at a time, as they do in a cluster.
const STEADY_UPDATES: usize = 10_000;
const STEADY_PER_SECOND: usize = 2_500;
/// Full runs of each client, taken in turn across the clients, unless `--pairs` says otherwise;
/// the memory and watch columns are their medians.
const PAIRS: usize = 3;

/// What one full run of a client reported.
struct FullRun {
    /// Time to synced and its CPU time, in ms.
    sync: (f64, f64),
    heap_peak: f64,
    heap_synced: f64,
    rss_peak: f64,
    rss: f64,
    /// Updates per second of the replayed bursts (median).
    rate: f64,
    /// CPU per update of the replayed bursts, in µs (median).
    cpu_per_update: f64,
    /// CPU per event of the steady streams, in µs (median).
    steady_cpu_per_event: f64,
}

/// Steady streams each client watches; the table gives the median.
const STEADY_ROUNDS: usize = 3;
const CHILD_ENV: &str = "CTRLKIT_INFORMER_BENCH_CHILD";
/// Bursts of updates each client replays per full run; the table gives the median. A burst is
/// short, so one moment of a shared host moves it: five of them make a median that holds.
const ROUNDS: usize = 5;
/// Syncs each client makes unless `--syncs` says otherwise; the table gives the median time and
/// CPU. Those beyond the full runs' own are children that sync, report and exit, taken in turn
/// across the clients so that each client sees the host in each of its states. The smaller size
/// syncs in a fraction of a second, which one slow moment moves most, so it gets more.
fn sync_rounds(objects: usize) -> usize {
    if objects <= 10_000 { 7 } else { 3 }
}
/// Set in a child that only syncs and reports.
const SYNC_ONLY_ENV: &str = "CTRLKIT_INFORMER_BENCH_SYNC_ONLY";

/// The value after `flag` on the command line, parsed; `None` when absent or unparsable.
fn arg_value<T: std::str::FromStr>(args: &[String], flag: &str) -> Option<T> {
    let at = args.iter().position(|arg| arg == flag)?;
    args.get(at + 1)?.parse().ok()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    if let Ok(role) = std::env::var(CHILD_ENV) {
        child(&role);
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--quick");
    let batch_watch = args.iter().any(|arg| arg == "--batch-watch");
    let objects_arg: Option<usize> = arg_value(&args, "--objects");
    let sizes: Vec<usize> = match (objects_arg, quick) {
        (Some(n), _) => vec![n],
        (None, true) => vec![10_000],
        (None, false) => vec![10_000, 100_000],
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "{:<11} {:>7} {:<28} {:>9} {:>9} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>11} {:>10} {:>16}",
        "kind",
        "objects",
        "client",
        "sync ms",
        "sync CPU",
        "heap peak",
        "heap sync",
        "B/object",
        "peak/sync",
        "RSS peak",
        "RSS sync",
        "updates/s",
        "CPU/update",
        "steady CPU/event"
    );
    let kinds: Vec<String> = match arg_value(&args, "--kind") {
        Some(kind) => vec![kind],
        None => vec!["configmaps".to_owned(), "pods".to_owned()],
    };
    for kind in kinds.iter().map(String::as_str) {
        for &objects in &sizes {
            runtime.block_on(run_size(kind, objects, batch_watch));
        }
    }
}

async fn run_size(kind: &str, objects: usize, batch_watch: bool) {
    // History and watch buffers room enough for the whole backlog of updates.
    let mut config = ApiServerConfig {
        store: StoreConfig {
            history: 50_000,
            // What is measured here is not the history's bound: the newest 50,000 changes are
            // kept, and no more (kept by age, the bursts' changes would fill the memory).
            history_age: Duration::ZERO,
            history_bytes: usize::MAX,
            watch_buffer: 50_000,
            ..StoreConfig::default()
        },
        ..ApiServerConfig::default()
    };
    if batch_watch {
        config.rest.watch_batch_bytes = 64 << 10;
    }
    let server = ApiServer::start(config).await.expect("server");
    let resources = builtin_resources();
    let namespaces = resources
        .iter()
        .find(|r| r.plural == "namespaces")
        .expect("namespaces");
    let resource = resources
        .iter()
        .find(|r| r.plural == kind)
        .expect("resource");
    server
        .store()
        .create(namespaces, "", json!({"metadata": {"name": NAMESPACE}}))
        .expect("namespace");
    for i in 0..objects {
        let body = if kind == "pods" { pod(i) } else { configmap(i) };
        let created = server
            .store()
            .create(resource, NAMESPACE, body)
            .expect("create");
        // Serialized now, as a create over HTTP is for its response. Left to the first list,
        // the serializing would fall on the first client's sync only (the server keeps an
        // object's JSON once made), and every later client would list faster.
        let _ = created.json();
    }
    let stored = server
        .store()
        .get(resource, NAMESPACE, "obj-000000")
        .expect("stored");
    eprintln!(
        "{kind}: {} bytes of JSON per object as served",
        stored.json().len()
    );
    let mut clients = vec![
        "server replay (no client)",
        "kube-runtime",
        "ctrlkit",
        "ctrlkit buffered-handler",
        "ctrlkit drop-managed-fields",
    ];
    if kind == "pods" {
        clients.push("ctrlkit slim-projection");
    }
    clients.push("ctrlkit metadata-only");
    let args: Vec<String> = std::env::args().collect();
    let chosen: Vec<&str> = args
        .windows(2)
        .filter(|pair| pair[0] == "--client")
        .map(|pair| pair[1].as_str())
        .collect();
    if !chosen.is_empty() {
        clients.retain(|client| chosen.contains(client));
    }
    // 20,000 updates a burst whatever the size (every object twice at 10,000): shorter bursts
    // were too brief to time on a shared host.
    let updates = 20_000;
    let spawn = |client: &str, sync_only: bool| {
        let exe = std::env::current_exe().expect("exe");
        let mut command = Command::new(&exe);
        command
            .env(CHILD_ENV, client)
            .env("BENCH_URL", server.url())
            .env("BENCH_KIND", kind)
            .env("BENCH_OBJECTS", objects.to_string())
            .env("BENCH_UPDATES", updates.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if sync_only {
            command.env(SYNC_ONLY_ENV, "1");
        }
        command.spawn().expect("child")
    };
    let syncs_per_client = arg_value(&args, "--syncs")
        .unwrap_or_else(|| sync_rounds(objects))
        .max(1);
    let sync_only = args.iter().any(|arg| arg == "--sync-only");
    // The syncs before the full runs (all of them with `--sync-only`): (ms, CPU ms) per client.
    let mut syncs: std::collections::HashMap<&str, Vec<(f64, f64)>> = Default::default();
    let pairs = arg_value(&args, "--pairs").unwrap_or(PAIRS).max(1);
    // The full runs sync too: only the rest are syncs alone.
    let sync_only_rounds = if sync_only {
        syncs_per_client
    } else {
        syncs_per_client.saturating_sub(pairs)
    };
    for _ in 0..sync_only_rounds {
        for &client in clients.iter().filter(|c| !c.starts_with("server replay")) {
            let mut child = spawn(client, true);
            let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
            let synced = tokio::task::block_in_place(|| lines.next())
                .expect("synced line")
                .expect("read");
            let _ = child.wait();
            let fields: Vec<&str> = synced.split_whitespace().collect();
            syncs.entry(client).or_default().push((
                fields[1].parse().expect("ms"),
                fields[2].parse().expect("cpu"),
            ));
        }
    }
    if sync_only {
        for client in clients.iter().filter(|c| !c.starts_with("server replay")) {
            let mut times: Vec<f64> = syncs[client].iter().map(|sync| sync.0).collect();
            let mut cpu: Vec<f64> = syncs[client].iter().map(|sync| sync.1).collect();
            let (fastest, slowest) = times
                .iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
            println!(
                "{kind:<11} {objects:>7} {client:<28} {:>9.0} {:>9.0}   {} syncs, {fastest:.0}–{slowest:.0} ms",
                median(&mut times),
                median(&mut cpu),
                times.len(),
            );
        }
        server.shutdown().await;
        return;
    }
    let writers_during_sync = args.iter().any(|arg| arg == "--writers-during-sync");
    // Each client's full runs, taken in turn across the clients `pairs` times.
    let mut fulls: std::collections::HashMap<&str, Vec<FullRun>> = Default::default();
    for _ in 0..pairs {
        for &client in &clients {
            let mut child = spawn(client, false);
            let mut stdin = child.stdin.take().expect("stdin");
            let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
            // With `--writers-during-sync`, two writers update objects (each at most 1,000 a second)
            // from the child's start until it reports synced: the list runs while objects change.
            let writing = std::sync::atomic::AtomicBool::new(writers_during_sync);
            let synced = std::thread::scope(|scope| {
                let writing = &writing;
                let store = server.store();
                for writer in 0..if writers_during_sync { 2 } else { 0 } {
                    scope.spawn(move || {
                        let mut i = writer;
                        while writing.load(Ordering::Relaxed) {
                            let name = format!("obj-{:06}", i % objects);
                            relabel(store, resource, &name, "during-sync", i.to_string());
                            i += 2;
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    });
                }
                let synced = tokio::task::block_in_place(|| lines.next());
                writing.store(false, Ordering::Relaxed);
                synced
            })
            .expect("synced line")
            .expect("read");
            // The bursts: watches are cut and held while the updates go straight into the store,
            // then released, so the rate is the client's (and the server's replay), not the
            // writer's. The raw replay reads one burst; the clients `ROUNDS`, reported as medians.
            let store = server.store();
            let rounds = if client.starts_with("server replay") {
                1
            } else {
                ROUNDS
            };
            let mut rates = Vec::new();
            let mut cpu_per_update = Vec::new();
            for round in 0..rounds {
                server.faults().hold_watches();
                server.faults().cut_watches();
                for i in 0..updates {
                    let name = format!("obj-{:06}", i % objects);
                    let value = format!("{}-{round}-{}", client.len(), i / objects);
                    relabel(store, resource, &name, "round", value);
                }
                let burst = Instant::now();
                writeln!(stdin, "go").expect("go");
                server.faults().release_watches();
                let watch_cpu_ms = watched_cpu_ms(&mut lines);
                rates.push(updates as f64 / burst.elapsed().as_secs_f64());
                cpu_per_update.push(watch_cpu_ms * 1000.0 / updates as f64);
            }
            let rate = median(&mut rates);
            let cpu_per_update = median(&mut cpu_per_update);
            // The steady stream: updates written at a fixed pace with the watch open.
            let steady_cpu_per_event = if client.starts_with("server replay") {
                0.0
            } else {
                let mut per_event = Vec::new();
                for round in 0..STEADY_ROUNDS {
                    writeln!(stdin, "steady").expect("steady");
                    let batch = 25;
                    let pause = Duration::from_secs_f64(batch as f64 / STEADY_PER_SECOND as f64);
                    let started = Instant::now();
                    for i in 0..STEADY_UPDATES {
                        let name = format!("obj-{:06}", i % objects);
                        let value = format!("{}-{round}-{i}", client.len());
                        relabel(store, resource, &name, "steady", value);
                        if (i + 1) % batch == 0 {
                            let due = started + pause * ((i + 1) / batch) as u32;
                            tokio::time::sleep_until(due.into()).await;
                        }
                    }
                    per_event.push(watched_cpu_ms(&mut lines) * 1000.0 / STEADY_UPDATES as f64);
                }
                median(&mut per_event)
            };
            drop(stdin);
            let _ = child.wait();
            let fields: Vec<&str> = synced.split_whitespace().collect();
            let (sync_ms, heap_peak, heap_synced, rss_peak, rss, sync_cpu_ms): (
                f64,
                f64,
                f64,
                f64,
                f64,
                f64,
            ) = (
                fields[1].parse().expect("ms"),
                fields[2].parse().expect("peak"),
                fields[3].parse().expect("heap"),
                fields[4].parse().expect("rss peak"),
                fields[5].parse().expect("rss"),
                fields[6].parse().expect("cpu"),
            );
            fulls.entry(client).or_default().push(FullRun {
                sync: (sync_ms, sync_cpu_ms),
                heap_peak,
                heap_synced,
                rss_peak,
                rss,
                rate,
                cpu_per_update,
                steady_cpu_per_event,
            });
        }
    }
    for client in clients {
        let runs = fulls.remove(client).unwrap_or_default();
        let mut earlier = syncs.remove(client).unwrap_or_default();
        earlier.extend(runs.iter().map(|run| run.sync));
        let sync_ms = median(&mut earlier.iter().map(|sync| sync.0).collect::<Vec<_>>());
        let sync_cpu_ms = median(&mut earlier.iter().map(|sync| sync.1).collect::<Vec<_>>());
        let of =
            |field: fn(&FullRun) -> f64| median(&mut runs.iter().map(field).collect::<Vec<_>>());
        let (heap_peak, heap_synced) = (of(|run| run.heap_peak), of(|run| run.heap_synced));
        let heap = format!(
            "{:>9.1}M {:>9.1}M {:>9.0} {:>9.2}",
            heap_peak / 1048576.0,
            heap_synced / 1048576.0,
            heap_synced / objects as f64,
            of(|run| run.heap_peak / run.heap_synced),
        );
        println!(
            "{:<11} {:>7} {:<28} {:>9.0} {:>9.0} {heap} {:>8.1}M {:>8.1}M {:>11.0} {:>8.1}us {:>14.1}us",
            kind,
            objects,
            client,
            sync_ms,
            sync_cpu_ms,
            of(|run| run.rss_peak) / 1048576.0,
            of(|run| run.rss) / 1048576.0,
            of(|run| run.rate),
            of(|run| run.cpu_per_update),
            of(|run| run.steady_cpu_per_event),
        );
    }
    server.shutdown().await;
}

/// The CPU milliseconds of the child's next "watched <cpu ms>" line.
fn watched_cpu_ms(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> f64 {
    let watched = tokio::task::block_in_place(|| lines.next())
        .expect("watched line")
        .expect("read");
    watched
        .strip_prefix("watched ")
        .expect("watched")
        .parse()
        .expect("cpu")
}

/// Sets label `label` of object `name` to `value`, straight in the store, and serializes the
/// result now, as a write over HTTP is for its response: watches then send bytes, as a real API
/// server's watch cache does.
fn relabel(
    store: &ctrlkit_apiserver::storage::Store,
    resource: &ctrlkit_apiserver::resource::ResourceKind,
    name: &str,
    label: &str,
    value: String,
) {
    let mut current = (*store.get(resource, NAMESPACE, name).expect("get")).clone();
    current["metadata"]["labels"][label] = json!(value);
    if let Some(meta) = current.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    let (updated, _) = store
        .update(resource, NAMESPACE, name, current, false)
        .expect("update");
    let _ = updated.json();
}

fn managed_fields(manager: &str) -> Value {
    json!([{
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-11-01T10:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {}},
                "f:ownerReferences": {".": {}, "k:{\"uid\":\"5f0c2b1e-2a43-4a8e-9d36-0a4a2f1c9b11\"}": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:env": {".": {},
                "k:{\"name\":\"LOG_LEVEL\"}": {".": {}, "f:name": {}, "f:value": {}},
                "k:{\"name\":\"POD_NAME\"}": {".": {}, "f:name": {}, "f:valueFrom": {".": {}, "f:fieldRef": {}}}},
                "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:ports": {".": {},
                "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}},
                "f:resources": {".": {}, "f:limits": {".": {}, "f:cpu": {}, "f:memory": {}}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}},
                "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}, "f:volumeMounts": {".": {},
                "k:{\"mountPath\":\"/etc/config\"}": {".": {}, "f:mountPath": {}, "f:name": {}}}}},
                "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
                "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}, "f:volumes": {".": {},
                "k:{\"name\":\"config\"}": {".": {}, "f:configMap": {".": {}, "f:defaultMode": {}, "f:name": {}}, "f:name": {}}}}
        }
    }, {
        "manager": "kubelet",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-11-01T10:00:05Z",
        "fieldsType": "FieldsV1",
        "subresource": "status",
        "fieldsV1": {"f:status": {"f:conditions": {
            "k:{\"type\":\"ContainersReady\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
            "k:{\"type\":\"Initialized\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
            "k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}},
            "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {".": {}, "k:{\"ip\":\"10.244.1.17\"}": {".": {}, "f:ip": {}}}, "f:startTime": {}}}
    }])
}

fn pod(i: usize) -> Value {
    json!({
        "metadata": {
            "name": format!("obj-{i:06}"),
            "labels": {"app": "web", "tier": "frontend", "pod-template-hash": "7d4b9c8f6d"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-01T09:59:58Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f6d",
                "uid": "5f0c2b1e-2a43-4a8e-9d36-0a4a2f1c9b11", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": managed_fields("kube-controller-manager")
        },
        "spec": {
            "containers": [{
                "name": "app",
                "image": "registry.example.com/web/frontend:1.42.3",
                "imagePullPolicy": "IfNotPresent",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "LOG_LEVEL", "value": "info"},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/config"},
                                 {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"
            }],
            "volumes": [{"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
                        {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": format!("node-{}", i % 50),
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-01T10:00:00Z"},
                {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-01T10:00:05Z"},
                {"type": "ContainersReady", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-01T10:00:05Z"},
                {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-01T10:00:00Z"}],
            "hostIP": "10.0.3.21",
            "podIP": "10.244.1.17",
            "podIPs": [{"ip": "10.244.1.17"}],
            "startTime": "2026-11-01T10:00:00Z",
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "started": true,
                "state": {"running": {"startedAt": "2026-11-01T10:00:04Z"}},
                "image": "registry.example.com/web/frontend:1.42.3",
                "imageID": "registry.example.com/web/frontend@sha256:3f1d2c4b5a6978877665544332211aabbccddeeff00112233445566778899aa",
                "containerID": "containerd://9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"}],
            "qosClass": "Burstable"
        }
    })
}

fn configmap(i: usize) -> Value {
    let data: serde_json::Map<String, Value> = (0..8)
        .map(|k| (format!("setting-{k}.yaml"), json!(format!("# generated for {i}\nkey: value-{k}\nreplicas: {k}\nenabled: true\nendpoint: https://service-{k}.example.internal:8443/api/v1\n"))))
        .collect();
    json!({
        "metadata": {
            "name": format!("obj-{i:06}"),
            "labels": {"app": "web", "component": "settings"},
            "annotations": {"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": NAMESPACE},
            "managedFields": [{"manager": "helm", "operation": "Update", "apiVersion": "v1", "time": "2026-11-01T10:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:setting-0.yaml": {}, "f:setting-1.yaml": {}, "f:setting-2.yaml": {},
                "f:setting-3.yaml": {}, "f:setting-4.yaml": {}, "f:setting-5.yaml": {}, "f:setting-6.yaml": {}, "f:setting-7.yaml": {}},
                "f:metadata": {"f:annotations": {".": {}, "f:meta.helm.sh/release-name": {}, "f:meta.helm.sh/release-namespace": {}},
                "f:labels": {".": {}, "f:app": {}, "f:component": {}}}}}]
        },
        "data": data
    })
}

/// A Pod with only the fields a typical controller reads (the benchmark only caches them).
#[allow(dead_code)]
#[derive(Clone, Debug, Deserialize)]
struct SlimPod {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: SlimPodSpec,
    #[serde(default)]
    status: SlimPodStatus,
}

#[allow(dead_code)]
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimPodSpec {
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    containers: Vec<SlimContainer>,
}

#[allow(dead_code)]
#[derive(Clone, Debug, Default, Deserialize)]
struct SlimContainer {
    name: String,
    #[serde(default)]
    image: Option<String>,
}

#[allow(dead_code)]
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimPodStatus {
    #[serde(default)]
    phase: Option<String>,
    #[serde(default, rename = "podIP")]
    pod_ip: Option<String>,
}

impl Resource for SlimPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The CPU time this process has used so far (user and system, all threads, those that have
/// ended included), in milliseconds: the kernel's count, to the nanosecond.
fn cpu_ms() -> f64 {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    time.tv_sec as f64 * 1e3 + time.tv_nsec as f64 / 1e6
}

/// `"<peak> <current>"` resident bytes (VmHWM and VmRSS).
fn rss_bytes() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0.0, |kib| kib * 1024.0)
    };
    format!("{} {}", field("VmHWM:"), field("VmRSS:"))
}

fn child(role: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let url = std::env::var("BENCH_URL").expect("url");
        let kind = std::env::var("BENCH_KIND").expect("kind");
        let updates: usize = std::env::var("BENCH_UPDATES")
            .expect("updates")
            .parse()
            .expect("updates");
        let client = Client::try_from(Config::new(url.parse().expect("url"))).expect("client");
        if role.starts_with("server replay") {
            raw_watch(&url, &kind, updates).await;
            return;
        }
        let delivery = if role == "ctrlkit buffered-handler" {
            Delivery::Buffered
        } else {
            Delivery::Inline
        };
        match (role, kind.as_str()) {
            ("kube-runtime", "pods") => kube_runtime(Api::<Pod>::all(client), updates).await,
            ("kube-runtime", _) => kube_runtime(Api::<ConfigMap>::all(client), updates).await,
            ("ctrlkit" | "ctrlkit buffered-handler", "pods") => {
                ctrlkit(Api::<Pod>::all(client), false, delivery, updates).await
            }
            ("ctrlkit" | "ctrlkit buffered-handler", _) => {
                ctrlkit(Api::<ConfigMap>::all(client), false, delivery, updates).await
            }
            ("ctrlkit drop-managed-fields", "pods") => {
                ctrlkit(Api::<Pod>::all(client), true, delivery, updates).await
            }
            ("ctrlkit drop-managed-fields", _) => {
                ctrlkit(Api::<ConfigMap>::all(client), true, delivery, updates).await
            }
            ("ctrlkit slim-projection", _) => {
                ctrlkit(Api::<SlimPod>::all(client), false, delivery, updates).await
            }
            ("ctrlkit metadata-only", "pods") => {
                ctrlkit::<PartialObjectMeta<Pod>>(
                    MetadataListerWatcher::new(Api::<Pod>::all(client)),
                    false,
                    delivery,
                    updates,
                )
                .await
            }
            ("ctrlkit metadata-only", _) => {
                ctrlkit::<PartialObjectMeta<ConfigMap>>(
                    MetadataListerWatcher::new(Api::<ConfigMap>::all(client)),
                    false,
                    delivery,
                    updates,
                )
                .await
            }
            _ => panic!("unknown role {role}"),
        }
    });
    // Informer and watch tasks are still running: leave without waiting for them.
    runtime.shutdown_background();
}

/// Reports "synced <ms> <heap peak> <heap now> <rss peak> <rss> <cpu ms>", then for each of
/// `ROUNDS` bursts waits for "go" and reports "watched <cpu ms>" once `updates` more updates
/// reached the handler (the parent times the burst); then for each of `STEADY_ROUNDS` steady
/// streams waits for "steady" and reports "watched <cpu ms>" once its `STEADY_UPDATES` reached
/// the handler.
async fn report_and_watch(started: Instant, progress: &Progress, updates: usize) {
    let sync_ms = started.elapsed().as_secs_f64() * 1000.0;
    if std::env::var_os(SYNC_ONLY_ENV).is_some() {
        println!("synced {sync_ms:.1} {}", cpu_ms());
        // Gone at once: a runtime torn down under a running watch only adds error lines.
        let _ = std::io::stdout().flush();
        std::process::exit(0);
    }
    // Steady state: what is still held once the initial sync's buffers are gone. (Two
    // seconds also keep the watch cut below from looking like a "very short watch", which a
    // reflector answers with a relist, as client-go's does.)
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (peak, now) = heap_peak_and_now();
    // Updates may reach the handler before "go" is read: count from here.
    let base = progress.seen();
    println!(
        "synced {sync_ms:.1} {peak} {now} {} {}",
        rss_bytes(),
        cpu_ms()
    );
    // The bursts, then the steady streams: each waits for the parent's line, then for its
    // updates to reach the handler.
    let bursts = (1..=ROUNDS).map(|round| base + updates * round);
    let steady = (1..=STEADY_ROUNDS).map(|round| base + updates * ROUNDS + STEADY_UPDATES * round);
    for target in bursts.chain(steady) {
        let mut line = String::new();
        let read = tokio::task::block_in_place(|| std::io::stdin().read_line(&mut line));
        if read.unwrap_or(0) == 0 {
            return;
        }
        let cpu_before = cpu_ms();
        progress.wait_for(target).await;
        println!("watched {}", cpu_ms() - cpu_before);
    }
}

/// The updates a client's handler has seen, and a waiter for a count of them. The handler
/// wakes the waiter only when the count it waits for is reached: a wake-up per update would
/// add the same cost to every client's CPU per update and hide the difference between them.
#[derive(Default)]
struct Progress {
    seen: AtomicUsize,
    /// The count waited for (`usize::MAX`: none).
    target: AtomicUsize,
    reached: Notify,
}

impl Progress {
    fn new() -> Self {
        Self {
            target: AtomicUsize::new(usize::MAX),
            ..Self::default()
        }
    }

    fn seen(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }

    /// Counts one update (the handler's side).
    fn count(&self) {
        let seen = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if seen >= self.target.load(Ordering::SeqCst) {
            self.reached.notify_one();
        }
    }

    /// Waits until `target` updates have been counted. (The target is stored before the count
    /// is read, and a handler reads the target after counting: the update that reaches it
    /// always wakes the waiter.)
    async fn wait_for(&self, target: usize) {
        self.target.store(target, Ordering::SeqCst);
        let mut last = self.seen();
        while self.seen() < target {
            let reached = self.reached.notified();
            if self.seen() >= target {
                break;
            }
            if tokio::time::timeout(Duration::from_millis(1000), reached)
                .await
                .is_err()
            {
                // Only a stall is worth a line (a steady stream takes seconds).
                let seen = self.seen();
                if seen == last {
                    eprintln!(
                        "child waiting: {} updates to go",
                        target.saturating_sub(seen)
                    );
                }
                last = seen;
            }
        }
        self.target.store(usize::MAX, Ordering::SeqCst);
    }
}

/// ctrlkit's informer with one handler, run where `delivery` says: on the informer's task (as a
/// controller's are), or behind a buffer and task of its own (client-go's way).
async fn ctrlkit<K>(
    lister_watcher: impl ctrlkit_cache::ListerWatcher<K>,
    drop_fields: bool,
    delivery: Delivery,
    updates: usize,
) where
    K: Resource + Clone + Send + Sync + 'static,
{
    let progress = Arc::new(Progress::new());
    let informer = SharedIndexInformer::new(lister_watcher, Duration::ZERO, Default::default());
    informer
        .set_watch_error_handler(Arc::new(|err: &ctrlkit_cache::ReflectorError| {
            eprintln!("child: {err}");
        }))
        .expect("error handler");
    if drop_fields {
        informer
            .set_transform(Arc::new(drop_managed_fields::<K>))
            .expect("transform");
    }
    let options = HandlerOptions {
        resync_period: None,
        delivery,
    };
    informer
        .add_event_handler_with_options(
            ResourceEventHandlerFuncs::new().on_update({
                let progress = Arc::clone(&progress);
                move |_: &Arc<K>, _: &Arc<K>| progress.count()
            }),
            options,
        )
        .expect("handler");
    let cancel = CancellationToken::new();
    let started = Instant::now();
    tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });
    informer.wait_for_sync(&cancel).await;
    report_and_watch(started, &progress, updates).await;
}

/// The ceiling the server sets: a plain HTTP watch whose lines are counted, not decoded.
async fn raw_watch(url: &str, kind: &str, updates: usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let started = Instant::now();
    let client = Client::try_from(Config::new(url.parse().expect("url"))).expect("client");
    let list = Api::<kube::core::DynamicObject>::all_with(
        client,
        &kube::core::ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: if kind == "pods" { "Pod" } else { "ConfigMap" }.into(),
            plural: kind.into(),
        },
    )
    .list_metadata(&kube::api::ListParams::default().limit(1))
    .await
    .expect("list");
    let resource_version = list.metadata.resource_version.expect("rv");
    let seen = AtomicUsize::new(0);
    let address = url.trim_start_matches("http://").to_owned();
    let path =
        format!("/api/v1/{kind}?watch=true&resourceVersion={resource_version}&timeoutSeconds=600");
    // Start watching on "go" (the parent holds watches until then); count MODIFIED lines.
    let watching = async {
        let mut line = String::new();
        tokio::task::block_in_place(|| std::io::stdin().read_line(&mut line)).expect("go");
        let cpu_before = cpu_ms();
        let mut stream = tokio::net::TcpStream::connect(&address)
            .await
            .expect("connect");
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nAccept: application/json\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("request");
        let mut buffer = vec![0u8; 1 << 20];
        let needle = b"\"MODIFIED\"";
        let mut carry: Vec<u8> = Vec::new();
        while seen.load(Ordering::SeqCst) < updates {
            let n = stream.read(&mut buffer).await.expect("read");
            if n == 0 {
                break;
            }
            carry.extend_from_slice(&buffer[..n]);
            let mut count = 0;
            let mut start = 0;
            while let Some(at) = carry[start..]
                .windows(needle.len())
                .position(|w| w == needle)
            {
                count += 1;
                start += at + needle.len();
            }
            carry.drain(..start.max(carry.len().saturating_sub(needle.len())));
            seen.fetch_add(count, Ordering::SeqCst);
        }
        println!("watched {}", cpu_ms() - cpu_before);
    };
    let sync_ms = started.elapsed().as_secs_f64() * 1000.0;
    let (peak, now) = heap_peak_and_now();
    println!(
        "synced {sync_ms:.1} {peak} {now} {} {}",
        rss_bytes(),
        cpu_ms()
    );
    watching.await;
}

async fn kube_runtime<K>(api: Api<K>, updates: usize)
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let progress = Arc::new(Progress::new());
    let (reader, writer) = reflector::store::<K>();
    let started = Instant::now();
    let stream = reflector(writer, watcher(api, watcher::Config::default()));
    tokio::spawn({
        let progress = Arc::clone(&progress);
        async move {
            stream
                .for_each(|event| {
                    if let Ok(watcher::Event::Apply(_)) = event {
                        progress.count();
                    }
                    std::future::ready(())
                })
                .await;
        }
    });
    reader.wait_until_ready().await.expect("ready");
    report_and_watch(started, &progress, updates).await;
}
