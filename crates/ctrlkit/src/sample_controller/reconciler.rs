//! The reconciler: keep each Foo's Deployment as the Foo asks, and report how it is doing.

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
}

impl Reconciler for SampleController {
    async fn reconcile(&self, key: &str, _: &Context) -> Result<Action, ReconcileError> {
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
        let mut deployment = match self.deployments.get(Some(namespace), wanted) {
            Some(deployment) => deployment,
            None => Arc::new(
                deployments
                    .create(&Default::default(), &new_deployment(&foo)?)
                    .await?,
            ),
        };
        if !is_controlled_by(&deployment, &foo) {
            let message = format!("Deployment {wanted} exists and is not controlled by this Foo");
            self.events.warn(&foo, "ErrResourceExists", &message).await;
            return Err(ReconcileError::retry(message));
        }
        let params = PatchParams::default();
        if foo.spec.replicas.is_some() && foo.spec.replicas != deployment.spec.replicas {
            let patch = Patch::Merge(json!({"spec": {"replicas": foo.spec.replicas}}));
            deployment = Arc::new(deployments.patch(wanted, &params, &patch).await?);
        }
        let available = deployment
            .status
            .as_ref()
            .and_then(|s| s.available_replicas);
        let status = FooStatus {
            available_replicas: available.unwrap_or(0),
        };
        if foo.status.as_ref() != Some(&status) {
            let patch = Patch::Merge(json!({ "status": status }));
            let foos = Api::<Foo>::namespaced(self.client.clone(), namespace);
            foos.patch_status(name, &params, &patch).await?;
        }
        let message = "its Deployment is as the spec asks";
        self.events.normal(&foo, "Synced", message).await;
        Ok(Action::done())
    }
}
