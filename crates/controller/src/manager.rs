//! Several controllers as one process: one informer factory, one leader election, one health
//! and metrics endpoint, one shutdown (controller-runtime's `Manager`).

use std::time::Duration;

use ctrlkit_cache::SharedInformerFactory;
use ctrlkit_leaderelection::{ConfigError, LeaderCallbacks, LeaderElectionConfig, ResourceLock};
use futures::FutureExt;
use futures::future::{BoxFuture, join_all};
use kube::Resource;
use tokio_util::sync::CancellationToken;

use crate::controller::{Controller, ControllerError, Elect, election};
use crate::endpoint::Health;
use crate::reconciler::Reconciler;

/// How long a stopping manager waits for its controllers' reconciles to finish (as
/// controller-runtime's default `GracefulShutdownTimeout`).
pub const DEFAULT_GRACEFUL_SHUTDOWN: Duration = Duration::from_secs(30);

/// Why a manager stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// A controller could not run.
    #[error("controller {name}: {source}")]
    Controller {
        /// The controller's name.
        name: String,
        /// Its error.
        #[source]
        source: ControllerError,
    },
    /// The leader election is misconfigured.
    #[error("leader election: {0}")]
    LeaderElection(#[from] ConfigError),
    /// Leadership was lost (not cancelled): every controller stopped. Exit and let the process
    /// restart, as controller-runtime's manager does.
    #[error("leader election lost")]
    LostLeadership,
    /// Some reconcile was still running when the grace period ended; it was abandoned.
    #[error("failed waiting for all controllers to end within grace period of {0:?}")]
    GracePeriodExceeded(Duration),
    /// Waiting for a termination signal failed.
    #[error("listening for termination signals: {0}")]
    Signal(#[source] std::io::Error),
}

type Runnable =
    Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, Result<(), ManagerError>> + Send>;

/// Runs controllers together. Every replica runs the informers (so a new leader starts warm);
/// with [`leader_election`](Self::leader_election) only the leader runs the controllers. On
/// stop (the token, or SIGTERM/SIGINT with [`run_until_signal`](Self::run_until_signal)) every
/// controller stops taking keys, the reconciles in progress get the grace period to finish,
/// and the informers stop.
///
/// ```no_run
/// use std::time::Duration;
/// use ctrlkit_cache::SharedInformerFactory;
/// use ctrlkit_controller::{Action, Context, Controller, Manager, ReconcileError, Reconciler};
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// struct Log;
/// impl Reconciler for Log {
///     async fn reconcile(&self, key: &str, _: &Context) -> Result<Action, ReconcileError> {
///         println!("{key}");
///         Ok(Action::done())
///     }
/// }
///
/// # async fn doc(client: kube::Client) -> Result<(), ctrlkit_controller::ManagerError> {
/// let mut manager = Manager::new(SharedInformerFactory::new(client, Duration::ZERO));
/// let deployments = manager.factory().informer::<Deployment>();
/// manager.add(Controller::new("deployments", deployments), Log);
/// let settings = manager.factory().informer::<ConfigMap>();
/// manager.add(Controller::new("settings", settings), Log);
/// manager.run_until_signal().await
/// # }
/// ```
#[must_use]
pub struct Manager {
    factory: std::sync::Arc<SharedInformerFactory>,
    health: Health,
    controllers: Vec<Runnable>,
    elect: Option<Elect>,
    grace: Option<Duration>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("controllers", &self.controllers.len())
            .field("leader_election", &self.elect.is_some())
            .field("grace", &self.grace)
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// A manager of controllers whose informers come from `factory`.
    pub fn new(factory: SharedInformerFactory) -> Self {
        let health = Health::default();
        // Ready once the factory's informers have synced (see `run`).
        health.expect_sync();
        Self {
            factory: std::sync::Arc::new(factory),
            health,
            controllers: Vec::new(),
            elect: None,
            grace: Some(DEFAULT_GRACEFUL_SHUTDOWN),
        }
    }

    /// The informer factory: make the controllers' informers with it, so that they share one
    /// cache per kind and the manager starts and stops them.
    pub fn factory(&self) -> &SharedInformerFactory {
        &self.factory
    }

    /// Reports every controller's metrics and health through `health` (add controllers after
    /// this). Serve it with [`Health::serve`]. `/readyz` passes once the factory's informers
    /// have synced (and any other controller given the same health has, too); make the
    /// controllers' informers with [`factory`](Self::factory).
    pub fn health(mut self, health: Health) -> Self {
        self.health.forget_sync();
        health.expect_sync();
        self.health = health;
        self
    }

    /// The health and metrics every controller reports to.
    pub fn health_handle(&self) -> &Health {
        &self.health
    }

    /// How long reconciles in progress may take to finish once the manager stops (default
    /// [`DEFAULT_GRACEFUL_SHUTDOWN`]); `None` waits for them however long they take.
    pub fn graceful_shutdown_timeout(mut self, grace: Option<Duration>) -> Self {
        self.grace = grace;
        self
    }

    /// Runs the controllers only while this replica leads the election on `lock`; one election
    /// for all of them.
    pub fn leader_election<L: ResourceLock + 'static>(
        mut self,
        lock: L,
        config: LeaderElectionConfig,
    ) -> Self {
        self.elect = Some(election(lock, config));
        self
    }

    /// Adds `controller`, reconciled by `reconciler`, reporting to the manager's health. A
    /// controller given its own leader election keeps it; usually the manager's is enough.
    pub fn add<K, R>(&mut self, controller: Controller<K>, reconciler: R)
    where
        K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Send + Sync + 'static,
        R: Reconciler,
    {
        let controller = controller.managed_by(self.health.clone());
        self.controllers
            .push(Box::new(move |stop: CancellationToken| {
                async move {
                    let name = controller.name().to_owned();
                    controller
                        .run(reconciler, stop)
                        .await
                        .map_err(|source| ManagerError::Controller { name, source })
                }
                .boxed()
            }));
    }

    /// Runs until `cancel` fires (or leadership is lost), then stops everything within the
    /// grace period.
    pub async fn run(self, cancel: CancellationToken) -> Result<(), ManagerError> {
        let informers = CancellationToken::new();
        // Whatever way this returns, the informers (and the readiness task below) stop.
        let _stop_informers = informers.clone().drop_guard();
        self.factory.start(&informers);
        // Ready once the informers are whole, on every replica: a standby is ready to take
        // over, though its controllers only start when it leads.
        let (factory, health, synced) = (
            std::sync::Arc::clone(&self.factory),
            self.health.clone(),
            informers.clone(),
        );
        tokio::spawn(async move {
            let status = factory.wait_for_cache_sync(&synced).await;
            if !synced.is_cancelled() && status.values().all(|&done| done) {
                health.synced();
            }
        });
        let controllers_stop = cancel.child_token();
        let controllers = self.controllers;
        let grace = self.grace;
        let outcome = match self.elect {
            None => {
                let running = tokio::spawn(run_all(controllers, controllers_stop.clone()));
                wait_within(running, &controllers_stop, grace).await
            }
            Some(elect) => {
                let (done_tx, done_rx) = tokio::sync::oneshot::channel();
                // Leadership is won once per run: a replica that loses it stops for good.
                let start =
                    std::sync::Arc::new(parking_lot::Mutex::new(Some((controllers, done_tx))));
                let stop_all = controllers_stop.clone();
                let callbacks = LeaderCallbacks::new(
                    move |leading: CancellationToken| {
                        let start = start.lock().take();
                        let stop_all = stop_all.clone();
                        async move {
                            if let Some((controllers, done)) = start {
                                let result = run_all(controllers, leading).await;
                                if result.is_err() {
                                    stop_all.cancel();
                                }
                                let _ = done.send(result);
                            }
                        }
                    },
                    || {},
                );
                let election = elect(callbacks, &self.health, controllers_stop.clone())?;
                let running = tokio::spawn(async move {
                    election.await;
                    done_rx.await.unwrap_or(Ok(()))
                });
                let result = wait_within(running, &controllers_stop, grace).await;
                match result {
                    Ok(()) if !cancel.is_cancelled() => Err(ManagerError::LostLeadership),
                    other => other,
                }
            }
        };
        informers.cancel();
        self.factory.shutdown().await;
        outcome
    }

    /// [`run`](Self::run) until the process gets SIGTERM or SIGINT (Ctrl-C).
    pub async fn run_until_signal(self) -> Result<(), ManagerError> {
        let cancel = CancellationToken::new();
        let signalled = termination_signal().map_err(ManagerError::Signal)?;
        let on_signal = cancel.clone();
        tokio::spawn(async move {
            signalled.await;
            tracing::info!("termination signal received: stopping the controllers");
            on_signal.cancel();
        });
        self.run(cancel).await
    }
}

/// Resolves on SIGTERM or SIGINT; the handlers are installed before this returns, so a signal
/// sent afterwards is never the default (kill the process) one.
fn termination_signal() -> std::io::Result<BoxFuture<'static, ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        }
        .boxed())
    }
    #[cfg(not(unix))]
    {
        Ok(async move {
            let _ = tokio::signal::ctrl_c().await;
        }
        .boxed())
    }
}

/// Runs every controller until `stop`; the first error is the result.
async fn run_all(controllers: Vec<Runnable>, stop: CancellationToken) -> Result<(), ManagerError> {
    let results = join_all(controllers.into_iter().map(|run| {
        let stop = stop.clone();
        async move {
            let result = run(stop.clone()).await;
            // One controller failing stops the others, as controller-runtime's manager does.
            if result.is_err() {
                stop.cancel();
            }
            result
        }
    }))
    .await;
    results.into_iter().collect()
}

/// Waits for `running`; once `stop` fires, for at most `grace` more.
async fn wait_within(
    mut running: tokio::task::JoinHandle<Result<(), ManagerError>>,
    stop: &CancellationToken,
    grace: Option<Duration>,
) -> Result<(), ManagerError> {
    let joined = |result: Result<Result<(), ManagerError>, tokio::task::JoinError>| {
        result.unwrap_or_else(|error| {
            // A controller task panicked outside any reconcile (reconciles are caught).
            tracing::error!(%error, "a controller task failed");
            Ok(())
        })
    };
    tokio::select! {
        result = &mut running => return joined(result),
        () = stop.cancelled() => {}
    }
    let Some(grace) = grace else {
        return joined(running.await);
    };
    match tokio::time::timeout(grace, &mut running).await {
        Ok(result) => joined(result),
        Err(_) => {
            running.abort();
            Err(ManagerError::GracePeriodExceeded(grace))
        }
    }
}
