//! What every area's tests start from: an embedded API server with an empty default
//! namespace, and waiting for a condition on the paused clock.

use std::time::Duration;

use ctrlkit_apiserver::resource::builtin_resources;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use tokio::time::{Instant, sleep};

/// An embedded API server and a client of it.
pub async fn server() -> (ApiServer, kube::Client) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    // The namespace starts empty: without the CA ConfigMap every namespace of a cluster has, so
    // a controller of ConfigMaps reconciles only what a test writes.
    let config_maps = builtin_resources()
        .into_iter()
        .find(|kind| kind.plural == "configmaps")
        .unwrap();
    server
        .store()
        .delete(&config_maps, "default", "kube-root-ca.crt", None)
        .unwrap();
    let client = kube::Client::new(server.service(), "default");
    (server, client)
}

/// Waits (on the paused clock, or in real time) until `done` holds, at most `limit`.
pub async fn eventually(limit: Duration, done: impl Fn() -> bool) {
    let end = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < end, "condition not met within {limit:?}");
        sleep(Duration::from_millis(1)).await;
    }
}
