//! Bad input from a real HTTP peer: a watch frame that is not JSON, an unknown event type, an
//! object without metadata and a stream cut mid-line reach the informer through kube-client's
//! own decoding. Each is reported to the watch-error handler (or, for the cut, resumed), the
//! informer recovers and its cache ends right.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctrlkit_cache::{Backoff, ReflectorError, ReflectorOptions, SharedIndexInformer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, Config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

fn configmap(name: &str, rv: u32) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"default","resourceVersion":"{rv}"}}}}"#
    )
}

fn list(rv: u32, items: &[(&str, u32)]) -> String {
    let items: Vec<String> = items
        .iter()
        .map(|(name, rv)| configmap(name, *rv))
        .collect();
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMapList","metadata":{{"resourceVersion":"{rv}"}},"items":[{}]}}"#,
        items.join(",")
    )
}

fn event(kind: &str, name: &str, rv: u32) -> String {
    format!(r#"{{"type":"{kind}","object":{}}}"#, configmap(name, rv)) + "\n"
}

/// What the peer answers, request by request.
struct Script {
    lists: AtomicUsize,
    watches: AtomicUsize,
    requests: Mutex<Vec<String>>,
}

async fn serve(mut socket: TcpStream, script: Arc<Script>) {
    let mut request = Vec::new();
    let mut buffer = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    }
    let line = String::from_utf8_lossy(&request)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    script.requests.lock().unwrap().push(line.clone());
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
    let _ = socket.write_all(head.as_bytes()).await;
    if !line.contains("watch=true") {
        let body = match script.lists.fetch_add(1, Ordering::SeqCst) {
            0 => list(1, &[("a", 1)]),
            _ => list(9, &[("a", 1), ("c", 8), ("d", 9)]),
        };
        let _ = socket.write_all(body.as_bytes()).await;
        return;
    }
    let body = match script.watches.fetch_add(1, Ordering::SeqCst) {
        // A frame that is not JSON.
        0 => event("ADDED", "b", 2) + "{not json\n",
        // An unknown event type.
        1 => event("ADDED", "c", 8).replace("ADDED", "BOGUS"),
        // An object without metadata, then a line cut in the middle by a closed connection.
        2 => {
            r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap"}}"#.to_owned()
                + "\n"
                + &event("MODIFIED", "a", 10)
                + &event("ADDED", "e", 11)[..20]
        }
        // The resumed watch: one more change, then it stays open.
        _ => {
            let _ = socket.write_all(event("DELETED", "c", 12).as_bytes()).await;
            tokio::time::sleep(Duration::from_secs(60)).await;
            return;
        }
    };
    let _ = socket.write_all(body.as_bytes()).await;
    // Keep the connection a moment so the watch does not look "very short".
    tokio::time::sleep(Duration::from_millis(1100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_are_reported_and_the_informer_recovers() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let script = Arc::new(Script {
        lists: AtomicUsize::new(0),
        watches: AtomicUsize::new(0),
        requests: Mutex::new(Vec::new()),
    });
    tokio::spawn({
        let script = Arc::clone(&script);
        async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, Arc::clone(&script)));
            }
        }
    });

    let client =
        Client::try_from(Config::new(format!("http://{address}").parse().unwrap())).unwrap();
    let options = ReflectorOptions {
        name: "configmaps".into(),
        backoff: Backoff::new(
            Duration::from_millis(10),
            Duration::from_millis(50),
            2.0,
            0.0,
            Duration::from_secs(120),
        ),
        ..ReflectorOptions::default()
    };
    let informer = SharedIndexInformer::with_options(
        Api::<ConfigMap>::all(client),
        Duration::ZERO,
        Default::default(),
        options,
    );
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    informer
        .set_watch_error_handler({
            let errors = Arc::clone(&errors);
            Arc::new(move |err: &ReflectorError| errors.lock().unwrap().push(err.to_string()))
        })
        .unwrap();
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });

    let mut names = Vec::new();
    for _ in 0..200 {
        names = informer.get_indexer().list_keys();
        names.sort();
        if names == ["default/a", "default/d"] && informer.last_sync_resource_version() == "12" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let errors = errors.lock().unwrap().clone();
    assert_eq!(names, ["default/a", "default/d"], "errors: {errors:?}");
    // "a" carries the MODIFIED state that came before the cut line.
    let a = informer.get_indexer().get_by_key("default/a").unwrap();
    assert_eq!(a.metadata.resource_version.as_deref(), Some("10"));
    // The frame that is not JSON and the unknown type each failed the watch (and forced a
    // relist); the object without metadata was skipped with a key error.
    let decode_failures = errors.iter().filter(|e| e.contains("watch failed")).count();
    let key_errors = errors.iter().filter(|e| e.contains("no name")).count();
    assert_eq!(decode_failures, 2, "{errors:?}");
    assert_eq!(key_errors, 1, "{errors:?}");
    let requests = script.requests.lock().unwrap().clone();
    let watches: Vec<&String> = requests
        .iter()
        .filter(|r| r.contains("watch=true"))
        .collect();
    assert_eq!(watches.len(), 4, "{requests:?}");
    // The cut stream was resumed from the last version seen, not relisted.
    assert!(watches[3].contains("resourceVersion=10"), "{requests:?}");
    assert_eq!(script.lists.load(Ordering::SeqCst), 3, "{requests:?}");

    cancel.cancel();
    run.await.unwrap().unwrap();
}
