//! Failover time and API load of the leader election, on the embedded API server in real time.
//!
//! `cargo bench -p ctrlkit-leaderelection --bench failover [-- --quick]`
//!
//! Five candidates elect a leader on a Lease with the timings of client-go's defaults scaled
//! down five times (lease 3 s, renew deadline 2 s, retry period 0.4 s), then:
//! - steady state for a while: API requests per second, for the leader and per follower;
//! - the leader steps down with `release_on_cancel`: time until the next leader starts;
//! - the leader's task is aborted (a crash): time until the next leader starts.
//!
//! Each runs with followers that watch the lock and with followers that poll (client-go), over
//! the in-process transport (which counts each candidate's requests) and, for releases, over
//! TCP as well.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use ctrlkit_apiserver::in_process::InProcessBody;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig, InProcessService};
use ctrlkit_leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The in-process transport, counting requests.
#[derive(Clone)]
struct Counted {
    inner: InProcessService,
    requests: Arc<AtomicU64>,
}

impl tower_service::Service<http::Request<kube::client::Body>> for Counted {
    type Response = http::Response<InProcessBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        tower_service::Service::<http::Request<kube::client::Body>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        self.requests.fetch_add(1, Ordering::Relaxed);
        Box::pin(self.inner.call(request))
    }
}

#[derive(Default)]
struct Leadership {
    leader: Mutex<Option<(String, Instant)>>,
    changed: Notify,
}

struct Candidate {
    id: String,
    requests: Arc<AtomicU64>,
    cancel: CancellationToken,
    run: JoinHandle<()>,
}

#[derive(Clone, Copy, PartialEq)]
enum Transport {
    InProcess,
    Tcp,
}

struct Election {
    server: Arc<ApiServer>,
    leadership: Arc<Leadership>,
    config: LeaderElectionConfig,
    transport: Transport,
    lease_name: String,
    next_id: usize,
}

impl Election {
    fn start(&mut self) -> Candidate {
        let id = format!("candidate-{}", self.next_id);
        self.next_id += 1;
        let requests = Arc::new(AtomicU64::new(0));
        let client = match self.transport {
            Transport::InProcess => kube::Client::new(
                Counted {
                    inner: self.server.service(),
                    requests: Arc::clone(&requests),
                },
                "default",
            ),
            Transport::Tcp => {
                kube::Client::try_from(kube::Config::new(self.server.url().parse().unwrap()))
                    .unwrap()
            }
        };
        let lock = LeaseLock::new(client, "default", &self.lease_name, &id);
        let (leadership, me) = (Arc::clone(&self.leadership), id.clone());
        let callbacks = LeaderCallbacks::new(
            move |leading: CancellationToken| {
                let (leadership, me) = (Arc::clone(&leadership), me.clone());
                async move {
                    *leadership.leader.lock() = Some((me.clone(), Instant::now()));
                    leadership.changed.notify_waiters();
                    leading.cancelled().await;
                    let mut leader = leadership.leader.lock();
                    if leader.as_ref().is_some_and(|(id, _)| *id == me) {
                        *leader = None;
                    }
                }
            },
            || {},
        );
        let elector = LeaderElector::new(lock, self.config.clone(), callbacks).unwrap();
        let cancel = CancellationToken::new();
        let run = tokio::spawn({
            let cancel = cancel.clone();
            async move { elector.run(cancel).await }
        });
        Candidate {
            id,
            requests,
            cancel,
            run,
        }
    }

    fn leader(&self) -> Option<(String, Instant)> {
        self.leadership.leader.lock().clone()
    }

    /// Waits for a leader other than `previous`; when it started.
    async fn next_leader(&self, previous: &str) -> (String, Instant) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let changed = self.leadership.changed.notified();
            if let Some((id, since)) = self.leader().filter(|(id, _)| id != previous) {
                return (id, since);
            }
            assert!(Instant::now() < deadline, "no new leader within 30 s");
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    }
}

struct Figures {
    leader_rps: f64,
    follower_rps: f64,
    releases: Vec<Duration>,
    crashes: Vec<Duration>,
}

fn describe(durations: &[Duration]) -> String {
    if durations.is_empty() {
        return "-".into();
    }
    let mut sorted = durations.to_vec();
    sorted.sort();
    let mean = sorted.iter().sum::<Duration>() / u32::try_from(sorted.len()).unwrap();
    format!(
        "mean {:.1} ms, max {:.1} ms (n={})",
        mean.as_secs_f64() * 1e3,
        sorted[sorted.len() - 1].as_secs_f64() * 1e3,
        sorted.len()
    )
}

async fn measure(
    watch_lock: bool,
    transport: Transport,
    handovers: usize,
    steady: Duration,
) -> Figures {
    let server = Arc::new(ApiServer::start(ApiServerConfig::default()).await.unwrap());
    let mut election = Election {
        server,
        leadership: Arc::default(),
        config: LeaderElectionConfig {
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(400),
            release_on_cancel: true,
            name: "failover".into(),
            watch_lock,
            ..LeaderElectionConfig::default()
        },
        transport,
        lease_name: "failover".into(),
        next_id: 0,
    };
    let mut candidates: Vec<Candidate> = (0..5).map(|_| election.start()).collect();
    let (mut leader, _) = election.next_leader("").await;

    // Steady state: let every follower settle into its rhythm, then count.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before: Vec<u64> = candidates
        .iter()
        .map(|c| c.requests.load(Ordering::Relaxed))
        .collect();
    tokio::time::sleep(steady).await;
    let seconds = steady.as_secs_f64();
    let (mut leader_rps, mut follower_total) = (0.0, 0.0);
    for (candidate, before) in candidates.iter().zip(before) {
        let rate = (candidate.requests.load(Ordering::Relaxed) - before) as f64 / seconds;
        if candidate.id == leader {
            leader_rps = rate;
        } else {
            follower_total += rate;
        }
    }
    let follower_rps = follower_total / (candidates.len() - 1) as f64;

    let mut releases = Vec::new();
    for _ in 0..handovers {
        let index = candidates.iter().position(|c| c.id == leader).unwrap();
        let stepping_down = candidates.remove(index);
        // Let the followers see the current holder before it goes.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let released_at = Instant::now();
        stepping_down.cancel.cancel();
        let (next, since) = election.next_leader(&leader).await;
        releases.push(since.saturating_duration_since(released_at));
        stepping_down.run.await.unwrap();
        leader = next;
        candidates.push(election.start());
    }

    let mut crashes = Vec::new();
    if transport == Transport::InProcess {
        for _ in 0..handovers.min(5) {
            let index = candidates.iter().position(|c| c.id == leader).unwrap();
            let crashed = candidates.remove(index);
            tokio::time::sleep(Duration::from_millis(500)).await;
            let crashed_at = Instant::now();
            crashed.run.abort();
            let (next, since) = election.next_leader(&leader).await;
            crashes.push(since.saturating_duration_since(crashed_at));
            leader = next;
            candidates.push(election.start());
        }
    }
    for candidate in candidates {
        candidate.cancel.cancel();
        let _ = candidate.run.await;
    }
    Figures {
        leader_rps,
        follower_rps,
        releases,
        crashes,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let (handovers, steady) = if quick {
        (3, Duration::from_secs(3))
    } else {
        (10, Duration::from_secs(10))
    };
    println!(
        "5 candidates; lease 3 s, renew deadline 2 s, retry period 0.4 s; {handovers} releases, {} crashes",
        handovers.min(5)
    );
    println!(
        "| followers | transport | leader req/s | follower req/s | release → new leader | crash → new leader |"
    );
    println!("|---|---|---|---|---|---|");
    for (watch_lock, label) in [(true, "watch"), (false, "poll (client-go)")] {
        let figures = measure(watch_lock, Transport::InProcess, handovers, steady).await;
        println!(
            "| {label} | in-process | {:.2} | {:.2} | {} | {} |",
            figures.leader_rps,
            figures.follower_rps,
            describe(&figures.releases),
            describe(&figures.crashes)
        );
        let figures = measure(watch_lock, Transport::Tcp, handovers, Duration::ZERO).await;
        println!(
            "| {label} | TCP | - | - | {} | - |",
            describe(&figures.releases)
        );
    }
}
