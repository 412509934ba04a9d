//! The controller loop: event handlers put keys on a priority work queue; workers reconcile
//! them; success forgets, failure requeues with backoff; the whole runs on the leader only.

use std::fmt::Debug;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_cache::{
    Delivery, HandlerOptions, InformerError, ObjectOrTombstone, ResourceEventHandlerFuncs,
    SharedIndexInformer, deletion_handling_meta_namespace_key, meta_namespace_key,
};
use ctrlkit_leaderelection::{
    ConfigError, LeaderCallbacks, LeaderElectionConfig, LeaderElector, ResourceLock,
};
use ctrlkit_workqueue::{
    AddOpts, LOW_PRIORITY, MetricsConfig, PriorityQueue, PriorityQueueBuilder,
    PrometheusMetricsProvider, RateLimiter,
};
use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use kube::Resource;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::action::ReconcileError;
use crate::endpoint::Health;
use crate::events::EventRecorder;
use crate::mapper::owner_key;
use crate::metrics::{ControllerMetrics, ReconcileMetrics, ReconcileResult};
use crate::predicate::{Predicate, Predicates};
use crate::reason::{PendingReasons, ReconcileReason, key_ref, object_ref};
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

/// Registers one watch's event handler, feeding the queue.
type Registration = Box<dyn FnOnce(&Enqueue) -> Result<(), InformerError> + Send>;
/// Feeds the queue from outside the informers until the controller stops.
type Source = Box<dyn FnOnce(Enqueue, CancellationToken) -> BoxFuture<'static, ()> + Send>;
/// Waits until one informer has synced; `false` when cancelled first.
type Synced = Box<dyn Fn(CancellationToken) -> BoxFuture<'static, bool> + Send + Sync>;
type QueueBuilder = PriorityQueueBuilder<String>;
/// Starts an election on given callbacks, reporting to a `Health`: the election future.
pub(crate) type Elect = Box<
    dyn FnOnce(
            LeaderCallbacks,
            &Health,
            CancellationToken,
        ) -> Result<BoxFuture<'static, ()>, ConfigError>
        + Send,
>;

/// An election on `lock`, its metrics and health check reported to the `Health` it is given.
pub(crate) fn election<L: ResourceLock + 'static>(lock: L, config: LeaderElectionConfig) -> Elect {
    Box::new(move |callbacks, health: &Health, cancel| {
        let metrics = health.leader_metrics();
        let elector = LeaderElector::new(lock, config, callbacks)?.with_metrics(metrics);
        health
            .leader()
            .set_leader_election(Arc::new(elector.clone()));
        Ok(async move { elector.run(cancel).await }.boxed())
    })
}

/// The queue as the event handlers and sources see it: every key goes in with the reason that
/// sent it.
#[derive(Clone)]
pub(crate) struct Enqueue {
    queue: PriorityQueue<String>,
    reasons: Arc<PendingReasons>,
}

impl Enqueue {
    fn add(&self, key: String, priority: i32, reason: impl FnOnce() -> ReconcileReason) {
        self.reasons.note(&key, reason);
        self.queue.add_with_opts(key, AddOpts::priority(priority));
    }
}

/// Queues keys of a controller's primary objects from outside: a webhook, a timer, a message
/// from another system. Cloning shares it; it works before the controller runs (the keys wait)
/// and does nothing after it stopped.
///
/// ```no_run
/// # use ctrlkit_controller::Controller;
/// # use k8s_openapi::api::core::v1::ConfigMap;
/// # fn doc(controller: &Controller<ConfigMap>) {
/// let trigger = controller.trigger();
/// trigger.trigger("default/settings");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Trigger(mpsc::UnboundedSender<Triggered>);

/// A key queued by a [`Trigger`], and why.
type Triggered = (String, ReconcileReason);

impl Trigger {
    /// Queues `key` (`namespace/name`, or `name` for cluster-scoped objects). `false` when the
    /// controller has stopped.
    pub fn trigger(&self, key: impl Into<String>) -> bool {
        self.trigger_with_reason(key, "external trigger")
    }

    /// Queues `key`, with `reason` for the reconcile's span and [`Context::reason`].
    pub fn trigger_with_reason(&self, key: impl Into<String>, reason: &str) -> bool {
        self.0
            .send((key.into(), ReconcileReason::Custom(reason.to_owned())))
            .is_ok()
    }
}

/// How the controller's handlers are registered: on the informer's own task, as kube-runtime
/// runs its triggers. They only run the predicates and mappers and put keys on the queue, which
/// never waits; each change reaches the queue without a wake of another task or thread.
const ENQUEUE_ONLY: HandlerOptions = HandlerOptions {
    resync_period: None,
    delivery: Delivery::Inline,
};

/// A controller for primary objects of kind `K`; client-go's sample-controller loop, and
/// controller-runtime's builder, in one.
///
/// ```no_run
/// use std::time::Duration;
/// use ctrlkit_cache::SharedInformerFactory;
/// use ctrlkit_controller::predicate::GenerationChanged;
/// use ctrlkit_controller::{Action, Context, Controller, ReconcileError, Reconciler};
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::api::core::v1::Pod;
/// use tokio_util::sync::CancellationToken;
///
/// struct Echo;
///
/// impl Reconciler for Echo {
///     async fn reconcile(&self, key: &str, ctx: &Context) -> Result<Action, ReconcileError> {
///         println!("reconciling {key}: {}", ctx.reason);
///         Ok(Action::done())
///     }
/// }
///
/// # async fn doc(client: kube::Client) -> Result<(), ctrlkit_controller::ControllerError> {
/// let factory = SharedInformerFactory::new(client, Duration::ZERO);
/// let cancel = CancellationToken::new();
/// let controller = Controller::new("deployments", factory.informer::<Deployment>())
///     .predicate(GenerationChanged)
///     .owns(factory.informer::<Pod>())
///     .workers(4);
/// factory.start(&cancel);
/// controller.run(Echo, cancel).await
/// # }
/// ```
#[must_use]
pub struct Controller<K: Resource + Clone> {
    name: String,
    /// The primary kind's type information (`()` for typed kinds, an `ApiResource` for
    /// `DynamicObject`s).
    types: K::DynamicType,
    primary: SharedIndexInformer<K>,
    predicates: Predicates<K>,
    registrations: Vec<Registration>,
    sources: Vec<Source>,
    triggers: (
        mpsc::UnboundedSender<Triggered>,
        mpsc::UnboundedReceiver<Triggered>,
    ),
    synced: Vec<Synced>,
    workers: usize,
    reconcile_timeout: Option<Duration>,
    give_up: Option<(usize, DeadLetter)>,
    rate_limiter: Option<Box<dyn FnOnce(QueueBuilder) -> QueueBuilder + Send>>,
    elect: Option<Elect>,
    health: Health,
    /// Whether this controller's sync counts towards its health's readiness (not under a
    /// manager, which reports readiness for all of them).
    reports_ready: bool,
    metrics: ControllerMetrics,
    queue_metrics: Option<Arc<PrometheusMetricsProvider>>,
    recorder: Option<EventRecorder>,
}

impl<K: Resource + Clone> Debug for Controller<K> {
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

/// Resyncs redeliver the cached object unchanged: they go behind real changes, as
/// controller-runtime queues them.
fn update_priority<T: Resource>(old: &T, new: &T) -> i32 {
    if old.meta().resource_version == new.meta().resource_version {
        LOW_PRIORITY
    } else {
        0
    }
}

fn initial_priority(initial: bool) -> i32 {
    if initial { LOW_PRIORITY } else { 0 }
}

impl<K> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
    /// A controller named `name` reconciling the objects `informer` caches: every add, update
    /// and delete puts the object's key on the queue (adds from the initial list and resyncs at
    /// low priority, so real changes go first).
    pub fn new(name: &str, informer: SharedIndexInformer<K>) -> Self {
        Self::new_with(name, informer, ())
    }
}

impl<K> Controller<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
{
    /// A controller of a kind known at run time: `types` describes it (for `DynamicObject`,
    /// the `ApiResource`; see [`SharedInformerFactory::dynamic_informer`]). Otherwise as
    /// [`new`](Controller::new).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use ctrlkit_cache::SharedInformerFactory;
    /// use ctrlkit_controller::Controller;
    /// use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    ///
    /// # fn doc(client: kube::Client) -> Controller<DynamicObject> {
    /// // A kind read from configuration, unknown when the controller was compiled.
    /// let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    /// let widgets = ApiResource::from_gvk(&gvk);
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO);
    /// Controller::new_with("widgets", factory.dynamic_informer(&widgets), widgets)
    /// # }
    /// ```
    ///
    /// [`SharedInformerFactory::dynamic_informer`]: ctrlkit_cache::SharedInformerFactory::dynamic_informer
    pub fn new_with(name: &str, informer: SharedIndexInformer<K>, types: K::DynamicType) -> Self {
        Self {
            name: name.to_owned(),
            types,
            primary: informer.clone(),
            predicates: Predicates::default(),
            registrations: Vec::new(),
            sources: Vec::new(),
            triggers: mpsc::unbounded_channel(),
            synced: vec![synced_by(informer)],
            workers: 1,
            reconcile_timeout: None,
            give_up: None,
            rate_limiter: None,
            elect: None,
            health: {
                let health = Health::default();
                health.expect_sync();
                health
            },
            reports_ready: true,
            metrics: ControllerMetrics::default(),
            queue_metrics: None,
            recorder: None,
        }
    }

    /// Gives every reconcile `recorder` ([`Context::recorder`]) to publish events with.
    pub fn event_recorder(mut self, recorder: EventRecorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Reconciles only the events of primary objects that `predicate` passes; with several,
    /// all must pass (controller-runtime's `WithPredicates` on `For`). See [`crate::predicate`].
    /// Predicates and mappers run on the informer's own task, as each change is cached (as
    /// kube-runtime's do): keep them quick, without blocking.
    pub fn predicate(mut self, predicate: impl Predicate<K>) -> Self {
        self.predicates.push(predicate);
        self
    }

    /// Also reconciles the owner of every object `informer` caches whose controller owner
    /// reference points at a `K` (a Deployment owned by a Foo, the Pods of a ReplicaSet).
    pub fn owns<C>(self, informer: SharedIndexInformer<C>) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    {
        self.owns_with(informer, (), Predicates::default())
    }

    /// [`owns`](Self::owns), for the events `predicate` passes only.
    pub fn owns_filtered<C>(
        self,
        informer: SharedIndexInformer<C>,
        predicate: impl Predicate<C>,
    ) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    {
        let mut predicates = Predicates::default();
        predicates.push(predicate);
        self.owns_with(informer, (), predicates)
    }

    /// [`owns`](Self::owns) for owned objects of a kind known at run time (`DynamicObject`s
    /// described by `types`), for the events `predicates` pass.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use ctrlkit_cache::SharedInformerFactory;
    /// use ctrlkit_controller::predicate::{GenerationChanged, Predicates};
    /// use ctrlkit_controller::Controller;
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use kube::core::{ApiResource, GroupVersionKind};
    ///
    /// # fn doc(client: kube::Client) -> Controller<Deployment> {
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO);
    /// let backups = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Backup"));
    /// Controller::new("deployments", factory.informer::<Deployment>()).owns_with(
    ///     factory.dynamic_informer(&backups),
    ///     backups,
    ///     Predicates::new().with(GenerationChanged),
    /// )
    /// # }
    /// ```
    pub fn owns_with<C>(
        self,
        informer: SharedIndexInformer<C>,
        types: C::DynamicType,
        predicates: Predicates<C>,
    ) -> Self
    where
        C: Resource + Clone + Debug + Send + Sync + 'static,
        C::DynamicType: Clone + Send + Sync + 'static,
    {
        let (kind, api_version) = (
            K::kind(&self.types).into_owned(),
            K::api_version(&self.types).into_owned(),
        );
        self.watches_with(informer, types, predicates, move |child: &C| {
            owner_key(&kind, &api_version, child).into_iter().collect()
        })
    }

    /// Also reconciles the keys `mapper` returns for every object `informer` caches (on add,
    /// update, and delete; on update both the old and the new object's keys).
    pub fn watches<C>(
        self,
        informer: SharedIndexInformer<C>,
        mapper: impl Fn(&C) -> Vec<String> + Send + Sync + 'static,
    ) -> Self
    where
        C: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
    {
        self.watches_with(informer, (), Predicates::default(), mapper)
    }

    /// [`watches`](Self::watches) for objects of any kind, typed or known at run time
    /// (`types`), for the events `predicates` pass (all must pass; build them with
    /// [`Predicates::new`] and [`Predicates::with`]).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use ctrlkit_cache::SharedInformerFactory;
    /// use ctrlkit_controller::predicate::{LabelsChanged, Predicates};
    /// use ctrlkit_controller::Controller;
    /// use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    ///
    /// # fn doc(client: kube::Client) -> Controller<ConfigMap> {
    /// let factory = SharedInformerFactory::new(client, Duration::ZERO);
    /// // A Secret labelled `config: NAME` concerns the ConfigMap NAME of its namespace; only
    /// // label changes count.
    /// Controller::new("settings", factory.informer::<ConfigMap>()).watches_with(
    ///     factory.informer::<Secret>(),
    ///     (),
    ///     Predicates::new().with(LabelsChanged),
    ///     |secret: &Secret| {
    ///         let labels = secret.metadata.labels.as_ref();
    ///         let namespace = secret.metadata.namespace.as_deref().unwrap_or_default();
    ///         labels
    ///             .and_then(|labels| labels.get("config"))
    ///             .map(|name| vec![format!("{namespace}/{name}")])
    ///             .unwrap_or_default()
    ///     },
    /// )
    /// # }
    /// ```
    pub fn watches_with<C>(
        mut self,
        informer: SharedIndexInformer<C>,
        types: C::DynamicType,
        predicates: Predicates<C>,
        mapper: impl Fn(&C) -> Vec<String> + Send + Sync + 'static,
    ) -> Self
    where
        C: Resource + Clone + Debug + Send + Sync + 'static,
        C::DynamicType: Clone + Send + Sync + 'static,
    {
        let watched = informer.clone();
        let watch = Arc::new(Watch {
            mapper,
            predicates,
            types,
        });
        self.registrations.push(Box::new(move |queue: &Enqueue| {
            let (on_add, on_update, on_delete) = (queue.clone(), queue.clone(), queue.clone());
            let (add, update, delete) = (Arc::clone(&watch), Arc::clone(&watch), watch);
            watched.add_event_handler_with_options(
                ResourceEventHandlerFuncs::new()
                    .on_add(move |object: &Arc<C>, initial| {
                        if add.predicates.create(object) {
                            add.enqueue(&on_add, object, initial_priority(initial));
                        }
                    })
                    .on_update(move |old: &Arc<C>, new: &Arc<C>| {
                        if update.predicates.update(old, new) {
                            let priority = update_priority(old.as_ref(), new.as_ref());
                            update.enqueue(&on_update, old, priority);
                            update.enqueue(&on_update, new, priority);
                        }
                    })
                    .on_delete(move |gone: &ObjectOrTombstone<C>| {
                        let object = match gone {
                            ObjectOrTombstone::Object(object) => Some(object),
                            ObjectOrTombstone::Tombstone(tombstone) => tombstone.obj.as_ref(),
                        };
                        if let Some(object) = object
                            && delete.predicates.delete(object)
                        {
                            delete.enqueue(&on_delete, object, 0);
                        }
                    }),
                ENQUEUE_ONLY,
            )?;
            Ok(())
        }));
        self.synced.push(synced_by(informer));
        self
    }

    /// Reconciles every primary object in the cache each time `stream` yields (a changed
    /// configuration, a periodic tick): kube-runtime's `reconcile_all_on`. Keys already waiting
    /// are not queued twice.
    ///
    /// ```no_run
    /// use ctrlkit_controller::Controller;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// # fn doc(controller: Controller<ConfigMap>) -> Controller<ConfigMap> {
    /// // Whoever holds `reload` asks for every cached ConfigMap to be reconciled again.
    /// let (reload, reloads) = futures::channel::mpsc::unbounded::<()>();
    /// # drop(reload);
    /// controller.reconcile_all_on(reloads)
    /// # }
    /// ```
    pub fn reconcile_all_on<S>(mut self, stream: S) -> Self
    where
        S: Stream + Send + 'static,
    {
        let store = self.primary.get_store();
        self.sources
            .push(Box::new(move |queue: Enqueue, stop: CancellationToken| {
                async move {
                    let mut stream = std::pin::pin!(stream.take_until(stop.cancelled_owned()));
                    while stream.next().await.is_some() {
                        for key in store.list_keys() {
                            queue.add(key, 0, || ReconcileReason::BulkReconcile);
                        }
                    }
                }
                .boxed()
            }));
        self
    }

    /// Reconciles each key (`namespace/name`, or `name`) `stream` yields: a channel or any
    /// other source of keys outside the API server.
    ///
    /// ```no_run
    /// use ctrlkit_controller::Controller;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// # fn doc(controller: Controller<ConfigMap>) -> Controller<ConfigMap> {
    /// // A webhook receiver sends the keys of the ConfigMaps whose remote source changed.
    /// let (changed, keys) = futures::channel::mpsc::unbounded::<String>();
    /// changed.unbounded_send("default/settings".to_owned()).unwrap();
    /// controller.watches_stream(keys)
    /// # }
    /// ```
    pub fn watches_stream<S>(mut self, stream: S) -> Self
    where
        S: Stream<Item = String> + Send + 'static,
    {
        self.sources
            .push(Box::new(move |queue: Enqueue, stop: CancellationToken| {
                async move {
                    let mut stream = std::pin::pin!(stream.take_until(stop.cancelled_owned()));
                    while let Some(key) = stream.next().await {
                        queue.add(key, 0, || {
                            ReconcileReason::Custom("stream event".to_owned())
                        });
                    }
                }
                .boxed()
            }));
        self
    }

    /// A handle that queues keys from outside ([`Trigger::trigger`]).
    pub fn trigger(&self) -> Trigger {
        Trigger(self.triggers.0.clone())
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
    /// metrics, the work queue's (client-go's `workqueue_*` names, labelled `name` and
    /// `controller` with the controller's name, as controller-runtime) and, with leader
    /// election, the election's.
    ///
    /// Several controllers may share one health: `/readyz` passes once all of them have synced.
    pub fn health(mut self, health: Health) -> Self {
        if self.reports_ready {
            self.health.forget_sync();
            health.expect_sync();
        }
        self.report_to(health);
        self
    }

    /// Reports to `health` as one of a manager's controllers: the manager, not this controller,
    /// says when the process is ready.
    pub(crate) fn managed_by(mut self, health: Health) -> Self {
        if self.reports_ready {
            self.health.forget_sync();
            self.reports_ready = false;
        }
        self.report_to(health);
        self
    }

    fn report_to(&mut self, health: Health) {
        self.metrics = health.controller_metrics();
        self.queue_metrics = Some(health.queue_metrics());
        self.health = health;
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
        self.elect = Some(election(lock, config));
        self
    }

    /// The controller's health and metrics.
    pub fn health_handle(&self) -> &Health {
        &self.health
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The primary objects' event handler: their keys, through the controller's predicates.
    fn primary_registration(&mut self) -> Registration {
        let primary = self.primary.clone();
        let predicates = Arc::new(std::mem::take(&mut self.predicates));
        Box::new(move |queue: &Enqueue| {
            let (on_add, on_update, on_delete) = (queue.clone(), queue.clone(), queue.clone());
            let (add, update, delete) =
                (Arc::clone(&predicates), Arc::clone(&predicates), predicates);
            primary.add_event_handler_with_options(
                ResourceEventHandlerFuncs::new()
                    .on_add(move |object: &Arc<K>, initial| {
                        if add.create(object)
                            && let Some(key) = key_of(object.as_ref())
                        {
                            on_add.add(key, initial_priority(initial), || {
                                ReconcileReason::ObjectUpdated
                            });
                        }
                    })
                    .on_update(move |old: &Arc<K>, new: &Arc<K>| {
                        if update.update(old, new)
                            && let Some(key) = key_of(new.as_ref())
                        {
                            let priority = update_priority(old.as_ref(), new.as_ref());
                            on_update.add(key, priority, || ReconcileReason::ObjectUpdated);
                        }
                    })
                    .on_delete(move |gone: &ObjectOrTombstone<K>| {
                        let key = match gone {
                            ObjectOrTombstone::Object(object) => {
                                if !delete.delete(object) {
                                    return;
                                }
                                key_of(object.as_ref())
                            }
                            // The object is not known: a predicate cannot judge it, and the
                            // reconcile must learn that it is gone.
                            ObjectOrTombstone::Tombstone(tombstone) => {
                                deletion_handling_meta_namespace_key(gone)
                                    .ok()
                                    .or_else(|| Some(tombstone.key.clone()))
                            }
                        };
                        if let Some(key) = key {
                            on_delete.add(key, 0, || ReconcileReason::ObjectUpdated);
                        }
                    }),
                ENQUEUE_ONLY,
            )?;
            Ok(())
        })
    }

    /// Runs until `cancel` fires (or, with leader election, leadership ends): registers the event
    /// handlers, waits for the caches, then reconciles with the configured workers. On the way
    /// out, the workers finish the keys they hold; queued keys are dropped.
    pub async fn run<R: Reconciler>(
        mut self,
        reconciler: R,
        cancel: CancellationToken,
    ) -> Result<(), ControllerError> {
        let mut builder = PriorityQueue::builder();
        if let Some(provider) = self.queue_metrics.take() {
            builder = builder.metrics(MetricsConfig::new(self.name.clone(), provider));
        }
        if let Some(limit) = self.rate_limiter.take() {
            builder = limit(builder);
        }
        let queue = Enqueue {
            queue: builder.build(),
            reasons: Arc::default(),
        };
        let primary = self.primary_registration();
        for registration in std::iter::once(primary).chain(self.registrations.drain(..)) {
            registration(&queue)?;
        }
        let sources_stop = cancel.child_token();
        let _stop_sources = sources_stop.clone().drop_guard();
        let (_, mut triggered) = std::mem::replace(&mut self.triggers, mpsc::unbounded_channel());
        let from_triggers = queue.clone();
        let stop = sources_stop.clone();
        tokio::spawn(async move {
            loop {
                let (key, reason) = tokio::select! {
                    () = stop.cancelled() => return,
                    next = triggered.recv() => match next {
                        Some(next) => next,
                        None => return,
                    },
                };
                from_triggers.add(key, 0, || reason);
            }
        });
        for source in self.sources.drain(..) {
            tokio::spawn(source(queue.clone(), sources_stop.clone()));
        }
        // Woken by each informer's own sync, not polled: a new leader or a restart starts
        // reconciling the moment the caches are whole.
        for synced in &self.synced {
            if !synced(cancel.clone()).await {
                queue.queue.shut_down();
                return Ok(());
            }
        }
        if self.reports_ready {
            self.health.synced();
        }
        self.metrics.set_max_concurrent(&self.name, self.workers);
        let workers = Arc::new(Workers {
            reconciler,
            queue: queue.clone(),
            count: self.workers,
            timeout: self.reconcile_timeout,
            give_up: self.give_up.take(),
            metrics: self.metrics.for_controller(&self.name),
            name: self.name.clone(),
            recorder: self.recorder.take(),
            key_ref: Box::new({
                let types = self.types.clone();
                move |key: &str| key_ref::<K>(&types, key)
            }),
        });
        match self.elect.take() {
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
                    queue.queue.shut_down();
                    return Err(ControllerError::LostLeadership);
                }
            }
        }
        queue.queue.shut_down();
        Ok(())
    }
}

/// One secondary watch: which events count, and the primaries they concern.
struct Watch<C: Resource, M> {
    mapper: M,
    predicates: Predicates<C>,
    types: C::DynamicType,
}

impl<C: Resource, M: Fn(&C) -> Vec<String>> Watch<C, M> {
    fn enqueue(&self, queue: &Enqueue, object: &C, priority: i32) {
        for key in (self.mapper)(object) {
            queue.add(key, priority, || {
                let meta = object.meta();
                ReconcileReason::RelatedObjectUpdated(object_ref::<C>(
                    &self.types,
                    meta.name.as_deref().unwrap_or_default(),
                    meta.namespace.as_deref(),
                ))
            });
        }
    }
}

/// The reconcile side of a running controller.
struct Workers<R> {
    name: String,
    reconciler: R,
    queue: Enqueue,
    count: usize,
    timeout: Option<Duration>,
    give_up: Option<(usize, DeadLetter)>,
    metrics: ReconcileMetrics,
    recorder: Option<EventRecorder>,
    /// A key's object reference text, for the reconcile's span.
    key_ref: Box<dyn Fn(&str) -> String + Send + Sync>,
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
                item = self.queue.queue.get() => match item {
                    Some(item) => item,
                    None => return,
                },
            };
            let key = item.item().clone();
            let ctx = Context {
                controller: self.name.clone(),
                retries: item.num_requeues(),
                cancel: stop.child_token(),
                reason: self.queue.reasons.take(&key),
                recorder: self.recorder.clone(),
            };
            let span = tracing::info_span!(
                "reconciling object",
                controller = %self.name,
                "object.ref" = %(self.key_ref)(&key),
                "object.reason" = %ctx.reason,
            );
            self.metrics.worker_busy(true);
            let started = Instant::now();
            let reconcile =
                AssertUnwindSafe(self.reconciler.reconcile(&key, &ctx).instrument(span))
                    .catch_unwind();
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
                            self.queue
                                .reasons
                                .note(&key, || ReconcileReason::ReconcilerRequestedRetry);
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
        self.queue
            .reasons
            .note(key, || ReconcileReason::ErrorPolicyRequestedRetry);
        item.requeue_rate_limited();
    }
}
