//! The controller loop: event handlers put keys on a priority work queue; workers reconcile
//! them; success forgets, failure requeues with backoff; the whole runs on the leader only.

use std::fmt::Debug;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_cache::{
    InformerError, ObjectOrTombstone, ResourceEventHandlerFuncs, SharedIndexInformer,
    deletion_handling_meta_namespace_key, meta_namespace_key,
};
use ctrlkit_leaderelection::{
    ConfigError, LeaderCallbacks, LeaderElectionConfig, LeaderElector, ResourceLock,
};
use ctrlkit_workqueue::{
    AddOpts, LOW_PRIORITY, MetricsConfig, PriorityQueue, PriorityQueueBuilder,
    PrometheusMetricsProvider, RateLimiter,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Resource;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::action::ReconcileError;
use crate::endpoint::Health;
use crate::mapper::controller_owner_key;
use crate::metrics::{ControllerMetrics, ReconcileMetrics, ReconcileResult};
use crate::reconciler::{Context, Reconciler};

/// Why a controller could not run.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// An event handler could not be registered.
    #[error("registering an event handler: {0}")]
    Informer(#[from] InformerError),
    /// The leader election is misconfigured.
    #[error("leader election: {0}")]
    LeaderElection(#[from] ConfigError),
    /// Leadership was lost (not cancelled): this replica stopped reconciling. client-go's
    /// controllers exit here and let the process restart.
    #[error("leadership was lost")]
    LostLeadership,
}

/// Called once for a key given up after too many failures: log it, record an event, park it.
pub type DeadLetter = Arc<dyn Fn(&str, &ReconcileError) + Send + Sync>;

type Registration = Box<dyn FnOnce(&PriorityQueue<String>) -> Result<(), InformerError> + Send>;
/// Waits until one informer has synced; `false` when cancelled first.
type Synced = Box<dyn Fn(CancellationToken) -> BoxFuture<'static, bool> + Send + Sync>;
type QueueBuilder = PriorityQueueBuilder<String>;
type Elect = Box<
    dyn FnOnce(
            LeaderCallbacks,
            &Health,
            CancellationToken,
        ) -> Result<BoxFuture<'static, ()>, ConfigError>
        + Send,
>;

/// A controller for primary objects of kind `K`; client-go's sample-controller loop, and
/// controller-runtime's builder, in one.
///
/// ```no_run
/// use std::time::Duration;
/// use ctrlkit_cache::SharedInformerFactory;
/// use ctrlkit_controller::{Action, Context, Controller, ReconcileError, Reconciler};
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::api::core::v1::Pod;
/// use tokio_util::sync::CancellationToken;
///
/// struct Echo;
///
/// impl Reconciler for Echo {
///     async fn reconcile(&self, key: &str, _ctx: &Context) -> Result<Action, ReconcileError> {
///         println!("reconciling {key}");
///         Ok(Action::done())
///     }
/// }
///
/// # async fn doc(client: kube::Client) -> Result<(), ctrlkit_controller::ControllerError> {
/// let factory = SharedInformerFactory::new(client, Duration::ZERO);
/// let cancel = CancellationToken::new();
/// let controller = Controller::new("deployments", factory.informer::<Deployment>())
///     .owns(factory.informer::<Pod>())
///     .workers(4);
/// factory.start(&cancel);
/// controller.run(Echo, cancel).await
/// # }
/// ```
#[must_use]
pub struct Controller<K: Clone> {
    name: String,
    /// The primary resource: its informer lives on in the registrations and sync checks.
    primary: std::marker::PhantomData<fn() -> K>,
    registrations: Vec<Registration>,
    synced: Vec<Synced>,
    workers: usize,
    reconcile_timeout: Option<Duration>,
    give_up: Option<(usize, DeadLetter)>,
    rate_limiter: Option<Box<dyn FnOnce(QueueBuilder) -> QueueBuilder + Send>>,
    elect: Option<Elect>,
    health: Health,
    metrics: ControllerMetrics,
    queue_metrics: Option<Arc<PrometheusMetricsProvider>>,
}

impl<K: Clone> Debug for Controller<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.name)
            .field("workers", &self.workers)
            .field("reconcile_timeout", &self.reconcile_timeout)
            .field("leader_election", &self.elect.is_some())
            .finish_non_exhaustive()
    }
}

fn synced_by<C>(informer: SharedIndexInformer<C>) -> Synced
where
    C: Resource + Clone + Debug + Send + Sync + 'static,
{
    Box::new(move |cancel: CancellationToken| {
        let informer = informer.clone();
        async move { informer.wait_for_sync(&cancel).await }.boxed()
    })
}

fn key_of<T: Resource>(object: &T) -> Option<String> {
    match meta_namespace_key(object) {
        Ok(key) => Some(key),
        Err(error) => {
            tracing::warn!(%error, "an object without a usable key was ignored");
            None
        }
    }
}

impl<K> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    /// A controller named `name` reconciling the objects `informer` caches: every add, update
    /// and delete puts the object's key on the queue (adds from the initial list at low
    /// priority, so real changes go first after a restart).
    pub fn new(name: &str, informer: SharedIndexInformer<K>) -> Self {
        let primary = informer.clone();
        let registration: Registration = Box::new(move |queue: &PriorityQueue<String>| {
            let (on_add, on_update, on_delete) = (queue.clone(), queue.clone(), queue.clone());
            primary.add_event_handler(
                ResourceEventHandlerFuncs::new()
                    .on_add(move |object: &Arc<K>, initial| {
                        if let Some(key) = key_of(object.as_ref()) {
                            let priority = if initial { LOW_PRIORITY } else { 0 };
                            on_add.add_with_opts(key, AddOpts::priority(priority));
                        }
                    })
                    .on_update(move |_, object: &Arc<K>| {
                        if let Some(key) = key_of(object.as_ref()) {
                            on_update.add(key);
                        }
                    })
                    .on_delete(move |gone: &ObjectOrTombstone<K>| {
                        let key = match gone {
                            ObjectOrTombstone::Object(object) => key_of(object.as_ref()),
                            ObjectOrTombstone::Tombstone(tombstone) => {
                                deletion_handling_meta_namespace_key(gone)
                                    .ok()
                                    .or_else(|| Some(tombstone.key.clone()))
                            }
                        };
                        if let Some(key) = key {
                            on_delete.add(key);
                        }
                    }),
            )?;
            Ok(())
        });
        Self {
            name: name.to_owned(),
            primary: std::marker::PhantomData,
            registrations: vec![registration],
            synced: vec![synced_by(informer)],
            workers: 1,
            reconcile_timeout: None,
            give_up: None,
            rate_limiter: None,
            elect: None,
            health: Health::default(),
            metrics: ControllerMetrics::default(),
            queue_metrics: None,
        }
    }

    /// Also reconciles the owner of every object `informer` caches whose controller owner
    /// reference points at a `K` (a Deployment owned by a Foo, the Pods of a ReplicaSet).
    pub fn owns<C>(self, informer: SharedIndexInformer<C>) -> Self
    where
        C: Resource + Clone + Debug + Send + Sync + 'static,
    {
        self.watches(informer, |child: &C| {
            controller_owner_key::<K, C>(child).into_iter().collect()
        })
    }

    /// Also reconciles the keys `mapper` returns for every object `informer` caches (on add,
    /// update, and delete; on update both the old and the new object's keys).
    pub fn watches<C>(
        mut self,
        informer: SharedIndexInformer<C>,
        mapper: impl Fn(&C) -> Vec<String> + Send + Sync + 'static,
    ) -> Self
    where
        C: Resource + Clone + Debug + Send + Sync + 'static,
    {
        let mapper = Arc::new(mapper);
        let watched = informer.clone();
        self.registrations
            .push(Box::new(move |queue: &PriorityQueue<String>| {
                let (on_add, on_update, on_delete) = (queue.clone(), queue.clone(), queue.clone());
                let (map_add, map_update, map_delete) =
                    (Arc::clone(&mapper), Arc::clone(&mapper), mapper);
                watched.add_event_handler(
                    ResourceEventHandlerFuncs::new()
                        .on_add(move |object: &Arc<C>, initial| {
                            let priority = if initial { LOW_PRIORITY } else { 0 };
                            for key in map_add(object) {
                                on_add.add_with_opts(key, AddOpts::priority(priority));
                            }
                        })
                        .on_update(move |old: &Arc<C>, new: &Arc<C>| {
                            for key in map_update(old).into_iter().chain(map_update(new)) {
                                on_update.add(key);
                            }
                        })
                        .on_delete(move |gone: &ObjectOrTombstone<C>| {
                            let object = match gone {
                                ObjectOrTombstone::Object(object) => Some(object),
                                ObjectOrTombstone::Tombstone(tombstone) => tombstone.obj.as_ref(),
                            };
                            for key in object.into_iter().flat_map(|object| map_delete(object)) {
                                on_delete.add(key);
                            }
                        }),
                )?;
                Ok(())
            }));
        self.synced.push(synced_by(informer));
        self
    }

    /// How many keys are reconciled at once (default 1; controller-runtime's
    /// `MaxConcurrentReconciles`).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// Cancels a reconcile that runs longer than `timeout` and requeues its key with backoff.
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.reconcile_timeout = Some(timeout);
        self
    }

    /// Gives a key up after `max_retries` failures in a row: `dead_letter` is called with it and
    /// its last error, and the key is forgotten until its object changes again.
    pub fn give_up_after(
        mut self,
        max_retries: usize,
        dead_letter: impl Fn(&str, &ReconcileError) + Send + Sync + 'static,
    ) -> Self {
        self.give_up = Some((max_retries, Arc::new(dead_letter)));
        self
    }

    /// Uses `limiter` for failed keys instead of the default: per-key exponential backoff from
    /// 5 ms to 1000 s and no overall bucket (controller-runtime's priority queue default;
    /// client-go's `DefaultControllerRateLimiter` adds a 10 qps bucket of 100, which
    /// [`ctrlkit_workqueue::default_controller_rate_limiter`] builds).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<String> + 'static) -> Self {
        self.rate_limiter = Some(Box::new(move |builder: QueueBuilder| {
            builder.rate_limiter(limiter)
        }));
        self
    }

    /// Reports metrics and health through `health` (see [`Health::serve`]): the reconcile
    /// metrics, the work queue's (client-go's `workqueue_*` names, labelled with the
    /// controller's name) and, with leader election, the election's.
    pub fn health(mut self, health: Health) -> Self {
        self.metrics = health.controller_metrics();
        self.queue_metrics = Some(health.queue_metrics());
        self.health = health;
        self
    }

    /// Reconciles only while this replica leads the election on `lock`: the informers run (and
    /// stay synced) on every replica, so a new leader starts reconciling at once. When
    /// leadership is lost, the workers stop taking keys; a reconcile still running when the lease
    /// of the last renewal runs out is aborted; and [`run`](Self::run) returns
    /// [`ControllerError::LostLeadership`].
    pub fn leader_election<L: ResourceLock + 'static>(
        mut self,
        lock: L,
        config: LeaderElectionConfig,
    ) -> Self {
        self.elect = Some(Box::new(move |callbacks, health: &Health, cancel| {
            let metrics = health.leader_metrics();
            let elector = LeaderElector::new(lock, config, callbacks)?.with_metrics(metrics);
            health
                .leader()
                .set_leader_election(Arc::new(elector.clone()));
            Ok(async move { elector.run(cancel).await }.boxed())
        }));
        self
    }

    /// The controller's health and metrics.
    pub fn health_handle(&self) -> &Health {
        &self.health
    }

    /// Runs until `cancel` fires (or, with leader election, leadership ends): registers the event
    /// handlers, waits for the caches, then reconciles with the configured workers. On the way
    /// out, the workers finish the keys they hold; queued keys are dropped.
    pub async fn run<R: Reconciler>(
        self,
        reconciler: R,
        cancel: CancellationToken,
    ) -> Result<(), ControllerError> {
        let mut builder = PriorityQueue::builder();
        if let Some(provider) = self.queue_metrics {
            builder = builder.metrics(MetricsConfig::new(self.name.clone(), provider));
        }
        if let Some(limit) = self.rate_limiter {
            builder = limit(builder);
        }
        let queue = builder.build();
        for registration in self.registrations {
            registration(&queue)?;
        }
        // Woken by each informer's own sync, not polled: a new leader or a restart starts
        // reconciling the moment the caches are whole.
        for synced in &self.synced {
            if !synced(cancel.clone()).await {
                queue.shut_down();
                return Ok(());
            }
        }
        self.health.set_ready(true);
        self.metrics.set_max_concurrent(&self.name, self.workers);
        let workers = Arc::new(Workers {
            reconciler,
            queue: queue.clone(),
            count: self.workers,
            timeout: self.reconcile_timeout,
            give_up: self.give_up,
            metrics: self.metrics.for_controller(&self.name),
            name: self.name,
        });
        match self.elect {
            None => workers.run(cancel).await,
            Some(elect) => {
                let leading = Arc::clone(&workers);
                let callbacks = LeaderCallbacks::new(
                    move |token| {
                        let workers = Arc::clone(&leading);
                        async move { workers.run(token).await }
                    },
                    || {},
                );
                elect(callbacks, &self.health, cancel.clone())?.await;
                if !cancel.is_cancelled() {
                    queue.shut_down();
                    return Err(ControllerError::LostLeadership);
                }
            }
        }
        queue.shut_down();
        Ok(())
    }
}

/// The reconcile side of a running controller.
struct Workers<R> {
    name: String,
    reconciler: R,
    queue: PriorityQueue<String>,
    count: usize,
    timeout: Option<Duration>,
    give_up: Option<(usize, DeadLetter)>,
    metrics: ReconcileMetrics,
}

impl<R: Reconciler> Workers<R> {
    /// Reconciles until `stop` fires, then lets each worker finish its key.
    async fn run(self: Arc<Self>, stop: CancellationToken) {
        // Nothing to catch up on first: the queue was registered with the informers before
        // they synced and keeps every key they delivered until a worker takes it, so a replica
        // that just became the leader finds every object it has seen waiting (in the initial
        // list's low priority, behind real changes).
        let mut workers = JoinSet::new();
        for _ in 0..self.count {
            let (this, stop) = (Arc::clone(&self), stop.clone());
            workers.spawn(async move { this.work(stop).await });
        }
        while workers.join_next().await.is_some() {}
    }

    async fn work(&self, stop: CancellationToken) {
        loop {
            let item = tokio::select! {
                biased;
                () = stop.cancelled() => return,
                item = self.queue.get() => match item {
                    Some(item) => item,
                    None => return,
                },
            };
            let key = item.item().clone();
            let ctx = Context {
                controller: self.name.clone(),
                retries: item.num_requeues(),
                cancel: stop.child_token(),
            };
            self.metrics.worker_busy(true);
            let started = Instant::now();
            let reconcile = AssertUnwindSafe(self.reconciler.reconcile(&key, &ctx)).catch_unwind();
            let outcome = match self.timeout {
                Some(timeout) => tokio::time::timeout(timeout, reconcile).await.ok(),
                None => Some(reconcile.await),
            };
            ctx.cancel.cancel();
            let seconds = started.elapsed().as_secs_f64();
            self.metrics.worker_busy(false);
            let queue: &PriorityQueue<String> = item.queue();
            match outcome {
                Some(Ok(Ok(action))) => {
                    queue.forget(&key);
                    match action.requeue_delay() {
                        Some(delay) => {
                            queue.add_after(key.clone(), delay);
                            self.metrics
                                .reconciled(ReconcileResult::RequeueAfter, seconds);
                        }
                        None => {
                            self.metrics.reconciled(ReconcileResult::Success, seconds);
                        }
                    }
                    drop(item);
                }
                Some(Ok(Err(error))) => {
                    self.metrics.reconciled(ReconcileResult::Error, seconds);
                    if error.is_terminal() {
                        self.metrics.terminal_error();
                        tracing::warn!(controller = %self.name, %key, %error, "reconcile failed for good");
                        item.forget();
                    } else {
                        self.fail(item, &key, &error);
                    }
                }
                Some(Err(_panic)) => {
                    self.metrics.panicked();
                    self.metrics.reconciled(ReconcileResult::Error, seconds);
                    let error = ReconcileError::retry("reconcile panicked");
                    tracing::error!(controller = %self.name, %key, "reconcile panicked");
                    self.fail(item, &key, &error);
                }
                None => {
                    self.metrics.timed_out();
                    self.metrics.reconciled(ReconcileResult::Error, seconds);
                    let error = ReconcileError::retry("reconcile timed out");
                    tracing::warn!(controller = %self.name, %key, "reconcile timed out");
                    self.fail(item, &key, &error);
                }
            }
        }
    }

    /// A failed key goes back with backoff, unless it has failed too often.
    fn fail(
        &self,
        item: ctrlkit_workqueue::WorkItem<String, &PriorityQueue<String>>,
        key: &str,
        error: &ReconcileError,
    ) {
        if let Some((max_retries, dead_letter)) = &self.give_up
            && item.num_requeues() >= *max_retries
        {
            tracing::warn!(controller = %self.name, %key, %error, "giving up on the key");
            dead_letter(key, error);
            item.forget();
            return;
        }
        tracing::debug!(controller = %self.name, %key, %error, "reconcile failed; requeued with backoff");
        item.requeue_rate_limited();
    }
}
