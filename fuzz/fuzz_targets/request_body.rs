//! The API server's handling of request bodies: create (POST), update (PUT, also of the status
//! subresource), patch (merge, strategic merge and JSON patch) and delete options (DELETE).
//!
//! Reading the body, checking it against the URL and applying patches happens in the REST
//! layer's private handlers, reachable only through HTTP; so the target starts the server once
//! (`ApiServer::start`, on a Tokio runtime of its own) and sends each input as the body of one
//! request through `ApiServer::service()`, the in-process transport, which calls the very
//! router TCP connections are served by. The first byte of an input picks the request (method,
//! path, content type), the rest is its body.
//!
//! After the request, the object it wrote is read back, listed with its collection and deleted,
//! as a client would, so that whatever a body leaves in the store goes through those paths too.
//!
//! Checked: every request is answered (any status; an error with a `Status` object, as
//! kube-apiserver's), and the server still answers `/healthz` after it. A handler that panics
//! fails the target.
//!
//! Between inputs the objects the requests may touch are put back as they were (every object of
//! the kinds concerned deleted, the fixtures created again), so an input does the same on every
//! run. Requests on namespaces and CustomResourceDefinitions change what the whole server serves
//! (a CRD can even take a built-in resource's name): they go to a fresh server of their own.
#![no_main]

use std::sync::{Mutex, OnceLock};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use bytes::Bytes;
use ctrlkit_apiserver::resource::{ResourceKind, builtin_resources};
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tower_service::Service;

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";

/// One request an input can make: method, path, content type (empty: no header), and whether it
/// needs a server of its own.
struct Op(Method, &'static str, &'static str, bool);

const CM: &str = "/api/v1/namespaces/default/configmaps";
const CM_FIXTURE: &str = "/api/v1/namespaces/default/configmaps/fixture";
const POD: &str = "/api/v1/namespaces/default/pods/fixture";
const POD_STATUS: &str = "/api/v1/namespaces/default/pods/fixture/status";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const LEASE_FIXTURE: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases/fixture";
const LEASE_NEW: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases/other";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/default/deployments/fixture";
const NAMESPACES: &str = "/api/v1/namespaces";
const NS_DEFAULT: &str = "/api/v1/namespaces/default";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const CRD: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";
const CRD_STATUS: &str =
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com/status";
const NS_DEFAULT_STATUS: &str = "/api/v1/namespaces/default/status";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn ops() -> Vec<Op> {
    vec![
        Op(Method::POST, CM, JSON, false),
        Op(Method::POST, CM, "", false),
        Op(Method::PUT, CM_FIXTURE, JSON, false),
        Op(Method::PATCH, CM_FIXTURE, MERGE, false),
        Op(Method::PATCH, CM_FIXTURE, STRATEGIC, false),
        Op(Method::PATCH, CM_FIXTURE, JSON_PATCH, false),
        Op(Method::DELETE, CM_FIXTURE, JSON, false),
        Op(Method::PUT, POD_STATUS, JSON, false),
        Op(Method::PATCH, POD_STATUS, MERGE, false),
        Op(Method::PATCH, POD, JSON_PATCH, false),
        Op(Method::DELETE, POD, JSON, false),
        Op(Method::POST, LEASES, JSON, false),
        Op(Method::PUT, LEASE_FIXTURE, JSON, false),
        Op(Method::PUT, LEASE_NEW, JSON, false),
        Op(Method::PATCH, DEPLOYMENT, MERGE, false),
        Op(Method::PUT, DEPLOYMENT, JSON, false),
        Op(Method::POST, DEPLOYMENTS, JSON, false),
        Op(Method::POST, NAMESPACES, JSON, true),
        Op(Method::PATCH, NS_DEFAULT, MERGE, true),
        Op(Method::DELETE, NS_DEFAULT, JSON, true),
        Op(Method::POST, CRDS, JSON, true),
        Op(Method::PUT, CRD, JSON, true),
        Op(Method::PATCH, CRD, MERGE, true),
        Op(Method::PATCH, CRD, JSON_PATCH, true),
        Op(Method::PATCH, CRD_STATUS, MERGE, true),
        Op(Method::POST, WIDGETS, JSON, true),
        Op(Method::PUT, NS_DEFAULT_STATUS, JSON, true),
        Op(Method::PATCH, NS_DEFAULT_STATUS, MERGE, true),
    ]
}

/// The kinds the shared server's requests can write, and the fixture of each.
fn fixtures() -> Vec<(ResourceKind, Value)> {
    let kind = |group: &str, plural: &str| {
        builtin_resources()
            .into_iter()
            .find(|kind| kind.group == group && kind.plural == plural)
            .expect("a built-in resource")
    };
    vec![
        (
            kind("", "configmaps"),
            json!({"metadata": {"name": "fixture", "labels": {"a": "b"}}, "data": {"k": "v"}}),
        ),
        (
            kind("", "pods"),
            json!({"metadata": {"name": "fixture", "finalizers": ["example.com/hold"]},
                   "spec": {"containers": [{"name": "c", "image": "i"}]},
                   "status": {"phase": "Pending"}}),
        ),
        (
            kind("coordination.k8s.io", "leases"),
            json!({"metadata": {"name": "fixture"},
                   "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}),
        ),
        (
            kind("apps", "deployments"),
            json!({"metadata": {"name": "fixture", "labels": {"app": "web"}},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}}}),
        ),
    ]
}

struct Fuzz {
    runtime: Runtime,
    server: ApiServer,
    ops: Vec<Op>,
    fixtures: Vec<(ResourceKind, Value)>,
}

fn start(runtime: &Runtime) -> ApiServer {
    // A short history: nothing here watches, and the shared server lives for the whole run.
    let mut config = ApiServerConfig::default();
    config.store.history = 1_000;
    config.store.watch_buffer = 1_000;
    runtime
        .block_on(ApiServer::start(config))
        .expect("the API server starts on loopback")
}

/// Deletes every object of the fixtures' kinds (finalizers first) and creates the fixtures anew.
fn reset(server: &ApiServer, fixtures: &[(ResourceKind, Value)]) {
    let store = server.store();
    for (kind, fixture) in fixtures {
        let (objects, _) = store.list(kind, None);
        for object in objects {
            let namespace = object["metadata"]["namespace"].as_str().unwrap_or("");
            let name = object["metadata"]["name"].as_str().unwrap_or("");
            let mut released = (*object).clone();
            if let Some(metadata) = released["metadata"].as_object_mut() {
                metadata.remove("finalizers");
            }
            let _ = store.update(kind, namespace, name, released, false);
            let _ = store.delete(kind, namespace, name, None);
        }
        store
            .create(kind, "default", fixture.clone())
            .expect("the fixture is valid");
    }
}

/// Sends one request and reads the whole answer; the answer's status and JSON body. `None` when
/// the path is not a valid URI (a name taken from an answer, say).
async fn send(
    server: &ApiServer,
    method: Method,
    path: &str,
    content_type: &str,
    body: Bytes,
) -> Option<(StatusCode, Value)> {
    let mut request = Request::builder().method(method.clone()).uri(path);
    if !content_type.is_empty() {
        request = request.header("content-type", content_type);
    }
    let request = request.body(Body::from(body)).ok()?;
    let response = server
        .service()
        .call(request)
        .await
        .unwrap_or_else(|error| panic!("{method} {path}: no answer: {error}"));
    let status = response.status();
    let body = axum::body::to_bytes(Body::new(response.into_body()), usize::MAX)
        .await
        .unwrap_or_else(|error| panic!("{method} {path} ({status}): broken body: {error}"));
    let decoded: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|error| panic!("{method} {path} ({status}): not JSON: {error}"));
    if status.is_client_error() || status.is_server_error() {
        // Every error is a `Status` object, as kube-apiserver's.
        assert_eq!(decoded["kind"], "Status", "{method} {path} ({status})");
    }
    Some((status, decoded))
}

/// One input: its request, then what a client does next with the object it wrote, so that
/// whatever the body left in the store is read, listed and deleted too.
async fn exchange(server: &ApiServer, op: &Op, body: Bytes) {
    let Op(method, path, content_type, _) = op;
    let answer = send(server, method.clone(), path, content_type, body).await;
    let item = if *method == Method::POST {
        let Some((StatusCode::CREATED, created)) = answer else {
            healthy(server).await;
            return;
        };
        let Some(name) = created["metadata"]["name"].as_str() else {
            panic!("POST {path}: created an object without a name: {created}");
        };
        format!("{path}/{name}")
    } else {
        path.trim_end_matches("/status").to_owned()
    };
    let collection = item
        .rsplit_once('/')
        .map_or("", |(collection, _)| collection);
    send(server, Method::GET, &item, "", Bytes::new()).await;
    send(server, Method::GET, collection, "", Bytes::new()).await;
    send(server, Method::DELETE, &item, "", Bytes::new()).await;
    healthy(server).await;
}

async fn healthy(server: &ApiServer) {
    let request = Request::get("/healthz")
        .body(Body::empty())
        .expect("a valid request");
    let response = server.service().call(request).await;
    assert_eq!(
        response.map(|response| response.status()).ok(),
        Some(StatusCode::OK),
        "the server stopped answering"
    );
}

/// A CRD, created on a fresh server before a CRD request, so PUT and PATCH find one.
const WIDGET_CRD: &str = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced",
"names":{"plural":"widgets","singular":"widget","kind":"Widget"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}}}]}}"#;

fuzz_target!(|data: &[u8]| {
    static FUZZ: OnceLock<Mutex<Fuzz>> = OnceLock::new();
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let fuzz = FUZZ.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a Tokio runtime");
        let server = start(&runtime);
        Mutex::new(Fuzz {
            runtime,
            server,
            ops: ops(),
            fixtures: fixtures(),
        })
    });
    let fuzz = fuzz.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let op = &fuzz.ops[usize::from(selector) % fuzz.ops.len()];
    let body = Bytes::copy_from_slice(body);
    if op.3 {
        let server = start(&fuzz.runtime);
        fuzz.runtime.block_on(async {
            send(
                &server,
                Method::POST,
                CRDS,
                JSON,
                Bytes::from_static(WIDGET_CRD.as_bytes()),
            )
            .await;
            exchange(&server, op, body).await;
            server.shutdown().await;
        });
    } else {
        reset(&fuzz.server, &fuzz.fixtures);
        fuzz.runtime.block_on(async {
            exchange(&fuzz.server, op, body).await;
        });
    }
});
