//! A two-CRD operator on one [`Manager`]: `Database`s and their `Backup`s, on the embedded API
//! server. `cargo run -p ctrlkit-examples --example operator`
//!
//! - the `databases` controller keeps each Database's data files (outside the cluster, in
//!   memory here) under a finalizer, makes sure it has an initial Backup, and reports how many
//!   of its Backups completed. It watches Backups as `DynamicObject`s of an `ApiResource`, the
//!   way an operator watches a kind it only learns of at run time;
//! - the `backups` controller "takes" each Backup (marks it Completed) and records an event.
//!
//! The run creates a Database, waits until its backup completed, deletes it, and exits once
//! its files are cleaned up and its Backup collected.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit::apiserver::{ApiServer, ApiServerConfig};
use ctrlkit::cache::{Indexer, SharedInformerFactory, split_meta_namespace_key};
use ctrlkit::controller::events::{Event, EventRecorder, EventType};
use ctrlkit::controller::finalizer::{FinalizerEvent, finalizer};
use ctrlkit::controller::predicate::{GenerationChanged, Predicates};
use ctrlkit::controller::{Action, Context, Controller, Manager, ReconcileError, Reconciler};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Client, CustomResource, CustomResourceExt, Resource, ResourceExt};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A database the operator runs.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(group = "example.com", version = "v1", kind = "Database", namespaced)]
#[kube(status = "DatabaseStatus")]
pub struct DatabaseSpec {
    /// The engine (`postgres`, `mysql`).
    pub engine: String,
}

/// What the operator reports about a Database.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseStatus {
    /// Its Backups that completed.
    pub completed_backups: u32,
}

/// One backup of a Database, owned by it.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(group = "example.com", version = "v1", kind = "Backup", namespaced)]
#[kube(status = "BackupStatus")]
pub struct BackupSpec {
    /// The Database backed up.
    pub database: String,
}

/// How a Backup is doing.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
pub struct BackupStatus {
    /// `Completed` once taken.
    pub phase: String,
}

const FILES_FINALIZER: &str = "example.com/data-files";

/// Keeps Databases' files and initial Backups; counts their completed Backups.
struct Databases {
    client: Client,
    databases: Indexer<Database>,
    /// The Backups, as the dynamic watch caches them.
    backups: Indexer<DynamicObject>,
    backup_kind: ApiResource,
    /// Data files outside the cluster, one per Database.
    files: Arc<Mutex<BTreeSet<String>>>,
}

impl Reconciler for Databases {
    async fn reconcile(&self, key: &str, ctx: &Context) -> Result<Action, ReconcileError> {
        let Some(database) = self.databases.get_by_key(key) else {
            return Ok(Action::done());
        };
        let (namespace, _) = split_meta_namespace_key(key)?;
        let api: Api<Database> =
            Api::namespaced(self.client.clone(), namespace.unwrap_or_default());
        finalizer(&api, FILES_FINALIZER, database, |event| async move {
            match event {
                FinalizerEvent::Apply(database) => self.apply(key, &database, ctx).await,
                FinalizerEvent::Cleanup(_) => {
                    self.files.lock().remove(key);
                    println!("database {key}: files deleted");
                    Ok(Action::done())
                }
            }
        })
        .await
    }
}

impl Databases {
    async fn apply(
        &self,
        key: &str,
        database: &Database,
        ctx: &Context,
    ) -> Result<Action, ReconcileError> {
        self.files.lock().insert(key.to_owned());
        let namespace = database.namespace().unwrap_or_default();
        let name = database.name_any();
        // The initial Backup, owned by the Database, written as the dynamic kind it is watched as.
        let backups: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &namespace, &self.backup_kind);
        let mut backup =
            DynamicObject::new(&format!("{name}-initial"), &self.backup_kind).within(&namespace);
        backup.metadata.owner_references =
            database.controller_owner_ref(&()).map(|owner| vec![owner]);
        backup.data = json!({"spec": {"database": name}});
        ctx.apply(&backups, &backup).await?;

        let completed = self
            .backups
            .list()
            .iter()
            .filter(|backup| {
                backup
                    .owner_references()
                    .iter()
                    .any(|owner| Some(&owner.uid) == database.uid().as_ref())
            })
            .filter(|backup| backup.data["status"]["phase"] == "Completed")
            .count();
        let status = DatabaseStatus {
            completed_backups: u32::try_from(completed).unwrap_or(u32::MAX),
        };
        let databases: Api<Database> = Api::namespaced(self.client.clone(), &namespace);
        ctx.apply_status(&databases, &name, &status).await?;
        Ok(Action::done())
    }
}

/// Takes each Backup.
struct Backups {
    client: Client,
    backups: Indexer<Backup>,
}

impl Reconciler for Backups {
    async fn reconcile(&self, key: &str, ctx: &Context) -> Result<Action, ReconcileError> {
        let Some(backup) = self.backups.get_by_key(key) else {
            return Ok(Action::done());
        };
        if backup
            .status
            .as_ref()
            .is_some_and(|status| status.phase == "Completed")
        {
            return Ok(Action::done());
        }
        let api: Api<Backup> =
            Api::namespaced(self.client.clone(), &backup.namespace().unwrap_or_default());
        ctx.apply_status(
            &api,
            &backup.name_any(),
            &BackupStatus {
                phase: "Completed".into(),
            },
        )
        .await?;
        if let Some(recorder) = &ctx.recorder {
            let event = Event {
                type_: EventType::Normal,
                reason: "BackupCompleted".into(),
                action: "BackingUp".into(),
                note: Some(format!("backup of {} taken", backup.spec.database)),
                secondary: None,
            };
            if let Err(error) = recorder.publish(&event, &backup.object_ref(&())).await {
                eprintln!("could not record an event: {error}");
            }
        }
        println!("backup {key}: completed");
        Ok(Action::done())
    }
}

/// Installs a CRD and waits until it is served.
async fn install(
    client: &Client,
    crd: CustomResourceDefinition,
) -> Result<(), Box<dyn std::error::Error>> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    crds.create(&PostParams::default(), &crd).await?;
    for _ in 0..600 {
        let established = crds
            .get(&name)
            .await?
            .status
            .and_then(|status| status.conditions)
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|condition| condition.type_ == "Established" && condition.status == "True")
            });
        if established {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("{name} was not established").into())
}

/// Waits until `done` holds, checking every 50 ms, for at most 30 s.
async fn until<F: Future<Output = bool>>(
    what: &str,
    mut done: impl FnMut() -> F,
) -> Result<(), Box<dyn std::error::Error>> {
    for _ in 0..600 {
        if done().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("timed out waiting for {what}").into())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = ApiServer::start(ApiServerConfig::default()).await?;
    let client = Client::new(server.service(), "default");
    install(&client, Database::crd()).await?;
    install(&client, Backup::crd()).await?;

    let mut manager = Manager::new(SharedInformerFactory::new(client.clone(), Duration::ZERO));
    let database_informer = manager.factory().informer::<Database>();
    let backup_kind = ApiResource::erase::<Backup>(&());
    let dynamic_backups = manager.factory().dynamic_informer(&backup_kind);
    let files = Arc::new(Mutex::new(BTreeSet::new()));
    let databases = Databases {
        client: client.clone(),
        databases: database_informer.get_indexer(),
        backups: dynamic_backups.get_indexer(),
        backup_kind: backup_kind.clone(),
        files: Arc::clone(&files),
    };
    manager.add(
        Controller::new("databases", database_informer)
            .predicate(GenerationChanged)
            .owns_with(dynamic_backups, backup_kind, Predicates::new()),
        databases,
    );
    let backup_informer = manager.factory().informer::<Backup>();
    let backups = Backups {
        client: client.clone(),
        backups: backup_informer.get_indexer(),
    };
    let recorder = EventRecorder::new(client.clone(), "example.com/backup-operator", "local");
    manager.add(
        Controller::new("backups", backup_informer).event_recorder(recorder),
        backups,
    );
    let cancel = CancellationToken::new();
    let running = tokio::spawn(manager.run(cancel.clone()));

    let api: Api<Database> = Api::namespaced(client.clone(), "default");
    api.create(
        &PostParams::default(),
        &Database::new(
            "orders",
            DatabaseSpec {
                engine: "postgres".into(),
            },
        ),
    )
    .await?;
    until("a completed backup", || async {
        api.get("orders")
            .await
            .ok()
            .and_then(|db| db.status)
            .is_some_and(|status| status.completed_backups == 1)
    })
    .await?;
    println!("database default/orders: 1 completed backup");

    api.delete("orders", &DeleteParams::default()).await?;
    let backups: Api<Backup> = Api::namespaced(client.clone(), "default");
    until("the database and its backup to go", || async {
        api.get_opt("orders").await.ok().flatten().is_none()
            && backups
                .get_opt("orders-initial")
                .await
                .ok()
                .flatten()
                .is_none()
    })
    .await?;
    assert!(files.lock().is_empty(), "the files outlived their database");
    println!("database default/orders: deleted, files and backup gone");

    cancel.cancel();
    running.await??;
    server.shutdown().await;
    Ok(())
}
