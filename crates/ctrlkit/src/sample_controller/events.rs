//! Events on the objects the controller works on, for `kubectl describe` to show.

use std::hash::{DefaultHasher, Hash, Hasher};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde_json::json;

use super::Foo;

/// Whether an event reports routine progress or a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum EventType {
    Normal,
    Warning,
}

/// Writes core/v1 Events. Repeats of one event (same object, type, reason and message) bump the
/// count of the first instead of piling up, as client-go's event correlator does.
#[derive(Clone)]
pub(super) struct EventRecorder {
    client: Client,
    component: String,
}

impl EventRecorder {
    pub(super) fn new(client: Client, component: &str) -> Self {
        Self {
            client,
            component: component.to_owned(),
        }
    }

    /// Records a `Normal` event about `foo`.
    pub(super) async fn normal(&self, foo: &Foo, reason: &str, message: &str) {
        self.record(foo, EventType::Normal, reason, message).await;
    }

    /// Records a `Warning` event about `foo`.
    pub(super) async fn warn(&self, foo: &Foo, reason: &str, message: &str) {
        self.record(foo, EventType::Warning, reason, message).await;
    }

    /// Records an event about `object`. Best effort: a failure is logged, never returned, since
    /// an event must not fail the work it describes.
    async fn record<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        if let Err(error) = self.write(object, type_, reason, message).await {
            tracing::warn!(%error, reason, "could not record an event");
        }
    }

    async fn write<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let meta = object.meta();
        let namespace = meta.namespace.as_deref().unwrap_or("default");
        let mut hasher = DefaultHasher::new();
        (&meta.uid, type_, reason, message).hash(&mut hasher);
        let name = format!(
            "{}.{:016x}",
            meta.name.as_deref().unwrap_or_default(),
            hasher.finish()
        );
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let now = Time(Timestamp::now());
        if let Some(seen) = api.get_opt(&name).await? {
            let count = seen.count.unwrap_or(1).saturating_add(1);
            let patch = json!({"count": count, "lastTimestamp": now});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await?;
            return Ok(());
        }
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            involved_object: object.object_ref(&()),
            type_: Some(format!("{type_:?}")),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            reporting_component: Some(self.component.clone()),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            ..Event::default()
        };
        api.create(&PostParams::default(), &event).await?;
        Ok(())
    }
}
