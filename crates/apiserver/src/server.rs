//! Running the server: bind, serve, stop.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::registry::Registry;
use crate::rest::{App, RestConfig, handle};
use crate::storage::{Store, StoreConfig};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Binding the listening socket failed.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
}

/// How to run an API server.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    /// Where to listen; port 0 picks a free one. Defaults to `127.0.0.1:0`.
    pub address: SocketAddr,
    /// The store's history and watch buffers.
    pub store: StoreConfig,
    /// The REST layer's limits and timers.
    pub rest: RestConfig,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        Self {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            store: StoreConfig::default(),
            rest: RestConfig::default(),
        }
    }
}

/// A running API server; dropping it stops it.
///
/// ```
/// use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
/// assert!(server.url().starts_with("http://127.0.0.1:"));
/// server.shutdown().await;
/// # }
/// ```
pub struct ApiServer {
    app: Arc<App>,
    address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ApiServer {
    /// Binds and starts serving on the current Tokio runtime.
    pub async fn start(config: ApiServerConfig) -> Result<Self, ServerError> {
        let listener =
            TcpListener::bind(config.address)
                .await
                .map_err(|source| ServerError::Bind {
                    address: config.address,
                    source,
                })?;
        let address = listener.local_addr().map_err(|source| ServerError::Bind {
            address: config.address,
            source,
        })?;
        let app = Arc::new(App {
            store: Store::new(config.store),
            registry: Registry::default(),
            config: config.rest,
            address: address.to_string(),
        });
        let router = Router::new().fallback(handle).with_state(Arc::clone(&app));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
            if let Err(error) = served {
                tracing::error!(%error, "the API server stopped serving");
            }
        });
        Ok(Self {
            app,
            address,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://host:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The object store, for tests and fault hooks.
    pub fn store(&self) -> &Store {
        &self.app.store
    }

    /// Stops accepting connections and waits for the server task to end. Open watches are ended
    /// when the server's task is dropped.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}
