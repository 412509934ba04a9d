//! `ctrlkit demo`: three sample-controller replicas with leader election, a stream of Foos
//! created, scaled and deleted, the leader killed midway, and a check that every Deployment
//! ends up matching its Foo.

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ctrlkit::apiserver::{ApiServer, ApiServerConfig};
use ctrlkit::cache::SharedInformerFactory;
use ctrlkit::controller::{Action, Context, ReconcileError, Reconciler};
use ctrlkit::leaderelection::{LeaderElectionConfig, LeaseLock};
use ctrlkit::sample_controller::{self, Foo, FooSpec, SampleController};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What `ctrlkit demo` is asked to do.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// How many Foos to create.
    pub foos: usize,
    /// How many controller replicas run (one leads).
    pub replicas: usize,
    /// Workers per replica.
    pub workers: usize,
    /// The namespace the Foos live in; the demo creates it and deletes it at the end, so it
    /// must not exist yet.
    pub namespace: String,
    /// A cluster to run against instead of the embedded API server.
    pub kubeconfig: Option<PathBuf>,
    /// Write to the kubeconfig's cluster without asking.
    pub yes: bool,
}

/// Why the demo failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// Setting up (server, client, CRD, namespace) failed.
    #[error("setting up: {0}")]
    Setup(String),
    /// Talking to the API server failed.
    #[error("the API server: {0}")]
    Api(#[from] kube::Error),
    /// Deployments do not match their Foos.
    #[error("{0} Deployment(s) do not match their Foo")]
    Mismatch(usize),
    /// No replica took over from the killed leader.
    #[error("no replica took over within {0:?} of the leader being killed")]
    NoFailover(Duration),
    /// A cluster (not the embedded server) was named without `--yes`.
    #[error(
        "the demo creates a namespace, the Foo CRD, Foos and Deployments on {0} and deletes them at the end; run it again with --yes to go ahead"
    )]
    NotConfirmed(String),
    /// The namespace exists already: the demo deletes its namespace at the end, so it needs one
    /// of its own.
    #[error(
        "the namespace {0} exists already; the demo needs a namespace of its own (--namespace NAME)"
    )]
    NamespaceExists(String),
    /// Ctrl-C.
    #[error("interrupted")]
    Interrupted,
}

impl DemoError {
    /// Whether the demo was refused before it did anything (exit code 2, as a bad flag).
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::NotConfirmed(_) | Self::NamespaceExists(_))
    }

    /// Whether the demo stopped because it was interrupted (Ctrl-C).
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Self::Interrupted)
    }
}

/// An error with its causes, `outer: cause: root cause`, each said once: a connection error
/// then shows why it failed (say, the server's certificate is not trusted), not only that it
/// did.
pub(crate) fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    // An API server's refusal is its Status message, said once (kube-client's Display of it
    // carries the whole Status).
    let api_refusal = |error: &(dyn std::error::Error + 'static)| {
        let status = match error.downcast_ref::<DemoError>() {
            Some(DemoError::Api(kube::Error::Api(status))) => status,
            _ => match error.downcast_ref() {
                Some(kube::Error::Api(status)) => status,
                _ => return None,
            },
        };
        Some(format!("the API server: {}", status.message))
    };
    if let Some(refusal) = api_refusal(error) {
        return refusal;
    }
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(refusal) = api_refusal(cause) {
            text.push_str(": ");
            text.push_str(&refusal);
            break;
        }
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// What every replica's reconciles tell the demo.
#[derive(Default)]
struct Observed {
    /// Per replica: how many reconciles it ran.
    per_replica: Mutex<BTreeMap<String, usize>>,
    /// The last replica that reconciled, and when.
    last: Mutex<Option<(String, Instant)>>,
    /// Keys written and not yet reconciled since, with the time of the write.
    pending: Mutex<HashMap<String, Instant>>,
    /// Write-to-reconciled latencies.
    latencies: Mutex<Vec<Duration>>,
    reconciles: AtomicUsize,
    keys: Mutex<std::collections::HashSet<String>>,
}

impl Observed {
    fn written(&self, key: String) {
        self.pending.lock().entry(key).or_insert_with(Instant::now);
    }
}

/// The sample-controller, counted.
struct Counted {
    replica: String,
    inner: SampleController,
    observed: Arc<Observed>,
}

impl Reconciler for Counted {
    async fn reconcile(&self, key: &str, ctx: &Context) -> Result<Action, ReconcileError> {
        let started = Instant::now();
        let result = self.inner.reconcile(key, ctx).await;
        let observed = &self.observed;
        observed.reconciles.fetch_add(1, Ordering::Relaxed);
        *observed
            .per_replica
            .lock()
            .entry(self.replica.clone())
            .or_default() += 1;
        *observed.last.lock() = Some((self.replica.clone(), Instant::now()));
        if result.is_ok() {
            observed.keys.lock().insert(key.to_owned());
            let mut pending = observed.pending.lock();
            if pending.get(key).is_some_and(|written| *written <= started)
                && let Some(written) = pending.remove(key)
            {
                observed.latencies.lock().push(written.elapsed());
            }
        }
        result
    }
}

struct Replica {
    id: String,
    cancel: CancellationToken,
    run: JoinHandle<()>,
}

/// The client, the embedded server if there is one, and where the demo writes.
async fn connect(options: &DemoOptions) -> Result<(Client, Option<ApiServer>), DemoError> {
    match &options.kubeconfig {
        Some(path) => {
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|error| DemoError::Setup(describe(&error)))?;
            let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|error| DemoError::Setup(describe(&error)))?;
            let target = format!(
                "the cluster at {} (kubeconfig {})",
                config.cluster_url,
                path.display()
            );
            println!(
                "about to write to {target}, namespace {}",
                options.namespace
            );
            if !options.yes {
                return Err(DemoError::NotConfirmed(target));
            }
            let client =
                Client::try_from(config).map_err(|error| DemoError::Setup(describe(&error)))?;
            Ok((client, None))
        }
        None => {
            let server = ApiServer::start(ApiServerConfig::default())
                .await
                .map_err(|error| DemoError::Setup(describe(&error)))?;
            let url = server
                .url()
                .parse()
                .map_err(|error: http::uri::InvalidUri| DemoError::Setup(describe(&error)))?;
            let client = Client::try_from(Config::new(url))
                .map_err(|error| DemoError::Setup(describe(&error)))?;
            println!("embedded API server at {}", server.url());
            Ok((client, Some(server)))
        }
    }
}

fn start_replica(
    client: &Client,
    options: &DemoOptions,
    id: &str,
    observed: &Arc<Observed>,
    stop: &CancellationToken,
) -> Replica {
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let (controller, reconciler) =
        sample_controller::build(client.clone(), &factory, Some(&options.namespace));
    let lock = LeaseLock::new(client.clone(), &options.namespace, "sample-controller", id);
    let controller = controller.workers(options.workers).leader_election(
        lock,
        // Short leases, so the failover after the kill is seconds, not a quarter minute.
        LeaderElectionConfig {
            lease_duration: Duration::from_secs(4),
            renew_deadline: Duration::from_secs(3),
            retry_period: Duration::from_millis(500),
            name: "sample-controller".into(),
            ..LeaderElectionConfig::default()
        },
    );
    let cancel = stop.child_token();
    factory.start(&cancel);
    let counted = Counted {
        replica: id.to_owned(),
        inner: reconciler,
        observed: Arc::clone(observed),
    };
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            if let Err(error) = controller.run(counted, cancel).await {
                eprintln!("controller stopped: {error}");
            }
        }
    });
    Replica {
        id: id.to_owned(),
        cancel,
        run,
    }
}

/// Shows progress: a bar on a terminal, a plain line a second otherwise.
struct Progress {
    terminal: bool,
    last_line: Instant,
    /// The last line printed (not on a terminal): the same line is not printed again.
    last_printed: Option<(String, usize, usize)>,
}

impl Progress {
    fn show(&mut self, phase: &str, done: usize, total: usize, observed: &Observed) {
        let leader = observed
            .last
            .lock()
            .as_ref()
            .map_or_else(|| "-".to_owned(), |(id, _)| id.clone());
        let reconciles = observed.reconciles.load(Ordering::Relaxed);
        if self.terminal {
            let width = 30;
            let filled = (done * width).checked_div(total).unwrap_or(width);
            let filled_bar: String = "=".repeat(filled) + &" ".repeat(width - filled);
            print!(
                "\r{phase:<10} [{filled_bar}] {done:>5}/{total:<5} reconciles {reconciles:>6}  leader {leader:<10}"
            );
            let _ = std::io::stdout().flush();
        } else if self.last_line.elapsed() >= Duration::from_secs(1) || done == total {
            let line = (phase.to_owned(), done, total);
            if self.last_printed.as_ref() != Some(&line) {
                println!(
                    "{phase}: {done}/{total} matching, {reconciles} reconciles, leader {leader}"
                );
                self.last_printed = Some(line);
            }
            self.last_line = Instant::now();
        }
    }

    fn end_phase(&self) {
        if self.terminal {
            println!();
        }
    }
}

/// Counts the Foos whose Deployment matches, and the Deployments left over from deleted Foos.
async fn check(client: &Client, namespace: &str) -> Result<(usize, usize, usize), DemoError> {
    let foos: Api<Foo> = Api::namespaced(client.clone(), namespace);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let foos = foos.list(&ListParams::default()).await?.items;
    let deployments: HashMap<String, Deployment> = deployments
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|deployment| (deployment.name_any(), deployment))
        .collect();
    let mut matching = 0;
    for wish in &foos {
        let Some(deployment) = deployments.get(&wish.spec.deployment_name) else {
            continue;
        };
        let owned = deployment.owner_references().iter().any(|owner| {
            owner.controller == Some(true) && Some(&owner.uid) == wish.metadata.uid.as_ref()
        });
        let replicas = deployment.spec.replicas;
        if owned && replicas == wish.spec.replicas {
            matching += 1;
        }
    }
    let wanted: std::collections::HashSet<&str> = foos
        .iter()
        .map(|wish| wish.spec.deployment_name.as_str())
        .collect();
    let orphans = deployments
        .keys()
        .filter(|name| name.starts_with("foo-") && !wanted.contains(name.as_str()))
        .count();
    Ok((matching, foos.len(), orphans))
}

/// Waits until `wanted` Foos exist (a deleted Foo stays until its finalizer is released), each
/// Deployment matches its Foo, and no Deployment of a deleted Foo is left.
async fn converge(
    client: &Client,
    options: &DemoOptions,
    wanted: usize,
    phase: &str,
    progress: &mut Progress,
    observed: &Observed,
    limit: Duration,
) -> Result<(usize, usize, usize), DemoError> {
    let end = Instant::now() + limit;
    loop {
        let (matching, total, orphans) = check(client, &options.namespace).await?;
        progress.show(phase, matching, total, observed);
        if (matching == total && total == wanted && orphans == 0) || Instant::now() >= end {
            progress.end_phase();
            return Ok((matching, total, orphans));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// What the demo made, to delete at the end.
#[derive(Debug, Default)]
struct Made {
    namespace: bool,
    crd: bool,
}

const CRD_NAME: &str = "foos.samplecontroller.k8s.io";

/// Runs the demo; `Ok` means every Deployment matched its Foo at the end. Whatever happens
/// (success, failure, Ctrl-C), what it made is deleted before it returns: its namespace with
/// everything in it, and the Foo CRD unless it existed before.
pub async fn run(options: DemoOptions) -> Result<(), DemoError> {
    let (client, server) = connect(&options).await?;
    let stop = CancellationToken::new();
    let made = Arc::new(Mutex::new(Made::default()));
    let result = tokio::select! {
        result = workload(&client, &options, &made, &stop) => result,
        _ = tokio::signal::ctrl_c() => {
            println!();
            println!("interrupted: cleaning up");
            Err(DemoError::Interrupted)
        }
    };
    // The replicas stop before their objects go: nothing is recreated behind the cleanup.
    stop.cancel();
    let made = std::mem::take(&mut *made.lock());
    if let Err(error) = clean_up(&client, &options.namespace, &made).await {
        eprintln!("warning: cleaning up: {}", describe(&error));
    }
    if let Some(server) = server {
        server.shutdown().await;
    }
    result
}

/// Deletes what the demo made and waits until it is gone.
async fn clean_up(client: &Client, namespace: &str, made: &Made) -> Result<(), DemoError> {
    let mut cleaned = Vec::new();
    if made.namespace {
        // The Foos' finalizer waits for a controller that no longer runs, so the Foos are
        // released on every poll: a replica that was mid-reconcile when it was told to stop
        // may still add the finalizer to a Foo after a first release.
        let foos: Api<Foo> = Api::namespaced(client.clone(), namespace);
        let namespaces: Api<Namespace> = Api::all(client.clone());
        delete_and_wait(&namespaces, namespace, || release_finalizers(&foos)).await?;
        cleaned.push(format!("namespace {namespace}"));
    }
    // The CRD is deleted if the demo created it: interrupted or refused before the create
    // landed, there is nothing to delete.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = async {
        if made.crd && crds.get_opt(CRD_NAME).await?.is_some() {
            delete_and_wait(&crds, CRD_NAME, || async { Ok(()) }).await?;
            cleaned.push("the Foo CRD".to_owned());
        }
        Ok::<(), DemoError>(())
    }
    .await;
    // What was cleaned up is said even when the rest could not be.
    if !cleaned.is_empty() {
        println!("cleaned up: {}", cleaned.join(", "));
    }
    crd
}

/// Removes the finalizer of every Foo that still has one.
async fn release_finalizers(foos: &Api<Foo>) -> Result<(), DemoError> {
    let Ok(list) = foos.list(&ListParams::default()).await else {
        return Ok(());
    };
    let release = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    for foo in list.items.iter().filter(|foo| !foo.finalizers().is_empty()) {
        match foos
            .patch(&foo.name_any(), &PatchParams::default(), &release)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// Deletes `name` and polls until it is gone, running `before_poll` before each poll.
async fn delete_and_wait<K, F, Fut>(
    api: &Api<K>,
    name: &str,
    before_poll: F,
) -> Result<(), DemoError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), DemoError>>,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(error) => return Err(error.into()),
    }
    let limit = Duration::from_secs(60);
    let end = Instant::now() + limit;
    loop {
        before_poll().await?;
        if api.get_opt(name).await?.is_none() {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(DemoError::Setup(format!(
                "{name} was not gone within {limit:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The demo's work, from the CRD to the summary.
async fn workload(
    client: &Client,
    options: &DemoOptions,
    made: &Mutex<Made>,
    stop: &CancellationToken,
) -> Result<(), DemoError> {
    let started = Instant::now();
    let client = client.clone();
    let options = options.clone();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(&options.namespace).await?.is_some() {
        return Err(DemoError::NamespaceExists(options.namespace.clone()));
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_existed = crds.get_opt(CRD_NAME).await?.is_some();
    made.lock().crd = !crd_existed;
    sample_controller::install_crd(client.clone(), Duration::from_secs(30))
        .await
        .map_err(|error| DemoError::Setup(describe(&error)))?;
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(options.namespace.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await?;
    made.lock().namespace = true;
    println!(
        "{} sample-controller replicas, {} workers each, leader election on Lease {}/sample-controller",
        options.replicas, options.workers, options.namespace
    );

    let observed = Arc::new(Observed::default());
    let mut replicas: Vec<Replica> = (0..options.replicas)
        .map(|n| start_replica(&client, &options, &format!("replica-{n}"), &observed, stop))
        .collect();
    let mut progress = Progress {
        terminal: std::io::stdout().is_terminal(),
        last_line: Instant::now(),
        last_printed: None,
    };
    let foos: Api<Foo> = Api::namespaced(client.clone(), &options.namespace);
    let key = |name: &str| format!("{}/{name}", options.namespace);
    let name = |n: usize| format!("foo-{n:05}");

    // Create.
    let workload = Instant::now();
    for n in 0..options.foos {
        let spec = FooSpec {
            deployment_name: format!("{}-deploy", name(n)),
            replicas: Some(i32::try_from(n % 3 + 1).unwrap_or(1)),
        };
        observed.written(key(&name(n)));
        foos.create(&PostParams::default(), &Foo::new(&name(n), spec))
            .await?;
    }
    converge(
        &client,
        &options,
        options.foos,
        "create",
        &mut progress,
        &observed,
        Duration::from_secs(120),
    )
    .await?;

    // Kill the leader: its task is aborted, no release; a standby takes over when the lease runs out.
    let leader = observed.last.lock().as_ref().map(|(id, _)| id.clone());
    let failover = match leader.and_then(|id| replicas.iter().position(|r| r.id == id)) {
        Some(index) => {
            let killed = replicas.remove(index);
            println!("killing the leader, {}", killed.id);
            killed.run.abort();
            // A dead process's informers die with it.
            killed.cancel.cancel();
            let killed_at = Instant::now();
            // Scale every other Foo while nobody leads: the new leader has work waiting.
            for n in (0..options.foos).step_by(2) {
                let patch = serde_json::json!({ "spec": { "replicas": (n % 3 + 2) } });
                observed.written(key(&name(n)));
                foos.patch(&name(n), &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
            let limit = Duration::from_secs(30);
            loop {
                let taken = observed
                    .last
                    .lock()
                    .as_ref()
                    .filter(|(id, at)| *id != killed.id && *at > killed_at)
                    .map(|(id, at)| (id.clone(), *at - killed_at));
                if let Some((id, after)) = taken {
                    println!("{id} took over {:.2} s after the kill", after.as_secs_f64());
                    break Some(after);
                }
                if killed_at.elapsed() > limit {
                    return Err(DemoError::NoFailover(limit));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        None => None,
    };
    converge(
        &client,
        &options,
        options.foos,
        "scale",
        &mut progress,
        &observed,
        Duration::from_secs(120),
    )
    .await?;

    // Delete a quarter; their Deployments go with them (garbage collection of owned objects).
    let mut deleted = 0;
    for n in (0..options.foos).step_by(4) {
        foos.delete(&name(n), &DeleteParams::default()).await?;
        deleted += 1;
    }
    let (matching, total, orphans) = converge(
        &client,
        &options,
        options.foos.saturating_sub(deleted),
        "delete",
        &mut progress,
        &observed,
        Duration::from_secs(120),
    )
    .await?;
    let elapsed = workload.elapsed();

    for replica in replicas.drain(..) {
        replica.cancel.cancel();
        let _ = replica.run.await;
    }

    let mut latencies = observed.latencies.lock().clone();
    latencies.sort();
    let reconciles = observed.reconciles.load(Ordering::Relaxed);
    println!();
    println!("summary");
    println!("  Foos reconciled          {}", observed.keys.lock().len());
    println!(
        "  reconciles               {reconciles} ({:.0}/s over {:.1} s)",
        reconciles as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    let by_replica: Vec<String> = observed
        .per_replica
        .lock()
        .iter()
        .map(|(replica, count)| format!("{replica} {count}"))
        .collect();
    println!("  by replica               {}", by_replica.join(", "));
    match failover {
        Some(after) => println!(
            "  failover                 {:.2} s (lease 4 s)",
            after.as_secs_f64()
        ),
        None => println!("  failover                 - (no leader to kill)"),
    }
    println!(
        "  write → reconciled       p50 {:.1} ms, p99 {:.1} ms ({} writes; the slowest were made while no replica led)",
        quantile(&latencies, 0.5).as_secs_f64() * 1e3,
        quantile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.len()
    );
    println!(
        "  Deployments matching     {matching}/{total}, left over from deleted Foos {orphans}"
    );
    println!(
        "  total time               {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let wrong = total - matching + orphans;
    if wrong > 0 {
        return Err(DemoError::Mismatch(wrong));
    }
    println!("every Deployment matches its Foo");
    Ok(())
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    #[test]
    fn an_api_error_is_its_message_once() {
        let status = Status::failure(
            r#"foos.samplecontroller.k8s.io "foo-00001" already exists"#,
            "AlreadyExists",
        )
        .with_code(409);
        let error = DemoError::Api(kube::Error::Api(status.boxed()));
        assert_eq!(
            describe(&error),
            r#"the API server: foos.samplecontroller.k8s.io "foo-00001" already exists"#
        );
    }

    #[test]
    fn a_refusal_under_another_error_is_said_once_as_the_servers_message() {
        let status = Status::failure("injected fault", "InternalError").with_code(500);
        let error = ctrlkit::sample_controller::InstallError::Api(kube::Error::Api(status.boxed()));
        assert_eq!(
            describe(&error),
            "installing the Foo CRD: the API server: injected fault"
        );
    }
}
