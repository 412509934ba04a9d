//! Server-side apply under the controller's own field manager: how a reconciler writes the
//! state it wants.
//!
//! A reconciler states the whole of what it manages and the API server merges it: the fields
//! it stops stating are removed (unless another manager owns them too), the fields it states
//! are its own. A controller is the authority over what it manages, so it applies with
//! `force`: a field another manager changed in between is taken back, not reported as a
//! conflict. The field manager is the controller's name, so `managedFields` say which
//! controller owns what.

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::reconciler::Context;

/// Why an apply failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The desired object has no `metadata.name`: there is nothing to apply it to.
    #[error("the desired {kind} has no metadata.name")]
    Unnamed {
        /// The kind of the object.
        kind: String,
    },
    /// The desired state could not be written as JSON.
    #[error("the desired {kind} could not be serialized: {source}")]
    Serialize {
        /// The kind of the object.
        kind: String,
        /// What serde said.
        source: serde_json::Error,
    },
    /// The API server refused the apply or could not be reached (a conflict on
    /// `metadata.resourceVersion`, an invalid object, no such resource ...).
    #[error(transparent)]
    Api(#[from] kube::Error),
}

impl Context {
    /// The field manager of this controller's writes: its name.
    pub fn field_manager(&self) -> &str {
        &self.controller
    }

    /// The patch parameters of this controller's applies: its field manager, forced.
    pub fn apply_params(&self) -> PatchParams {
        PatchParams::apply(self.field_manager()).force()
    }

    /// Applies `desired` (server-side apply, forced, under [`field_manager`](Self::field_manager))
    /// through `api`, creating the object if it does not exist, and returns the object as the
    /// server stored it.
    ///
    /// `desired` should hold only what the controller manages, built fresh rather than edited
    /// from a cached copy: any `metadata.managedFields` it carries are dropped (the server
    /// refuses them), and a `metadata.resourceVersion` it carries makes the apply conditional
    /// on it.
    ///
    /// ```no_run
    /// use ctrlkit_controller::{Action, Context, ReconcileError};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::api::{Api, ObjectMeta};
    ///
    /// async fn reconcile(ctx: &Context, client: kube::Client) -> Result<Action, ReconcileError> {
    ///     let desired = ConfigMap {
    ///         metadata: ObjectMeta { name: Some("settings".into()), ..ObjectMeta::default() },
    ///         data: Some([("mode".to_string(), "fast".to_string())].into()),
    ///         ..ConfigMap::default()
    ///     };
    ///     ctx.apply(&Api::<ConfigMap>::namespaced(client, "default"), &desired).await?;
    ///     Ok(Action::done())
    /// }
    /// ```
    pub async fn apply<K>(&self, api: &Api<K>, desired: &K) -> Result<K, ApplyError>
    where
        K: Resource + Serialize + DeserializeOwned + Clone + std::fmt::Debug,
    {
        // The kind, for errors: a typed object's serialization or a dynamic object's types say
        // it; the Rust type names it otherwise.
        let type_name = || {
            let name = std::any::type_name::<K>();
            name.rsplit("::").next().unwrap_or(name).to_owned()
        };
        let mut body = serde_json::to_value(desired).map_err(|source| ApplyError::Serialize {
            kind: type_name(),
            source,
        })?;
        let name = desired
            .meta()
            .name
            .clone()
            .ok_or_else(|| ApplyError::Unnamed {
                kind: body["kind"].as_str().map_or_else(type_name, str::to_owned),
            })?;
        if let Some(metadata) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("managedFields");
        }
        Ok(api
            .patch(&name, &self.apply_params(), &Patch::Apply(body))
            .await?)
    }

    /// Applies `status` as the status of the object `name` (server-side apply to the `status`
    /// subresource, forced, under [`field_manager`](Self::field_manager)) and returns the object
    /// as the server stored it. The controller owns exactly the status fields it states.
    ///
    /// ```no_run
    /// use ctrlkit_controller::{Context, ReconcileError};
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use kube::api::Api;
    /// use serde_json::json;
    ///
    /// async fn report(ctx: &Context, api: &Api<Deployment>) -> Result<(), ReconcileError> {
    ///     ctx.apply_status(api, "web", &json!({"availableReplicas": 3})).await?;
    ///     Ok(())
    /// }
    /// ```
    pub async fn apply_status<K>(
        &self,
        api: &Api<K>,
        name: &str,
        status: &impl Serialize,
    ) -> Result<K, ApplyError>
    where
        K: Resource + DeserializeOwned + Clone + std::fmt::Debug,
        K::DynamicType: Default,
    {
        self.apply_status_with(api, name, status, &K::DynamicType::default())
            .await
    }

    /// [`apply_status`](Self::apply_status) for a kind known at run time (`DynamicObject`s
    /// described by `types`).
    pub async fn apply_status_with<K>(
        &self,
        api: &Api<K>,
        name: &str,
        status: &impl Serialize,
        types: &K::DynamicType,
    ) -> Result<K, ApplyError>
    where
        K: Resource + DeserializeOwned + Clone + std::fmt::Debug,
    {
        let kind = K::kind(types).into_owned();
        let status = serde_json::to_value(status).map_err(|source| ApplyError::Serialize {
            kind: kind.clone(),
            source,
        })?;
        let body = json!({
            "apiVersion": K::api_version(types),
            "kind": kind,
            "metadata": {"name": name},
            "status": status,
        });
        Ok(api
            .patch_status(name, &self.apply_params(), &Patch::Apply(body))
            .await?)
    }
}
