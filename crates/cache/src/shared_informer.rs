//! One cache per kind of object, shared by every handler that cares: client-go's
//! `SharedIndexInformer`.
//!
//! The informer runs a [`Reflector`] into a [`DeltaFifo`] and pops each change as soon as it is
//! queued, in the reflector's own task: it applies the change to its [`Indexer`] and then
//! notifies every registered handler, through that handler's own unbounded buffer and task, or
//! by calling it there and then for a handler registered with [`Delivery::Inline`]. Handlers
//! registered after start first receive a synthetic add of every cached object. Each handler
//! may ask for periodic resyncs (re-delivery of every cached object as an update with equal old
//! and new resourceVersions).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kube::Resource;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::boxed_list_watch::BoxListerWatcher;
use crate::delta::{Delta, Deltas};
use crate::delta_fifo::{DeltaFifoOptions, KnownObjects, TransformFunc};
use crate::handler::{Delivery, HandlerOptions, ResourceEventHandler};
use crate::index::{Indexer, NAMESPACE_INDEX, meta_namespace_index_func};
use crate::informer_fifo::{DrainedFifo, InformerFifo, Process};
use crate::informer_metrics::{InformerId, InformerMetrics, InformerSeries};
use crate::key::meta_namespace_key;
use crate::list_watch::ListerWatcher;
use crate::processor::{Listener, Notification, Processor, SyncTracker, determine_resync_period};
use crate::reflector::{Reflector, ReflectorOptions};
use crate::reflector_error::WatchErrorHandler;
use crate::thread_safe_store::{IndexError, IndexFunc, Indexers};

/// The shortest resync period a handler may ask for; shorter ones are raised to it.
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// What an informer refused to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InformerError {
    /// `run` was called on an informer that has run already.
    #[error("informer {0} has already been started")]
    AlreadyStarted(String),
    /// The informer has stopped; handlers can no longer be added.
    #[error("handler was not added to informer {0} because it has stopped already")]
    Stopped(String),
    /// The registration is not (or no longer) on this informer.
    #[error("the handler registration is not on informer {0}")]
    UnknownRegistration(String),
    /// Adding indexes failed.
    #[error(transparent)]
    Index(#[from] IndexError),
}

#[derive(Default)]
struct Config<K> {
    started: bool,
    stopped: bool,
    resync_check_period: Duration,
    transform: Option<TransformFunc<K>>,
    watch_error_handler: Option<WatchErrorHandler>,
    real_fifo: bool,
    metrics: Option<InformerSeries>,
}

struct Inner<K: Clone> {
    name: String,
    lister_watcher: BoxListerWatcher<K>,
    reflector_options: ReflectorOptions,
    default_resync_period: Duration,
    indexer: Indexer<K>,
    config: Mutex<Config<K>>,
    /// Also the lock that keeps the indexer and the handlers' view in step: a change is applied
    /// and distributed under it, and a late handler's synthetic adds are made under it.
    processor: Mutex<Processor<K>>,
    fifo: OnceLock<Arc<InformerFifo<K>>>,
    reflector: OnceLock<Arc<Reflector<K, BoxListerWatcher<K>>>>,
    runtime: OnceLock<tokio::runtime::Handle>,
    /// Woken once `run` has made the FIFO.
    started: tokio::sync::Notify,
}

/// client-go's `SharedIndexInformer`; see the module docs. Clones share one informer.
///
/// ```no_run
/// use std::time::Duration;
/// use ctrlkit_cache::{ResourceEventHandlerFuncs, SharedIndexInformer};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::{Api, Client};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::try_default().await?;
/// let informer = SharedIndexInformer::new(Api::<ConfigMap>::all(client), Duration::ZERO, Default::default());
/// informer.add_event_handler(
///     ResourceEventHandlerFuncs::new().on_add(|cm: &std::sync::Arc<ConfigMap>, _| {
///         println!("{:?}", cm.metadata.name);
///     }),
/// )?;
/// let cancel = CancellationToken::new();
/// tokio::spawn({
///     let informer = informer.clone();
///     let cancel = cancel.clone();
///     async move { informer.run(cancel).await }
/// });
/// informer.wait_for_sync(&cancel).await;
/// println!("{} config maps cached", informer.get_indexer().len());
/// # Ok(()) }
/// ```
pub struct SharedIndexInformer<K: Clone> {
    inner: Arc<Inner<K>>,
}

impl<K: Clone> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K: Clone> std::fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("name", &self.inner.name)
            .finish()
    }
}

/// A handler's registration on an informer: remove it with it, or ask whether the handler has
/// seen the whole initial list.
#[derive(Clone)]
pub struct ResourceEventHandlerRegistration {
    id: u64,
    tracker: Arc<SyncTracker>,
    informer_synced: Arc<dyn Fn() -> bool + Send + Sync>,
}

impl std::fmt::Debug for ResourceEventHandlerRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceEventHandlerRegistration")
            .field("id", &self.id)
            .field("has_synced", &self.has_synced())
            .finish()
    }
}

impl ResourceEventHandlerRegistration {
    /// Whether the informer has synced and this handler has handled every add of the initial
    /// list (or, for a handler added late, every synthetic add).
    pub fn has_synced(&self) -> bool {
        (self.informer_synced)() && self.tracker.pending_initial() == 0
    }
}

impl<K> SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// An informer over `lister_watcher`. `default_resync_period` applies to handlers added
    /// with [`add_event_handler`](Self::add_event_handler) (zero: no resync). The namespace
    /// index is always there, besides `indexers`.
    pub fn new(
        lister_watcher: impl ListerWatcher<K>,
        default_resync_period: Duration,
        indexers: Indexers<K>,
    ) -> Self {
        Self::with_options(
            lister_watcher,
            default_resync_period,
            indexers,
            ReflectorOptions::default(),
        )
    }

    /// [`new`](Self::new) with the reflector's options (name, selectors, page size, streaming
    /// list, backoff).
    pub fn with_options(
        lister_watcher: impl ListerWatcher<K>,
        default_resync_period: Duration,
        mut indexers: Indexers<K>,
        reflector_options: ReflectorOptions,
    ) -> Self {
        indexers
            .entry(NAMESPACE_INDEX.to_owned())
            .or_insert_with(|| {
                let func: IndexFunc<K> = Arc::new(meta_namespace_index_func::<K>);
                func
            });
        let indexer = Indexer::with_key_func(meta_namespace_key::<K>, indexers);
        Self {
            inner: Arc::new(Inner {
                name: reflector_options.name.clone(),
                lister_watcher: BoxListerWatcher::new(lister_watcher),
                reflector_options,
                default_resync_period,
                indexer,
                config: Mutex::new(Config {
                    started: false,
                    stopped: false,
                    resync_check_period: default_resync_period,
                    transform: None,
                    watch_error_handler: None,
                    real_fifo: false,
                    metrics: None,
                }),
                processor: Mutex::new(Processor::new()),
                fifo: OnceLock::new(),
                reflector: OnceLock::new(),
                runtime: OnceLock::new(),
                started: tokio::sync::Notify::new(),
            }),
        }
    }

    /// Registers `handler` with the informer's default resync period.
    pub fn add_event_handler(
        &self,
        handler: impl ResourceEventHandler<K>,
    ) -> Result<ResourceEventHandlerRegistration, InformerError> {
        self.add_event_handler_with_resync_period(handler, self.inner.default_resync_period)
    }

    /// Registers `handler`, asking for a resync every `resync_period` (zero: never). Periods
    /// under [`MINIMUM_RESYNC_PERIOD`] are raised to it; before start a shorter period than the
    /// informer's check period lowers the check period, after start it is raised to it.
    pub fn add_event_handler_with_resync_period(
        &self,
        handler: impl ResourceEventHandler<K>,
        resync_period: Duration,
    ) -> Result<ResourceEventHandlerRegistration, InformerError> {
        let options = HandlerOptions {
            resync_period: Some(resync_period),
            delivery: Delivery::Buffered,
        };
        self.add_event_handler_with_options(handler, options)
    }

    /// Registers `handler` with `options`: its resync period (as
    /// [`add_event_handler_with_resync_period`](Self::add_event_handler_with_resync_period)) and
    /// where it runs ([`Delivery`]). A handler registered after start first gets an add of every
    /// cached object, as client-go's does.
    ///
    /// ```no_run
    /// # async fn run(client: kube::Client) -> Result<(), ctrlkit_cache::InformerError> {
    /// use std::{sync::Arc, time::Duration};
    /// use ctrlkit_cache::{Delivery, HandlerOptions, ResourceEventHandlerFuncs, SharedInformerFactory};
    /// use k8s_openapi::api::core::v1::Pod;
    ///
    /// let factory = SharedInformerFactory::new(client, Duration::from_secs(600));
    /// let (sender, mut keys) = tokio::sync::mpsc::unbounded_channel();
    /// // Only sends a key on: quick enough to run on the informer's own task.
    /// let enqueue = ResourceEventHandlerFuncs::new()
    ///     .on_update(move |_old, pod: &Arc<Pod>| { let _ = sender.send(pod.metadata.name.clone()); });
    /// let options = HandlerOptions { delivery: Delivery::Inline, ..Default::default() };
    /// factory.informer::<Pod>().add_event_handler_with_options(enqueue, options)?;
    /// # drop(keys.try_recv()); Ok(()) }
    /// ```
    pub fn add_event_handler_with_options(
        &self,
        handler: impl ResourceEventHandler<K>,
        options: HandlerOptions,
    ) -> Result<ResourceEventHandlerRegistration, InformerError> {
        let mut resync_period = options
            .resync_period
            .unwrap_or(self.inner.default_resync_period);
        // Held until the listener is in place, so `run` cannot start (and distribute the first
        // changes) between the decision below and the registration.
        let mut config = self.inner.config.lock();
        if config.stopped {
            return Err(InformerError::Stopped(self.inner.name.clone()));
        }
        if !resync_period.is_zero() {
            if resync_period < MINIMUM_RESYNC_PERIOD {
                tracing::warn!(
                    ?resync_period,
                    "resync period too small; raised to {MINIMUM_RESYNC_PERIOD:?}"
                );
                resync_period = MINIMUM_RESYNC_PERIOD;
            }
            if resync_period < config.resync_check_period {
                if config.started {
                    tracing::warn!(
                        ?resync_period,
                        check_period = ?config.resync_check_period,
                        "resync period smaller than the running informer's check period; raised to it"
                    );
                    resync_period = config.resync_check_period;
                } else {
                    config.resync_check_period = resync_period;
                    self.inner
                        .processor
                        .lock()
                        .resync_check_period_changed(resync_period);
                }
            }
        }
        let (started, check_period) = (config.started, config.resync_check_period);

        let mut processor = self.inner.processor.lock();
        let id = processor.next_id();
        let mut listener = Listener::new(
            id,
            Arc::new(handler),
            options.delivery,
            resync_period,
            determine_resync_period(resync_period, check_period),
        );
        if started {
            if let Some(runtime) = self.inner.runtime.get() {
                listener.start(runtime);
            }
            for obj in self.inner.indexer.list() {
                listener.send(Notification::Add {
                    obj,
                    is_in_initial_list: true,
                });
            }
        }
        let tracker = Arc::clone(&listener.tracker);
        processor.listeners.push(listener);
        drop(processor);
        drop(config);
        let fifo_synced = {
            let inner = Arc::downgrade(&self.inner);
            move || {
                inner
                    .upgrade()
                    .and_then(|inner| inner.fifo.get().map(|fifo| fifo.has_synced()))
                    .unwrap_or(false)
            }
        };
        Ok(ResourceEventHandlerRegistration {
            id,
            tracker,
            informer_synced: Arc::new(fifo_synced),
        })
    }

    /// Unregisters a handler; it receives nothing more once its current call returns. A
    /// registration can be removed once, also after the informer stopped; removing it again, or
    /// from another informer, is an error.
    pub fn remove_event_handler(
        &self,
        registration: &ResourceEventHandlerRegistration,
    ) -> Result<(), InformerError> {
        if self.inner.processor.lock().remove(registration.id) {
            Ok(())
        } else {
            Err(InformerError::UnknownRegistration(self.inner.name.clone()))
        }
    }

    /// Sets a function applied to every object before it is cached (for example
    /// [`drop_managed_fields`](crate::drop_managed_fields)). Refused after start.
    pub fn set_transform(&self, transform: TransformFunc<K>) -> Result<(), InformerError> {
        let mut config = self.inner.config.lock();
        if config.started {
            return Err(InformerError::AlreadyStarted(self.inner.name.clone()));
        }
        config.transform = Some(transform);
        Ok(())
    }

    /// Whether changes reach the handlers through client-go's RealFIFO ([`RealFifo`]: every
    /// change on its own, in arrival order, interleaved across keys as it happened) instead of
    /// the DeltaFIFO (the default: a key's changes gathered until it is handled, so a burst of
    /// updates to one object is handled together). client-go switched its informers to RealFIFO
    /// in 1.36; handlers that only look at the newest state see no difference. Refused after
    /// start.
    ///
    /// [`RealFifo`]: crate::RealFifo
    pub fn set_real_fifo(&self, real: bool) -> Result<(), InformerError> {
        let mut config = self.inner.config.lock();
        if config.started {
            return Err(InformerError::AlreadyStarted(self.inner.name.clone()));
        }
        config.real_fifo = real;
        Ok(())
    }

    /// Reports client-go's informer metrics (queued items, processing latency, the store's
    /// resourceVersion) to `metrics`, labelled as `id` says. Refused after start.
    pub fn set_metrics(
        &self,
        metrics: &InformerMetrics,
        id: &InformerId,
    ) -> Result<(), InformerError> {
        let mut config = self.inner.config.lock();
        if config.started {
            return Err(InformerError::AlreadyStarted(self.inner.name.clone()));
        }
        config.metrics = Some(metrics.series(id));
        Ok(())
    }

    /// Sets the handler for errors the reflector recovers from. Refused after start.
    pub fn set_watch_error_handler(&self, handler: WatchErrorHandler) -> Result<(), InformerError> {
        let mut config = self.inner.config.lock();
        if config.started {
            return Err(InformerError::AlreadyStarted(self.inner.name.clone()));
        }
        config.watch_error_handler = Some(handler);
        Ok(())
    }

    /// Registers more indexes (built at once over the cache); a name clash is an error.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), InformerError> {
        Ok(self.inner.indexer.add_indexers(indexers)?)
    }

    /// The cache.
    pub fn get_indexer(&self) -> Indexer<K> {
        self.inner.indexer.clone()
    }

    /// The cache (client-go's `GetStore`; the same as [`get_indexer`](Self::get_indexer)).
    pub fn get_store(&self) -> Indexer<K> {
        self.inner.indexer.clone()
    }

    /// Whether the cache holds the whole initial list (every key of the first list popped and
    /// applied).
    pub fn has_synced(&self) -> bool {
        self.inner.fifo.get().is_some_and(|fifo| fifo.has_synced())
    }

    /// Waits until [`has_synced`](Self::has_synced); `false` if `cancel` fired first.
    pub async fn wait_for_sync(&self, cancel: &CancellationToken) -> bool {
        let fifo = loop {
            let started = self.inner.started.notified();
            tokio::pin!(started);
            started.as_mut().enable();
            if let Some(fifo) = self.inner.fifo.get() {
                break Arc::clone(fifo);
            }
            tokio::select! {
                () = started => {}
                () = cancel.cancelled() => return false,
            }
        };
        tokio::select! {
            () = fifo.wait_for_sync() => true,
            () = cancel.cancelled() => self.has_synced(),
        }
    }

    /// The resourceVersion the reflector last saw ("" before the first list).
    pub fn last_sync_resource_version(&self) -> String {
        self.inner
            .reflector
            .get()
            .map(|reflector| reflector.last_sync_resource_version())
            .unwrap_or_default()
    }

    /// Whether the informer has run and stopped.
    pub fn is_stopped(&self) -> bool {
        self.inner.config.lock().stopped
    }

    /// Runs the informer until `cancel` fires: lists, watches, keeps the cache and notifies the
    /// handlers. An informer runs once.
    pub async fn run(&self, cancel: CancellationToken) -> Result<(), InformerError> {
        let (fifo, reflector, check_period) = {
            let mut config = self.inner.config.lock();
            if config.started || config.stopped {
                return Err(InformerError::AlreadyStarted(self.inner.name.clone()));
            }
            config.started = true;
            let known: Arc<dyn KnownObjects<K>> = Arc::new(self.inner.indexer.clone());
            let queue = Arc::new(InformerFifo::new(
                config.real_fifo,
                DeltaFifoOptions {
                    key_func: meta_namespace_key::<K>,
                    known_objects: Some(known),
                    emit_delta_type_replaced: true,
                    transformer: config.transform.clone(),
                },
            ));
            let _ = self.inner.fifo.set(Arc::clone(&queue));
            // Weak: the informer holds its reflector, which holds the FIFO and this.
            let informer = Arc::downgrade(&self.inner);
            let metrics = config.metrics.clone();
            let process: Process<K> = Box::new(move |key, deltas, is_in_initial_list| {
                if let Some(informer) = informer.upgrade() {
                    informer.process(key, deltas, is_in_initial_list, metrics.as_ref());
                }
            });
            let fifo = Arc::new(DrainedFifo::new(queue, process, config.metrics.clone()));
            let mut reflector = Reflector::new(
                self.inner.lister_watcher.clone(),
                Arc::clone(&fifo) as Arc<dyn crate::ReflectorStore<K>>,
                self.inner.reflector_options.clone(),
            );
            if let Some(handler) = &config.watch_error_handler {
                reflector = reflector.with_watch_error_handler(Arc::clone(handler));
            }
            let reflector = Arc::new(reflector);
            let _ = self.inner.reflector.set(Arc::clone(&reflector));
            self.inner.started.notify_waiters();
            (fifo, reflector, config.resync_check_period)
        };
        let runtime = tokio::runtime::Handle::current();
        let _ = self.inner.runtime.set(runtime.clone());
        for listener in &mut self.inner.processor.lock().listeners {
            listener.start(&runtime);
        }

        let resync_task = (!check_period.is_zero()).then(|| {
            let inner = Arc::clone(&self.inner);
            let fifo = Arc::clone(&fifo);
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let mut ticker = tokio::time::interval_at(
                    tokio::time::Instant::now() + check_period,
                    check_period,
                );
                loop {
                    tokio::select! {
                        _ = ticker.tick() => {}
                        () = cancel.cancelled() => return,
                    }
                    // Decide under the processor's lock, resync outside it: a pop holds the
                    // FIFO's lock while it takes the processor's.
                    let due = inner.processor.lock().should_resync();
                    if due {
                        fifo.resync();
                    }
                }
            })
        });

        // The reflector runs in this task, and what it queues is applied to the cache as it is
        // queued (see `DrainedFifo`).
        reflector.run(cancel).await;
        if let Some(task) = resync_task {
            let _ = task.await;
        }
        self.inner.config.lock().stopped = true;
        self.inner.processor.lock().stop_all();
        Ok(())
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> Inner<K> {
    /// Applies one popped key's deltas, timing it for the metrics.
    fn process(
        &self,
        key: &str,
        deltas: Deltas<K>,
        is_in_initial_list: bool,
        metrics: Option<&InformerSeries>,
    ) {
        let Some(metrics) = metrics else {
            self.handle_deltas(key, deltas, is_in_initial_list);
            return;
        };
        let started = std::time::Instant::now();
        let newest = deltas
            .newest()
            .and_then(Delta::object)
            .and_then(|object| object.meta().resource_version.clone());
        self.handle_deltas(key, deltas, is_in_initial_list);
        metrics.processed(started.elapsed().as_secs_f64());
        metrics.store_at(newest.as_deref());
    }

    /// Applies one key's deltas to the cache and tells the handlers.
    fn handle_deltas(&self, key: &str, deltas: Deltas<K>, is_in_initial_list: bool) {
        let processor = self.processor.lock();
        let store = self.indexer.thread_safe_store();
        for delta in deltas {
            let periodic = matches!(delta, Delta::Sync(_));
            match delta {
                Delta::Added(obj)
                | Delta::Updated(obj)
                | Delta::Replaced(obj)
                | Delta::Sync(obj) => {
                    match store.swap(key.to_owned(), Arc::clone(&obj)) {
                        Some(old) => {
                            // A periodic resync re-delivers the cached object, whatever its
                            // resourceVersion; other changes are resyncs if it did not move.
                            let is_sync = periodic
                                || (old.meta().resource_version.is_some()
                                    && old.meta().resource_version == obj.meta().resource_version);
                            processor.distribute(Notification::Update { old, new: obj }, is_sync);
                        }
                        None => processor.distribute(
                            Notification::Add {
                                obj,
                                is_in_initial_list,
                            },
                            false,
                        ),
                    }
                }
                Delta::Deleted(obj) => {
                    store.delete(key);
                    processor.distribute(Notification::Delete(obj), false);
                }
            }
        }
    }
}
