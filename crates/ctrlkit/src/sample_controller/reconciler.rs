//! The reconciler: keep each Foo's Deployment as the Foo asks, and report how it is doing,
//! writing either as client-go's sample-controller does (create, then patch what differs) or
//! by server-side apply (state the whole Deployment and status; the server merges).

use std::sync::Arc;

use ctrlkit_cache::{Lister, split_meta_namespace_key};
use ctrlkit_controller::{Action, Context, ReconcileError, Reconciler};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::events::EventRecorder;
use super::{Foo, FooStatus, is_controlled_by, new_deployment};

/// Reconciles a Foo: creates its Deployment if missing, sets its replicas, and mirrors its
/// available replicas in the Foo's status. A Deployment of that name that the Foo does not
/// control is left alone, and the error retried, until its owner (or its name) changes. Made by
/// [`build`](super::build).
#[derive(Clone)]
pub struct SampleController {
    pub(super) client: Client,
    pub(super) foos: Lister<Foo>,
    pub(super) deployments: Lister<Deployment>,
    pub(super) events: EventRecorder,
    pub(super) writes: Writes,
}

/// How the sample-controller writes the Deployment and the Foo's status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Writes {
    /// As client-go's sample-controller: create the Deployment if missing, merge-patch its
    /// replicas when they differ, merge-patch the Foo's status when it differs.
    #[default]
    Patch,
    /// Server-side apply, under the controller's name as field manager: apply the whole
    /// Deployment the Foo asks for, and the status it reports. The server creates, merges and
    /// skips writes that change nothing.
    Apply,
}

impl SampleController {
    /// The same controller, writing as `writes` says.
    pub fn with_writes(self, writes: Writes) -> Self {
        Self { writes, ..self }
    }
}

impl Reconciler for SampleController {
    async fn reconcile(&self, key: &str, ctx: &Context) -> Result<Action, ReconcileError> {
        let (namespace, name) = split_meta_namespace_key(key)?;
        let namespace = namespace.unwrap_or_default();
        let Some(foo) = self.foos.get(Some(namespace), name) else {
            return Ok(Action::done()); // gone: the garbage collector deletes its Deployment
        };
        let wanted = &foo.spec.deployment_name;
        if wanted.is_empty() {
            let message = "spec.deploymentName is empty, so there is nothing to manage";
            self.events.warn(&foo, "InvalidSpec", message).await;
            return Err(ReconcileError::terminal(format!("Foo {key}: {message}")));
        }
        let deployments = Api::<Deployment>::namespaced(self.client.clone(), namespace);
        let foos = Api::<Foo>::namespaced(self.client.clone(), namespace);
        let deployment = match self.writes {
            Writes::Patch => self.patch_deployment(&deployments, &foo).await?,
            Writes::Apply => self.apply_deployment(&deployments, &foo, ctx).await?,
        };
        let available = deployment
            .status
            .as_ref()
            .and_then(|s| s.available_replicas);
        let status = FooStatus {
            available_replicas: available.unwrap_or(0),
        };
        if foo.status.as_ref() != Some(&status) {
            match self.writes {
                Writes::Patch => {
                    let patch = Patch::Merge(json!({ "status": status }));
                    foos.patch_status(name, &PatchParams::default(), &patch)
                        .await?;
                }
                Writes::Apply => {
                    ctx.apply_status(&foos, name, &status).await?;
                }
            }
        }
        let message = "its Deployment is as the spec asks";
        self.events.normal(&foo, "Synced", message).await;
        Ok(Action::done())
    }
}

impl SampleController {
    /// The Foo's Deployment, created if missing and its replicas patched if they differ.
    async fn patch_deployment(
        &self,
        deployments: &Api<Deployment>,
        foo: &Foo,
    ) -> Result<Arc<Deployment>, ReconcileError> {
        let namespace = foo.metadata.namespace.as_deref();
        let wanted = &foo.spec.deployment_name;
        let mut deployment = match self.deployments.get(namespace, wanted) {
            Some(deployment) => deployment,
            None => Arc::new(
                deployments
                    .create(&Default::default(), &new_deployment(foo)?)
                    .await?,
            ),
        };
        self.check_controlled(&deployment, foo).await?;
        if foo.spec.replicas.is_some() && foo.spec.replicas != deployment.spec.replicas {
            let patch = Patch::Merge(json!({"spec": {"replicas": foo.spec.replicas}}));
            let params = PatchParams::default();
            deployment = Arc::new(deployments.patch(wanted, &params, &patch).await?);
        }
        Ok(deployment)
    }

    /// The Foo's Deployment as applied: the whole Deployment the Foo asks for. One the Foo
    /// does not control is left alone (as far as the cache knows: a forced apply would take
    /// its fields).
    async fn apply_deployment(
        &self,
        deployments: &Api<Deployment>,
        foo: &Foo,
        ctx: &Context,
    ) -> Result<Arc<Deployment>, ReconcileError> {
        let namespace = foo.metadata.namespace.as_deref();
        if let Some(existing) = self.deployments.get(namespace, &foo.spec.deployment_name) {
            self.check_controlled(&existing, foo).await?;
        }
        let applied = ctx.apply(deployments, &new_deployment(foo)?).await?;
        self.check_controlled(&applied, foo).await?;
        Ok(Arc::new(applied))
    }

    /// An error (and a warning event) unless `deployment` is controlled by `foo`.
    async fn check_controlled(
        &self,
        deployment: &Deployment,
        foo: &Foo,
    ) -> Result<(), ReconcileError> {
        if is_controlled_by(deployment, foo) {
            return Ok(());
        }
        let wanted = &foo.spec.deployment_name;
        let message = format!("Deployment {wanted} exists and is not controlled by this Foo");
        self.events.warn(foo, "ErrResourceExists", &message).await;
        Err(ReconcileError::retry(message))
    }
}
