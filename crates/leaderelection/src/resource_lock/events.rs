//! Events on the lock object: "`<identity>` became leader", "`<identity>` stopped leading".

use std::sync::atomic::{AtomicU64, Ordering};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, PostParams};

/// Writes core/v1 Events about a lock, the way client-go's event recorder does.
#[derive(Clone)]
pub(crate) struct EventRecorder {
    api: Api<Event>,
    namespace: String,
    component: String,
    identity: String,
}

/// Keeps event names distinct within one process even when the clock stands still.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

impl EventRecorder {
    pub(crate) fn new(
        client: kube::Client,
        namespace: &str,
        component: &str,
        identity: &str,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            component: component.to_owned(),
            identity: identity.to_owned(),
        }
    }

    /// Sends the event in the background; a failure is logged, never returned: an event is a
    /// courtesy and must not hold up the election.
    pub(crate) fn record(
        &self,
        resource: &ApiResource,
        name: &str,
        object: Option<&DynamicObject>,
        action: &str,
    ) {
        let now = Timestamp::now();
        let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}{sequence:x}", now.as_nanosecond())),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some(resource.api_version.clone()),
                kind: Some(resource.kind.clone()),
                name: Some(name.to_owned()),
                namespace: Some(self.namespace.clone()),
                uid: object.and_then(|object| object.metadata.uid.clone()),
                resource_version: object
                    .and_then(|object| object.metadata.resource_version.clone()),
                ..ObjectReference::default()
            },
            reason: Some("LeaderElection".to_owned()),
            message: Some(format!("{} {action}", self.identity)),
            type_: Some("Normal".to_owned()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.identity.clone()),
            count: Some(1),
            ..Event::default()
        };
        let api = self.api.clone();
        tokio::spawn(async move {
            if let Err(error) = api.create(&PostParams::default(), &event).await {
                tracing::warn!(%error, "recording a leader election event failed");
            }
        });
    }
}
