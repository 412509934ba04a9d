//! client-go's informer metrics, on `prometheus-client`: how many changes wait in each
//! informer's FIFO (as of the last change handed out), how long handing one to the handlers
//! takes, and the highest resourceVersion its cache holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// client-go's buckets for `informer_processing_latency_seconds`.
const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// What one informer's series are labelled with (client-go's `InformerNameAndResource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InformerId {
    /// The informer's name.
    pub name: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource (plural).
    pub resource: String,
}

impl InformerId {
    /// The id of an informer named `name` of the resource a kube-client URL addresses
    /// (`/api/v1/namespaces/ns/configmaps`, `/apis/apps/v1/deployments`).
    pub fn from_resource_url(name: &str, url: &str) -> Self {
        let parts: Vec<&str> = url.split('/').filter(|part| !part.is_empty()).collect();
        let (group, version) = match parts.as_slice() {
            ["api", version, ..] => ("", *version),
            ["apis", group, version, ..] => (*group, *version),
            _ => ("", ""),
        };
        Self {
            name: name.to_owned(),
            group: group.to_owned(),
            version: version.to_owned(),
            resource: parts.last().copied().unwrap_or_default().to_owned(),
        }
    }

    fn labels(&self) -> Labels {
        vec![
            ("name".to_owned(), self.name.clone()),
            ("group".to_owned(), self.group.clone()),
            ("version".to_owned(), self.version.clone()),
            ("resource".to_owned(), self.resource.clone()),
        ]
    }
}

/// Registers client-go's three informer metric families (`informer_queued_items`,
/// `informer_processing_latency_seconds`, `informer_store_resource_version`, labelled `name`,
/// `group`, `version`, `resource`). Make one per registry and give it to every informer
/// ([`SharedIndexInformer::set_metrics`](crate::SharedIndexInformer::set_metrics), or a
/// factory's [`with_metrics`](crate::SharedInformerFactory::with_metrics)). Cloning shares it.
///
/// ```
/// use ctrlkit_cache::{InformerId, InformerMetrics};
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let metrics = InformerMetrics::new(&mut registry);
/// let id = InformerId::from_resource_url("pods", "/api/v1/pods");
/// assert_eq!((id.group.as_str(), id.version.as_str(), id.resource.as_str()), ("", "v1", "pods"));
/// # let _ = metrics;
/// ```
#[derive(Debug, Clone)]
pub struct InformerMetrics {
    queued: Family<Labels, Gauge>,
    latency: HistogramFamily,
    store_resource_version: Family<Labels, Gauge>,
}

impl InformerMetrics {
    /// Registers the families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self {
            queued: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            store_resource_version: Family::default(),
        };
        registry.register(
            "informer_queued_items",
            "Number of items currently queued in the FIFO",
            metrics.queued.clone(),
        );
        registry.register(
            "informer_processing_latency_seconds",
            "Time taken to process events after popping from the queue",
            metrics.latency.clone(),
        );
        registry.register(
            "informer_store_resource_version",
            "The 15 least significant digits of the resource version of the store",
            metrics.store_resource_version.clone(),
        );
        metrics
    }

    /// The series of one informer.
    pub(crate) fn series(&self, id: &InformerId) -> InformerSeries {
        let labels = id.labels();
        InformerSeries {
            queued: self.queued.get_or_create(&labels).clone(),
            latency: self.latency.get_or_create(&labels).clone(),
            store_resource_version: self.store_resource_version.get_or_create(&labels).clone(),
            newest: Arc::default(),
        }
    }
}

/// One informer's metrics.
#[derive(Debug, Clone)]
pub(crate) struct InformerSeries {
    queued: Gauge,
    latency: Histogram,
    store_resource_version: Gauge,
    /// The highest resourceVersion applied: pages of a list arrive in name order, not in
    /// version order, and the store holds everything up to the highest.
    newest: Arc<AtomicU64>,
}

impl InformerSeries {
    pub(crate) fn queued(&self, items: usize) {
        self.queued.set(i64::try_from(items).unwrap_or(i64::MAX));
    }

    pub(crate) fn processed(&self, seconds: f64) {
        self.latency.observe(seconds);
    }

    /// Records the resourceVersion of an object applied to the store, if it is a number and
    /// higher than any before.
    pub(crate) fn store_at(&self, resource_version: Option<&str>) {
        let Some(version) = resource_version.and_then(|rv| rv.parse::<u64>().ok()) else {
            return;
        };
        let previous = self.newest.fetch_max(version, Ordering::Relaxed);
        if version > previous {
            let low = version % 1_000_000_000_000_000;
            self.store_resource_version
                .set(i64::try_from(low).unwrap_or(i64::MAX));
        }
    }
}
