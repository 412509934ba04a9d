//! The public event recorder against the embedded API server: `events.k8s.io/v1` Events,
//! repeats counted in a series, the 10th similar event combined, an object's storm throttled.

use std::time::Duration;

use ctrlkit_controller::events::{Event, EventRecorder, EventType, Published};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::{Api, Resource};

use crate::support::server;

fn event(reason: &str, note: &str) -> Event {
    Event {
        type_: EventType::Warning,
        reason: reason.into(),
        action: "Reconciling".into(),
        note: Some(note.into()),
        secondary: None,
    }
}

async fn subject(client: &kube::Client) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some("subject".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &object).await.unwrap()
}

async fn events(client: &kube::Client) -> Vec<KubeEvent> {
    let api: Api<KubeEvent> = Api::namespaced(client.clone(), "default");
    let mut events = api.list(&ListParams::default()).await.unwrap().items;
    events.sort_by_key(|event| event.event_time.clone().map(|time| time.0));
    events
}

#[tokio::test(start_paused = true)]
async fn events_are_written_and_repeats_grow_a_series() {
    let (_server, client) = server().await;
    let object = subject(&client).await;
    let recorder = EventRecorder::new(client.clone(), "example.com/settings", "replica-0");
    let reference = object.object_ref(&());
    for _ in 0..3 {
        recorder
            .publish(&event("Failed", "disk full"), &reference)
            .await
            .unwrap();
    }
    let events = events(&client).await;
    assert_eq!(events.len(), 1);
    let written = &events[0];
    assert_eq!(written.reason.as_deref(), Some("Failed"));
    assert_eq!(written.type_.as_deref(), Some("Warning"));
    assert_eq!(written.action.as_deref(), Some("Reconciling"));
    assert_eq!(written.note.as_deref(), Some("disk full"));
    assert_eq!(
        written.reporting_controller.as_deref(),
        Some("example.com/settings")
    );
    assert_eq!(written.reporting_instance.as_deref(), Some("replica-0"));
    assert_eq!(
        written.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("subject")
    );
    assert!(
        written
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("subject.")
    );
    assert_eq!(written.series.as_ref().map(|series| series.count), Some(3));
}

#[tokio::test(start_paused = true)]
async fn the_tenth_similar_event_is_combined_as_client_gos_correlator_does() {
    let (_server, client) = server().await;
    let object = subject(&client).await;
    let recorder = EventRecorder::new(client.clone(), "example.com/settings", "replica-0");
    let reference = object.object_ref(&());
    let mut outcomes = Vec::new();
    for i in 0..12 {
        let note = format!("pod-{i} failed");
        outcomes.push(
            recorder
                .publish(&event("FailedCreate", &note), &reference)
                .await
                .unwrap(),
        );
    }
    assert_eq!(outcomes[..10], [Published::Created; 10]);
    assert_eq!(outcomes[10..], [Published::Repeated; 2]);
    let events = events(&client).await;
    assert_eq!(events.len(), 10, "nine single events and one combined");
    let notes: Vec<&str> = events
        .iter()
        .filter_map(|event| event.note.as_deref())
        .collect();
    assert_eq!(
        notes[..9],
        (0..9)
            .map(|i| format!("pod-{i} failed"))
            .collect::<Vec<_>>()
    );
    let combined = &events[9];
    assert_eq!(
        combined.note.as_deref(),
        Some("(combined from similar events): pod-11 failed")
    );
    assert_eq!(combined.series.as_ref().map(|series| series.count), Some(3));

    // Outside the 10-minute window the count starts again.
    tokio::time::advance(Duration::from_secs(601)).await;
    let fresh = recorder
        .publish(&event("FailedCreate", "pod-12 failed"), &reference)
        .await
        .unwrap();
    assert_eq!(fresh, Published::Created);
    let last = events_named_note(&client, "pod-12 failed").await;
    assert_eq!(last, 1, "a plain event again");
}

async fn events_named_note(client: &kube::Client, note: &str) -> usize {
    events(client)
        .await
        .iter()
        .filter(|event| event.note.as_deref() == Some(note))
        .count()
}

#[tokio::test(start_paused = true)]
async fn an_objects_event_storm_is_throttled_after_25() {
    let (_server, client) = server().await;
    let object = subject(&client).await;
    let recorder = EventRecorder::new(client.clone(), "example.com/settings", "replica-0");
    let reference = object.object_ref(&());
    let mut throttled = 0;
    for i in 0..30 {
        let outcome = recorder
            .publish(&event(&format!("Reason{i}"), "n"), &reference)
            .await
            .unwrap();
        if outcome == Published::Throttled {
            throttled += 1;
        }
    }
    assert_eq!(throttled, 5);
    assert_eq!(events(&client).await.len(), 25);
    // One token comes back every five minutes.
    tokio::time::advance(Duration::from_secs(300)).await;
    let back = recorder
        .publish(&event("Later", "n"), &reference)
        .await
        .unwrap();
    assert_eq!(back, Published::Created);
    let again = recorder
        .publish(&event("Later2", "n"), &reference)
        .await
        .unwrap();
    assert_eq!(again, Published::Throttled);
}

/// Publishes one Normal event about each ConfigMap it reconciles, through its context.
struct Announcer {
    api: Api<ConfigMap>,
}

impl ctrlkit_controller::Reconciler for Announcer {
    async fn reconcile(
        &self,
        key: &str,
        ctx: &ctrlkit_controller::Context,
    ) -> Result<ctrlkit_controller::Action, ctrlkit_controller::ReconcileError> {
        let name = key.rsplit('/').next().unwrap_or(key);
        let object = self.api.get(name).await?;
        let recorder = ctx.recorder.as_ref().expect("the controller's recorder");
        let event = Event {
            type_: EventType::Normal,
            reason: "Seen".into(),
            action: "Reconciling".into(),
            note: Some(format!("{} reconciled it", ctx.controller)),
            secondary: None,
        };
        recorder.publish(&event, &object.object_ref(&())).await?;
        Ok(ctrlkit_controller::Action::done())
    }
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_publishes_through_its_controllers_recorder() {
    use ctrlkit_cache::SharedInformerFactory;
    use ctrlkit_controller::Controller;
    use tokio_util::sync::CancellationToken;

    let (_server, client) = server().await;
    subject(&client).await;
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let recorder = EventRecorder::new(client.clone(), "example.com/announcer", "replica-1");
    let controller = Controller::new(
        "announcer",
        factory.namespaced_informer::<ConfigMap>("default"),
    )
    .event_recorder(recorder);
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let reconciler = Announcer {
        api: Api::namespaced(client.clone(), "default"),
    };
    let run = tokio::spawn(controller.run(reconciler, cancel.clone()));
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    let written = loop {
        let written = events(&client).await;
        if !written.is_empty() || tokio::time::Instant::now() > end {
            break written;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    cancel.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(written.len(), 1, "{written:?}");
    let event = &written[0];
    assert_eq!(event.reason.as_deref(), Some("Seen"));
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(event.note.as_deref(), Some("announcer reconciled it"));
    assert_eq!(
        event.reporting_controller.as_deref(),
        Some("example.com/announcer")
    );
    assert_eq!(event.reporting_instance.as_deref(), Some("replica-1"));
    let regarding = event.regarding.as_ref().unwrap();
    assert_eq!(
        (regarding.kind.as_deref(), regarding.name.as_deref()),
        (Some("ConfigMap"), Some("subject"))
    );
}
