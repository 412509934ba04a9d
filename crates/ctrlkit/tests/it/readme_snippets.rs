//! The README's shorter Rust listings, each the region between `// README: NAME` and
//! `// README end` below (the README marks it `<!-- readme_snippets: NAME -->`): compiled here
//! and run against the embedded API server, so a listing cannot name what does not exist.
//! `readme.rs` checks that the README shows exactly these regions.
#![allow(clippy::disallowed_names)] // `foo` is the sample resource's name

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use ctrlkit::apiserver::{ApiServer, ApiServerConfig};
use ctrlkit::cache::{Lister, SharedInformerFactory};
use ctrlkit::controller::{Action, Context, ReconcileError};
use ctrlkit::sample_controller::{Foo, FooSpec, install_crd, is_controlled_by, new_deployment};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

type Result<T = ()> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

static RECONCILED: AtomicUsize = AtomicUsize::new(0);

async fn reconcile(_key: &str) -> std::result::Result<(), String> {
    RECONCILED.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(start_paused = true)]
#[rustfmt::skip]
async fn the_work_queue_listing_reconciles_its_key() {
    // The loop waits for keys until the queue shuts down; here it is left after a second.
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        // README: workqueue
        use ctrlkit::workqueue::RateLimitingQueue;

        let queue = RateLimitingQueue::with_default_rate_limiter(); // client-go's: max(exp 5ms..1000s, 10qps/100)
        queue.add("default/foo".to_string());                      // event handlers add keys

        while let Some(key) = queue.get().await {                   // None once shut down and drained
            match reconcile(&key).await {
                Ok(()) => key.forget(),                              // success: reset its backoff
                Err(_) => key.requeue_rate_limited(),                // failure: back after its backoff
            }                                                        // either way: done (also on panic)
        }
        // README end
    })
    .await;
    assert_eq!(RECONCILED.load(Ordering::SeqCst), 1);
}

/// The README's apply variant of the Foo controller's reconcile, around its listing.
struct ApplyingFooController {
    client: kube::Client,
    deployments: Lister<Deployment>,
}

#[rustfmt::skip]
impl ApplyingFooController {
    async fn reconcile_foo(
        &self,
        foo: Arc<Foo>,
        namespace: &str,
        name: &str,
        ctx: &Context,
    ) -> std::result::Result<Action, ReconcileError> {
        let wanted = &foo.spec.deployment_name;
        // README: apply
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
        if let Some(existing) = self.deployments.get(Some(namespace), wanted)
            && !is_controlled_by(&existing, &foo)
        {
            return Err(ReconcileError::retry(format!("{wanted} belongs to someone else")));
        }
        let deployment = ctx.apply(&api, &new_deployment(&foo)?).await?; // created or updated
        let available = deployment.status.and_then(|s| s.available_replicas).unwrap_or(0);
        let foos: Api<Foo> = Api::namespaced(self.client.clone(), namespace);
        ctx.apply_status(&foos, name, &json!({"availableReplicas": available})).await?;
        // README end
        Ok(Action::done())
    }
}

#[tokio::test]
async fn the_apply_listing_creates_the_deployment_and_the_status() -> Result {
    let server = ApiServer::start(ApiServerConfig::default()).await?;
    let client = kube::Client::new(server.service(), "default");
    install_crd(client.clone(), Duration::from_secs(30)).await?;
    let foos: Api<Foo> = Api::namespaced(client.clone(), "default");
    let spec = FooSpec {
        deployment_name: "web".into(),
        replicas: Some(2),
    };
    let foo = foos
        .create(&PostParams::default(), &Foo::new("example", spec))
        .await?;
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let controller = ApplyingFooController {
        client: client.clone(),
        deployments: Lister::new(factory.informer::<Deployment>().get_indexer()),
    };
    let ctx = Context::new("foos");
    let reconciled = controller
        .reconcile_foo(Arc::new(foo), "default", "example", &ctx)
        .await;
    assert!(reconciled.is_ok(), "{reconciled:?}");
    let deployment = Api::<Deployment>::namespaced(client, "default")
        .get("web")
        .await?;
    assert_eq!(deployment.spec.replicas, Some(2));
    let status = foos.get_status("example").await?.status;
    assert!(status.is_some(), "no status applied");
    Ok(())
}

/// The README's informer listing; how many Pods its lister found in `default`.
#[rustfmt::skip]
async fn informer_listing(client: kube::Client, cancel: CancellationToken) -> Result<usize> {
    // README: informer
    use std::{sync::Arc, time::Duration};
    use ctrlkit::cache::{ResourceEventHandlerFuncs, SharedInformerFactory, Lister, drop_managed_fields};
    use k8s_openapi::api::core::v1::Pod;

    let factory = SharedInformerFactory::new(client, Duration::from_secs(600));
    let pods = factory.informer::<Pod>();
    pods.set_transform(Arc::new(drop_managed_fields))?; // half the memory of a cached Pod
    pods.add_event_handler(ResourceEventHandlerFuncs::new().on_add(|pod: &Arc<Pod>, _| {
        println!("{:?}", pod.metadata.name); // typically: put its key on a work queue
    }))?;
    factory.start(&cancel);
    factory.wait_for_cache_sync(&cancel).await;
    let in_default = Lister::new(pods.get_indexer()).namespaced("default").list(&Default::default());
    // README end
    Ok(in_default.len())
}

#[tokio::test]
async fn the_informer_listing_lists_the_pods() -> Result {
    let server = ApiServer::start(ApiServerConfig::default()).await?;
    let client = kube::Client::new(server.service(), "default");
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "web".into(),
                image: Some("nginx".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pod)
        .await?;
    let cancel = CancellationToken::new();
    assert_eq!(informer_listing(client, cancel.clone()).await?, 1);
    cancel.cancel();
    Ok(())
}

#[tokio::test]
#[rustfmt::skip]
async fn the_embedded_server_listing_serves_a_client() -> Result {
    // README: embedded server
    let server = ctrlkit::apiserver::ApiServer::start(Default::default()).await?;
    let client = kube::Client::try_from(kube::Config::new(server.url().parse()?))?;
    // README end
    assert!(!client.apiserver_version().await?.git_version.is_empty());
    Ok(())
}

static LED: AtomicBool = AtomicBool::new(false);

async fn run_controller(leading: CancellationToken) {
    LED.store(true, Ordering::SeqCst);
    leading.cancelled().await;
}

/// The README's leader election listing, run until `cancel`.
#[rustfmt::skip]
async fn election_listing(client: kube::Client, pod_name: String, cancel: CancellationToken) -> Result {
    // README: leader election
    use ctrlkit::leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock};

    let lock = LeaseLock::new(client, "default", "my-controller", &pod_name)
        .with_event_recorder("my-controller");                  // "<id> became leader" events
    let callbacks = LeaderCallbacks::new(
        |leading| async move { run_controller(leading).await }, // `leading` is cancelled on loss
        || println!("stopped leading"),                          // always runs, once
    );
    let config = LeaderElectionConfig { release_on_cancel: true, ..Default::default() }; // 15/10/2 s
    LeaderElector::new(lock, config, callbacks)?.run(cancel).await;
    // README end
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_leader_election_listing_leads_and_releases() -> Result {
    let server = ApiServer::start(ApiServerConfig::default()).await?;
    let client = kube::Client::new(server.service(), "default");
    let cancel = CancellationToken::new();
    let election = tokio::spawn(election_listing(
        client.clone(),
        "pod-0".into(),
        cancel.clone(),
    ));
    for _ in 0..500 {
        if LED.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(LED.load(Ordering::SeqCst), "never led");
    cancel.cancel();
    election.await??;
    let lease = Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client, "default")
        .get("my-controller")
        .await?;
    // Released on cancel: no holder.
    let holder = lease
        .spec
        .and_then(|spec| spec.holder_identity)
        .unwrap_or_default();
    assert!(holder.is_empty(), "still held by {holder}");
    Ok(())
}
