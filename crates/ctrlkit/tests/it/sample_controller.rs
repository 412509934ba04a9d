//! The sample-controller end to end against the embedded API server, over its in-process
//! transport on Tokio's paused clock: the CRD is installed, the controller runs with two workers,
//! and each test drives Foos and Deployments through the API and waits (on the virtual clock,
//! with a deadline) for what the controller must do.

// `foo` is the name of the resource here, not a placeholder.
#![allow(clippy::disallowed_names)]

use std::collections::BTreeMap;
use std::time::Duration;

use ctrlkit::apiserver::{ApiServer, ApiServerConfig};
use ctrlkit::cache::SharedInformerFactory;
use ctrlkit::controller::Health;
use ctrlkit::sample_controller::{self, ExternalRecords, Foo, FooSpec, Writes};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

const NAMESPACE: &str = "default";

/// Each scenario runs with both ways of writing: `by_patch` and `by_apply`.
macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::*;

            #[tokio::test(start_paused = true)]
            async fn by_patch() {
                super::$name(Writes::Patch).await;
            }

            #[tokio::test(start_paused = true)]
            async fn by_apply() {
                super::$name(Writes::Apply).await;
            }
        }
    )*};
}

scenarios!(
    a_deployment_scaled_by_hand_is_scaled_back,
    a_foo_gets_a_controlled_deployment_with_its_replicas_and_labels,
    scaling_a_foo_scales_its_deployment_and_the_status_follows_the_deployment,
    a_deployment_the_foo_does_not_control_is_left_alone,
    deleting_a_foo_deletes_its_deployment,
    a_foo_is_kept_until_its_external_record_is_deleted,
    the_controllers_own_status_writes_do_not_wake_it,
    an_empty_deployment_name_is_a_terminal_error
);

/// How long (virtual time) anything the controller must do may take.
const DEADLINE: Duration = Duration::from_secs(30);

/// A server with the CRD installed and the controller running on it.
struct Harness {
    server: ApiServer,
    client: Client,
    health: Health,
    records: ExternalRecords,
    cancel: CancellationToken,
    run: JoinHandle<()>,
}

impl Harness {
    async fn start(writes: Writes) -> Self {
        let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
        let client = Client::new(server.service(), NAMESPACE);
        sample_controller::install_crd(client.clone(), DEADLINE)
            .await
            .unwrap();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd = crds.get("foos.samplecontroller.k8s.io").await.unwrap();
        assert!(sample_controller::is_established(&crd));
        Self::restart(server, writes, ExternalRecords::default()).await
    }

    /// A controller on `server`, whose CRD is installed, keeping its records in `records`.
    async fn restart(server: ApiServer, writes: Writes, records: ExternalRecords) -> Self {
        let client = Client::new(server.service(), NAMESPACE);
        let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let health = Health::default();
        let (controller, reconciler) = sample_controller::build(client.clone(), &factory, None);
        let reconciler = reconciler.with_writes(writes).with_records(records.clone());
        let controller = controller.workers(2).health(health.clone());
        let cancel = CancellationToken::new();
        factory.start(&cancel);
        let stop = cancel.clone();
        let run = tokio::spawn(async move { controller.run(reconciler, stop).await.unwrap() });
        Self {
            server,
            client,
            health,
            records,
            cancel,
            run,
        }
    }

    fn foos(&self) -> Api<Foo> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    async fn create_foo(&self, name: &str, deployment: &str, replicas: Option<i32>) -> Foo {
        let spec = FooSpec {
            deployment_name: deployment.into(),
            replicas,
        };
        self.foos()
            .create(&PostParams::default(), &Foo::new(name, spec))
            .await
            .unwrap()
    }

    /// The deployment named `name`, once `ready` holds for it.
    async fn deployment_when(&self, name: &str, ready: impl Fn(&Deployment) -> bool) -> Deployment {
        let api = self.deployments();
        eventually(&format!("deployment {name}"), async || {
            api.get_opt(name).await.unwrap().filter(|d| ready(d))
        })
        .await
    }

    /// The events (`events.k8s.io/v1`) about the object named `name` with `reason`.
    async fn events(&self, name: &str, reason: &str) -> Vec<Event> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), NAMESPACE);
        let mut events = api.list(&ListParams::default()).await.unwrap().items;
        events.retain(|event| {
            event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && event.reason.as_deref() == Some(reason)
        });
        events
    }

    /// Successful reconciles so far.
    fn successes(&self) -> u64 {
        let prefix = format!(
            "controller_runtime_reconcile_total{{controller=\"{}\",result=\"success\"}} ",
            sample_controller::NAME
        );
        self.health
            .metrics_text()
            .lines()
            .find_map(|line| line.strip_prefix(&prefix)?.trim().parse().ok())
            .unwrap_or(0)
    }

    /// A counter of the controller's metrics (0 when not reported yet).
    fn metric(&self, name: &str) -> u64 {
        let prefix = format!("{name}{{controller=\"{}\"}} ", sample_controller::NAME);
        self.health
            .metrics_text()
            .lines()
            .find_map(|line| line.strip_prefix(&prefix)?.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Stops the controller only: the server, and the records, stay for another.
    async fn stop_controller(self) -> (ApiServer, ExternalRecords) {
        self.cancel.cancel();
        self.run.await.unwrap();
        (self.server, self.records)
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.run.await.unwrap();
        self.server.shutdown().await;
    }
}

/// Polls `check` every 20 ms of virtual time until it gives a value; fails after [`DEADLINE`].
async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        sleep(Duration::from_millis(20)).await;
    }
}

fn labels(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect(),
    )
}

async fn a_foo_gets_a_controlled_deployment_with_its_replicas_and_labels(writes: Writes) {
    let harness = Harness::start(writes).await;
    let foo = harness.create_foo("alpha", "alpha-nginx", Some(2)).await;

    let deployment = harness.deployment_when("alpha-nginx", |_| true).await;
    assert_eq!(deployment.spec.replicas, Some(2));
    let wanted = labels(&[("app", "nginx"), ("controller", "alpha")]);
    assert_eq!(deployment.metadata.labels, wanted);
    assert_eq!(deployment.spec.selector.match_labels, wanted);
    let template = deployment.spec.template.metadata.as_ref().unwrap();
    assert_eq!(template.labels, wanted);
    let containers = &deployment.spec.template.spec.as_ref().unwrap().containers;
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0].name, "nginx");
    let owners = deployment.owner_references();
    assert_eq!(owners.len(), 1, "{owners:?}");
    let owner = &owners[0];
    assert_eq!(owner.api_version, "samplecontroller.k8s.io/v1alpha1");
    assert_eq!(owner.kind, "Foo");
    assert_eq!(owner.name, "alpha");
    assert_eq!(Some(&owner.uid), foo.metadata.uid.as_ref());
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));
    assert!(sample_controller::is_controlled_by(&deployment, &foo));
    if writes == Writes::Apply {
        let entries = deployment.metadata.managed_fields.as_ref().unwrap();
        let entry = &entries[0];
        assert_eq!(
            (entry.manager.as_deref(), entry.operation.as_deref()),
            (Some(sample_controller::NAME), Some("Apply")),
            "{entries:?}"
        );
    }

    // No Deployment controller runs here: the Foo reports zero available replicas, and is synced.
    let foos = harness.foos();
    eventually("alpha's status", async || {
        let foo = foos.get("alpha").await.unwrap();
        (foo.status?.available_replicas == 0).then_some(())
    })
    .await;
    eventually("a Synced event", async || {
        (!harness.events("alpha", "Synced").await.is_empty()).then_some(())
    })
    .await;
    harness.stop().await;
}

async fn scaling_a_foo_scales_its_deployment_and_the_status_follows_the_deployment(writes: Writes) {
    let harness = Harness::start(writes).await;
    harness.create_foo("beta", "beta-nginx", Some(1)).await;
    harness
        .deployment_when("beta-nginx", |d| d.spec.replicas == Some(1))
        .await;

    let scale = Patch::Merge(json!({"spec": {"replicas": 4}}));
    harness
        .foos()
        .patch("beta", &PatchParams::default(), &scale)
        .await
        .unwrap();
    harness
        .deployment_when("beta-nginx", |d| d.spec.replicas == Some(4))
        .await;

    // Play the Deployment controller: three of the four replicas become available.
    let available = Patch::Merge(json!({"status": {"replicas": 4, "availableReplicas": 3}}));
    harness
        .deployments()
        .patch_status("beta-nginx", &PatchParams::default(), &available)
        .await
        .unwrap();
    let foos = harness.foos();
    let foo = eventually("beta's status", async || {
        let foo = foos.get("beta").await.unwrap();
        (foo.status.as_ref()?.available_replicas == 3).then_some(foo)
    })
    .await;
    assert_eq!(foo.spec.replicas, Some(4), "the status write kept the spec");
    harness.stop().await;
}

async fn a_deployment_the_foo_does_not_control_is_left_alone(writes: Writes) {
    let harness = Harness::start(writes).await;
    // Someone else's Deployment (no owner at all: an orphan is not adopted either).
    let theirs = Deployment {
        metadata: ObjectMeta {
            name: Some("taken".into()),
            labels: labels(&[("owner", "someone-else")]),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            replicas: Some(5),
            ..DeploymentSpec::default()
        },
        status: None,
    };
    let before = harness
        .deployments()
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    harness.create_foo("gamma", "taken", Some(2)).await;

    let events = eventually("an ErrResourceExists event", async || {
        let events = harness.events("gamma", "ErrResourceExists").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert!(events[0].note.as_deref().unwrap().contains("taken"));
    assert_eq!(
        events[0].reporting_controller.as_deref(),
        Some(sample_controller::NAME)
    );
    // The failure is retried: the one event's series grows, and the error count with it (which
    // may count one more: a first reconcile whose cache had not seen the Deployment yet tries to
    // create it and fails with AlreadyExists).
    let events = eventually("retries", async || {
        let events = harness.events("gamma", "ErrResourceExists").await;
        let count = events[0].series.as_ref().map_or(1, |series| series.count);
        (events.len() != 1 || count >= 3).then_some(events)
    })
    .await;
    assert_eq!(events.len(), 1, "{events:?}");
    // Counted once the reconcile that wrote the event has returned.
    eventually("errors counted", async || {
        (harness.metric("controller_runtime_reconcile_errors_total") >= 3).then_some(())
    })
    .await;
    assert_eq!(
        harness.metric("controller_runtime_terminal_reconcile_errors_total"),
        0
    );

    let after = harness.deployments().get("taken").await.unwrap();
    assert_eq!(
        after.metadata.resource_version, before.metadata.resource_version,
        "the Deployment was written to"
    );
    assert_eq!(after.spec.replicas, Some(5));
    assert!(after.owner_references().is_empty());
    let foo = harness.foos().get("gamma").await.unwrap();
    assert_eq!(
        foo.status, None,
        "a Foo without its Deployment reports nothing"
    );
    harness.stop().await;
}

async fn deleting_a_foo_deletes_its_deployment(writes: Writes) {
    let harness = Harness::start(writes).await;
    harness.create_foo("delta", "delta-nginx", Some(1)).await;
    harness.create_foo("keep", "keep-nginx", Some(1)).await;
    harness.deployment_when("delta-nginx", |_| true).await;
    harness.deployment_when("keep-nginx", |_| true).await;

    harness
        .foos()
        .delete("delta", &DeleteParams::default())
        .await
        .unwrap();
    let deployments = harness.deployments();
    eventually("delta-nginx to be collected", async || {
        deployments
            .get_opt("delta-nginx")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    // The controller does not bring it back, and the other Foo keeps its own.
    sleep(Duration::from_secs(5)).await;
    assert!(deployments.get_opt("delta-nginx").await.unwrap().is_none());
    assert!(harness.foos().get_opt("delta").await.unwrap().is_none());
    assert!(harness.records.get("default/delta").is_none());
    assert!(harness.records.get("default/keep").is_some());
    assert!(deployments.get_opt("keep-nginx").await.unwrap().is_some());
    harness.stop().await;
}

async fn a_foo_is_kept_until_its_external_record_is_deleted(writes: Writes) {
    let harness = Harness::start(writes).await;
    harness.create_foo("zeta", "zeta-nginx", Some(1)).await;
    harness.deployment_when("zeta-nginx", |_| true).await;
    let foos = harness.foos();
    let foo = foos.get("zeta").await.unwrap();
    assert_eq!(foo.finalizers(), [sample_controller::FINALIZER]);
    let record = harness.records.get("default/zeta").unwrap();
    assert_eq!(record.deployment_name, "zeta-nginx");

    // Stopped, the controller cannot clean up: the delete only marks the Foo.
    let (server, records) = harness.stop_controller().await;
    foos.delete("zeta", &DeleteParams::default()).await.unwrap();
    sleep(Duration::from_secs(5)).await;
    let marked = foos.get("zeta").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(records.get("default/zeta").is_some());

    // A controller started later deletes the record, then lets the Foo go.
    let harness = Harness::restart(server, writes, records).await;
    eventually("zeta to be gone", async || {
        foos.get_opt("zeta").await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(harness.records.get("default/zeta").is_none());
    harness.stop().await;
}

async fn the_controllers_own_status_writes_do_not_wake_it(writes: Writes) {
    let harness = Harness::start(writes).await;
    harness.create_foo("eta", "eta-nginx", Some(1)).await;
    let foos = harness.foos();
    eventually("eta's status", async || {
        foos.get("eta").await.unwrap().status.map(|_| ())
    })
    .await;
    sleep(Duration::from_secs(10)).await;
    let settled = harness.successes();
    // Changes that touch neither the spec nor the Deployment wake nothing.
    let relabel = Patch::Merge(json!({"metadata": {"labels": {"team": "web"}}}));
    foos.patch("eta", &PatchParams::default(), &relabel)
        .await
        .unwrap();
    sleep(Duration::from_secs(10)).await;
    assert_eq!(harness.successes(), settled);
    // A spec change does.
    let scale = Patch::Merge(json!({"spec": {"replicas": 2}}));
    foos.patch("eta", &PatchParams::default(), &scale)
        .await
        .unwrap();
    harness
        .deployment_when("eta-nginx", |d| d.spec.replicas == Some(2))
        .await;
    assert!(harness.successes() > settled);
    harness.stop().await;
}

async fn an_empty_deployment_name_is_a_terminal_error(writes: Writes) {
    let harness = Harness::start(writes).await;
    harness.create_foo("epsilon", "", Some(1)).await;

    eventually("the terminal error", async || {
        (harness.metric("controller_runtime_terminal_reconcile_errors_total") == 1).then_some(())
    })
    .await;
    // Not retried: a minute later it still failed once, and nothing was created.
    sleep(Duration::from_secs(60)).await;
    assert_eq!(
        harness.metric("controller_runtime_terminal_reconcile_errors_total"),
        1
    );
    assert_eq!(
        harness.metric("controller_runtime_reconcile_errors_total"),
        1
    );
    let deployments = harness
        .deployments()
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(deployments.items.is_empty());
    assert_eq!(harness.events("epsilon", "InvalidSpec").await.len(), 1);
    harness.stop().await;
}

async fn a_deployment_scaled_by_hand_is_scaled_back(writes: Writes) {
    let harness = Harness::start(writes).await;
    harness.create_foo("delta", "delta-nginx", Some(2)).await;
    harness
        .deployment_when("delta-nginx", |d| d.spec.replicas == Some(2))
        .await;
    let by_hand = Patch::Merge(json!({"spec": {"replicas": 5}}));
    let params = PatchParams {
        field_manager: Some("kubectl-scale".into()),
        ..PatchParams::default()
    };
    let scaled = harness
        .deployments()
        .patch("delta-nginx", &params, &by_hand)
        .await
        .unwrap();
    assert_eq!(scaled.spec.replicas, Some(5));
    // The change wakes the Foo's reconcile, which puts its replicas back.
    harness
        .deployment_when("delta-nginx", |d| d.spec.replicas == Some(2))
        .await;
    harness.stop().await;
}

/// The Foo CRD's schema: the server refuses what it refuses, fills in its default, its scale
/// subresource drives the Deployment, and its CEL rule keeps the Deployment's name.
#[tokio::test(start_paused = true)]
async fn the_foo_schema_refuses_defaults_and_scales() {
    let harness = Harness::start(Writes::Patch).await;
    let refused = harness
        .foos()
        .create(
            &PostParams::default(),
            &Foo::new(
                "too-many",
                FooSpec {
                    deployment_name: "Not_A_Name".into(),
                    replicas: Some(11),
                },
            ),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused}");
    };
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        r#"Foo.samplecontroller.k8s.io "too-many" is invalid: [spec.deploymentName: Invalid value: "Not_A_Name": spec.deploymentName in body should match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$', spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10]"#
    );

    let created = harness.create_foo("zeta", "zeta-nginx", None).await;
    assert_eq!(created.spec.replicas, Some(1));
    harness
        .deployment_when("zeta-nginx", |d| d.spec.replicas == Some(1))
        .await;
    let scale = Patch::Merge(json!({"spec": {"replicas": 3}}));
    harness
        .foos()
        .patch_scale("zeta", &PatchParams::default(), &scale)
        .await
        .unwrap();
    harness
        .deployment_when("zeta-nginx", |d| d.spec.replicas == Some(3))
        .await;

    let rename = Patch::Merge(json!({"spec": {"deploymentName": "other"}}));
    let refused = harness
        .foos()
        .patch("zeta", &PatchParams::default(), &rename)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused}");
    };
    assert_eq!(
        status.message,
        r#"Foo.samplecontroller.k8s.io "zeta" is invalid: spec: Invalid value: deploymentName is immutable"#
    );
    harness.stop().await;
}
