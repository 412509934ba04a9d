//! One informer per kind, shared by a whole program: client-go's `SharedInformerFactory`.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::time::Duration;

use kube::core::{ApiResource, DynamicObject, NamespaceResourceScope};
use kube::{Api, Client, Resource};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::informer_metrics::{InformerId, InformerMetrics};
use crate::reflector::ReflectorOptions;
use crate::shared_informer::SharedIndexInformer;

/// Which informer: one per object type, resource URL (so per namespace) and selectors.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct InformerKey {
    type_id: TypeId,
    resource_url: String,
    label_selector: Option<String>,
    field_selector: Option<String>,
}

trait AnyInformer: Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn has_synced(&self) -> bool;
    fn spawn(&self, cancel: CancellationToken) -> JoinHandle<()>;
}

impl<K: Resource + Clone + Send + Sync + 'static> AnyInformer for SharedIndexInformer<K> {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }
    fn spawn(&self, cancel: CancellationToken) -> JoinHandle<()> {
        let informer = self.clone();
        tokio::spawn(async move {
            if let Err(err) = informer.run(cancel).await {
                tracing::warn!(%err, "informer did not run");
            }
        })
    }
}

struct Entry {
    name: String,
    informer: Box<dyn AnyInformer>,
    task: Option<JoinHandle<()>>,
}

/// Hands out shared informers and runs them; client-go's `SharedInformerFactory`.
///
/// Asking twice for the same kind (in the same namespace, with the same selectors) gives the
/// same informer, so every controller in a program shares one cache and one watch per kind.
///
/// ```no_run
/// use std::time::Duration;
/// use ctrlkit_cache::SharedInformerFactory;
/// use k8s_openapi::api::core::v1::{ConfigMap, Pod};
/// use kube::Client;
/// use tokio_util::sync::CancellationToken;
///
/// # async fn doc() -> Result<(), kube::Error> {
/// let factory = SharedInformerFactory::new(Client::try_default().await?, Duration::from_secs(600));
/// let pods = factory.informer::<Pod>();
/// let config_maps = factory.namespaced_informer::<ConfigMap>("kube-system");
/// let cancel = CancellationToken::new();
/// factory.start(&cancel);
/// let synced = factory.wait_for_cache_sync(&cancel).await;
/// assert!(synced.values().all(|&ok| ok));
/// # drop((pods, config_maps));
/// factory.shutdown().await;
/// # Ok(()) }
/// ```
pub struct SharedInformerFactory {
    client: Client,
    default_resync_period: Duration,
    label_selector: Option<String>,
    field_selector: Option<String>,
    real_fifo: bool,
    metrics: Option<InformerMetrics>,
    informers: Mutex<HashMap<InformerKey, Entry>>,
    cancel: CancellationToken,
}

impl Debug for SharedInformerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformerFactory")
            .field("informers", &self.informers.lock().len())
            .finish()
    }
}

impl SharedInformerFactory {
    /// A factory whose informers use `client` and resync handlers every `default_resync_period`
    /// (zero: never).
    pub fn new(client: Client, default_resync_period: Duration) -> Self {
        Self {
            client,
            default_resync_period,
            label_selector: None,
            field_selector: None,
            real_fifo: false,
            metrics: None,
            informers: Mutex::new(HashMap::new()),
            cancel: CancellationToken::new(),
        }
    }

    /// Only objects matching this label selector, in every informer of this factory.
    #[must_use]
    pub fn with_label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only objects matching this field selector, in every informer of this factory.
    #[must_use]
    pub fn with_field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Every informer of this factory hands changes to its handlers through client-go's
    /// RealFIFO (see [`SharedIndexInformer::set_real_fifo`]).
    pub fn with_real_fifo(mut self) -> Self {
        self.real_fifo = true;
        self
    }

    /// Every informer of this factory reports client-go's informer metrics to `metrics`, named
    /// by the URL it lists.
    pub fn with_metrics(mut self, metrics: InformerMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The informer for `K` across all namespaces (or for a cluster-scoped kind).
    pub fn informer<K>(&self) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        self.informer_for(Api::<K>::all(self.client.clone()))
    }

    /// The informer for `K` in one namespace.
    pub fn namespaced_informer<K>(&self, namespace: &str) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
    {
        self.informer_for(Api::<K>::namespaced(self.client.clone(), namespace))
    }

    /// The informer for objects of a kind known only at run time (a custom resource found
    /// through discovery), across all namespaces, as `DynamicObject`s.
    ///
    /// ```no_run
    /// # fn doc(factory: &ctrlkit_cache::SharedInformerFactory) {
    /// use kube::core::{ApiResource, GroupVersionKind};
    ///
    /// let databases = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Database"));
    /// let informer = factory.dynamic_informer(&databases);
    /// # let _ = informer;
    /// # }
    /// ```
    pub fn dynamic_informer(&self, resource: &ApiResource) -> SharedIndexInformer<DynamicObject> {
        self.informer_for(Api::all_with(self.client.clone(), resource))
    }

    /// The informer for whatever `api` addresses (any kind, including `DynamicObject`).
    pub fn informer_for<K>(&self, api: Api<K>) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let key = InformerKey {
            type_id: TypeId::of::<K>(),
            resource_url: api.resource_url().to_owned(),
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
        };
        let mut informers = self.informers.lock();
        if let Some(entry) = informers.get(&key)
            && let Some(informer) = entry
                .informer
                .as_any()
                .downcast_ref::<SharedIndexInformer<K>>()
        {
            return informer.clone();
        }
        // The URL names the informer in logs; the type keeps a typed and a dynamic informer
        // of one URL apart in `wait_for_cache_sync`'s answer.
        let name = format!("{} ({})", api.resource_url(), std::any::type_name::<K>());
        let id = InformerId::from_resource_url(api.resource_url(), api.resource_url());
        let options = ReflectorOptions {
            name: name.clone(),
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            ..ReflectorOptions::default()
        };
        let informer = SharedIndexInformer::with_options(
            api,
            self.default_resync_period,
            Default::default(),
            options,
        );
        // A new informer has not started: its settings are taken.
        if self.real_fifo {
            let _ = informer.set_real_fifo(true);
        }
        if let Some(metrics) = &self.metrics {
            let _ = informer.set_metrics(metrics, &id);
        }
        informers.insert(
            key,
            Entry {
                name,
                informer: Box::new(informer.clone()),
                task: None,
            },
        );
        informer
    }

    /// Starts every informer not yet started. Informers asked for later need another `start`.
    /// Stops when `cancel` fires or on [`shutdown`](Self::shutdown).
    pub fn start(&self, cancel: &CancellationToken) {
        let mut informers = self.informers.lock();
        for entry in informers.values_mut() {
            if entry.task.is_none() {
                let stop = self.cancel.child_token();
                let outer = cancel.clone();
                let inner_stop = stop.clone();
                // Forward the caller's cancel; end with the informer on shutdown too.
                tokio::spawn(async move {
                    tokio::select! {
                        () = outer.cancelled() => inner_stop.cancel(),
                        () = inner_stop.cancelled() => {}
                    }
                });
                entry.task = Some(entry.informer.spawn(stop));
            }
        }
    }

    /// Waits until every started informer has synced, or `cancel` fires; which synced, by name
    /// (the resource URL and the object type).
    pub async fn wait_for_cache_sync(&self, cancel: &CancellationToken) -> HashMap<String, bool> {
        loop {
            let status: HashMap<String, bool> = self
                .informers
                .lock()
                .values()
                .filter(|entry| entry.task.is_some())
                .map(|entry| (entry.name.clone(), entry.informer.has_synced()))
                .collect();
            if status.values().all(|&synced| synced) || cancel.is_cancelled() {
                return status;
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
                () = cancel.cancelled() => {}
            }
        }
    }

    /// Stops every informer and waits for them to finish.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        let tasks: Vec<JoinHandle<()>> = self
            .informers
            .lock()
            .values_mut()
            .filter_map(|entry| entry.task.take())
            .collect();
        for task in tasks {
            let _ = task.await;
        }
    }
}
