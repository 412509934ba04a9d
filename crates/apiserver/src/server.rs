//! Running the server: bind, serve, partition, restart, stop.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tower_service::Service as _;

use crate::activity::{Activity, Tracked};
use crate::faults::Faults;
use crate::in_process::InProcessService;
use crate::link::Link;
use crate::registry::Registry;
use crate::rest::{App, InFlight, RestConfig, handle, serve_stored_crds};
use crate::storage::{PersistError, Store, StoreConfig};
use crate::tls::TlsConfig;

/// How long a client has to complete the TLS handshake before its connection is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client has to send a request's headers (kube-apiserver's `ReadHeaderTimeout`).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// How long a connection may carry no bytes at all before it is closed (kube-apiserver's
/// `IdleTimeout`).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How long a connection may be silent before TCP probes that its peer is still there, as
/// kube-apiserver's listener sets it: a peer that vanished without closing is found and its
/// connection let go, even while a long watch sends nothing.
const TCP_KEEPALIVE: Duration = Duration::from_secs(180);

/// Sets an accepted connection's socket options: no Nagle delay (every answer is sent whole),
/// and TCP keep-alive probes after [`TCP_KEEPALIVE`]. A socket that refuses either is served
/// anyway.
fn tune(stream: &TcpStream) {
    let _ = stream.set_nodelay(true);
    let keepalive = socket2::TcpKeepalive::new().with_time(TCP_KEEPALIVE);
    let _ = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive);
}

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
    /// The data directory could not be opened or recovered.
    #[error("cannot open the data directory: {0}")]
    Storage(#[from] PersistError),
    /// `serde_json::Map` keeps its keys in insertion order in this build: a crate in it enables
    /// serde_json's `preserve_order` feature. Server-side apply walks objects' fields in name
    /// order and would merge them wrongly.
    #[error(
        "serde_json's `preserve_order` feature is enabled in this build (see `cargo tree -e features -i serde_json`); the API server needs JSON objects kept in key order"
    )]
    JsonMapsInInsertionOrder,
}

/// How to run an API server.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    /// Where to listen; port 0 picks a free one. Defaults to `127.0.0.1:0`.
    pub address: SocketAddr,
    /// The store's history and watch buffers.
    pub store: StoreConfig,
    /// The REST layer's limits, timers and bearer token.
    pub rest: RestConfig,
    /// Serve HTTPS with this TLS configuration (see [`crate::tls`]); plain HTTP without it, the
    /// default.
    pub tls: Option<TlsConfig>,
    /// Keep the objects in this directory, durably (see [`Store::open`]): every acknowledged
    /// write survives a crash, and a server started on the directory again serves them with
    /// their resourceVersions. In memory only without it, the default. The directory is locked
    /// until the server and every [`InProcessService`] of it are dropped.
    pub data_dir: Option<PathBuf>,
    /// How many connections are served at once (10,000 by default; 0: no cap). Past it a new
    /// connection gets one answer and is closed: the health endpoints answer as usual, anything
    /// else 429 with `Retry-After: 1`; the connections already open are served as before. Keep
    /// it below the process's open-file limit, so that a flood of connections cannot take the
    /// descriptors the store and the existing clients need.
    pub max_connections: usize,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        Self {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            store: StoreConfig::default(),
            rest: RestConfig::default(),
            tls: None,
            data_dir: None,
            max_connections: 10_000,
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
    router: Router,
    /// Partitions, restarts and shutdown, watched by the listener task and every
    /// [`InProcessService`].
    link: Arc<watch::Sender<Link>>,
    task: Option<JoinHandle<()>>,
    /// Whether it serves HTTPS.
    tls: bool,
}

impl ApiServer {
    /// Binds and starts serving on the current Tokio runtime: HTTPS with
    /// [`ApiServerConfig::tls`], plain HTTP without.
    pub async fn start(config: ApiServerConfig) -> Result<Self, ServerError> {
        if !crate::apply::typed::json_maps_are_sorted() {
            return Err(ServerError::JsonMapsInInsertionOrder);
        }
        // Recovery reads and fsyncs files: off the async worker threads.
        let store = match config.data_dir.clone() {
            Some(path) => {
                let store_config = config.store;
                let opened =
                    tokio::task::spawn_blocking(move || Store::open(store_config, &path)).await;
                match opened {
                    Ok(opened) => opened?,
                    Err(join) => std::panic::resume_unwind(join.into_panic()),
                }
            }
            None => Store::new(config.store),
        };
        let bind_error = |source| ServerError::Bind {
            address: config.address,
            source,
        };
        let listener = TcpListener::bind(config.address)
            .await
            .map_err(bind_error)?;
        let address = listener.local_addr().map_err(bind_error)?;
        let link = Arc::new(watch::Sender::new(Link::up()));
        let in_flight = InFlight::new(
            config.rest.max_requests_inflight,
            config.rest.max_mutating_requests_inflight,
        );
        let app = Arc::new(App {
            store,
            registry: Registry::default(),
            config: config.rest,
            address: address.to_string(),
            faults: Faults::default(),
            accesses: crate::access::Accesses::default(),
            link: Arc::clone(&link),
            services: Default::default(),
            tokens: Default::default(),
            in_flight,
        });
        serve_stored_crds(&app);
        crate::rest::cluster::bootstrap(&app);
        let router = Router::new().fallback(handle).with_state(Arc::clone(&app));
        tokio::spawn(cluster_controllers(Arc::downgrade(&app), link.subscribe()));
        let tls = config.tls.is_some();
        let acceptor = config
            .tls
            .map(|tls| tokio_rustls::TlsAcceptor::from(Arc::clone(tls.server_config())));
        let task = tokio::spawn(serve(
            Listening {
                listener,
                address,
                acceptor,
                max_connections: config.max_connections,
            },
            router.clone(),
            link.subscribe(),
        ));
        Ok(Self {
            app,
            address,
            router,
            link,
            task: Some(task),
            tls,
        })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://host:port`, or `https://host:port` when it serves TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.address)
    }

    /// The object store, for tests and fault hooks.
    pub fn store(&self) -> &Store {
        &self.app.store
    }

    /// The fault hooks: cut watches, fail or delay requests.
    pub fn faults(&self) -> &Faults {
        &self.app.faults
    }

    /// The verbs clients asked for on each resource: what their RBAC roles must grant.
    pub fn accesses(&self) -> &crate::access::Accesses {
        &self.app.accesses
    }

    /// The server as an in-process [`tower_service::Service`], for clients that should not go
    /// through a socket: every handler, fault hook and watch stream behaves as over TCP, and a
    /// test on Tokio's paused clock keeps its clock still during plain requests (over TCP the
    /// paused clock jumps ahead whenever every task waits on I/O). Partitions, restarts and
    /// shutdown reach it as they reach TCP clients; see [`InProcessService`]. With a token
    /// ([`RestConfig::token`]) in-process calls must carry it as TCP ones do.
    ///
    /// With kube-client, `kube::Client::new(server.service(), "default")`:
    ///
    /// ```
    /// use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::api::{Api, ObjectMeta, PostParams};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    /// let client = kube::Client::new(server.service(), "default");
    /// let configmaps: Api<ConfigMap> = Api::default_namespaced(client);
    ///
    /// let start = tokio::time::Instant::now();
    /// let mut configmap = ConfigMap::default();
    /// configmap.metadata.name = Some("settings".to_string());
    /// configmaps.create(&PostParams::default(), &configmap).await.unwrap();
    /// assert!(configmaps.get("settings").await.is_ok());
    /// assert_eq!(tokio::time::Instant::now(), start);
    /// # }
    /// ```
    pub fn service(&self) -> InProcessService {
        InProcessService::new(self.router.clone(), self.link.subscribe())
    }

    /// A network partition: every open connection (and in-process call and response body) is
    /// dropped and new ones are refused for `duration`, then the server listens again on the
    /// same address with its state intact. A partition that begins while another is under way
    /// drops everything again and lasts until the later of the two ends.
    pub fn partition(&self, duration: Duration) {
        self.link.send_modify(|link| link.partition(duration));
    }

    /// Restarts the listener: every open connection (and in-process call and response body) is
    /// dropped, and the server accepts again at once.
    pub fn restart_listener(&self) {
        self.partition(Duration::ZERO);
    }

    /// Stops serving: the listener and every connection are dropped, and in-process calls are
    /// refused.
    pub async fn shutdown(mut self) {
        self.link.send_modify(Link::stop);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// Where and how the server accepts connections.
struct Listening {
    listener: TcpListener,
    address: SocketAddr,
    /// With an acceptor, each connection completes a TLS handshake first.
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    /// Past this many connections (0: no cap), a new one is only answered and closed.
    max_connections: usize,
}

/// The accept loop. Connections run in a `JoinSet`, so a partition can drop them all; those
/// past the cap run in a set of their own, each for one answer.
async fn serve(listening: Listening, router: Router, mut link: watch::Receiver<Link>) {
    let Listening {
        listener,
        address,
        acceptor,
        max_connections,
    } = listening;
    let mut listener = Some(listener);
    let mut connections = JoinSet::new();
    let mut turned_away = JoinSet::new();
    loop {
        let accepted = async {
            match &listener {
                Some(listener) => listener.accept().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            accepted = accepted => match accepted {
                Ok((stream, _)) => {
                    tune(&stream);
                    let full = max_connections > 0 && connections.len() >= max_connections;
                    if full && turned_away.len() >= max_connections {
                        // Even the answers to the turned-away are too many: just close.
                        drop(stream);
                        continue;
                    }
                    let router = router.clone();
                    let acceptor = acceptor.clone();
                    let connection = async move {
                        match acceptor {
                            None => serve_one(stream, router, full).await,
                            Some(acceptor) => {
                                let handshake = tokio::time::timeout(
                                    TLS_HANDSHAKE_TIMEOUT,
                                    acceptor.accept(stream),
                                );
                                match handshake.await {
                                    Ok(Ok(stream)) => serve_one(stream, router, full).await,
                                    Ok(Err(error)) => {
                                        tracing::debug!(%error, "TLS handshake failed");
                                    }
                                    Err(_) => tracing::debug!("TLS handshake timed out"),
                                }
                            }
                        }
                    };
                    if full {
                        turned_away.spawn(connection);
                    } else {
                        connections.spawn(connection);
                    }
                }
                Err(error) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(()) = reap(&mut connections) => {}
            Some(()) = reap(&mut turned_away) => {}
            changed = link.changed() => {
                // A partition or a restart (the only other changes) drops the listener and every
                // connection; so does a stop, for good.
                drop(listener.take());
                connections.abort_all();
                turned_away.abort_all();
                if changed.is_err() || !wait_while_down(&mut link).await {
                    return;
                }
                listener = rebind(address).await;
            }
        }
    }
}

/// Serves a connection: in full, or, past the connection cap, one answer.
async fn serve_one<S>(stream: S, router: Router, turned_away: bool)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    if turned_away {
        answer_and_close(stream, router).await;
    } else {
        serve_connection(stream, router).await;
    }
}

/// Past the connection cap: one request is answered (a health check as usual, anything else
/// 429 with `Retry-After: 1`), then the connection is closed.
async fn answer_and_close<S>(stream: S, router: Router)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let health = crate::rest::is_health(request.uri().path());
        let answer = health.then(|| router.clone().call(request.map(axum::body::Body::new)));
        async move {
            match answer {
                Some(answer) => answer.await,
                None => Ok(crate::rest::too_many_requests()),
            }
        }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(error) = served {
        tracing::debug!(%error, "a turned-away connection ended with an error");
    }
}

/// Serves HTTP/1.1 on one connection until it ends: a client that takes longer than
/// [`HEADER_READ_TIMEOUT`] to send a request's head, from its first byte, is cut off, and a
/// connection that has carried no bytes for [`IDLE_TIMEOUT`] between requests is closed, as
/// kube-apiserver's HTTP server does.
async fn serve_connection<S>(stream: S, router: Router)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Activity::new();
    let requests = activity.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        requests.request_started();
        let activity = requests.clone();
        let answer = router.clone().call(request.map(axum::body::Body::new));
        async move {
            let response = answer.await?;
            Ok::<_, Infallible>(response.map(|body| Tracked::new(body, activity)))
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(activity.watch(stream)), service);
    tokio::pin!(connection);
    let mut closing = false;
    let served = loop {
        if closing {
            break connection.as_mut().await;
        }
        // While a request is answered the idle clock does not run; it is looked at again an
        // idle period later (so a connection is closed at most twice that after its last byte).
        let idle_at = if activity.busy() {
            Instant::now() + IDLE_TIMEOUT
        } else {
            activity.last() + IDLE_TIMEOUT
        };
        let cut_at = activity
            .head_since()
            .map(|since| since + HEADER_READ_TIMEOUT);
        let wake_at = cut_at.map_or(idle_at, |cut_at| cut_at.min(idle_at));
        tokio::select! {
            served = connection.as_mut() => break served,
            () = activity.head_started() => {}
            () = tokio::time::sleep_until(wake_at) => {
                let now = Instant::now();
                if activity.head_since().is_some_and(|since| since + HEADER_READ_TIMEOUT <= now) {
                    tracing::debug!("a request head took too long: connection closed");
                    return;
                }
                // Idle is between requests, as Go's `IdleTimeout`: a quiet watch is left alone.
                if !activity.busy() && activity.last() + IDLE_TIMEOUT <= now {
                    connection.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    };
    if let Err(error) = served {
        tracing::debug!(%error, "connection ended with an error");
    }
}

/// Waits until the link is up again, following partitions that extend it; false if the server
/// stops meanwhile.
async fn wait_while_down(link: &mut watch::Receiver<Link>) -> bool {
    loop {
        let state = *link.borrow_and_update();
        if state.stopped {
            return false;
        }
        let Some(until) = state.down_until.filter(|until| Instant::now() < *until) else {
            return true;
        };
        tokio::select! {
            () = tokio::time::sleep_until(until) => {}
            changed = link.changed() => if changed.is_err() {
                return false;
            },
        }
    }
}

/// The controllers that run beside kube-apiserver in a cluster, which envtest lacks: the
/// namespace controller (empties each namespace being deleted, then lets it go) and the garbage
/// collector (dependents go with their owners). Runs until the server stops or is gone (an
/// [`InProcessService`] that outlives the server keeps the state alive, not the controllers).
async fn cluster_controllers(app: std::sync::Weak<App>, mut link: watch::Receiver<Link>) {
    let mut ticks = tokio::time::interval(Duration::from_millis(50));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = link.wait_for(|link| link.stopped) => return,
        }
        let Some(app) = app.upgrade() else {
            return;
        };
        // The controllers' writes to a durable store are awaited here, not on this thread.
        let ((), durable) = crate::storage::durability::deferring(|| {
            if let Err(error) = app.store.collect_garbage() {
                tracing::debug!(%error, "the garbage collector cannot write");
            }
            crate::rest::clean_up_deleted_crds(&app);
            crate::rest::elect_coordinated_leaders(&app);
            for namespace in app.store.terminating_namespaces() {
                if app.store.delete_namespace_contents(&namespace) == Ok(0)
                    && let Err(error) = app.store.finalize_namespace(&namespace)
                {
                    // Someone updated it meanwhile: the next tick tries again.
                    tracing::debug!(%error, namespace, "could not finalize the namespace yet");
                }
            }
        });
        drop(app);
        if let Err(error) = durable.wait().await {
            tracing::debug!(%error, "a cluster controller's write was not made durable");
        }
    }
}

/// Waits for a finished connection task (so the set does not grow); pending while none runs.
async fn reap(connections: &mut JoinSet<()>) -> Option<()> {
    if connections.is_empty() {
        return std::future::pending().await;
    }
    connections.join_next().await.map(|_| ())
}

/// Listens on `address` again, retrying briefly while the old socket lets go of it.
async fn rebind(address: SocketAddr) -> Option<TcpListener> {
    for _ in 0..100 {
        match TcpListener::bind(address).await {
            Ok(listener) => return Some(listener),
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    tracing::error!(%address, "could not listen again after a partition");
    None
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.link.send_modify(Link::stop);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("address", &self.address)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_accepted_connection_has_no_nagle_delay_and_keepalive_probes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (_client, accepted) = tokio::join!(client, listener.accept());
        let (stream, _) = accepted.unwrap();
        tune(&stream);
        let socket = socket2::SockRef::from(&stream);
        assert!(stream.nodelay().unwrap());
        assert!(socket.keepalive().unwrap());
        #[cfg(target_os = "linux")]
        assert_eq!(socket.tcp_keepalive_time().unwrap(), TCP_KEEPALIVE);
    }
}
