//! Events about the objects a controller works on (`events.k8s.io/v1`), for `kubectl describe`
//! and `kubectl events` to show, correlated as client-go's recorder does (see
//! [`EventRecorder`]: similar events combined, a storm throttled).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use parking_lot::Mutex;
use serde_json::json;

use crate::event_correlator::{Correlation, EventCorrelator, EventKeys};

/// The API server's limit on `note` (bytes).
const NOTE_LIMIT: usize = 1024;

/// Whether an event reports routine progress or a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Routine progress.
    Normal,
    /// Something went wrong.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// One event to publish (kube-runtime's `Event`).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// Why, in UpperCamelCase (`Scaled`, `FailedCreate`); at most 128 bytes.
    pub reason: String,
    /// What the controller did or failed to do (`Scaling`, `Creating`); at most 128 bytes.
    pub action: String,
    /// A human-readable description; cut to the API server's 1,024 bytes.
    pub note: Option<String>,
    /// A second object concerned (the Pod a ReplicaSet created).
    pub secondary: Option<ObjectReference>,
}

/// What became of a published event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// Written as a new Event.
    Created,
    /// A repeat: the Event written before counts one more in its series.
    Repeated,
    /// Dropped: the object had too many events lately (25, then one per 5 minutes).
    Throttled,
}

/// Why publishing failed.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The regarding reference has no name.
    #[error("the object an event is about has no name")]
    Unnamed,
    /// The API server refused the write.
    #[error("writing the event: {0}")]
    Api(#[from] kube::Error),
}

/// Publishes `events.k8s.io/v1` Events as one reporting controller and instance. Cloning shares
/// its correlation state, so clones throttle and count together.
///
/// ```no_run
/// use ctrlkit_controller::events::{Event, EventRecorder, EventType};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::Resource;
///
/// # async fn doc(client: kube::Client, object: ConfigMap) -> Result<(), ctrlkit_controller::events::EventError> {
/// let recorder = EventRecorder::new(client, "example.com/settings-controller", "replica-0");
/// let event = Event {
///     type_: EventType::Normal,
///     reason: "Synced".into(),
///     action: "Reconciling".into(),
///     note: Some("settings are applied".into()),
///     secondary: None,
/// };
/// recorder.publish(&event, &object.object_ref(&())).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct EventRecorder {
    client: Client,
    reporting_controller: String,
    reporting_instance: String,
    correlator: Arc<Mutex<EventCorrelator>>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("reporting_controller", &self.reporting_controller)
            .field("reporting_instance", &self.reporting_instance)
            .finish_non_exhaustive()
    }
}

fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn reference_key(reference: &ObjectReference) -> String {
    [
        reference.api_version.as_deref(),
        reference.kind.as_deref(),
        reference.namespace.as_deref(),
        reference.name.as_deref(),
        reference.uid.as_deref(),
        reference.field_path.as_deref(),
    ]
    .map(|part| part.unwrap_or_default())
    .join("\u{0}")
}

impl EventRecorder {
    /// A recorder reporting as `reporting_controller` (a qualified name such as
    /// `example.com/foo-controller`) from `reporting_instance` (this replica: its pod name).
    pub fn new(client: Client, reporting_controller: &str, reporting_instance: &str) -> Self {
        Self {
            client,
            reporting_controller: reporting_controller.to_owned(),
            reporting_instance: reporting_instance.to_owned(),
            correlator: Arc::default(),
        }
    }

    /// Publishes `event` about the object `regarding` refers to (for a typed object,
    /// `object.object_ref(&())`). Repeats grow the first Event's series; a flood of similar
    /// events is combined; an object's event storm is throttled.
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<Published, EventError> {
        let name = regarding.name.as_deref().ok_or(EventError::Unnamed)?;
        let note = cut(event.note.as_deref().unwrap_or_default(), NOTE_LIMIT);
        let object = reference_key(regarding);
        let related = event
            .secondary
            .as_ref()
            .map(reference_key)
            .unwrap_or_default();
        let similar = [
            object.as_str(),
            event.type_.as_str(),
            &event.reason,
            &self.reporting_controller,
            &self.reporting_instance,
        ]
        .join("\u{0}");
        let keys = EventKeys {
            object_and_type: format!("{object}\u{0}{}", event.type_.as_str()),
            identical: [similar.as_str(), &event.action, &related, note].join("\u{0}"),
            similar,
        };
        let correlation =
            self.correlator
                .lock()
                .correlate(&keys, note, tokio::time::Instant::now());
        let namespace = regarding
            .namespace
            .as_deref()
            .filter(|namespace| !namespace.is_empty())
            .unwrap_or("default");
        let api: Api<KubeEvent> = Api::namespaced(self.client.clone(), namespace);
        let now = MicroTime(Timestamp::now());
        match correlation {
            Correlation::Skip => Ok(Published::Throttled),
            Correlation::Repeat {
                name: written,
                count,
                note,
                key,
            } => {
                let patch = json!({
                    "note": cut(&note, NOTE_LIMIT),
                    "series": EventSeries { count, last_observed_time: now.clone() },
                });
                match api
                    .patch(&written, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                {
                    Ok(_) => Ok(Published::Repeated),
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        // Deleted (or expired) meanwhile: start again with a new one.
                        self.correlator.lock().forget(&key);
                        self.create(&api, event, regarding, name, &note, now, &key)
                            .await
                    }
                    Err(error) => Err(error.into()),
                }
            }
            Correlation::Create { note, key } => {
                self.create(&api, event, regarding, name, &note, now, &key)
                    .await
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn create(
        &self,
        api: &Api<KubeEvent>,
        event: &Event,
        regarding: &ObjectReference,
        regarding_name: &str,
        note: &str,
        now: MicroTime,
        key: &str,
    ) -> Result<Published, EventError> {
        // client-go's name: the object's name and the time in hex nanoseconds.
        let nanos = now.0.as_nanosecond();
        let mut body = KubeEvent {
            metadata: ObjectMeta {
                name: Some(format!("{regarding_name}.{nanos:x}")),
                ..ObjectMeta::default()
            },
            event_time: Some(now),
            type_: Some(event.type_.as_str().to_owned()),
            reason: Some(event.reason.clone()),
            action: Some(event.action.clone()),
            note: Some(cut(note, NOTE_LIMIT).to_owned()),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            reporting_controller: Some(self.reporting_controller.clone()),
            reporting_instance: Some(self.reporting_instance.clone()),
            ..KubeEvent::default()
        };
        let written = match api.create(&PostParams::default(), &body).await {
            // Two events of one object in the same nanosecond (clones on several tasks): the
            // next nanosecond's name is free.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                body.metadata.name =
                    Some(format!("{regarding_name}.{:x}", nanos.saturating_add(1)));
                api.create(&PostParams::default(), &body).await?
            }
            other => other?,
        };
        if let Some(name) = written.meta().name.as_deref() {
            self.correlator.lock().written(key, name);
        }
        Ok(Published::Created)
    }
}
