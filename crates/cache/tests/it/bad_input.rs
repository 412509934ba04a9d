//! Bad input from a scripted API server: a watch frame that is not JSON, an unknown event type,
//! an object without metadata and a stream cut mid-line reach the informer through kube-client.
//! Each is reported to the watch-error handler (or, for the cut, resumed), the informer recovers
//! and its cache ends right.
//!
//! The peer is a tower service that kube-client calls in process, so the test runs on a paused
//! clock: the reflector's backoffs and the peer's pauses take virtual time.

use std::convert::Infallible;
use std::future::Ready;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http_body::Frame;
use http_body_util::StreamBody;

use ctrlkit_cache::{Backoff, ReflectorError, ReflectorOptions, SharedIndexInformer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
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

/// A response body: its parts in turn, each after the pause before it; then the end, or (with
/// `open`) nothing more, as a watch that stays open.
type Body = StreamBody<Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, Infallible>> + Send>>>;

fn body(parts: Vec<(Duration, String)>, open: bool) -> Body {
    let parts = futures::stream::iter(parts).then(|(pause, part)| async move {
        tokio::time::sleep(pause).await;
        Ok(Frame::data(Bytes::from(part)))
    });
    let rest = futures::stream::iter(open.then(futures::stream::pending)).flatten();
    StreamBody::new(Box::pin(parts.chain(rest)))
}

/// The scripted API server, as kube-client calls it.
#[derive(Clone)]
struct Peer(Arc<Script>);

impl tower_service::Service<http::Request<kube::client::Body>> for Peer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let line = format!("{} {}", request.method(), request.uri());
        std::future::ready(Ok(http::Response::new(self.0.answer(line))))
    }
}

impl Script {
    fn answer(&self, line: String) -> Body {
        self.requests.lock().unwrap().push(line.clone());
        let now = Duration::ZERO;
        if !line.contains("watch=true") {
            let list = match self.lists.fetch_add(1, Ordering::SeqCst) {
                0 => list(1, &[("a", 1)]),
                _ => list(9, &[("a", 1), ("c", 8), ("d", 9)]),
            };
            return body(vec![(now, list)], false);
        }
        let events = match self.watches.fetch_add(1, Ordering::SeqCst) {
            // A frame that is not JSON.
            0 => event("ADDED", "b", 2) + "{not json\n",
            // An unknown event type.
            1 => event("ADDED", "c", 8).replace("ADDED", "BOGUS"),
            // An object without metadata, then a line cut in the middle by the end of the body.
            2 => {
                r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap"}}"#.to_owned()
                    + "\n"
                    + &event("MODIFIED", "a", 10)
                    + &event("ADDED", "e", 11)[..20]
            }
            // The resumed watch: one more change, then it stays open.
            _ => return body(vec![(now, event("DELETED", "c", 12))], true),
        };
        // The body ends a moment later, so the watch does not look "very short".
        body(
            vec![(now, events), (Duration::from_millis(1100), String::new())],
            false,
        )
    }
}

#[tokio::test(start_paused = true)]
async fn malformed_frames_are_reported_and_the_informer_recovers() {
    let script = Arc::new(Script {
        lists: AtomicUsize::new(0),
        watches: AtomicUsize::new(0),
        requests: Mutex::new(Vec::new()),
    });
    let client = Client::new(Peer(Arc::clone(&script)), "default");
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
