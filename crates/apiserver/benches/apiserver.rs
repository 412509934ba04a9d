//! Embedded API server throughput and watch latency, over real HTTP on loopback:
//!
//! - creates per second of small ConfigMaps with 0, 1 and 100 watchers attached (8 client
//!   connections with keep-alive);
//! - p50/p99 from a create's response to its event reaching each of 100 watchers, at 1,000
//!   creates per second;
//! - a list of 100,000 small ConfigMaps, in MB/s;
//! - Pod writes (create, strategic merge patch, server-side apply), each group of writes on a
//!   server in a process of its own (`-- --pods`: only these);
//! - creates per second of a custom resource whose CRD has a 30-field schema and 3 CEL rules,
//!   beside the same object under a schema that checks nothing, and the cost of that schema's
//!   decoding and validation per object, measured in process (`-- --custom`: only these).
//!
//! - creates per second and answer times from 64 concurrent writers, in memory beside a data
//!   directory whose every acknowledged write is fsynced (`-- --durable`: only these).
//!
//! Run: `cargo bench -p ctrlkit-apiserver --bench apiserver` (add `-- --quick` for smaller runs).
//! Client and server share the process (and the machine's two cores), as in a controller's tests,
//! on the allocator of the `ctrlkit` binary (mimalloc).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctrlkit_apiserver::resource::builtin_resources;
use ctrlkit_apiserver::storage::StoreConfig;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod support;
use support::{Connection, find};

/// The allocator of the `ctrlkit` binary (see crates/ctrlkit/src/main.rs), so that the figures
/// are those of `ctrlkit apiserver`. A test binary on the system's malloc gets other figures:
/// docs/BENCHMARKS.md gives both.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A watch connection that records when each object's ADDED event arrives.
async fn watcher(
    address: SocketAddr,
    seen: Arc<Mutex<HashMap<String, Vec<Instant>>>>,
    record: bool,
) {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET /api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: bench\r\n\r\n")
        .await
        .unwrap();
    let mut pending = Vec::new();
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if !record {
            continue;
        }
        let now = Instant::now();
        pending.extend_from_slice(&chunk[..n]);
        // Each event is one JSON line (one chunk); chunk-size lines never contain `"name":"`.
        while let Some(newline) = pending.iter().position(|b| *b == b'\n') {
            let line = pending.drain(..=newline).collect::<Vec<u8>>();
            if let Some(at) = find(&line, b"\"name\":\"") {
                let rest = &line[at + 8..];
                if let Some(end) = rest.iter().position(|b| *b == b'"') {
                    let name = String::from_utf8_lossy(&rest[..end]).to_string();
                    seen.lock().entry(name).or_default().push(now);
                }
            }
        }
    }
}

fn configmap(name: &str) -> Vec<u8> {
    format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","labels":{{"app":"bench"}}}},"data":{{"key":"value"}}}}"#).into_bytes()
}

async fn start() -> ApiServer {
    start_on(None).await
}

/// A server as `ApiServer::start` makes one by default: its history bounded to 128 MiB, so a
/// write's cost includes letting older changes go, and the process does not grow with every
/// change made.
async fn start_as_users_do() -> ApiServer {
    ApiServer::start(ApiServerConfig::default()).await.unwrap()
}

/// A server in memory, or durable on the data directory `data_dir`.
async fn start_on(data_dir: Option<&std::path::Path>) -> ApiServer {
    ApiServer::start(ApiServerConfig {
        store: StoreConfig {
            history: 200_000,
            // What is measured here is not the history's bound.
            history_bytes: usize::MAX,
            watch_buffer: 200_000,
            ..StoreConfig::default()
        },
        data_dir: data_dir.map(std::path::Path::to_path_buf),
        ..ApiServerConfig::default()
    })
    .await
    .unwrap()
}

/// Creates `total` ConfigMaps from `writers` connections, each sending its next create when
/// the last is answered; returns creates per second and the p50 and p99 answer times.
async fn concurrent_creates(
    address: SocketAddr,
    writers: usize,
    total: usize,
) -> (f64, Duration, Duration) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|writer| {
            tokio::spawn(async move {
                let mut connection = Connection::open(address).await;
                let mut times = Vec::new();
                for i in (writer..total).step_by(writers) {
                    let body = configmap(&format!("cm-{i}"));
                    let sent = Instant::now();
                    let (code, answer) = connection
                        .request("POST", "/api/v1/namespaces/default/configmaps", &body)
                        .await;
                    times.push(sent.elapsed());
                    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
                }
                times
            })
        })
        .collect();
    let mut times = Vec::new();
    for task in tasks {
        times.extend(task.await.unwrap());
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    times.sort_unstable();
    let at = |share: f64| times[((times.len() - 1) as f64 * share) as usize];
    (rate, at(0.5), at(0.99))
}

/// Creates from 64 concurrent writers in memory and on a data directory (each acknowledged
/// create logged and fsynced first).
async fn durable_figures(quick: bool) {
    let total = if quick { 10_000 } else { 40_000 };
    let writers = 64;
    println!("creates from {writers} writers ({total} creates):");
    for durable in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let server = start_on(durable.then(|| dir.path())).await;
        let (rate, p50, p99) = concurrent_creates(server.address(), writers, total).await;
        server.shutdown().await;
        let place = if durable {
            "--data-dir (fsync)"
        } else {
            "in memory"
        };
        println!(
            "  {place:<18} {rate:>9.0}/s  p50 {:.2} ms  p99 {:.2} ms",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
}

/// Creates `total` ConfigMaps over 8 connections; returns creates per second.
async fn creates_per_second(watchers: usize, total: usize) -> f64 {
    let server = start().await;
    let address = server.address();
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let watch_tasks: Vec<_> = (0..watchers)
        .map(|_| tokio::spawn(watcher(address, Arc::clone(&seen), false)))
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rate = post_all(
        address,
        total,
        "/api/v1/namespaces/default/configmaps",
        |i| configmap(&format!("cm-{i}")),
    )
    .await;
    for task in watch_tasks {
        task.abort();
    }
    server.shutdown().await;
    rate
}

/// POSTs `total` bodies (`body(i)`) to `path` over 8 connections, each answered 201; returns
/// creates per second.
async fn post_all(
    address: SocketAddr,
    total: usize,
    path: &'static str,
    body: fn(usize) -> Vec<u8>,
) -> f64 {
    let clients = 8;
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            tokio::spawn(async move {
                let mut connection = Connection::open(address).await;
                for i in (client..total).step_by(clients) {
                    let (code, answer) = connection.request("POST", path, &body(i)).await;
                    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

/// Creates at `rate` per second for `total` objects with `watchers` watchers; returns the
/// p50 and p99 of (event received − create response received).
async fn delivery_latency(watchers: usize, rate: u64, total: usize) -> (Duration, Duration) {
    let server = start().await;
    let address = server.address();
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let watch_tasks: Vec<_> = (0..watchers)
        .map(|_| tokio::spawn(watcher(address, Arc::clone(&seen), true)))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut connection = Connection::open(address).await;
    let mut responded = HashMap::new();
    let mut ticks = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate));
    for i in 0..total {
        ticks.tick().await;
        let name = format!("lat-{i}");
        let (code, _) = connection
            .request(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                &configmap(&name),
            )
            .await;
        assert_eq!(code, 201);
        responded.insert(name, Instant::now());
    }
    // Let the last events arrive.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        // Only the benchmark's own objects count (the namespace also holds kube-root-ca.crt).
        let complete = seen
            .lock()
            .iter()
            .filter(|(name, times)| responded.contains_key(*name) && times.len() == watchers)
            .count();
        if complete == total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut latencies = Vec::with_capacity(total * watchers);
    for (name, times) in seen.lock().iter() {
        if let Some(response) = responded.get(name) {
            for time in times {
                latencies.push(time.saturating_duration_since(*response));
            }
        }
    }
    assert_eq!(
        latencies.len(),
        total * watchers,
        "every watcher saw every event"
    );
    latencies.sort();
    for task in watch_tasks {
        task.abort();
    }
    server.shutdown().await;
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    (at(0.50), at(0.99))
}

/// A Pod of about 3.9 KB in JSON (labels, annotations, two containers with env, ports,
/// resources and probes, volumes), its main container's image `image`.
fn pod(name: &str, image: &str) -> Vec<u8> {
    let env: Vec<serde_json::Value> = (0..25)
        .map(|i| serde_json::json!({"name": format!("SETTING_{i}"), "value": format!("value-{i}")}))
        .collect();
    let container = |name: &str, image: &str, port: u16| {
        serde_json::json!({
            "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
            "args": ["--listen", format!(":{port}"), "--log-level", "info"],
            "env": env,
            "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                          "limits": {"cpu": "500m", "memory": "256Mi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": port},
                               "periodSeconds": 5, "timeoutSeconds": 1},
            "livenessProbe": {"httpGet": {"path": "/live", "port": port},
                              "periodSeconds": 10, "failureThreshold": 3},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"},
                             {"name": "cache", "mountPath": "/var/cache/app"}],
        })
    };
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": "bench", "tier": "backend", "release": "stable", "team": "platform"},
            "annotations": {"example.com/owner": "platform-team", "example.com/revision": "42"},
        },
        "spec": {
            "containers": [container("app", image, 8080), container("sidecar", "envoy:1.30", 9901)],
            "volumes": [{"name": "config", "configMap": {"name": "app-config"}},
                        {"name": "cache", "emptyDir": {}}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            // The two a cluster adds to every Pod are stated too: the list is atomic, so an
            // apply without them would replace it, and the server would add them back.
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "backend", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "serviceAccountName": "default",
        },
    }))
    .unwrap()
}

/// How a Pod is written: its verb, content type, and URL (`None`: the collection).
#[derive(Clone, Copy)]
enum PodWrite {
    /// POST.
    Create,
    /// Server-side apply (PATCH, `application/apply-patch+yaml`), creating or updating.
    Apply,
    /// A strategic merge patch of the main container's image, as `kubectl patch` sends one:
    /// containers merge by name. (A JSON merge patch would replace the whole list, which
    /// kube-apiserver refuses for a Pod.)
    StrategicMergePatch,
}

/// Writes `total` Pods `how` over 8 connections (image `image`); returns writes per second.
/// The request bodies are made before the clock starts: the client shares the two cores with
/// the server, and building a Pod's JSON is the client's work, not the server's.
async fn pod_writes(server: &ApiServer, how: PodWrite, total: usize, image: &str) -> f64 {
    let address = server.address();
    let clients = 8;
    let bodies: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..total)
            .map(|i| match how {
                PodWrite::Create | PodWrite::Apply => pod(&format!("pod-{i}"), image),
                PodWrite::StrategicMergePatch => {
                    format!(r#"{{"spec":{{"containers":[{{"name":"app","image":"{image}"}}]}}}}"#)
                        .into_bytes()
                }
            })
            .collect(),
    );
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let bodies = Arc::clone(&bodies);
            tokio::spawn(async move {
                let mut connection = Connection::open(address).await;
                for i in (client..total).step_by(clients) {
                    let item = format!("/api/v1/namespaces/default/pods/pod-{i}");
                    let body = &bodies[i];
                    let (code, body) = match how {
                        PodWrite::Create => {
                            connection
                                .request("POST", "/api/v1/namespaces/default/pods", body)
                                .await
                        }
                        PodWrite::Apply => {
                            connection
                                .send(
                                    "PATCH",
                                    &format!("{item}?fieldManager=bench"),
                                    "application/apply-patch+yaml",
                                    body,
                                )
                                .await
                        }
                        PodWrite::StrategicMergePatch => {
                            connection
                                .send(
                                    "PATCH",
                                    &item,
                                    "application/strategic-merge-patch+json",
                                    body,
                                )
                                .await
                        }
                    };
                    assert!(
                        code == 200 || code == 201,
                        "{code}: {}",
                        String::from_utf8_lossy(&body)
                    );
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

/// Lists `count` small ConfigMaps; returns (MB/s, bytes, seconds).
async fn list_throughput(count: usize) -> (f64, usize, f64) {
    let server = start().await;
    let configmaps = builtin_resources()
        .into_iter()
        .find(|k| k.plural == "configmaps")
        .unwrap();
    for i in 0..count {
        let body: serde_json::Value =
            serde_json::from_slice(&configmap(&format!("cm-{i:06}"))).unwrap();
        server.store().create(&configmaps, "default", body).unwrap();
    }
    let mut connection = Connection::open(server.address()).await;
    // Warm up once, then measure.
    connection
        .request("GET", "/api/v1/namespaces/default/configmaps", b"")
        .await;
    let started = Instant::now();
    let (code, body) = connection
        .request("GET", "/api/v1/namespaces/default/configmaps", b"")
        .await;
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(code, 200);
    server.shutdown().await;
    (body.len() as f64 / 1e6 / seconds, body.len(), seconds)
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    // `--pods`: only the Pod writes (for profiling them); `--custom`: only custom resources;
    // `--durable`: only the creates in memory beside those on a data directory.
    let only_pods = std::env::args().any(|arg| arg == "--pods");
    let only_custom = std::env::args().any(|arg| arg == "--custom");
    let only_durable = std::env::args().any(|arg| arg == "--durable");
    let runtime = support::runtime();
    let args: Vec<String> = std::env::args().collect();
    if let Some(group) = args
        .iter()
        .position(|arg| arg == POD_GROUP)
        .and_then(|at| args.get(at + 1))
    {
        runtime.block_on(pod_group(group, quick));
        return;
    }
    runtime.block_on(async {
        let creates = if quick { 5_000 } else { 20_000 };
        println!("ctrlkit-apiserver over HTTP/1.1 on loopback (client in the same process)");
        if only_durable {
            durable_figures(quick).await;
            return;
        }
        if !only_custom {
            for watchers in [0, 1, 100].into_iter().filter(|_| !only_pods) {
                let rate = creates_per_second(watchers, creates).await;
                println!("creates/s with {watchers:>3} watchers ({creates} creates, 8 connections): {rate:>9.0}");
            }
            if !only_pods {
                delivery_and_list(quick).await;
            }
            pod_figures(quick).await;
        }
        if !only_pods {
            custom_resource_figures(quick).await;
        }
        if !only_pods && !only_custom {
            durable_figures(quick).await;
        }
    });
}

async fn delivery_and_list(quick: bool) {
    let total = if quick { 1_000 } else { 5_000 };
    let (p50, p99) = delivery_latency(100, 1_000, total).await;
    println!(
        "event delivery, 100 watchers at 1,000 creates/s ({total} creates): p50 {:.3} ms, p99 {:.3} ms",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    let count = if quick { 10_000 } else { 100_000 };
    let (rate, bytes, seconds) = list_throughput(count).await;
    println!(
        "list of {count} small ConfigMaps: {:.1} MB in {:.3} s = {rate:.0} MB/s",
        bytes as f64 / 1e6,
        seconds
    );
}

/// The argument that makes this program a child running one group of Pod writes.
const POD_GROUP: &str = "--pod-group";

/// The Pod writes, in two groups: creates by POST then strategic merge patches, and creates by
/// apply, updates by apply, then applies that change nothing. Each group runs on its own server
/// in a process of its own (this program, run again), as a user's test process holds one
/// server: run one after the other in one process, whichever group came second was measured far
/// slower, its allocations made beside the first group's gigabytes of objects.
async fn pod_figures(quick: bool) {
    let pods = if quick { 2_000 } else { 10_000 };
    println!(
        "Pods of {} bytes, {pods} of each write, 8 connections, each group in a process of its own:",
        pod("pod-0", "app:1").len()
    );
    let mut figures = Vec::new();
    for group in ["post", "apply"] {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child.args([POD_GROUP, group]);
        if quick {
            child.arg("--quick");
        }
        let output = child.output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        figures.extend(
            String::from_utf8(output.stdout)
                .unwrap()
                .lines()
                .map(|line| line.parse::<f64>().unwrap()),
        );
    }
    let [created, merged, applied_new, applied, unchanged] = figures[..] else {
        panic!("five figures expected, got {figures:?}");
    };
    println!("  creates (POST)/s:                   {created:>9.0}");
    println!("  updates by strategic merge patch/s: {merged:>9.0}");
    println!("  creates by apply/s:                 {applied_new:>9.0}");
    println!("  updates by apply/s:                 {applied:>9.0}");
    println!("  applies that change nothing/s:      {unchanged:>9.0}");
}

/// One group of Pod writes (see [`pod_figures`]) on a server as `ApiServer::start` makes it;
/// prints each rate on a line of its own.
async fn pod_group(group: &str, quick: bool) {
    let pods = if quick { 2_000 } else { 10_000 };
    let server = start_as_users_do().await;
    let rates = match group {
        "post" => {
            let created = pod_writes(&server, PodWrite::Create, pods, "app:1").await;
            let merged = pod_writes(&server, PodWrite::StrategicMergePatch, pods, "app:2").await;
            // The patch changed the image and nothing else: both containers are still there.
            let (code, body) = Connection::open(server.address())
                .await
                .request("GET", "/api/v1/namespaces/default/pods/pod-0", b"")
                .await;
            let patched: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(code, 200);
            assert_eq!(patched["spec"]["containers"][0]["image"], "app:2");
            assert_eq!(patched["spec"]["containers"][1]["name"], "sidecar");
            vec![created, merged]
        }
        "apply" => vec![
            pod_writes(&server, PodWrite::Apply, pods, "app:1").await,
            pod_writes(&server, PodWrite::Apply, pods, "app:2").await,
            pod_writes(&server, PodWrite::Apply, pods, "app:2").await,
        ],
        other => panic!("no group of Pod writes named {other}"),
    };
    server.shutdown().await;
    for rate in rates {
        println!("{rate}");
    }
}

/// The schema of the benchmark's custom resource: 30 fields under `spec` (strings with lengths,
/// patterns and enums, bounded integers, booleans, lists, nested objects) and 3 CEL rules.
fn validated_schema() -> serde_json::Value {
    use serde_json::json;
    let mut fields = serde_json::Map::new();
    for i in 0..8 {
        fields.insert(
            format!("text{i}"),
            json!({"type": "string", "maxLength": 64, "pattern": "^[a-z0-9-]*$"}),
        );
    }
    for i in 0..2 {
        fields.insert(
            format!("mode{i}"),
            json!({"type": "string", "enum": ["fast", "slow", "off"]}),
        );
    }
    for i in 0..8 {
        fields.insert(
            format!("count{i}"),
            json!({"type": "integer", "minimum": 0, "maximum": 1000}),
        );
    }
    fields.insert(
        "minReplicas".into(),
        json!({"type": "integer", "minimum": 0, "default": 1}),
    );
    fields.insert(
        "maxReplicas".into(),
        json!({"type": "integer", "maximum": 100}),
    );
    for i in 0..5 {
        fields.insert(format!("flag{i}"), json!({"type": "boolean"}));
    }
    fields.insert("tags".into(), json!({"type": "array", "maxItems": 16, "x-kubernetes-list-type": "set", "items": {"type": "string", "maxLength": 32}}));
    fields.insert("ports".into(), json!({"type": "array", "maxItems": 16, "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "port": {"type": "integer", "minimum": 1, "maximum": 65535}}}}));
    fields.insert(
        "owner".into(),
        json!({"type": "object", "properties": {
        "name": {"type": "string"}, "email": {"type": "string", "format": "email"}}}),
    );
    fields.insert(
        "limits".into(),
        json!({"type": "object", "additionalProperties": {"type": "integer"}}),
    );
    fields.insert(
        "since".into(),
        json!({"type": "string", "format": "date-time"}),
    );
    assert_eq!(fields.len(), 30);
    json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "required": ["text0", "mode0"],
        "properties": fields,
        "x-kubernetes-validations": [
            {"rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not exceed maxReplicas"},
            {"rule": "self.text0.startsWith('b')"},
            {"rule": "!has(self.tags) || size(self.tags) <= 8"},
        ],
    }}})
}

/// A schema that checks nothing.
fn open_schema() -> serde_json::Value {
    serde_json::json!({"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
}

fn custom_resource(name: &str) -> Vec<u8> {
    let mut spec = serde_json::Map::new();
    for i in 0..8 {
        spec.insert(format!("text{i}"), format!("b-value-{i}").into());
    }
    spec.insert("mode0".into(), "fast".into());
    spec.insert("mode1".into(), "slow".into());
    for i in 0..8 {
        spec.insert(format!("count{i}"), (i * 10).into());
    }
    spec.insert("maxReplicas".into(), 10.into());
    for i in 0..5 {
        spec.insert(format!("flag{i}"), (i % 2 == 0).into());
    }
    spec.insert("tags".into(), serde_json::json!(["a", "b", "c"]));
    spec.insert(
        "ports".into(),
        serde_json::json!([{"name": "http", "port": 80}, {"name": "https", "port": 443}]),
    );
    spec.insert(
        "owner".into(),
        serde_json::json!({"name": "ops", "email": "ops@example.com"}),
    );
    spec.insert(
        "limits".into(),
        serde_json::json!({"cpu": 2, "memory": 512}),
    );
    spec.insert("since".into(), "2024-01-02T03:04:05Z".into());
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "bench.example.com/v1", "kind": "Gadget",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

/// A server serving `gadgets.bench.example.com` with `schema`.
async fn gadgets(schema: serde_json::Value) -> ApiServer {
    let server = start().await;
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.bench.example.com"},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": schema}}]},
    });
    let mut connection = Connection::open(server.address()).await;
    let (code, body) = connection
        .request(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &serde_json::to_vec(&crd).unwrap(),
        )
        .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    server
}

/// Creates `total` Gadgets over 8 connections; returns creates per second.
async fn gadget_creates(server: &ApiServer, total: usize) -> f64 {
    let path = "/apis/bench.example.com/v1/namespaces/default/gadgets";
    post_all(server.address(), total, path, |i| {
        custom_resource(&format!("g-{i}"))
    })
    .await
}

/// The time one object's schema work takes (pruning, defaults, validation, CEL rules), in
/// process, averaged over `rounds`.
fn validation_cost(rounds: u32) -> Duration {
    use ctrlkit_apiserver::custom::{self, CustomVersion};
    let version = CustomVersion::read(&serde_json::json!({
        "name": "v1", "schema": {"openAPIV3Schema": validated_schema()},
    }));
    let object: serde_json::Value = serde_json::from_slice(&custom_resource("g")).unwrap();
    let started = Instant::now();
    for _ in 0..rounds {
        let mut copy = object.clone();
        let removed = custom::fit_to_schema(&version, &mut copy);
        let errors = custom::validate_create(&version, &copy);
        assert!(removed.is_empty() && errors.is_empty(), "{errors:?}");
    }
    started.elapsed() / rounds
}

async fn custom_resource_figures(quick: bool) {
    let total = if quick { 2_000 } else { 10_000 };
    println!(
        "Custom resources of {} bytes, {total} creates, 8 connections:",
        custom_resource("g-0").len()
    );
    let server = gadgets(open_schema()).await;
    let open = gadget_creates(&server, total).await;
    server.shutdown().await;
    let server = gadgets(validated_schema()).await;
    let validated = gadget_creates(&server, total).await;
    server.shutdown().await;
    let cost = validation_cost(if quick { 2_000 } else { 20_000 });
    println!("  creates/s, schema that checks nothing: {open:>9.0}");
    println!("  creates/s, 30 fields and 3 CEL rules:  {validated:>9.0}");
    println!(
        "  schema work per object (prune, default, validate, CEL): {:.1} µs",
        cost.as_secs_f64() * 1e6
    );
}
