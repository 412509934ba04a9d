//! The `ctrlkit` command: `ctrlkit demo` runs the sample-controller with leader election through
//! a workload and checks the result; `ctrlkit apiserver` serves the embedded Kubernetes API
//! server until stopped, and writes a kubeconfig that kubectl and kube-client accept.

mod demo;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};

/// Kubernetes controller machinery in Rust.
#[derive(Parser, Debug)]
#[command(name = "ctrlkit", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run three sample-controller replicas with leader election through a stream of Foos
    /// (created, scaled, deleted), kill the leader midway, and check that every Deployment
    /// matches its Foo. Runs on the embedded API server unless given a kubeconfig.
    Demo {
        /// How many Foos to create.
        #[arg(long, default_value_t = 200)]
        foos: usize,
        /// How many controller replicas.
        #[arg(long, default_value_t = 3)]
        replicas: usize,
        /// Workers per replica.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// The namespace for the Foos.
        #[arg(long, default_value = "ctrlkit-demo")]
        namespace: String,
        /// Run against this cluster (also taken from KUBECONFIG) instead of the embedded server.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
    /// Serve the embedded Kubernetes API server until stopped (Ctrl-C).
    Apiserver {
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        bind: IpAddr,
        /// The port to listen on; 0 picks a free one.
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Write a kubeconfig for the server to this file.
        #[arg(long)]
        kubeconfig_out: Option<PathBuf>,
        /// Serve the fault hooks' admin endpoint (/admin/faults/...): for reliability tests
        /// only, since anyone who reaches it can break the server.
        #[arg(long)]
        admin: bool,
    },
}

/// A kubeconfig with one cluster, user and context for the server at `url`.
fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: ctrlkit\n  cluster:\n    server: {url}\nusers:\n- name: ctrlkit\n  user: {{}}\ncontexts:\n- name: ctrlkit\n  context:\n    cluster: ctrlkit\n    user: ctrlkit\n    namespace: default\ncurrent-context: ctrlkit\n"
    )
}

async fn apiserver(
    bind: IpAddr,
    port: u16,
    kubeconfig_out: Option<PathBuf>,
    admin: bool,
) -> ExitCode {
    let mut config = ApiServerConfig {
        address: SocketAddr::new(bind, port),
        ..ApiServerConfig::default()
    };
    config.rest.admin = admin;
    let server = match ApiServer::start(config).await {
        Ok(server) => server,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(path) = kubeconfig_out {
        if let Err(error) = std::fs::write(&path, kubeconfig(&server.url())) {
            eprintln!(
                "error: cannot write the kubeconfig {}: {error}",
                path.display()
            );
            return ExitCode::FAILURE;
        }
        println!("kubeconfig written to {}", path.display());
    }
    println!("serving the Kubernetes API at {}", server.url());
    if let Err(error) = tokio::signal::ctrl_c().await {
        eprintln!("error: cannot wait for Ctrl-C: {error}");
    }
    server.shutdown().await;
    ExitCode::SUCCESS
}

#[tokio::main]
async fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Demo {
            foos,
            replicas,
            workers,
            namespace,
            kubeconfig,
        } => {
            let kubeconfig =
                kubeconfig.or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from));
            let options = demo::DemoOptions {
                foos,
                replicas: replicas.max(1),
                workers: workers.max(1),
                namespace,
                kubeconfig,
            };
            match demo::run(options).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("error: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Apiserver {
            bind,
            port,
            kubeconfig_out,
            admin,
        } => apiserver(bind, port, kubeconfig_out, admin).await,
    }
}
