//! The fault hooks, as the reliability tests of the other crates use them.

use std::time::{Duration, Instant};

use ctrlkit_apiserver::faults::Fault;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams, WatchParams};
use kube::{Client, Config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn server() -> (ApiServer, Client) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
    (server, client)
}

/// A GET over a fresh connection: the status code and the raw response.
async fn raw_get(server: &ApiServer, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(server.address()).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    Ok((response[9..12].parse().unwrap(), response))
}

fn configmap(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn injected_statuses_match_by_verb_and_resource_then_run_out() {
    let (server, _client) = server().await;
    server.faults().fail_next(
        1,
        Some("list"),
        Some("configmaps"),
        Fault::TooManyRequests {
            retry_after_seconds: 7,
        },
    );
    server.faults().fail_next(
        1,
        Some("list"),
        Some("configmaps"),
        Fault::ServiceUnavailable,
    );
    server
        .faults()
        .fail_next(1, Some("list"), Some("configmaps"), Fault::InternalError);

    // Another resource is untouched.
    assert_eq!(
        raw_get(&server, "/api/v1/namespaces/default/secrets")
            .await
            .unwrap()
            .0,
        200
    );
    let (code, response) = raw_get(&server, CONFIGMAPS).await.unwrap();
    assert_eq!(code, 429);
    assert!(response.to_ascii_lowercase().contains("retry-after: 7"));
    assert!(response.contains(r#""reason":"TooManyRequests""#));
    assert!(response.contains(r#""retryAfterSeconds":7"#));
    let (code, response) = raw_get(&server, CONFIGMAPS).await.unwrap();
    assert_eq!(code, 503);
    assert!(response.contains(r#""reason":"ServiceUnavailable""#));
    let (code, response) = raw_get(&server, CONFIGMAPS).await.unwrap();
    assert_eq!(code, 500);
    assert!(response.contains(r#""reason":"InternalError""#));
    assert_eq!(raw_get(&server, CONFIGMAPS).await.unwrap().0, 200);
}

/// In process on a paused clock: the delay is the server's own timer, so it passes in virtual
/// time, all of it.
#[tokio::test(start_paused = true)]
async fn delays_hold_a_request_then_serve_it() {
    let (server, client) = crate::support::in_process().await;
    server.faults().fail_next(
        1,
        Some("get"),
        None,
        Fault::Delay(Duration::from_millis(300)),
    );
    let started = tokio::time::Instant::now();
    let missing = Api::<ConfigMap>::default_namespaced(client)
        .get("missing")
        .await
        .unwrap_err();
    assert_eq!(crate::support::api_error(missing).code, 404);
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn cut_watches_end_every_open_stream() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let from = server.store().resource_version().to_string();
    let mut events = api
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &configmap("a"))
        .await
        .unwrap();
    assert!(events.try_next().await.unwrap().is_some());
    server.faults().cut_watches();
    let ended = tokio::time::timeout(Duration::from_secs(5), events.try_next()).await;
    assert!(matches!(ended, Ok(Ok(None))), "the stream ends: {ended:?}");
}

#[tokio::test]
async fn a_partition_refuses_connections_then_heals_with_the_state_intact() {
    let (server, client) = server().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &configmap("kept"))
        .await
        .unwrap();
    let version = server.store().resource_version();

    server.partition(Duration::from_millis(500));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        raw_get(&server, CONFIGMAPS).await.is_err(),
        "connections are refused"
    );

    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(raw_get(&server, CONFIGMAPS).await.unwrap().0, 200);
    assert_eq!(server.store().resource_version(), version);
    assert!(api.get("kept").await.is_ok());

    // A restart drops open connections and accepts again at once.
    server.restart_listener();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(api.get("kept").await.is_ok());
}

async fn raw_post(server: &ApiServer, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(server.address())
        .await
        .unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    (response[9..12].parse().unwrap(), response)
}

#[tokio::test]
async fn the_admin_endpoint_is_off_unless_asked_for() {
    let (server, _client) = server().await;
    assert_eq!(raw_post(&server, "/admin/faults/cut-watches").await.0, 404);

    let mut config = ApiServerConfig::default();
    config.rest.admin = true;
    let server = ApiServer::start(config).await.unwrap();
    let (code, _) = raw_post(
        &server,
        "/admin/faults/fail?count=1&verb=list&resource=configmaps&status=429&retryAfterSeconds=3",
    )
    .await;
    assert_eq!(code, 200);
    let (code, response) = raw_get(&server, CONFIGMAPS).await.unwrap();
    assert_eq!(code, 429);
    assert!(response.to_ascii_lowercase().contains("retry-after: 3"));
    assert_eq!(raw_get(&server, CONFIGMAPS).await.unwrap().0, 200);

    assert_eq!(raw_post(&server, "/admin/faults/compact").await.0, 200);
    let (code, response) = raw_get(
        &server,
        &format!("{CONFIGMAPS}?watch=true&resourceVersion=1"),
    )
    .await
    .unwrap();
    assert_eq!(code, 200);
    assert!(response.contains(r#""type":"ERROR""#) && response.contains(r#""code":410"#));

    assert_eq!(
        raw_post(&server, "/admin/faults/fail?status=418").await.0,
        400
    );
    assert_eq!(raw_post(&server, "/admin/faults/hold-watches").await.0, 200);
    assert_eq!(
        raw_post(&server, "/admin/faults/release-watches").await.0,
        200
    );
    assert_eq!(raw_post(&server, "/admin/faults/bogus").await.0, 404);
    assert_eq!(raw_post(&server, "/admin/faults/clear").await.0, 200);
}

/// In process on a paused clock: while the clock moves on, every task has run as far as it can,
/// so a watch that is not held back would have started.
#[tokio::test(start_paused = true)]
async fn held_watches_start_on_release_and_replay_the_backlog() {
    let (server, client) = crate::support::in_process().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let first = api
        .create(&PostParams::default(), &configmap("first"))
        .await
        .unwrap();
    let from = first.metadata.resource_version.unwrap();
    server.faults().hold_watches();
    let watching = tokio::spawn(async move {
        let stream = api.watch(&WatchParams::default(), &from).await.unwrap();
        stream.take(3).try_collect::<Vec<_>>().await.unwrap()
    });
    // Lists and writes go on; the watch does not start.
    let writer: Api<ConfigMap> = Api::namespaced(client, "default");
    for name in ["second", "third", "fourth"] {
        writer
            .create(&PostParams::default(), &configmap(name))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!watching.is_finished());
    server.faults().release_watches();
    let events = tokio::time::timeout(Duration::from_secs(5), watching)
        .await
        .unwrap()
        .unwrap();
    let names: Vec<String> = events
        .iter()
        .map(|event| match event {
            kube::api::WatchEvent::Added(cm) => cm.metadata.name.clone().unwrap(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(names, ["second", "third", "fourth"]);
}

/// `POST /admin/faults/partition?seconds=S` and `/admin/faults/restart-listener`, for tests that
/// drive the binary: answered first, then every connection is dropped; a partition refuses new
/// connections until it ends, a restart accepts at once; the state is intact after both.
#[tokio::test]
async fn the_admin_endpoint_partitions_and_restarts_the_listener() {
    let mut config = ApiServerConfig::default();
    config.rest.admin = true;
    let server = ApiServer::start(config).await.unwrap();
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client);
    configmaps
        .create(&PostParams::default(), &configmap("kept"))
        .await
        .unwrap();

    // A watch open at the partition is cut.
    let mut watch = configmaps
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert!(watch.try_next().await.unwrap().is_some()); // the ADDED of "kept"
    assert_eq!(
        raw_post(&server, "/admin/faults/partition?seconds=1.5")
            .await
            .0,
        200
    );
    let cut = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = watch.next().await {}
    })
    .await;
    assert!(cut.is_ok(), "the partition ends open watches");
    let refused_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        raw_get(&server, CONFIGMAPS).await.is_err(),
        "connections are refused during the partition"
    );
    // Then the same address serves again, with the state intact.
    let healed = loop {
        if let Ok((200, response)) = raw_get(&server, CONFIGMAPS).await {
            break response;
        }
        assert!(
            refused_at.elapsed() < Duration::from_secs(10),
            "never healed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(healed.contains("\"name\":\"kept\""));

    assert_eq!(
        raw_post(&server, "/admin/faults/restart-listener").await.0,
        200
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(raw_get(&server, CONFIGMAPS).await.unwrap().0, 200);
    assert_eq!(
        raw_post(&server, "/admin/faults/partition?seconds=-1")
            .await
            .0,
        400
    );
    assert_eq!(raw_post(&server, "/admin/faults/partition").await.0, 400);
}

/// The events of a chunked body, by chunk: each chunk's lines.
fn chunks_of(response: &str) -> Vec<Vec<String>> {
    let body = &response[response.find("\r\n\r\n").unwrap() + 4..];
    let mut chunks = Vec::new();
    let mut rest = body;
    loop {
        let (size, after) = rest.split_once("\r\n").unwrap();
        let size = usize::from_str_radix(size, 16).unwrap();
        if size == 0 {
            return chunks;
        }
        let lines = after[..size].lines().map(str::to_string).collect();
        chunks.push(lines);
        rest = &after[size + 2..];
    }
}

/// By default each event has a chunk of its own, as kube-apiserver writes a watch; with
/// `watch_batch_bytes` set a backlog goes out in a few chunks.
#[tokio::test]
async fn a_watch_batches_a_backlog_unless_told_to_send_a_chunk_per_event() {
    for batch_bytes in [64 * 1024, 0] {
        let mut config = ApiServerConfig::default();
        config.rest.watch_batch_bytes = batch_bytes;
        let server = ApiServer::start(config).await.unwrap();
        let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let from = server.store().resource_version();
        for i in 0..50 {
            api.create(&PostParams::default(), &configmap(&format!("cm-{i:02}")))
                .await
                .unwrap();
        }
        let (status, response) = raw_get(
            &server,
            &format!("{CONFIGMAPS}?watch=true&resourceVersion={from}&timeoutSeconds=1"),
        )
        .await
        .unwrap();
        assert_eq!(status, 200);
        let chunks = chunks_of(&response);
        let lines: Vec<&String> = chunks.iter().flatten().collect();
        assert_eq!(lines.len(), 50, "{batch_bytes}");
        for (i, line) in lines.iter().enumerate() {
            assert!(line.contains(&format!("\"cm-{i:02}\"")), "{i}: {line}");
        }
        if batch_bytes == 0 {
            assert!(chunks.iter().all(|chunk| chunk.len() == 1));
        } else {
            assert!(chunks.len() < 10, "{} chunks", chunks.len());
        }
    }
}
