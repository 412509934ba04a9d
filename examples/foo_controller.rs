//! The README's controller, whole: Kubernetes' sample-controller in one file, run on the
//! embedded API server. `cargo run -p ctrlkit-examples --example foo_controller`
#![allow(clippy::disallowed_names)] // `foo` is the resource's name here

use std::time::Duration;

use ctrlkit::apiserver::{ApiServer, ApiServerConfig};
use ctrlkit::cache::{Lister, SharedInformerFactory, split_meta_namespace_key};
use ctrlkit::controller::predicate::GenerationChanged;
use ctrlkit::controller::{Action, Context, Controller, ReconcileError, Reconciler};
use ctrlkit::leaderelection::{LeaderElectionConfig, LeaseLock};
use ctrlkit::sample_controller::{Foo, FooSpec, install_crd, is_controlled_by, new_deployment};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct FooController {
    client: kube::Client,
    foos: Lister<Foo>,
    deployments: Lister<Deployment>,
}

impl Reconciler for FooController {
    async fn reconcile(&self, key: &str, _: &Context) -> Result<Action, ReconcileError> {
        let (namespace, name) = split_meta_namespace_key(key)?;
        let namespace = namespace.unwrap_or_default();
        let Some(foo) = self.foos.get(Some(namespace), name) else {
            return Ok(Action::done()); // deleted: its Deployment goes with it (owner reference)
        };
        let wanted = &foo.spec.deployment_name;
        if wanted.is_empty() {
            return Err(ReconcileError::terminal("spec.deploymentName is empty")); // not retried
        }
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
        let deployment = match self.deployments.get(Some(namespace), wanted) {
            Some(deployment) => deployment.as_ref().clone(),
            None => {
                api.create(&PostParams::default(), &new_deployment(&foo)?)
                    .await?
            }
        };
        if !is_controlled_by(&deployment, &foo) {
            return Err(ReconcileError::retry(format!(
                "{wanted} belongs to someone else"
            )));
        }
        if foo.spec.replicas.is_some() && foo.spec.replicas != deployment.spec.replicas {
            let patch = Patch::Merge(json!({"spec": {"replicas": foo.spec.replicas}}));
            api.patch(wanted, &PatchParams::default(), &patch).await?;
        }
        let available = deployment
            .status
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        let foos: Api<Foo> = Api::namespaced(self.client.clone(), namespace);
        let status = Patch::Merge(json!({"status": {"availableReplicas": available}}));
        foos.patch_status(name, &PatchParams::default(), &status)
            .await?;
        Ok(Action::done()) // an error above (`?`) is retried with backoff instead
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // An API server in this process; `kube::Client::try_default().await?` is a real cluster.
    let server = ApiServer::start(ApiServerConfig::default()).await?;
    let client = kube::Client::new(server.service(), "default");
    install_crd(client.clone(), Duration::from_secs(30)).await?;

    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let (foos, deployments) = (factory.informer::<Foo>(), factory.informer::<Deployment>());
    let reconciler = FooController {
        client: client.clone(),
        foos: Lister::new(foos.get_indexer()),
        deployments: Lister::new(deployments.get_indexer()),
    };
    let pod_name = std::env::var("HOSTNAME").unwrap_or_else(|_| "local".to_owned());
    let lock = LeaseLock::new(client.clone(), "default", "sample-controller", &pod_name);
    let controller = Controller::new("sample-controller", foos)
        .predicate(GenerationChanged) // not woken by its own status writes
        .owns(deployments) // a change to a Deployment a Foo controls reconciles that Foo
        .workers(2)
        .leader_election(lock, LeaderElectionConfig::default());
    let cancel = CancellationToken::new();
    factory.start(&cancel);

    // Ask for a Deployment, and stop once it is there.
    let spec = FooSpec {
        deployment_name: "example-nginx".into(),
        replicas: Some(2),
    };
    let foos: Api<Foo> = Api::namespaced(client.clone(), "default");
    foos.create(&PostParams::default(), &Foo::new("example", spec))
        .await?;
    let (deployments, stop) = (
        Api::<Deployment>::namespaced(client, "default"),
        cancel.clone(),
    );
    tokio::spawn(async move {
        while deployments
            .get_opt("example-nginx")
            .await
            .ok()
            .flatten()
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!("Foo example has its Deployment example-nginx");
        stop.cancel();
    });
    controller.run(reconciler, cancel).await?;
    Ok(())
}
