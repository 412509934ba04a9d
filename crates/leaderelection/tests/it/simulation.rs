//! Five candidates, a thousand rounds of crashes, releases, API errors, slow requests and
//! partitions against the embedded API server, on the paused clock: never two live leaders,
//! and every failover within its bound.
//!
//! `SIM_SEED=<n>` replays one seed; `SIM_ROUNDS=<n>` changes the number of rounds.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ctrlkit_apiserver::faults::Fault;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig, InProcessService};
use ctrlkit_leaderelection::{
    JITTER_FACTOR, LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock,
};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One candidate's network link: the server's in-process transport, which the simulation can
/// cut for this candidate alone.
#[derive(Clone)]
struct Link {
    inner: InProcessService,
    cut_until: Arc<Mutex<Option<Instant>>>,
    /// Requests sent, and how many at the current instant: a candidate that retries without
    /// letting time pass would hang the paused clock, so it fails the test instead.
    requests: Arc<Mutex<Requests>>,
}

#[derive(Default)]
struct Requests {
    total: u64,
    instant: Option<Instant>,
    at_instant: u32,
}

impl tower_service::Service<http::Request<kube::client::Body>> for Link {
    type Response = http::Response<ctrlkit_apiserver::in_process::InProcessBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        tower_service::Service::<http::Request<kube::client::Body>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        {
            let mut requests = self.requests.lock();
            let now = Instant::now();
            requests.total += 1;
            if requests.instant == Some(now) {
                requests.at_instant += 1;
                assert!(
                    requests.at_instant < 1_000,
                    "a candidate sent 1,000 requests without time passing (a busy loop)"
                );
            } else {
                requests.instant = Some(now);
                requests.at_instant = 1;
            }
        }
        let cut = self
            .cut_until
            .lock()
            .is_some_and(|until| Instant::now() < until);
        if cut {
            return Box::pin(async {
                Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into())
            });
        }
        Box::pin(self.inner.call(request))
    }
}

/// Log lines stamped with virtual time.
struct VirtualTime(Instant);

impl tracing_subscriber::fmt::time::FormatTime for VirtualTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        write!(w, "{:>10.3}", self.0.elapsed().as_secs_f64())
    }
}

/// What the simulation watches: who acts as leader right now.
#[derive(Default)]
struct World {
    live: Mutex<BTreeSet<String>>,
    double_leader_instants: Mutex<u32>,
    leaders_started: Mutex<u32>,
    changed: Notify,
}

/// Held by a leader's `on_started_leading` task while it acts as leader; dropping it (the
/// token fired, or the process crashed) ends the act.
struct Acting {
    world: Arc<World>,
    id: String,
}

impl Acting {
    fn start(world: &Arc<World>, id: &str) -> Self {
        let mut live = world.live.lock();
        if !live.is_empty() {
            *world.double_leader_instants.lock() += 1;
            eprintln!("two live leaders: {live:?} and {id}");
        }
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("{:?} {id} starts leading", Instant::now());
        }
        live.insert(id.to_owned());
        drop(live);
        *world.leaders_started.lock() += 1;
        world.changed.notify_waiters();
        Self {
            world: Arc::clone(world),
            id: id.to_owned(),
        }
    }
}

impl Drop for Acting {
    fn drop(&mut self) {
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("{:?} {} stops leading", Instant::now(), self.id);
        }
        self.world.live.lock().remove(&self.id);
        self.world.changed.notify_waiters();
    }
}

struct Candidate {
    id: String,
    link: Link,
    running: Option<(LeaderElector<LeaseLock>, CancellationToken, JoinHandle<()>)>,
    /// When a crashed or released candidate comes back.
    restart_at: Option<Instant>,
}

struct Simulation {
    server: ApiServer,
    world: Arc<World>,
    candidates: Vec<Candidate>,
    config: LeaderElectionConfig,
    rng: fastrand::Rng,
    figures: Figures,
}

#[derive(Debug, Default)]
struct Figures {
    crashes: Vec<Duration>,
    releases: Vec<Duration>,
    api_error_rounds: u32,
    slow_rounds: u32,
    partitions_one: u32,
    partitions_all: u32,
    leaders_started: u32,
    double_leader_instants: u32,
    requests_per_candidate_second: f64,
}

impl Simulation {
    async fn new(seed: u64, watch_lock: bool) -> Self {
        if std::env::var_os("SIM_TRACE").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter("ctrlkit_leaderelection=debug,simulation=info")
                .with_timer(VirtualTime(Instant::now()))
                .try_init();
        }
        fastrand::seed(seed);
        let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
        let world = Arc::new(World::default());
        let candidates = (0..5)
            .map(|n| Candidate {
                id: format!("candidate-{n}"),
                link: Link {
                    inner: server.service(),
                    cut_until: Arc::default(),
                    requests: Arc::default(),
                },
                running: None,
                restart_at: None,
            })
            .collect();
        Self {
            server,
            world,
            candidates,
            config: LeaderElectionConfig {
                release_on_cancel: true,
                name: "simulation".into(),
                watch_lock,
                ..LeaderElectionConfig::default()
            },
            rng: fastrand::Rng::with_seed(seed),
            figures: Figures::default(),
        }
    }

    fn start(&mut self, index: usize) {
        let candidate = &mut self.candidates[index];
        let client = kube::Client::new(candidate.link.clone(), "default");
        let lock = LeaseLock::new(client, "default", "simulation", &candidate.id);
        let (world, id) = (Arc::clone(&self.world), candidate.id.clone());
        let callbacks = LeaderCallbacks::new(
            move |leading: CancellationToken| {
                let acting = Acting::start(&world, &id);
                async move {
                    leading.cancelled().await;
                    drop(acting);
                }
            },
            || {},
        );
        let elector = LeaderElector::new(lock, self.config.clone(), callbacks).unwrap();
        let cancel = CancellationToken::new();
        let run = tokio::spawn({
            let (elector, cancel) = (elector.clone(), cancel.clone());
            let span = tracing::info_span!("candidate", id = %candidate.id);
            tracing::Instrument::instrument(async move { elector.run(cancel).await }, span)
        });
        candidate.running = Some((elector, cancel, run));
        candidate.restart_at = None;
    }

    /// Restarts candidates whose time has come, and those whose election ended by itself
    /// (leadership lost), as a process supervisor would.
    fn supervise(&mut self) {
        let now = Instant::now();
        for index in 0..self.candidates.len() {
            let candidate = &mut self.candidates[index];
            let ended = candidate
                .running
                .as_ref()
                .is_some_and(|(_, _, run)| run.is_finished());
            if ended {
                candidate.running = None;
                candidate.restart_at = Some(now);
            }
            if candidate.running.is_none() && candidate.restart_at.is_some_and(|at| at <= now) {
                self.start(index);
            }
        }
    }

    /// Lets `duration` of virtual time pass, supervising every 100 ms.
    async fn run_for(&mut self, duration: Duration) {
        let end = Instant::now() + duration;
        while Instant::now() < end {
            self.supervise();
            sleep_until((Instant::now() + Duration::from_millis(100)).min(end)).await;
        }
        self.supervise();
    }

    fn leader(&self) -> Option<String> {
        self.world.live.lock().iter().next().cloned()
    }

    /// Waits until some candidate acts as leader, at most `limit`; the time it took.
    async fn await_leader(&mut self, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        let end = start + limit;
        let world = Arc::clone(&self.world);
        loop {
            let changed = world.changed.notified();
            if self.leader().is_some() {
                return Some(start.elapsed());
            }
            if Instant::now() >= end {
                return None;
            }
            self.supervise();
            tokio::select! {
                () = changed => {}
                () = sleep_until((Instant::now() + Duration::from_millis(100)).min(end)) => {}
            }
        }
    }

    fn millis(&mut self, range: std::ops::Range<u64>) -> Duration {
        Duration::from_millis(self.rng.u64(range))
    }

    fn index_of(&self, id: &str) -> usize {
        self.candidates.iter().position(|c| c.id == id).unwrap()
    }

    fn restart_later(&mut self, index: usize) {
        let delay = Duration::from_millis(self.rng.u64(0..30_000));
        self.candidates[index].restart_at = Some(Instant::now() + delay);
    }

    async fn round(&mut self, seed: u64, round: usize) {
        let lease = self.config.lease_duration;
        let retry = self.config.retry_period;
        // A quiet start: with every fault gone, someone leads within a lease, a renew
        // deadline and a jittered retry.
        self.server.faults().clear();
        for candidate in &self.candidates {
            *candidate.link.cut_until.lock() = None;
        }
        let settle = lease + self.config.renew_deadline + retry.mul_f64(1.0 + JITTER_FACTOR);
        let settled = self.await_leader(settle + Duration::from_secs(30)).await;
        assert!(
            settled.is_some(),
            "no leader after faults stopped (replay: SIM_SEED={seed}, round {round})"
        );
        let pause = self.millis(0..5_000);
        self.run_for(pause).await;
        let action = self.rng.u32(0..100);
        if action < 45 {
            // Failover is measured with every candidate up and following for longer than a
            // jittered retry period, so each has observed the current holder.
            for candidate in &mut self.candidates {
                if candidate.running.is_none() {
                    candidate.restart_at = Some(Instant::now());
                }
            }
            self.run_for(retry.mul_f64(1.0 + JITTER_FACTOR) + Duration::from_millis(100))
                .await;
        }
        let Some(leader) = self.leader() else {
            return;
        };
        let index = self.index_of(&leader);
        if std::env::var_os("SIM_TRACE").is_some() {
            eprintln!("round {round}: action {action}, leader {leader}");
        }
        match action {
            // The leader's process dies: no release.
            0..25 => {
                let (_, _, run) = self.candidates[index].running.take().unwrap();
                run.abort();
                let _ = run.await;
                self.restart_later(index);
                let took = self.await_leader(lease * 3).await.unwrap_or_else(|| {
                    panic!("no leader after a crash (replay: SIM_SEED={seed}, round {round})")
                });
                self.figures.crashes.push(took);
            }
            // The leader shuts down gracefully and releases the lock.
            25..45 => {
                let (_, cancel, run) = self.candidates[index].running.take().unwrap();
                cancel.cancel();
                let released_at = Instant::now();
                // Until `run` returns the leader is still stepping down; the handover is
                // measured from the release.
                run.await.unwrap();
                let stepping_down = released_at.elapsed();
                self.restart_later(index);
                let took = self.await_leader(lease * 3).await.unwrap_or_else(|| {
                    panic!("no leader after a release (replay: SIM_SEED={seed}, round {round})")
                });
                self.figures.releases.push(took + stepping_down);
            }
            // The API server fails lease requests for a while.
            45..65 => {
                let fault = match self.rng.u32(0..3) {
                    0 => Fault::InternalError,
                    1 => Fault::ServiceUnavailable,
                    _ => Fault::TooManyRequests {
                        retry_after_seconds: 1,
                    },
                };
                let count = self.rng.usize(1..40);
                self.server
                    .faults()
                    .fail_next(count, None, Some("leases"), fault);
                self.figures.api_error_rounds += 1;
                let pause = self.millis(1_000..30_000);
                self.run_for(pause).await;
            }
            // Lease requests become slow.
            65..75 => {
                let delay = Duration::from_millis(self.rng.u64(100..12_000));
                let count = self.rng.usize(1..10);
                self.server
                    .faults()
                    .fail_next(count, None, Some("leases"), Fault::Delay(delay));
                self.figures.slow_rounds += 1;
                let pause = self.millis(1_000..30_000);
                self.run_for(pause).await;
            }
            // One candidate (often the leader) is cut off from the server.
            75..90 => {
                let cut = if self.rng.bool() {
                    index
                } else {
                    self.rng.usize(0..self.candidates.len())
                };
                let length = Duration::from_millis(self.rng.u64(1_000..40_000));
                *self.candidates[cut].link.cut_until.lock() = Some(Instant::now() + length);
                self.figures.partitions_one += 1;
                let pause = length + self.millis(0..5_000);
                self.run_for(pause).await;
            }
            // Everyone is cut off: the server's own partition.
            _ => {
                let length = Duration::from_millis(self.rng.u64(1_000..40_000));
                self.server.partition(length);
                self.figures.partitions_all += 1;
                let pause = length + self.millis(0..5_000);
                self.run_for(pause).await;
            }
        }
    }

    async fn run(mut self, seed: u64, rounds: usize) -> Figures {
        let started = Instant::now();
        for index in 0..self.candidates.len() {
            self.start(index);
        }
        for round in 0..rounds {
            self.round(seed, round).await;
            assert_eq!(
                *self.world.double_leader_instants.lock(),
                0,
                "two candidates acted as leader at once (replay: SIM_SEED={seed}, round {round})"
            );
        }
        for candidate in &mut self.candidates {
            if let Some((_, cancel, run)) = candidate.running.take() {
                cancel.cancel();
                run.await.unwrap();
            }
        }
        let requests: u64 = self
            .candidates
            .iter()
            .map(|candidate| candidate.link.requests.lock().total)
            .sum();
        self.figures.requests_per_candidate_second =
            requests as f64 / started.elapsed().as_secs_f64() / self.candidates.len() as f64;
        self.figures.leaders_started = *self.world.leaders_started.lock();
        self.figures.double_leader_instants = *self.world.double_leader_instants.lock();
        self.figures
    }
}

fn seed() -> u64 {
    std::env::var("SIM_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(20_261_122)
}

fn rounds(default: usize) -> usize {
    std::env::var("SIM_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(default)
}

fn summary(label: &str, figures: &Figures) {
    let max = |durations: &[Duration]| durations.iter().max().copied().unwrap_or_default();
    let mean = |durations: &[Duration]| {
        durations.iter().sum::<Duration>() / u32::try_from(durations.len().max(1)).unwrap()
    };
    eprintln!(
        "{label}: crashes {} (takeover mean {:?}, max {:?}), releases {} (mean {:?}, max {:?}), \
         API-error rounds {}, slow rounds {}, one cut off {}, all cut off {}; \
         terms of leadership {}, instants with two leaders {}, requests per candidate-second {:.2}",
        figures.crashes.len(),
        mean(&figures.crashes),
        max(&figures.crashes),
        figures.releases.len(),
        mean(&figures.releases),
        max(&figures.releases),
        figures.api_error_rounds,
        figures.slow_rounds,
        figures.partitions_one,
        figures.partitions_all,
        figures.leaders_started,
        figures.double_leader_instants,
        figures.requests_per_candidate_second,
    );
}

#[tokio::test(start_paused = true)]
async fn watching_candidates_never_overlap_and_fail_over_within_bounds() {
    let seed = seed();
    let simulation = Simulation::new(seed, true).await;
    let config = simulation.config.clone();
    let figures = simulation.run(seed, rounds(1_000)).await;
    summary("watching", &figures);
    assert!(!figures.crashes.is_empty() && !figures.releases.is_empty());
    // A crashed leader's lock is taken when its lease, observed through the watch at the last
    // renewal, runs out.
    let crash_bound = config.lease_duration + config.retry_period.mul_f64(JITTER_FACTOR);
    for took in &figures.crashes {
        assert!(
            *took <= crash_bound,
            "crash takeover {took:?} > {crash_bound:?} (SIM_SEED={seed})"
        );
    }
    // A released lock is taken in the same instant of virtual time: one round trip, which
    // costs no virtual time in process.
    for took in &figures.releases {
        assert!(
            took.is_zero(),
            "release takeover {took:?} (SIM_SEED={seed})"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn polling_candidates_never_overlap_and_fail_over_within_bounds() {
    let seed = seed();
    let simulation = Simulation::new(seed, false).await;
    let config = simulation.config.clone();
    let figures = simulation.run(seed, rounds(300)).await;
    summary("polling", &figures);
    assert!(!figures.crashes.is_empty() && !figures.releases.is_empty());
    // Polling sees each renewal up to one jittered retry period late, and then waits for the
    // lease from that observation.
    let jittered = config.retry_period.mul_f64(1.0 + JITTER_FACTOR);
    let crash_bound = config.lease_duration + jittered;
    for took in &figures.crashes {
        assert!(
            *took <= crash_bound,
            "crash takeover {took:?} > {crash_bound:?} (SIM_SEED={seed})"
        );
    }
    for took in &figures.releases {
        assert!(
            *took <= jittered,
            "release takeover {took:?} > {jittered:?} (SIM_SEED={seed})"
        );
    }
}
