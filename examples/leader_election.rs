//! Leader election between candidates, each printing who leads.
//!
//! With no kubeconfig, one process shows the whole story on the embedded API server: three
//! candidates race for a Lease, the leader hands it over with a release, then the next leader
//! crashes and a follower takes over when the lease runs out.
//!
//! `cargo run -p ctrlkit-examples --example leader_election`
//!
//! With a kubeconfig, each process is one candidate until Ctrl-C (which releases the lock), so
//! several processes (or pods) elect among themselves on a real cluster or on `ctrlkit apiserver`:
//!
//! ```text
//! cargo run -p ctrlkit -- apiserver --port 8080 --kubeconfig-out /tmp/ctrlkit.kubeconfig &
//! cargo run -p ctrlkit-examples --example leader_election -- --kubeconfig /tmp/ctrlkit.kubeconfig --id a &
//! cargo run -p ctrlkit-examples --example leader_election -- --kubeconfig /tmp/ctrlkit.kubeconfig --id b
//! ```

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use ctrlkit::apiserver::{ApiServer, ApiServerConfig};
use ctrlkit::leaderelection::{
    AnyLock, LeaderCallbacks, LeaderElectionConfig, LeaderElector, resource_lock,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Elect a leader among candidates.
#[derive(Parser, Debug)]
struct Args {
    /// This candidate's identity (with a kubeconfig).
    #[arg(long)]
    id: Option<String>,
    /// Run one candidate against the cluster of this kubeconfig (also `KUBECONFIG`).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The kind of lock: leases, configmaps, endpoints, configmapsleases, endpointsleases.
    #[arg(long, default_value = "leases")]
    lock: String,
    /// The lock's namespace.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// The lock's name.
    #[arg(long, default_value = "example-leader")]
    name: String,
}

fn candidate(
    client: Client,
    args: &Args,
    id: &str,
    started: Instant,
) -> Result<LeaderElector<AnyLock>, Box<dyn std::error::Error>> {
    let lock = resource_lock::new(&args.lock, client, &args.namespace, &args.name, id)?
        .with_event_recorder("leader-election-example");
    let config = LeaderElectionConfig {
        release_on_cancel: true,
        name: args.name.clone(),
        ..LeaderElectionConfig::default()
    };
    let me = id.to_owned();
    let at = move || format!("{:>6.1}s", started.elapsed().as_secs_f64());
    let (me_start, me_stop) = (me.clone(), me.clone());
    let callbacks = LeaderCallbacks::new(
        move |leading: CancellationToken| {
            let me = me_start.clone();
            async move {
                println!("{} {me}: I lead now", at());
                leading.cancelled().await;
                println!("{} {me}: my leadership ended", at());
            }
        },
        move || println!("{} {me_stop}: stopped", at()),
    )
    .on_new_leader(move |leader| {
        let leader = if leader.is_empty() {
            "nobody (released)"
        } else {
            leader
        };
        println!("{} {me}: the leader is {leader}", at());
    });
    Ok(LeaderElector::new(lock, config, callbacks)?)
}

/// One candidate until Ctrl-C.
async fn run_one(args: &Args, kubeconfig: &PathBuf) -> Result<(), Box<dyn std::error::Error>> {
    let id = args
        .id
        .clone()
        .ok_or("--id is required with a kubeconfig")?;
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let elector = candidate(Client::try_from(config)?, args, &id, Instant::now())?;
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        on_signal.cancel();
    });
    elector.run(cancel).await;
    Ok(())
}

/// Three candidates in this process on the embedded API server.
async fn run_demo(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let server = ApiServer::start(ApiServerConfig::default()).await?;
    let client = Client::try_from(Config::new(server.url().parse()?))?;
    let started = Instant::now();
    let mut candidates: Vec<Candidate> = Vec::new();
    for id in ["a", "b", "c"] {
        let elector = candidate(client.clone(), args, id, started)?;
        let cancel = CancellationToken::new();
        let run = tokio::spawn({
            let (elector, cancel) = (elector.clone(), cancel.clone());
            async move { elector.run(cancel).await }
        });
        candidates.push((elector, cancel, run));
        // The first one wins the race for a fresh lock.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let first = leader(&candidates).ok_or("no leader after 3 s")?;
    println!("--- the leader steps down and releases the lock");
    let released_at = Instant::now();
    let (_, cancel, run) = candidates.remove(first);
    cancel.cancel();
    run.await?;
    let second = wait_for_leader(&candidates).await?;
    println!(
        "--- taken over {} ms after the release",
        released_at.elapsed().as_millis()
    );

    println!("--- the leader crashes (no release)");
    let crashed_at = Instant::now();
    let (_, _, run) = candidates.remove(second);
    run.abort();
    wait_for_leader(&candidates).await?;
    println!(
        "--- taken over {:.1} s after the crash (lease duration 15 s)",
        crashed_at.elapsed().as_secs_f64()
    );
    for (_, cancel, run) in candidates {
        cancel.cancel();
        run.await?;
    }
    server.shutdown().await;
    Ok(())
}

/// A candidate of the demo: its elector, what cancels it, and its running election.
type Candidate = (LeaderElector<AnyLock>, CancellationToken, JoinHandle<()>);

fn leader(candidates: &[Candidate]) -> Option<usize> {
    candidates
        .iter()
        .position(|(elector, _, _)| elector.is_leader())
}

async fn wait_for_leader(candidates: &[Candidate]) -> Result<usize, Box<dyn std::error::Error>> {
    for _ in 0..300 {
        if let Some(index) = leader(candidates) {
            return Ok(index);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("no new leader within 30 s".into())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let kubeconfig = args
        .kubeconfig
        .clone()
        .or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from));
    match &kubeconfig {
        Some(kubeconfig) => run_one(&args, kubeconfig).await,
        None => run_demo(&args).await,
    }
}
