//! A scripted API server for unit tests: a `tower` service that answers each request to a lock
//! object with the next scripted reply (or a handler's), records what was asked, and keeps
//! Events apart, so tests can assert the exact calls a lock makes.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::coordination::v1::LeaseSpec;
use kube::client::Body;
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::record::{LEADER_ANNOTATION, LeaderElectionRecord};

/// How long every lock request takes. On a paused clock time then moves while a request is in
/// flight, as it does against a real server.
pub(crate) const LATENCY: Duration = Duration::from_millis(1);

/// One request to a lock object.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// `get`, `create`, `update`, `watch`, `list`, or the lower-cased HTTP method.
    pub(crate) verb: String,
    /// The plural resource in the path: `leases`, `configmaps`, `endpoints`.
    pub(crate) resource: String,
    /// The object's name (from the path, or from the body for a create).
    pub(crate) name: String,
    /// The object sent, for create and update.
    pub(crate) body: Option<Value>,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.verb, self.resource, self.name)
    }
}

/// What the fake server answers.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// 200 with this object (a resourceVersion is added when it has none).
    Object(Value),
    /// The object sent, with a new resourceVersion (200 for update, 201 for create).
    Echo,
    /// 404 NotFound.
    NotFound,
    /// 409 Conflict.
    Conflict,
    /// 409 AlreadyExists.
    AlreadyExists,
    /// Never answers: the request is in flight until the caller gives up on it.
    Hang,
}

type Handler = Box<dyn FnMut(&Call) -> Reply + Send>;

#[derive(Default)]
struct State {
    /// Expected (verb, resource) and the reply, in order.
    script: VecDeque<(String, String, Reply)>,
    /// Answers every call once the script is empty, when set.
    handler: Option<Handler>,
    calls: Vec<Call>,
    /// Events as `"<type> <reason> <message>"`, client-go's `FakeRecorder` format.
    events: Vec<String>,
    version: u64,
}

/// The fake API server; clones share it.
#[derive(Clone, Default)]
pub(crate) struct FakeApi {
    state: Arc<Mutex<State>>,
}

impl FakeApi {
    /// A server that answers the calls in `script` in order and fails the test on any other.
    pub(crate) fn scripted<'a>(
        script: impl IntoIterator<Item = (&'a str, &'a str, Reply)>,
    ) -> Self {
        let api = Self::default();
        api.state.lock().script = script
            .into_iter()
            .map(|(verb, resource, reply)| (verb.to_owned(), resource.to_owned(), reply))
            .collect();
        api
    }

    /// A server that answers every call with `handler`.
    pub(crate) fn handled(handler: impl FnMut(&Call) -> Reply + Send + 'static) -> Self {
        let api = Self::default();
        api.state.lock().handler = Some(Box::new(handler));
        api
    }

    /// A client whose every request this server answers.
    pub(crate) fn client(&self) -> kube::Client {
        kube::Client::new(self.clone(), "default")
    }

    /// The lock calls so far, as `"verb resource/name"`.
    pub(crate) fn calls(&self) -> Vec<String> {
        self.state
            .lock()
            .calls
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// The record written by the last create or update.
    pub(crate) fn last_written(&self) -> LeaderElectionRecord {
        let state = self.state.lock();
        let body = state
            .calls
            .iter()
            .rev()
            .find_map(|call| call.body.clone())
            .expect("nothing was written");
        record_in(&body)
    }

    /// The scripted replies not used yet.
    pub(crate) fn unused(&self) -> usize {
        self.state.lock().script.len()
    }

    /// The events recorded so far.
    pub(crate) fn events(&self) -> Vec<String> {
        self.state.lock().events.clone()
    }

    fn next_version(&self) -> u64 {
        let mut state = self.state.lock();
        state.version += 1;
        state.version
    }

    async fn answer(self, request: Request<Body>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.expect("request body");
        let body: Option<Value> = (!bytes.is_empty())
            .then(|| serde_json::from_slice(&bytes).expect("request body is not JSON"));
        let call = describe(&parts.method, parts.uri.path(), parts.uri.query(), body);

        if call.resource == "events" && call.verb == "create" {
            let event = call.body.clone().unwrap_or_default();
            let text = |field: &str| event[field].as_str().unwrap_or_default().to_owned();
            self.state.lock().events.push(format!(
                "{} {} {}",
                text("type"),
                text("reason"),
                text("message")
            ));
            return respond(StatusCode::CREATED, &event);
        }

        let reply = {
            let mut state = self.state.lock();
            state.calls.push(call.clone());
            match state.script.pop_front() {
                Some((verb, resource, reply)) => {
                    assert!(
                        verb == call.verb && resource == call.resource,
                        "expected a {verb} of {resource}, the lock sent: {call}"
                    );
                    reply
                }
                None => match state.handler.as_mut() {
                    Some(handler) => handler(&call),
                    None => panic!("unscripted call: {call}"),
                },
            }
        };

        tokio::time::sleep(LATENCY).await;
        match reply {
            Reply::Object(mut object) => {
                if object["metadata"]["resourceVersion"].is_null() {
                    object["metadata"]["resourceVersion"] = json!(self.next_version().to_string());
                }
                respond(StatusCode::OK, &object)
            }
            Reply::Echo => {
                let mut object = call.body.clone().expect("only a write can be echoed");
                object["metadata"]["resourceVersion"] = json!(self.next_version().to_string());
                let status = if call.verb == "create" {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                respond(status, &object)
            }
            Reply::NotFound => failure(&call, StatusCode::NOT_FOUND, "NotFound"),
            Reply::Conflict => failure(&call, StatusCode::CONFLICT, "Conflict"),
            Reply::AlreadyExists => failure(&call, StatusCode::CONFLICT, "AlreadyExists"),
            Reply::Hang => std::future::pending().await,
        }
    }
}

impl tower_service::Service<Request<Body>> for FakeApi {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // Everything happens in the future, which the caller polls: a panic there fails the
        // test that made the call.
        let api = self.clone();
        Box::pin(async move { Ok(api.answer(request).await) })
    }
}

/// Names a request as client-go's fake clientset does: verb, plural resource, object name.
fn describe(method: &Method, path: &str, query: Option<&str>, body: Option<Value>) -> Call {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let after = segments
        .iter()
        .position(|segment| *segment == "namespaces")
        .map_or(&[][..], |at| &segments[at + 2..]);
    let resource = after.first().copied().unwrap_or_default().to_owned();
    let path_name = after.get(1).copied().map(str::to_owned);
    let watching = query.is_some_and(|query| query.split('&').any(|pair| pair == "watch=true"));
    let verb = match *method {
        Method::GET if watching => "watch".to_owned(),
        Method::GET if path_name.is_none() => "list".to_owned(),
        Method::GET => "get".to_owned(),
        Method::POST => "create".to_owned(),
        Method::PUT => "update".to_owned(),
        ref other => other.as_str().to_lowercase(),
    };
    let name = path_name.unwrap_or_else(|| {
        body.as_ref()
            .and_then(|body| body["metadata"]["name"].as_str())
            .unwrap_or_default()
            .to_owned()
    });
    Call {
        verb,
        resource,
        name,
        body,
    }
}

fn respond(status: StatusCode, object: &Value) -> Response<Body> {
    let mut response = Response::new(Body::from(object.to_string().into_bytes()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().expect("header"));
    response
}

fn failure(call: &Call, status: StatusCode, reason: &str) -> Response<Body> {
    let status_object = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("{} {:?}: {reason}", call.resource, call.name),
        "reason": reason,
        "details": { "name": call.name, "kind": call.resource },
        "code": status.as_u16(),
    });
    respond(status, &status_object)
}

/// The kinds of lock object, as the fake server names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Lease,
    ConfigMap,
    Endpoints,
}

impl Kind {
    pub(crate) const ALL: [Kind; 3] = [Kind::Lease, Kind::ConfigMap, Kind::Endpoints];

    /// The plural resource, which is also the lock's name for `resource_lock::new`.
    pub(crate) fn resource(self) -> &'static str {
        match self {
            Kind::Lease => "leases",
            Kind::ConfigMap => "configmaps",
            Kind::Endpoints => "endpoints",
        }
    }

    /// The object `namespace/name` of this kind, holding `record` if given (a Lease without a
    /// record has an empty spec, the others no annotation).
    pub(crate) fn object(
        self,
        namespace: &str,
        name: &str,
        record: Option<&LeaderElectionRecord>,
    ) -> Value {
        let metadata = json!({ "name": name, "namespace": namespace });
        match self {
            Kind::Lease => {
                let spec =
                    record.map_or_else(LeaseSpec::default, LeaderElectionRecord::to_lease_spec);
                json!({
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": metadata,
                    "spec": serde_json::to_value(spec).expect("lease spec"),
                })
            }
            Kind::ConfigMap | Kind::Endpoints => {
                let mut metadata = metadata;
                if let Some(record) = record {
                    metadata["annotations"] = json!({ LEADER_ANNOTATION: record.to_annotation() });
                }
                let kind = if self == Kind::ConfigMap {
                    "ConfigMap"
                } else {
                    "Endpoints"
                };
                json!({ "apiVersion": "v1", "kind": kind, "metadata": metadata })
            }
        }
    }
}

/// The record an object sent to the server holds.
pub(crate) fn record_in(object: &Value) -> LeaderElectionRecord {
    if object["kind"] == "Lease" {
        let spec: LeaseSpec =
            serde_json::from_value(object["spec"].clone()).expect("the lease spec");
        LeaderElectionRecord::from_lease_spec(&spec)
    } else {
        let annotation = object["metadata"]["annotations"][LEADER_ANNOTATION]
            .as_str()
            .expect("the leader annotation");
        LeaderElectionRecord::from_annotation(annotation).expect("a readable record")
    }
}
