//! kube-client over the in-process transport, on Tokio's paused clock: no socket between them,
//! so the clock moves only when the test moves it.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::time::Duration;

use axum::body::Body;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams, WatchEvent, WatchParams};
use tokio::time::Instant;
use tower_service::Service;

async fn server() -> (ApiServer, Api<ConfigMap>) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::new(server.service(), "default");
    (server, Api::default_namespaced(client))
}

fn configmap(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("key".to_string(), value.to_string())])),
        ..ConfigMap::default()
    }
}

/// The kind of the innermost `std::io::Error` in an error's chain (kube wraps the transport's
/// errors in `io::Error`s of its own, and an `io::Error`'s `source` skips the error it wraps).
fn io_kind(error: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    let mut kind = None;
    let mut current = Some(error);
    while let Some(error) = current {
        current = match error.downcast_ref::<std::io::Error>() {
            Some(io) => {
                kind = Some(io.kind());
                match io.get_ref() {
                    Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                    None => std::error::Error::source(io),
                }
            }
            None => error.source(),
        };
    }
    kind
}

/// A raw call through the service: its status, or the kind of its connection error.
async fn raw_get(server: &ApiServer, path: &str) -> Result<u16, ErrorKind> {
    let request = axum::http::Request::get(path).body(Body::empty()).unwrap();
    match server.service().call(request).await {
        Ok(response) => Ok(response.status().as_u16()),
        Err(error) => Err(io_kind(&*error).expect("a connection error is an io::Error")),
    }
}

#[tokio::test(start_paused = true)]
async fn kube_client_creates_gets_and_watches_without_the_clock_moving() {
    let (_server, api) = server().await;
    let start = Instant::now();

    let created = api
        .create(&PostParams::default(), &configmap("settings", "one"))
        .await
        .unwrap();
    let fetched = api.get("settings").await.unwrap();
    assert_eq!(fetched.data, created.data);
    let version = fetched.metadata.resource_version.clone().unwrap();
    assert_eq!(
        Instant::now(),
        start,
        "plain requests do not move the clock"
    );

    let mut events = api
        .watch(&WatchParams::default(), &version)
        .await
        .unwrap()
        .boxed();
    let mut changed = fetched.clone();
    changed.data = Some(BTreeMap::from([("key".to_string(), "two".to_string())]));
    api.replace("settings", &PostParams::default(), &changed)
        .await
        .unwrap();
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Modified(seen)) => {
            assert_eq!(seen.data, changed.data);
            assert_ne!(seen.metadata.resource_version, Some(version));
        }
        other => panic!("expected the update, got {other:?}"),
    }
    assert_eq!(Instant::now(), start, "nor does a watch event");
}

#[tokio::test(start_paused = true)]
async fn a_partition_refuses_calls_at_once_then_heals_with_the_state_intact() {
    let (server, api) = server().await;
    api.create(&PostParams::default(), &configmap("kept", "value"))
        .await
        .unwrap();

    server.partition(Duration::from_secs(5));
    let start = Instant::now();
    assert_eq!(
        raw_get(&server, "/api/v1/namespaces/default/configmaps").await,
        Err(ErrorKind::ConnectionRefused)
    );
    let error = api.get("kept").await.unwrap_err();
    assert!(
        matches!(error, kube::Error::Service(_)),
        "a transport error, not an API status: {error:?}"
    );
    assert_eq!(io_kind(&error), Some(ErrorKind::ConnectionRefused));
    assert_eq!(
        Instant::now(),
        start,
        "refused at once, not after a timeout"
    );

    tokio::time::advance(Duration::from_millis(4_999)).await;
    assert_eq!(
        raw_get(&server, "/healthz").await,
        Err(ErrorKind::ConnectionRefused),
        "still partitioned just before the end"
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(raw_get(&server, "/healthz").await, Ok(200));
    assert_eq!(
        api.get("kept").await.unwrap().data,
        configmap("kept", "value").data
    );
}

#[tokio::test(start_paused = true)]
async fn an_open_watch_ends_with_an_error_when_a_partition_starts() {
    let (server, api) = server().await;
    let created = api
        .create(&PostParams::default(), &configmap("watched", "value"))
        .await
        .unwrap();
    let version = created.metadata.resource_version.unwrap();
    let mut events = api
        .watch(&WatchParams::default(), &version)
        .await
        .unwrap()
        .boxed();

    server.partition(Duration::from_secs(5));
    match events.next().await {
        Some(Err(error)) => assert_eq!(io_kind(&error), Some(ErrorKind::ConnectionReset)),
        other => panic!("expected the stream to break, got {other:?}"),
    }
    assert!(events.next().await.is_none(), "and then to end");
}

#[tokio::test(start_paused = true)]
async fn a_listener_restart_breaks_open_watches_and_accepts_again_at_once() {
    let (server, api) = server().await;
    let mut events = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let start = Instant::now();

    server.restart_listener();
    match events.next().await {
        Some(Err(error)) => assert_eq!(io_kind(&error), Some(ErrorKind::ConnectionReset)),
        other => panic!("expected the stream to break, got {other:?}"),
    }
    api.create(&PostParams::default(), &configmap("after", "value"))
        .await
        .unwrap();
    assert_eq!(Instant::now(), start);

    // A watch opened after the restart is untouched by it.
    let mut events = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Added(seen)) => assert_eq!(seen.metadata.name.as_deref(), Some("after")),
        other => panic!("expected the object, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_in_flight_when_a_partition_starts_is_reset() {
    let (server, api) = server().await;
    server.faults().fail_next(
        1,
        Some("get"),
        Some("configmaps"),
        ctrlkit_apiserver::faults::Fault::Delay(Duration::from_secs(10)),
    );
    let call = tokio::spawn(async move { api.get("missing").await });
    // Let the call reach the server and wait there.
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.partition(Duration::from_secs(1));
    let error = call.await.unwrap().unwrap_err();
    assert_eq!(io_kind(&error), Some(ErrorKind::ConnectionReset));
}

#[tokio::test(start_paused = true)]
async fn a_stopped_server_refuses_in_process_calls() {
    let (server, api) = server().await;
    let mut service = server.service();
    server.shutdown().await;
    let request = axum::http::Request::get("/healthz")
        .body(Body::empty())
        .unwrap();
    let error = service.call(request).await.unwrap_err();
    assert_eq!(io_kind(&*error), Some(ErrorKind::ConnectionRefused));
    assert_eq!(
        io_kind(&api.get("any").await.unwrap_err()),
        Some(ErrorKind::ConnectionRefused)
    );
}
