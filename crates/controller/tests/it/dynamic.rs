//! A controller of a kind known only at run time: `DynamicObject`s of a CRD created by the
//! test, with an owned kind watched through the same dynamic path.

use std::sync::Arc;
use std::time::Duration;

use ctrlkit_cache::SharedInformerFactory;
use ctrlkit_controller::predicate::Predicates;
use ctrlkit_controller::{
    Action, Context, Controller, ReconcileError, ReconcileReason, Reconciler,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Resource};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, server};

#[derive(Clone, Default)]
struct Record(Arc<Mutex<Vec<(String, ReconcileReason)>>>);

impl Reconciler for Record {
    async fn reconcile(&self, key: &str, ctx: &Context) -> Result<Action, ReconcileError> {
        self.0.lock().push((key.to_owned(), ctx.reason.clone()));
        Ok(Action::done())
    }
}

/// Installs the Database CRD (with the status subresource when `status`) and waits until it is
/// served; its resource.
async fn databases_crd(client: &kube::Client, status: bool) -> ApiResource {
    let subresources = if status {
        json!({"status": {}})
    } else {
        json!({})
    };
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "databases.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "databases", "singular": "database", "kind": "Database", "listKind": "DatabaseList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": subresources,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Database"))
}

/// Creates Database `name` (`spec.engine: postgres`) with `owner` as its controller, retrying
/// until its CRD is served.
async fn create_owned_database(
    databases: &Api<DynamicObject>,
    name: &str,
    owner: Option<OwnerReference>,
) {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Database"));
    for _ in 0..5000 {
        let mut db = DynamicObject::new(name, &resource);
        db.metadata.owner_references = owner.clone().map(|owner| vec![owner]);
        db.data = json!({"spec": {"engine": "postgres"}});
        if databases.create(&PostParams::default(), &db).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the CRD was never served");
}

async fn create_database(databases: &Api<DynamicObject>, name: &str) {
    create_owned_database(databases, name, None).await;
}

#[tokio::test(start_paused = true)]
async fn a_dynamic_controller_reconciles_a_crd_it_only_knows_at_run_time() {
    let (_server, client) = server().await;
    let resource = databases_crd(&client, false).await;
    let databases: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    create_database(&databases, "orders").await;
    let owner = databases.get("orders").await.unwrap();

    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let controller = Controller::new_with(
        "databases",
        factory.dynamic_informer(&resource),
        resource.clone(),
    )
    .owns_with(
        factory.namespaced_informer::<ConfigMap>("default"),
        (),
        Predicates::new(),
    );
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let record = Record::default();
    let run = tokio::spawn(controller.run(record.clone(), cancel.clone()));
    eventually(Duration::from_secs(5), || record.0.lock().len() == 1).await;
    assert_eq!(
        record.0.lock()[0],
        ("default/orders".to_owned(), ReconcileReason::ObjectUpdated)
    );

    // A ConfigMap the Database controls reconciles the Database.
    let owned = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("orders-settings".into()),
            owner_references: Some(vec![owner.controller_owner_ref(&resource).unwrap()]),
            ..Default::default()
        },
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(client, "default")
        .create(&PostParams::default(), &owned)
        .await
        .unwrap();
    eventually(Duration::from_secs(5), || record.0.lock().len() == 2).await;
    assert_eq!(
        record.0.lock()[1],
        (
            "default/orders".to_owned(),
            ReconcileReason::RelatedObjectUpdated("ConfigMap.v1./orders-settings.default".into())
        )
    );
    cancel.cancel();
    run.await.unwrap().unwrap();
}

/// Counts the Databases its ConfigMap owns, from the dynamic informer's lister.
#[derive(Clone)]
struct CountOwned {
    databases: ctrlkit_cache::Lister<DynamicObject>,
    seen: Arc<Mutex<Vec<usize>>>,
}

impl Reconciler for CountOwned {
    async fn reconcile(&self, key: &str, _: &Context) -> Result<Action, ReconcileError> {
        let name = key.rsplit('/').next().unwrap_or(key);
        let owned = self
            .databases
            .namespaced("default")
            .list(&kube::core::Selector::default())
            .iter()
            .filter(|db| {
                db.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|owner| owner.name == name)
            })
            .count();
        self.seen.lock().push(owned);
        Ok(Action::done())
    }
}

#[tokio::test(start_paused = true)]
async fn owned_objects_of_a_run_time_kind_reconcile_their_owner_on_the_changes_a_predicate_passes()
{
    use ctrlkit_controller::predicate::GenerationChanged;
    use kube::api::{Patch, PatchParams};

    let (_server, client) = server().await;
    let resource = databases_crd(&client, true).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = config_maps
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: kube::api::ObjectMeta {
                    name: Some("shop".into()),
                    ..Default::default()
                },
                ..ConfigMap::default()
            },
        )
        .await
        .unwrap();

    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let owned = factory.dynamic_informer(&resource);
    let lister = ctrlkit_cache::Lister::new(owned.get_indexer());
    let controller = Controller::new("shops", factory.namespaced_informer::<ConfigMap>("default"))
        .owns_with(
            owned,
            resource.clone(),
            Predicates::new().with(GenerationChanged),
        );
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let reconciler = CountOwned {
        databases: lister,
        seen: Arc::default(),
    };
    let seen = Arc::clone(&reconciler.seen);
    let run = tokio::spawn(controller.run(reconciler, cancel.clone()));
    eventually(Duration::from_secs(5), || seen.lock().len() == 1).await;
    assert_eq!(seen.lock()[0], 0, "nothing owned yet");

    let databases: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    create_owned_database(&databases, "orders", owner.controller_owner_ref(&())).await;
    eventually(Duration::from_secs(5), || seen.lock().len() == 2).await;
    assert_eq!(seen.lock()[1], 1, "the owned Database, from the lister");

    // Status writes leave the generation alone: the predicate drops them.
    for replicas in 1..=5 {
        let status = json!({"status": {"replicas": replicas}});
        databases
            .patch_status("orders", &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(seen.lock().len(), 2, "a status write reconciled the owner");

    // A spec change passes.
    let spec = json!({"spec": {"engine": "mysql"}});
    databases
        .patch("orders", &PatchParams::default(), &Patch::Merge(spec))
        .await
        .unwrap();
    eventually(Duration::from_secs(5), || seen.lock().len() == 3).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(seen.lock().len(), 3);
    cancel.cancel();
    run.await.unwrap().unwrap();
}
