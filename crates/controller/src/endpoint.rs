//! The controller's HTTP endpoint: `/metrics`, `/healthz` and `/readyz`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use ctrlkit_cache::InformerMetrics;
use ctrlkit_leaderelection::{HealthzAdaptor, LeaderElectionMetrics};
use ctrlkit_workqueue::PrometheusMetricsProvider;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::ControllerMetrics;

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// Binding the address failed.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
}

/// What the endpoint reports: the metrics registry, liveness and readiness.
///
/// Cloning shares it. `/readyz` passes once every controller given it (with
/// `Controller::health`) has synced its caches, or once a [`Manager`](crate::Manager)'s
/// informers have all synced; the leader election's [`HealthzAdaptor`] makes `/healthz` fail
/// when a leader is stuck.
#[derive(Clone, Default)]
pub struct Health {
    registry: Arc<Mutex<Registry>>,
    ready: Arc<Readiness>,
    leader: HealthzAdaptor,
    /// Each family is registered once per registry, however many controllers share it (they
    /// tell themselves apart by their labels): a registry with a family twice is not valid
    /// exposition.
    families: Arc<Families>,
}

/// Whether `/readyz` passes: ready once no controller that reports to it is still syncing.
#[derive(Default)]
struct Readiness {
    ready: AtomicBool,
    /// Controllers given this health that have not synced yet.
    syncing: AtomicUsize,
}

#[derive(Default)]
struct Families {
    controller: OnceLock<ControllerMetrics>,
    queue: OnceLock<Arc<PrometheusMetricsProvider>>,
    leader: OnceLock<LeaderElectionMetrics>,
    informer: OnceLock<InformerMetrics>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("ready", &self.is_ready())
            .field("leader", &self.leader)
            .finish()
    }
}

impl Health {
    /// Reports `registry` on `/metrics` and `leader` on `/healthz`.
    pub fn new(registry: Registry, leader: HealthzAdaptor) -> Self {
        Self {
            registry: Arc::new(Mutex::new(registry)),
            ready: Arc::default(),
            leader,
            families: Arc::default(),
        }
    }

    /// The reconcile metrics, registered on first use.
    pub(crate) fn controller_metrics(&self) -> ControllerMetrics {
        self.families
            .controller
            .get_or_init(|| ControllerMetrics::new(&mut self.registry.lock()))
            .clone()
    }

    /// The work queue metrics, registered on first use.
    pub(crate) fn queue_metrics(&self) -> Arc<PrometheusMetricsProvider> {
        Arc::clone(self.families.queue.get_or_init(|| {
            Arc::new(PrometheusMetricsProvider::for_controllers(
                &mut self.registry.lock(),
            ))
        }))
    }

    /// client-go's informer metrics in this registry, registered on first use: give them to the
    /// informer factory (`SharedInformerFactory::new(..).with_metrics(health.informer_metrics())`).
    pub fn informer_metrics(&self) -> InformerMetrics {
        self.families
            .informer
            .get_or_init(|| InformerMetrics::new(&mut self.registry.lock()))
            .clone()
    }

    /// The leader election metrics, registered on first use.
    pub(crate) fn leader_metrics(&self) -> LeaderElectionMetrics {
        self.families
            .leader
            .get_or_init(|| LeaderElectionMetrics::new(&mut self.registry.lock()))
            .clone()
    }

    /// The registry, to register more metrics.
    pub fn registry(&self) -> &Arc<Mutex<Registry>> {
        &self.registry
    }

    /// The leader election check.
    pub fn leader(&self) -> &HealthzAdaptor {
        &self.leader
    }

    /// Marks the process ready or not, for readiness that also depends on something else. The
    /// next controller to finish syncing marks it ready again once it was the last one
    /// syncing.
    pub fn set_ready(&self, ready: bool) {
        self.ready.ready.store(ready, Ordering::Release);
    }

    /// Whether `/readyz` passes.
    pub fn is_ready(&self) -> bool {
        self.ready.ready.load(Ordering::Acquire)
    }

    /// One more controller reports to this health: it is not ready until that one has synced.
    pub(crate) fn expect_sync(&self) {
        self.ready.syncing.fetch_add(1, Ordering::AcqRel);
    }

    /// A controller counted by [`expect_sync`](Self::expect_sync) gives up its claim without
    /// having synced (it reports somewhere else now).
    pub(crate) fn forget_sync(&self) {
        // Never below zero: only a count this health holds is taken back.
        let _ = self
            .ready
            .syncing
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// A controller counted by [`expect_sync`](Self::expect_sync) has synced: ready once it was
    /// the last one still syncing.
    pub(crate) fn synced(&self) {
        let before = self
            .ready
            .syncing
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if matches!(before, Ok(1) | Err(0)) {
            self.set_ready(true);
        }
    }

    /// The metrics in Prometheus' text format.
    pub fn metrics_text(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry.lock());
        text
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` on `address` until `cancel` fires; returns the
    /// address bound (port 0 picks one).
    pub async fn serve(
        &self,
        address: SocketAddr,
        cancel: CancellationToken,
    ) -> Result<SocketAddr, EndpointError> {
        let bind_error = |source| EndpointError::Bind { address, source };
        let listener = TcpListener::bind(address).await.map_err(bind_error)?;
        let bound = listener.local_addr().map_err(bind_error)?;
        let router = Router::new()
            .route("/metrics", get(metrics))
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .with_state(self.clone());
        tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move { cancel.cancelled().await })
                .await;
            if let Err(error) = served {
                tracing::warn!(%error, "the controller's endpoint stopped");
            }
        });
        Ok(bound)
    }
}

async fn metrics(
    State(health): State<Health>,
) -> (StatusCode, [(&'static str, &'static str); 1], String) {
    (
        StatusCode::OK,
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        health.metrics_text(),
    )
}

async fn healthz(State(health): State<Health>) -> (StatusCode, String) {
    match health.leader.check() {
        Ok(()) => (StatusCode::OK, "ok".into()),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[-]{} failed: {error}", health.leader.name()),
        ),
    }
}

async fn readyz(State(health): State<Health>) -> (StatusCode, String) {
    if health.is_ready() {
        (StatusCode::OK, "ok".into())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "[-]informers not synced".into(),
        )
    }
}
