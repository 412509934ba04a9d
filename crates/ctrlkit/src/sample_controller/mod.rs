//! Kubernetes' sample-controller on ctrlkit: for every [`Foo`], a Deployment of the name and size
//! it asks for, owned by it, with the Deployment's available replicas in the Foo's status.
//!
//! ```no_run
//! use std::time::Duration;
//! use ctrlkit::cache::SharedInformerFactory;
//! use ctrlkit::sample_controller;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! sample_controller::install_crd(client.clone(), Duration::from_secs(30)).await?;
//! let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
//! let (controller, reconciler) = sample_controller::build(client, &factory, None);
//! let cancel = CancellationToken::new();
//! factory.start(&cancel);
//! controller.workers(2).run(reconciler, cancel).await?;
//! # Ok(()) }
//! ```

// `foo` is the name of the resource here, not a placeholder.
#![allow(clippy::disallowed_names)]

mod crd;
mod deployment;
mod foo;
mod reconciler;
mod records;

pub use crd::{InstallError, foo_crd, install_crd, is_established};
pub use deployment::{UnsavedFoo, is_controlled_by, new_deployment};
pub use foo::{Foo, FooSpec, FooStatus};
pub use reconciler::{FINALIZER, SampleController, Writes};
pub use records::{ExternalRecord, ExternalRecords};

use ctrlkit_cache::{Lister, SharedInformerFactory};
use ctrlkit_controller::Controller;
use ctrlkit_controller::events::EventRecorder;
use ctrlkit_controller::predicate::GenerationChanged;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;

/// The controller's name, in its metrics, logs and events.
pub const NAME: &str = "sample-controller";

/// The sample-controller, ready to run: a [`Controller`] over the Foos of `namespace` (all
/// namespaces if `None`) that reconciles a Foo when its spec changes (not when the controller
/// writes its status: a [`GenerationChanged`] predicate) or a Deployment it controls changes,
/// and its reconciler. Events go out as `events.k8s.io/v1` Events reported by [`NAME`] from
/// this host. The informers come from `factory`: start it after this call. The caller
/// may still set `.workers(n)`, `.leader_election(lock, config)`, `.health(health)` and the
/// rest on the controller. The reconciler writes by server-side apply;
/// [`SampleController::with_writes`] with [`Writes::Patch`] makes it create and merge-patch
/// as client-go's sample-controller does.
pub fn build(
    client: Client,
    factory: &SharedInformerFactory,
    namespace: Option<&str>,
) -> (Controller<Foo>, SampleController) {
    let (foos, deployments) = match namespace {
        Some(namespace) => (
            factory.namespaced_informer::<Foo>(namespace),
            factory.namespaced_informer::<Deployment>(namespace),
        ),
        None => (factory.informer::<Foo>(), factory.informer::<Deployment>()),
    };
    let instance = std::env::var("HOSTNAME").unwrap_or_else(|_| "local".to_owned());
    let reconciler = SampleController {
        events: EventRecorder::new(client.clone(), NAME, &format!("{NAME}-{instance}")),
        client,
        foos: Lister::new(foos.get_indexer()),
        deployments: Lister::new(deployments.get_indexer()),
        records: ExternalRecords::default(),
        writes: Writes::default(),
    };
    let controller = Controller::new(NAME, foos)
        .predicate(GenerationChanged)
        .owns(deployments);
    (controller, reconciler)
}
