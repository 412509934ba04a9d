//! The reconciler: keep each Foo's Deployment as the Foo asks, and report how it is doing,
//! writing either as client-go's sample-controller does (create, then patch what differs) or
//! by server-side apply (state the whole Deployment and status; the server merges). Each Foo
//! also has a record outside the cluster, deleted under the Foo's finalizer before it goes.

use std::sync::Arc;

use ctrlkit_cache::{Lister, split_meta_namespace_key};
use ctrlkit_controller::events::{Event, EventRecorder, EventType};
use ctrlkit_controller::finalizer::{FinalizerEvent, finalizer};
use ctrlkit_controller::{Action, Context, ReconcileError, Reconciler};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource};
use serde_json::json;

use super::records::{ExternalRecord, ExternalRecords};
use super::{Foo, FooStatus, is_controlled_by, new_deployment};

/// The finalizer that keeps a Foo until its external record is deleted.
pub const FINALIZER: &str = "samplecontroller.k8s.io/external-record";

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
    pub(super) records: ExternalRecords,
    pub(super) writes: Writes,
}

/// How the sample-controller writes the Deployment and the Foo's status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Writes {
    /// As client-go's sample-controller: create the Deployment if missing, merge-patch its
    /// replicas when they differ, merge-patch the Foo's status when it differs.
    Patch,
    /// Server-side apply, under the controller's name as field manager (the default): apply
    /// the whole Deployment the Foo asks for, and the status it reports. The server creates,
    /// merges and skips writes that change nothing.
    #[default]
    Apply,
}

impl SampleController {
    /// The same controller, writing as `writes` says.
    pub fn with_writes(self, writes: Writes) -> Self {
        Self { writes, ..self }
    }

    /// The same controller, keeping its records in `records` (shared with another controller,
    /// or with the one before a restart).
    pub fn with_records(self, records: ExternalRecords) -> Self {
        Self { records, ..self }
    }

    /// The records it keeps outside the cluster, one per Foo.
    pub fn records(&self) -> &ExternalRecords {
        &self.records
    }

    /// Publishes an event about `foo`. Best effort: a failure is logged, never returned, since
    /// an event must not fail the work it describes.
    async fn event(&self, foo: &Foo, type_: EventType, reason: &str, note: &str) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            action: "Reconciling".to_owned(),
            note: Some(note.to_owned()),
            secondary: None,
        };
        if let Err(error) = self.events.publish(&event, &foo.object_ref(&())).await {
            tracing::warn!(%error, reason, "could not record an event");
        }
    }
}

impl Reconciler for SampleController {
    async fn reconcile(&self, key: &str, ctx: &Context) -> Result<Action, ReconcileError> {
        let (namespace, name) = split_meta_namespace_key(key)?;
        let namespace = namespace.unwrap_or_default();
        let Some(foo) = self.foos.get(Some(namespace), name) else {
            return Ok(Action::done()); // gone: the garbage collector deletes its Deployment
        };
        let foos = Api::<Foo>::namespaced(self.client.clone(), namespace);
        finalizer(&foos, FINALIZER, foo, |event| async move {
            match event {
                FinalizerEvent::Apply(foo) => self.apply(key, &foo, ctx).await,
                FinalizerEvent::Cleanup(_) => {
                    // Its Deployment goes with it (owner reference); the record would not.
                    self.records.delete(key);
                    Ok(Action::done())
                }
            }
        })
        .await
    }
}

impl SampleController {
    /// Brings the Foo's Deployment, record and status to what the Foo asks.
    async fn apply(&self, key: &str, foo: &Foo, ctx: &Context) -> Result<Action, ReconcileError> {
        let namespace = foo.metadata.namespace.as_deref().unwrap_or_default();
        let name = foo.metadata.name.as_deref().unwrap_or_default();
        let wanted = &foo.spec.deployment_name;
        if wanted.is_empty() {
            let message = "spec.deploymentName is empty, so there is nothing to manage";
            self.event(foo, EventType::Warning, "InvalidSpec", message)
                .await;
            return Err(ReconcileError::terminal(format!("Foo {key}: {message}")));
        }
        let deployments = Api::<Deployment>::namespaced(self.client.clone(), namespace);
        let foos = Api::<Foo>::namespaced(self.client.clone(), namespace);
        let deployment = match self.writes {
            Writes::Patch => self.patch_deployment(&deployments, foo).await?,
            Writes::Apply => self.apply_deployment(&deployments, foo, ctx).await?,
        };
        self.records.put(
            key,
            ExternalRecord {
                deployment_name: wanted.clone(),
                replicas: foo.spec.replicas,
            },
        );
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
        self.event(foo, EventType::Normal, "Synced", message).await;
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
        self.event(foo, EventType::Warning, "ErrResourceExists", &message)
            .await;
        Err(ReconcileError::retry(message))
    }
}
