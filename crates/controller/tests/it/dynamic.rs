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

#[tokio::test(start_paused = true)]
async fn a_dynamic_controller_reconciles_a_crd_it_only_knows_at_run_time() {
    let (_server, client) = server().await;
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
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();

    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Database"));
    let databases: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let mut created = false;
    for _ in 0..5000 {
        let mut db = DynamicObject::new("orders", &resource);
        db.data = json!({"spec": {"engine": "postgres"}});
        if databases.create(&PostParams::default(), &db).await.is_ok() {
            created = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(created, "the CRD was never served");
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
