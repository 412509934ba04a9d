//! The REST layer: kube-apiserver's URLs and verbs over the [`Store`].
//!
//! One handler takes every request, checks its bearer token when the configuration has one,
//! splits its path into the resource it names, and dispatches on the verb; every failure answers
//! with a `Status` as kube-apiserver's would.

mod admin;
mod apply;
pub(crate) mod cluster;
mod coordinated_election;
mod crd;
pub(crate) use self::coordinated_election::elect_coordinated_leaders;
pub(crate) use self::crd::clean_up_deleted as clean_up_deleted_crds;
pub(crate) use self::crd::serve_stored as serve_stored_crds;
mod discovery;
mod in_flight;
pub(crate) use self::in_flight::InFlight;
mod openapi;
mod read;
mod review;
pub mod status;
mod subresource;
mod write;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::Response;

use self::status::{ApiError, json_response};
use crate::auth::BearerToken;
use crate::faults::{Fault, Faults};
use crate::kinds::subresources::subresources;
use crate::registry::Registry;
use crate::request::encode::Encoding;
use crate::request::negotiate::{IncludeObject, Shape, View, negotiate};
use crate::resource::ResourceKind;
use crate::storage::Store;

/// Settings of the REST layer.
#[derive(Debug, Clone)]
pub struct RestConfig {
    /// The largest request body accepted (kube-apiserver: 3 MiB); larger ones get 413.
    pub max_body_bytes: usize,
    /// How often a watch with `allowWatchBookmarks` gets a bookmark.
    pub bookmark_interval: Duration,
    /// A watch without `timeoutSeconds` ends after between this and twice this.
    pub min_request_timeout: Duration,
    /// Serve the fault hooks' admin endpoint (`/admin/faults/…`); off by default.
    pub admin: bool,
    /// The bearer token every request must carry (`Authorization: Bearer <token>`), over TCP and
    /// in process alike; without it a request gets 401 `Unauthorized`. All paths need it, the
    /// health endpoints (`/healthz`, `/livez`, `/readyz`) and `/version` included. None by
    /// default: no authentication. See [`crate::auth`].
    pub token: Option<BearerToken>,
    /// How many bytes of events that are ready at once a watch stream may send in one chunk.
    /// 0 (the default) sends every event in a chunk of its own, as kube-apiserver does, so
    /// clients are tested against the framing a cluster uses; a size (64 KiB, say) writes a
    /// burst of changes at once instead.
    pub watch_batch_bytes: usize,
    /// How many requests that are not long-running may be served at once, reads and writes
    /// apart (kube-apiserver's `--max-requests-inflight` 400 and
    /// `--max-mutating-requests-inflight` 200); past that a request is answered 429 with
    /// `Retry-After: 1`. 0: no cap.
    pub max_requests_inflight: usize,
    /// The cap of mutating requests (POST, PUT, PATCH, DELETE) at once; see
    /// [`max_requests_inflight`](Self::max_requests_inflight).
    pub max_mutating_requests_inflight: usize,
    /// How long a request that is not long-running (a watch, exec, attach, port-forward, proxy
    /// or log) may take, its body included, before it is answered 504 (kube-apiserver's
    /// `--request-timeout`, 60 s).
    pub request_timeout: Duration,
}

impl Default for RestConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 3 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(60),
            min_request_timeout: Duration::from_secs(1800),
            admin: false,
            token: None,
            watch_batch_bytes: 0,
            request_timeout: Duration::from_secs(60),
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
        }
    }
}

/// What every request handler shares.
#[derive(Debug)]
pub struct App {
    /// The objects.
    pub store: Store,
    /// The served resources.
    pub registry: Registry,
    /// Settings.
    pub config: RestConfig,
    /// `host:port` the server listens on, for discovery.
    pub address: String,
    /// The fault hooks.
    pub faults: Faults,
    /// The verbs asked for on each resource.
    pub accesses: crate::access::Accesses,
    /// Partitions, restarts and shutdown, for the admin endpoint's partition and restart.
    pub(crate) link: std::sync::Arc<tokio::sync::watch::Sender<crate::link::Link>>,
    /// The lock under which Services get cluster IPs and node ports.
    pub(crate) services: crate::kinds::strategy::ServiceAllocations,
    /// The key service account tokens are signed with.
    pub(crate) tokens: review::TokenKey,
    /// The places of requests in flight.
    pub(crate) in_flight: in_flight::InFlight,
}

/// What a resource URL names.
#[derive(Debug)]
enum Target {
    /// `/…/<plural>` or `/…/namespaces/<ns>/<plural>`.
    Collection {
        kind: ResourceKind,
        namespace: Option<String>,
    },
    /// `/…/<plural>/<name>[/<subresource>]`, namespaced or not.
    Item {
        kind: ResourceKind,
        namespace: String,
        name: String,
        subresource: Option<String>,
    },
}

/// The query parameters (the last of a repeated one wins).
pub(crate) type Query = HashMap<String, String>;

fn parse_query(query: Option<&str>) -> Query {
    query
        .map(|query| {
            form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

/// Splits the path under a group version into what it names.
fn parse_target(
    registry: &Registry,
    group: &str,
    version: &str,
    segments: &[&str],
) -> Result<Target, ApiError> {
    let find = |plural: &str| registry.find(group, version, plural);
    if let ["namespaces", namespace, plural, rest @ ..] = segments
        && let Some(kind) = find(plural).filter(|kind| kind.namespaced)
    {
        let namespace = namespace.to_string();
        return match rest {
            [] => Ok(Target::Collection {
                kind,
                namespace: Some(namespace),
            }),
            [name] => Ok(Target::Item {
                kind,
                namespace,
                name: name.to_string(),
                subresource: None,
            }),
            [name, subresource] => Ok(Target::Item {
                kind,
                namespace,
                name: name.to_string(),
                subresource: Some(subresource.to_string()),
            }),
            _ => Err(ApiError::not_found_path()),
        };
    }
    let (plural, rest) = segments
        .split_first()
        .ok_or_else(ApiError::not_found_path)?;
    let kind = find(plural).ok_or_else(ApiError::not_found_path)?;
    match rest {
        [] => Ok(Target::Collection {
            kind,
            namespace: None,
        }),
        [name] if !kind.namespaced => Ok(Target::Item {
            kind,
            namespace: String::new(),
            name: name.to_string(),
            subresource: None,
        }),
        [name, subresource] if !kind.namespaced => Ok(Target::Item {
            kind,
            namespace: String::new(),
            name: name.to_string(),
            subresource: Some(subresource.to_string()),
        }),
        _ => Err(ApiError::not_found_path()),
    }
}

/// The one handler of every request.
pub async fn handle(State(app): State<Arc<App>>, request: Request) -> Response {
    // Before anything else, the body included, as kube-apiserver's authentication filter.
    if let Some(token) = &app.config.token
        && !token.authenticates(request.headers())
    {
        return ApiError::unauthorized().response();
    }
    let query = parse_query(request.uri().query());
    let answer = if is_long_running(request.uri().path(), &query) || is_health(request.uri().path())
    {
        route(&app, request, query).await
    } else {
        let Ok(_place) = app.in_flight.admit(request.method()) else {
            return too_many_requests();
        };
        // A slow body counts too: a client that declares more than it sends is answered.
        let answer = route(&app, request, query);
        match tokio::time::timeout(app.config.request_timeout, answer).await {
            Ok(answer) => answer,
            Err(_) => Err(ApiError::request_timeout()),
        }
    };
    match answer {
        Ok(response) => response,
        Err(error) => error.response(),
    }
}

/// kube-apiserver's answer past its in-flight cap: plain text, with `Retry-After`.
pub(crate) fn too_many_requests() -> Response {
    let mut response = Response::new(axum::body::Body::from(
        "Too many requests, please try again later.\n",
    ));
    *response.status_mut() = axum::http::StatusCode::TOO_MANY_REQUESTS;
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from_static("1"),
    );
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Whether `path` is a health endpoint: never turned away, never timed out.
pub(crate) fn is_health(path: &str) -> bool {
    matches!(path, "/healthz" | "/livez" | "/readyz")
}

/// Whether a request for `path` with `query` may run for as long as it needs (kube-apiserver's
/// long-running check): a watch, or a pod's `exec`, `attach`, `portforward`, `log` or a `proxy`.
fn is_long_running(path: &str, query: &Query) -> bool {
    let watch_param = is_true(query, "watch");
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let watch_path = matches!(
        segments.as_slice(),
        ["api", _, "watch", ..] | ["apis", _, _, "watch", ..]
    );
    let streaming = matches!(
        segments.last(),
        Some(&("exec" | "attach" | "portforward" | "log"))
    ) || segments.contains(&"proxy");
    watch_param || watch_path || streaming
}

async fn route(app: &Arc<App>, request: Request, query: Query) -> Result<Response, ApiError> {
    let method = request.method().clone();
    let path = request.uri().path().trim_end_matches('/').to_string();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let get_only = |body: serde_json::Value| -> Result<Response, ApiError> {
        if method == Method::GET {
            Ok(json_response(200, &body))
        } else {
            Err(ApiError::method_not_allowed(method.as_str()))
        }
    };
    match segments.as_slice() {
        ["healthz" | "livez" | "readyz"] => Ok(plain_ok()),
        ["admin", "faults", action] if app.config.admin => {
            if method == Method::POST {
                admin::handle(app, action, &query)
            } else {
                Err(ApiError::method_not_allowed(method.as_str()))
            }
        }
        ["version"] => get_only(discovery::version()),
        ["api" | "apis"] if method == Method::GET => {
            let core = segments == ["api"];
            discovery::root(&app.registry, core, &app.address, request.headers())
        }
        ["api", "v1"] => get_only(
            discovery::resources(&app.registry, "", "v1").ok_or_else(ApiError::not_found_path)?,
        ),
        ["apis", group] => {
            get_only(discovery::group(&app.registry, group).ok_or_else(ApiError::not_found_path)?)
        }
        ["apis", group, version] => get_only(
            discovery::resources(&app.registry, group, version)
                .ok_or_else(ApiError::not_found_path)?,
        ),
        ["openapi", "v2"] if method == Method::GET => Ok(openapi::v2(request.headers())),
        ["openapi", "v3"] => get_only(openapi::index(&app.registry)),
        ["openapi", "v3", "api", version] => get_only(
            openapi::group_version(&app.registry, "", version)
                .ok_or_else(ApiError::not_found_path)?,
        ),
        ["openapi", "v3", "apis", group, version] => get_only(
            openapi::group_version(&app.registry, group, version)
                .ok_or_else(ApiError::not_found_path)?,
        ),
        ["api", "v1", rest @ ..] => {
            let target = parse_target(&app.registry, "", "v1", rest)?;
            dispatch(app, target, query, request).await
        }
        ["apis", group, version, rest @ ..] => {
            let target = parse_target(&app.registry, group, version, rest)?;
            dispatch(app, target, query, request).await
        }
        _ => Err(ApiError::not_found_path()),
    }
}

fn plain_ok() -> Response {
    let mut response = Response::new(Body::from("ok"));
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Notes the access an RBAC authorizer would check: the verb (a POST to a subresource is a
/// `create`) on the resource, or on its subresource when the resource has one of that name.
fn note_access(
    app: &App,
    target: &Target,
    method: &Method,
    verb: &'static str,
    headers: &axum::http::HeaderMap,
) {
    let (kind, subresource) = match target {
        Target::Collection { kind, .. } => (kind, None),
        Target::Item {
            kind, subresource, ..
        } => (kind, subresource.as_deref()),
    };
    let verb = match (verb, subresource, method) {
        ("", Some(_), &Method::POST) => "create",
        ("", _, _) => return,
        (verb, _, _) => verb,
    };
    let known = subresource.is_none_or(|name| subresources(kind).iter().any(|s| s.name == name));
    if known {
        let user = headers
            .get("impersonate-user")
            .and_then(|user| user.to_str().ok());
        app.accesses
            .record(user, verb, &kind.group, &kind.plural, subresource);
    }
}

/// A boolean query parameter as kube-apiserver reads one: present and anything but `false` or
/// `0` (in any case) is true, even empty.
fn is_true(query: &Query, name: &str) -> bool {
    query
        .get(name)
        .is_some_and(|value| !value.eq_ignore_ascii_case("false") && value != "0")
}

async fn dispatch(
    app: &Arc<App>,
    target: Target,
    query: Query,
    request: Request,
) -> Result<Response, ApiError> {
    let method = request.method().clone();
    let (verb, kind) = match &target {
        Target::Collection { kind, .. } => (
            match method {
                Method::GET if is_true(&query, "watch") => "watch",
                Method::GET => "list",
                Method::POST => "create",
                Method::DELETE => "deletecollection",
                _ => "",
            },
            kind,
        ),
        Target::Item { kind, .. } => (
            match method {
                Method::GET => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            },
            kind,
        ),
    };
    if !verb.is_empty() && !crate::kinds::subresources::verbs(kind).contains(&verb) {
        return Err(ApiError::method_not_allowed(method.as_str()));
    }
    note_access(app, &target, &method, verb, request.headers());
    match app.faults.take(verb, &kind.plural) {
        Some(Fault::Delay(delay)) => tokio::time::sleep(delay).await,
        Some(fault) => return Err(ApiError::injected(fault)),
        None => {}
    }
    let shape = match verb {
        "list" | "deletecollection" => Shape::List,
        "watch" => Shape::Watch,
        _ => Shape::Object,
    };
    // Protobuf answers for built-in kinds, except watches, which stream JSON.
    let protobuf = shape != Shape::Watch && crate::request::encode::protobuf_capable(kind);
    let negotiated = negotiate(request.headers(), shape, protobuf)?;
    let include = match negotiated.view {
        View::Table => IncludeObject::parse(query.get("includeObject").map(String::as_str))?,
        _ => IncludeObject::Metadata,
    };
    match target {
        Target::Collection { kind, namespace } => {
            let encoding = Encoding {
                negotiated,
                kind: &kind,
                include,
            };
            match method {
                Method::GET if verb == "watch" => {
                    app.faults.watch_admitted().await;
                    read::watch(app, &encoding, namespace.as_deref(), &query)
                }
                Method::GET => read::list(app, &encoding, namespace.as_deref(), &query).await,
                Method::POST => {
                    let namespace = namespace.unwrap_or_default();
                    if kind.namespaced && namespace.is_empty() {
                        return Err(ApiError::method_not_allowed("create"));
                    }
                    write::create(app, &encoding, &namespace, &query, request).await
                }
                Method::DELETE => {
                    write::delete_collection(app, &encoding, namespace.as_deref(), &query, request)
                        .await
                }
                other => Err(ApiError::method_not_allowed(other.as_str())),
            }
        }
        Target::Item {
            kind,
            namespace,
            name,
            subresource,
        } => {
            let encoding = Encoding {
                negotiated,
                kind: &kind,
                include,
            };
            let status_only = match subresource.as_deref() {
                None => false,
                Some("status") if kind.status_subresource => true,
                Some(other) => {
                    if !subresources(&kind).iter().any(|known| known.name == other) {
                        return Err(ApiError::not_found_path());
                    }
                    let item = write::Item {
                        namespace: &namespace,
                        name: &name,
                        status_only: false,
                        subresource: other,
                    };
                    return subresource::serve(app, &encoding, item, other, &query, request).await;
                }
            };
            let item = write::Item {
                namespace: &namespace,
                name: &name,
                status_only,
                subresource: if status_only { "status" } else { "" },
            };
            match method {
                Method::GET => read::get(app, &encoding, &namespace, &name).await,
                Method::PUT => write::update(app, &encoding, item, &query, request).await,
                Method::PATCH => write::patch(app, &encoding, item, &query, request).await,
                Method::DELETE if !status_only => {
                    write::delete(app, &encoding, item, &query, request).await
                }
                other => Err(ApiError::method_not_allowed(other.as_str())),
            }
        }
    }
}
