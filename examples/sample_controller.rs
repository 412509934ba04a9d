//! Kubernetes' sample-controller on ctrlkit: every `Foo` gets a Deployment of the name and size
//! it asks for.
//!
//! `cargo run -p ctrlkit-examples --example sample_controller`
//!
//! The reconciler states the whole Deployment and the Foo's status by server-side apply under its
//! own field manager; `--patch` runs client-go's way instead (create, then merge-patch what
//! differs).
//!
//! With no kubeconfig, one process shows the whole story on the embedded API server: the Foo CRD
//! is installed, the controller starts, two Foos are created, one is scaled (and its Deployment's
//! status played, since no Deployment controller runs there), the other deleted; the example
//! exits 0 once every Deployment matches its Foo.
//!
//! With `--kubeconfig FILE` it only runs the controller against that cluster until Ctrl-C
//! (`--install-crd` installs the CRD first):
//!
//! ```text
//! cargo run -p ctrlkit -- apiserver --port 8080 --kubeconfig-out /tmp/ctrlkit.kubeconfig &
//! cargo run -p ctrlkit-examples --example sample_controller -- --kubeconfig /tmp/ctrlkit.kubeconfig --install-crd
//! ```

// `foo` is the name of the resource here, not a placeholder.
#![allow(clippy::disallowed_names)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use ctrlkit::apiserver::{ApiServer, ApiServerConfig};
use ctrlkit::cache::SharedInformerFactory;
use ctrlkit::sample_controller::{self, Foo, FooSpec, Writes};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

type Error = Box<dyn std::error::Error>;

/// Run the sample-controller.
#[derive(Parser, Debug)]
struct Args {
    /// Run the controller against the cluster of this kubeconfig until Ctrl-C.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// With a kubeconfig: install the Foo CRD before starting.
    #[arg(long)]
    install_crd: bool,
    /// Only this namespace's Foos (all namespaces with a kubeconfig if unset).
    #[arg(long)]
    namespace: Option<String>,
    /// Write by create and merge patch, as client-go's sample-controller, rather than by
    /// server-side apply.
    #[arg(long)]
    patch: bool,
}

impl Args {
    fn writes(&self) -> Writes {
        if self.patch {
            Writes::Patch
        } else {
            Writes::Apply
        }
    }
}

/// Starts the controller with two workers; it runs until `cancel` fires.
fn start_controller(
    client: Client,
    namespace: Option<&str>,
    writes: Writes,
    cancel: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let (controller, reconciler) = sample_controller::build(client, &factory, namespace);
    let reconciler = reconciler.with_writes(writes);
    factory.start(cancel);
    let cancel = cancel.clone();
    tokio::spawn(async move {
        if let Err(error) = controller.workers(2).run(reconciler, cancel).await {
            eprintln!("the controller stopped: {error}");
        }
    })
}

/// Polls `check` every 50 ms until it gives a value, for up to ten seconds.
async fn wait_for<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> Result<T, Error> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some(value) = check().await {
            return Ok(value);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("timed out waiting for {what}").into())
}

/// Waits until the Deployment `name` exists with `replicas` replicas.
async fn deployment_with(
    deployments: &Api<Deployment>,
    name: &str,
    replicas: i32,
) -> Result<Deployment, Error> {
    let what = format!("Deployment {name} with {replicas} replicas");
    wait_for(&what, async || {
        let deployment = deployments.get_opt(name).await.ok()??;
        (deployment.spec.replicas == Some(replicas)).then_some(deployment)
    })
    .await
}

/// Whether every Foo's Deployment exists, is controlled by it and has its replicas.
async fn check(foos: &Api<Foo>, deployments: &Api<Deployment>) -> Result<usize, Error> {
    let foos = foos.list(&ListParams::default()).await?.items;
    for foo in &foos {
        let name = &foo.spec.deployment_name;
        let deployment = deployments.get(name).await?;
        if !sample_controller::is_controlled_by(&deployment, foo) {
            return Err(format!("Deployment {name} is not controlled by its Foo").into());
        }
        if deployment.spec.replicas != foo.spec.replicas {
            return Err(format!("Deployment {name} has the wrong number of replicas").into());
        }
    }
    Ok(foos.len())
}

/// The whole story on the embedded API server.
async fn run_demo(namespace: &str, writes: Writes) -> Result<(), Error> {
    let server = ApiServer::start(ApiServerConfig::default()).await?;
    println!("embedded API server at {}", server.url());
    let client = Client::try_from(Config::new(server.url().parse()?))?;
    sample_controller::install_crd(client.clone(), Duration::from_secs(10)).await?;
    println!("CRD foos.samplecontroller.k8s.io installed and established");
    let cancel = CancellationToken::new();
    let controller = start_controller(client.clone(), Some(namespace), writes, &cancel);
    println!("controller running (2 workers, writing by {writes:?})");

    let foos: Api<Foo> = Api::namespaced(client.clone(), namespace);
    let deployments: Api<Deployment> = Api::namespaced(client, namespace);
    for (name, replicas) in [("web", 1), ("batch", 2)] {
        let spec = FooSpec {
            deployment_name: format!("{name}-nginx"),
            replicas: Some(replicas),
        };
        foos.create(&PostParams::default(), &Foo::new(name, spec))
            .await?;
        println!("created Foo {name} asking for {replicas} replica(s)");
    }
    for (name, replicas) in [("web-nginx", 1), ("batch-nginx", 2)] {
        let deployment = deployment_with(&deployments, name, replicas).await?;
        let owner = deployment.metadata.owner_references.unwrap_or_default();
        let owner = owner.first().map_or("nobody", |owner| owner.name.as_str());
        println!(
            "  the controller created Deployment {name}: {replicas} replica(s), owned by Foo {owner}"
        );
    }

    let scale = Patch::Merge(json!({"spec": {"replicas": 3}}));
    foos.patch("web", &PatchParams::default(), &scale).await?;
    println!("scaled Foo web to 3 replicas");
    deployment_with(&deployments, "web-nginx", 3).await?;
    println!("  the controller scaled Deployment web-nginx to 3");
    let available = Patch::Merge(json!({"status": {"replicas": 3, "availableReplicas": 3}}));
    deployments
        .patch_status("web-nginx", &PatchParams::default(), &available)
        .await?;
    println!(
        "reported 3 available replicas on Deployment web-nginx (no Deployment controller here)"
    );
    wait_for("Foo web's status", async || {
        let foo = foos.get("web").await.ok()?;
        (foo.status?.available_replicas == 3).then_some(())
    })
    .await?;
    println!("  the controller mirrored them: Foo web's status says 3 available");

    foos.delete("batch", &DeleteParams::default()).await?;
    println!("deleted Foo batch");
    wait_for("Deployment batch-nginx to go", async || {
        deployments
            .get_opt("batch-nginx")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await?;
    println!("  the garbage collector deleted Deployment batch-nginx with its owner");

    let checked = check(&foos, &deployments).await?;
    println!("every Deployment matches its Foo ({checked} Foo(s) checked)");
    cancel.cancel();
    controller.await?;
    server.shutdown().await;
    Ok(())
}

/// The controller against a real cluster until Ctrl-C.
async fn run_against(args: &Args, kubeconfig: &Path) -> Result<(), Error> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    if args.install_crd {
        sample_controller::install_crd(client.clone(), Duration::from_secs(60)).await?;
        println!("CRD foos.samplecontroller.k8s.io installed and established");
    }
    let cancel = CancellationToken::new();
    let controller = start_controller(client, args.namespace.as_deref(), args.writes(), &cancel);
    println!("controller running (2 workers); Ctrl-C stops it");
    tokio::signal::ctrl_c().await?;
    cancel.cancel();
    controller.await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args = Args::parse();
    match &args.kubeconfig {
        Some(kubeconfig) => run_against(&args, kubeconfig).await,
        None => {
            run_demo(
                args.namespace.as_deref().unwrap_or("default"),
                args.writes(),
            )
            .await
        }
    }
}
