//! Soak: the embedded API server under sustained and abusive load, over real HTTP on loopback.
//!
//! 1. Watchers: 100 watchers of ConfigMaps while 4 writers create, patch and delete small
//!    ConfigMaps as fast as they are answered, for 60 s.
//! 2. Large objects: a ConfigMap of about 1 MB patched 10,000 times by 2 writers, with 2
//!    watchers that read and 1 that never reads.
//! 3. Idle and slowloris: 2,000 connections that send nothing and 200 that send a request head
//!    one byte a second, for 40 s.
//!
//! Throughout, a normal client reads one ConfigMap every 10 ms on a connection of its own and
//! times each answer, and the process's RSS is sampled every 50 ms. The clients share the
//! process (and the machine's two cores) with the server, so RSS is theirs together.
//!
//! Run: `cargo bench -p ctrlkit-apiserver --bench soak` (`-- --quick`: 10 s, 1,000 patches,
//! 10 s).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod support;
use support::Connection;

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const MERGE_PATCH: &str = "application/merge-patch+json";

/// The process's resident set, in KiB, from `/proc/self/status`.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The highest RSS seen since the last [`take`](RssPeak::take), sampled every 50 ms.
#[derive(Clone)]
struct RssPeak(Arc<AtomicU64>);

impl RssPeak {
    fn start() -> Self {
        let peak = Arc::new(AtomicU64::new(rss_kib()));
        let sampled = Arc::clone(&peak);
        std::thread::spawn(move || {
            loop {
                sampled.fetch_max(rss_kib(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Self(peak)
    }

    fn take(&self) -> u64 {
        self.0.swap(rss_kib(), Ordering::Relaxed)
    }
}

/// The normal client: a GET of one ConfigMap every 10 ms, each answer timed.
struct Probe {
    times: Arc<Mutex<Vec<Duration>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Probe {
    fn start(address: SocketAddr) -> Self {
        let times = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&times);
        let task = tokio::spawn(async move {
            let mut connection = Connection::open(address).await;
            let mut ticks = tokio::time::interval(Duration::from_millis(10));
            loop {
                ticks.tick().await;
                let sent = Instant::now();
                let (code, _) = connection
                    .request("GET", &format!("{CONFIGMAPS}/probe"), b"")
                    .await;
                assert_eq!(code, 200);
                recorded.lock().push(sent.elapsed());
            }
        });
        Self { times, task }
    }

    /// The answers since the last call: p50, p99, the slowest, and how many.
    fn take(&self) -> (Duration, Duration, Duration, usize) {
        let mut times = std::mem::take(&mut *self.times.lock());
        times.sort_unstable();
        if times.is_empty() {
            return (Duration::ZERO, Duration::ZERO, Duration::ZERO, 0);
        }
        let at = |share: f64| times[((times.len() - 1) as f64 * share) as usize];
        (at(0.5), at(0.99), at(1.0), times.len())
    }
}

/// A watch of ConfigMaps from now on that counts its events (or, with `read` false, never
/// reads); ends with the number of events and whether the server ended the stream.
async fn watch(address: SocketAddr, read: bool, stop: Arc<AtomicBool>) -> (u64, bool) {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let head = format!("GET {CONFIGMAPS}?watch=true HTTP/1.1\r\nHost: soak\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    if !read {
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut events = 0;
    let mut chunk = vec![0u8; 256 * 1024];
    let mut tail = Vec::new();
    loop {
        let reading = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut chunk));
        match reading.await {
            Ok(Ok(0) | Err(_)) => return (events, true),
            Ok(Ok(n)) => {
                // Each event is a line; the chunk framing adds none with a `"type":"`.
                events += chunk[..n]
                    .windows(8)
                    .filter(|window| window == b"\"type\":\"")
                    .count() as u64;
                // The server ends a watch with the last chunk; the connection stays open.
                tail.extend_from_slice(&chunk[n.saturating_sub(7)..n]);
                tail.drain(..tail.len().saturating_sub(7));
                if tail.ends_with(b"\r\n0\r\n\r\n") {
                    return (events, true);
                }
            }
            Err(_) if stop.load(Ordering::Relaxed) => return (events, false),
            Err(_) => {}
        }
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn report(
    name: &str,
    server: &ApiServer,
    rss: &RssPeak,
    probe: &Probe,
    elapsed: Duration,
    extra: &str,
) {
    let (p50, p99, slowest, answers) = probe.take();
    let history = server.store().history_usage();
    println!(
        "{name}: {:.1} s; RSS peak {:.0} MiB, now {:.0} MiB; history {} changes, {:.1} MiB; \
         normal client ({answers} reads) p50 {:.2} ms, p99 {:.2} ms, slowest {:.1} ms; {extra}",
        elapsed.as_secs_f64(),
        mib(rss.take()),
        mib(rss_kib()),
        history.changes,
        history.bytes as f64 / (1024.0 * 1024.0),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        slowest.as_secs_f64() * 1e3,
    );
}

/// 100 watchers, 4 writers at full speed.
async fn watchers_and_writers(server: &ApiServer, rss: &RssPeak, probe: &Probe, span: Duration) {
    let address = server.address();
    let stop = Arc::new(AtomicBool::new(false));
    let watchers: Vec<_> = (0..100)
        .map(|_| tokio::spawn(watch(address, true, Arc::clone(&stop))))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            tokio::spawn(async move {
                let mut connection = Connection::open(address).await;
                let mut writes = 0u64;
                let mut round = 0u64;
                while started.elapsed() < span {
                    let name = format!("w{writer}-{}", round % 50);
                    let body = format!(r#"{{"metadata":{{"name":"{name}"}},"data":{{"k":"1"}}}}"#);
                    let (code, _) = connection
                        .request("POST", CONFIGMAPS, body.as_bytes())
                        .await;
                    assert_eq!(code, 201);
                    let path = format!("{CONFIGMAPS}/{name}");
                    let patch = br#"{"data":{"k":"2"}}"#;
                    let (code, _) = connection.send("PATCH", &path, MERGE_PATCH, patch).await;
                    assert_eq!(code, 200);
                    let (code, _) = connection.request("DELETE", &path, b"").await;
                    assert_eq!(code, 200);
                    writes += 3;
                    round += 1;
                }
                writes
            })
        })
        .collect();
    let mut writes = 0;
    for writer in writers {
        writes += writer.await.unwrap();
    }
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut fewest, mut cut) = (u64::MAX, 0);
    for watcher in watchers {
        let (events, ended) = watcher.await.unwrap();
        fewest = fewest.min(events);
        cut += u64::from(ended);
    }
    report(
        "100 watchers, 4 writers",
        server,
        rss,
        probe,
        elapsed,
        &format!(
            "{writes} writes ({:.0}/s); the slowest watcher got {fewest} events; watchers cut: {cut}",
            writes as f64 / elapsed.as_secs_f64()
        ),
    );
}

/// A ConfigMap of about 1 MB patched `patches` times, 2 watchers reading and 1 not.
async fn large_objects(server: &ApiServer, rss: &RssPeak, probe: &Probe, patches: usize) {
    let address = server.address();
    let blob = |round: usize| {
        let letter = char::from(b'a' + (round % 26) as u8);
        letter.to_string().repeat(1_000_000)
    };
    let body = format!(
        r#"{{"metadata":{{"name":"large"}},"data":{{"blob":"{}"}}}}"#,
        blob(0)
    );
    let mut connection = Connection::open(address).await;
    let (code, _) = connection
        .request("POST", CONFIGMAPS, body.as_bytes())
        .await;
    assert_eq!(code, 201);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| tokio::spawn(watch(address, true, Arc::clone(&stop))))
        .collect();
    let stalled = tokio::spawn(watch(address, false, Arc::clone(&stop)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let writers: Vec<_> = (0..2)
        .map(|writer| {
            tokio::spawn(async move {
                let mut connection = Connection::open(address).await;
                for round in (writer..patches).step_by(2) {
                    let patch = format!(r#"{{"data":{{"blob":"{}"}}}}"#, blob(round + 1));
                    let path = format!("{CONFIGMAPS}/large");
                    let (code, _) = connection
                        .send("PATCH", &path, MERGE_PATCH, patch.as_bytes())
                        .await;
                    assert_eq!(code, 200);
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut read = Vec::new();
    for reader in readers {
        read.push(reader.await.unwrap());
    }
    let (stalled_events, stalled_cut) = stalled.await.unwrap();
    report(
        "1 MB ConfigMap patched",
        server,
        rss,
        probe,
        elapsed,
        &format!(
            "{patches} patches ({:.0}/s); reading watchers (events, cut): {read:?}; \
             the watcher that never read: cut {stalled_cut} after {stalled_events} events",
            patches as f64 / elapsed.as_secs_f64()
        ),
    );
}

/// Idle connections and slowloris ones held for `span`.
async fn idle_and_slowloris(server: &ApiServer, rss: &RssPeak, probe: &Probe, span: Duration) {
    let address = server.address();
    let started = Instant::now();
    let closed_idle = Arc::new(AtomicU64::new(0));
    let mut idle = Vec::new();
    for _ in 0..2_000 {
        let mut stream = TcpStream::connect(address).await.unwrap();
        let closed = Arc::clone(&closed_idle);
        idle.push(tokio::spawn(async move {
            let mut byte = [0u8; 1];
            if let Ok(Ok(_)) = tokio::time::timeout(span, stream.read(&mut byte)).await {
                closed.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let cut_slowloris = Arc::new(Mutex::new(Vec::new()));
    let slowloris: Vec<_> = (0..200)
        .map(|_| {
            let cut = Arc::clone(&cut_slowloris);
            tokio::spawn(async move {
                let mut stream = TcpStream::connect(address).await.unwrap();
                let head = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: soak\r\nX-Slow: ".repeat(4);
                for byte in head {
                    if started.elapsed() >= span {
                        return;
                    }
                    if stream.write_all(&[byte]).await.is_err() {
                        cut.lock().push(started.elapsed());
                        return;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            })
        })
        .collect();
    for task in idle.into_iter().chain(slowloris) {
        task.await.unwrap();
    }
    let cut = cut_slowloris.lock().clone();
    let first_cut = cut.iter().min().copied().unwrap_or_default();
    report(
        "2,000 idle and 200 slowloris connections",
        server,
        rss,
        probe,
        started.elapsed(),
        &format!(
            "idle connections closed by the server: {}; slowloris cut: {} (the first after {:.0} s)",
            closed_idle.load(Ordering::Relaxed),
            cut.len(),
            first_cut.as_secs_f64()
        ),
    );
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let runtime = support::runtime();
    runtime.block_on(async {
        let rss = RssPeak::start();
        let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
        let mut connection = Connection::open(server.address()).await;
        let probe_object = br#"{"metadata":{"name":"probe"},"data":{"k":"v"}}"#;
        let (code, _) = connection.request("POST", CONFIGMAPS, probe_object).await;
        assert_eq!(code, 201);
        println!(
            "ctrlkit-apiserver soak, default configuration; RSS at start {:.0} MiB",
            mib(rss.take())
        );
        let probe = Probe::start(server.address());
        let (span, patches, idle_span) = if quick {
            (Duration::from_secs(10), 1_000, Duration::from_secs(10))
        } else {
            (Duration::from_secs(60), 10_000, Duration::from_secs(40))
        };
        watchers_and_writers(&server, &rss, &probe, span).await;
        large_objects(&server, &rss, &probe, patches).await;
        idle_and_slowloris(&server, &rss, &probe, idle_span).await;
        probe.task.abort();
        server.shutdown().await;
    });
}
