//! The server's security defaults: the bearer token (over TCP, through kube-client and in
//! process), the request body cap, and the token kept out of every Debug output and answer.

use axum::body::Body;
use ctrlkit_apiserver::rest::RestConfig;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig, BearerToken};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::{Client, Config};
use serde_json::{Value, json};
use tower_service::Service;

const TOKEN: &str = "c2VjcmV0LXRva2VuLWZvci10ZXN0cw";

/// What kube-apiserver answers an unauthenticated request.
fn unauthorized_status() -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    })
}

async fn server_with(rest: RestConfig) -> ApiServer {
    let config = ApiServerConfig {
        rest,
        ..ApiServerConfig::default()
    };
    ApiServer::start(config).await.unwrap()
}

async fn server() -> ApiServer {
    server_with(RestConfig {
        token: Some(BearerToken::new(TOKEN).unwrap()),
        ..RestConfig::default()
    })
    .await
}

/// A kube-client over TCP presenting `token`, if any.
fn client(server: &ApiServer, token: Option<&str>) -> Client {
    let mut config = Config::new(server.url().parse().unwrap());
    config.auth_info.token = token.map(Into::into);
    Client::try_from(config).unwrap()
}

/// A GET over a plain HTTP/1.1 connection with `authorization` as its header, if any: the status
/// code and the body.
async fn raw_get(server: &ApiServer, path: &str, authorization: Option<&str>) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.address())
        .await
        .unwrap();
    let header = authorization.map_or(String::new(), |value| format!("Authorization: {value}\r\n"));
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{header}\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response[9..12].parse().unwrap();
    let body = response.split_once("\r\n\r\n").unwrap().1.to_string();
    (code, body)
}

fn api_error(result: Result<impl std::fmt::Debug, kube::Error>) -> Box<kube::core::Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn configmap(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        data: Some([("key".to_string(), value.to_string())].into()),
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn over_tcp_every_path_needs_the_token() {
    let server = server().await;
    let same_length_wrong = "x".repeat(TOKEN.len());
    let refused = [
        None,
        Some(format!("Bearer {same_length_wrong}")),
        Some(format!("Bearer {}", &TOKEN[..TOKEN.len() - 1])),
        Some(format!("Bearer {TOKEN}x")),
        Some("Bearer ".to_string()),
        Some(format!("Basic {TOKEN}")),
        Some(TOKEN.to_string()),
    ];
    for path in ["/healthz", "/livez", "/readyz", "/version", "/api", "/apis"]
        .into_iter()
        .chain([
            "/api/v1/namespaces",
            "/api/v1/namespaces/default/configmaps",
        ])
        .chain(["/no/such/path", "/admin/faults/clear"])
    {
        for authorization in &refused {
            let (code, body) = raw_get(&server, path, authorization.as_deref()).await;
            assert_eq!(code, 401, "{path} with {authorization:?}: {body}");
            let body: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(body, unauthorized_status(), "{path} with {authorization:?}");
        }
    }

    let bearer = format!("Bearer {TOKEN}");
    for path in [
        "/healthz",
        "/livez",
        "/readyz",
        "/version",
        "/api/v1/namespaces",
    ] {
        let (code, body) = raw_get(&server, path, Some(&bearer)).await;
        assert_eq!(code, 200, "{path}: {body}");
    }
    // The scheme in any case and extra whitespace, as kube-apiserver reads the header.
    let (code, _) = raw_get(&server, "/healthz", Some(&format!("bearer {TOKEN}  "))).await;
    assert_eq!(code, 200);
    // Authentication comes first: an unknown path with the token is a 404, not a 401.
    let (code, _) = raw_get(&server, "/no/such/path", Some(&bearer)).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn kube_client_with_the_token_is_served_and_without_it_refused() {
    let server = server().await;

    let configmaps: Api<ConfigMap> = Api::default_namespaced(client(&server, Some(TOKEN)));
    configmaps
        .create(&PostParams::default(), &configmap("settings", "1"))
        .await
        .unwrap();
    assert!(configmaps.get("settings").await.is_ok());
    let namespaces: Api<Namespace> = Api::all(client(&server, Some(TOKEN)));
    assert!(
        !namespaces
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let wrong_same_length = "y".repeat(TOKEN.len());
    for token in [None, Some(wrong_same_length.as_str()), Some("short")] {
        let configmaps: Api<ConfigMap> = Api::default_namespaced(client(&server, token));
        let status = api_error(configmaps.get("settings").await);
        assert_eq!(
            (status.code, status.reason.as_str(), status.message.as_str()),
            (401, "Unauthorized", "Unauthorized"),
            "{token:?}"
        );
        let status = api_error(
            configmaps
                .create(&PostParams::default(), &configmap("intruder", "1"))
                .await,
        );
        assert_eq!(status.code, 401, "{token:?}");
    }
    // Nothing the refused clients sent was written.
    let names: Vec<_> = configmaps
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|configmap| configmap.metadata.name)
        .collect();
    assert_eq!(names, ["kube-root-ca.crt", "settings"]);
}

#[tokio::test]
async fn the_in_process_transport_needs_the_token_too() {
    let server = server().await;
    let call = |authorization: Option<String>| {
        let mut service = server.service();
        async move {
            let mut request = axum::http::Request::get("/api/v1/namespaces");
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            let response = service.call(request.body(Body::empty()).unwrap()).await;
            let response = response.unwrap();
            let code = response.status().as_u16();
            let body = axum::body::to_bytes(Body::new(response.into_body()), 1 << 20)
                .await
                .unwrap();
            (code, serde_json::from_slice::<Value>(&body).unwrap())
        }
    };
    let (code, body) = call(None).await;
    assert_eq!((code, body), (401, unauthorized_status()));
    let (code, body) = call(Some(format!("Bearer {}", "z".repeat(TOKEN.len())))).await;
    assert_eq!((code, body), (401, unauthorized_status()));
    let (code, body) = call(Some(format!("Bearer {TOKEN}"))).await;
    assert_eq!(code, 200);
    assert_eq!(body["kind"], "NamespaceList");

    // kube-client over the in-process transport, which adds no token.
    let configmaps: Api<ConfigMap> =
        Api::default_namespaced(Client::new(server.service(), "default"));
    let status = api_error(configmaps.list(&ListParams::default()).await);
    assert_eq!((status.code, status.reason.as_str()), (401, "Unauthorized"));
}

#[tokio::test]
async fn without_a_token_nothing_is_asked_for() {
    let server = server_with(RestConfig::default()).await;
    let (code, _) = raw_get(&server, "/api/v1/namespaces", None).await;
    assert_eq!(code, 200);
    // A token presented to a server without one is ignored, as by kube-apiserver without
    // token authentication.
    let (code, _) = raw_get(&server, "/api/v1/namespaces", Some("Bearer anything")).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn request_bodies_over_the_limit_get_413() {
    assert_eq!(RestConfig::default().max_body_bytes, 3 * 1024 * 1024);
    let limit = 4096;
    let server = server_with(RestConfig {
        max_body_bytes: limit,
        token: Some(BearerToken::new(TOKEN).unwrap()),
        ..RestConfig::default()
    })
    .await;
    let client = client(&server, Some(TOKEN));
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    configmaps
        .create(&PostParams::default(), &configmap("small", "1"))
        .await
        .unwrap();

    let big = "a".repeat(limit);
    let path = "/api/v1/namespaces/default/configmaps";
    let object = serde_json::to_vec(&configmap("big", &big)).unwrap();
    let requests = [
        http::Request::post(path)
            .header("content-type", "application/json")
            .body(object.clone()),
        http::Request::put(format!("{path}/small"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&configmap("small", &big)).unwrap()),
        http::Request::patch(format!("{path}/small"))
            .header("content-type", "application/merge-patch+json")
            .body(serde_json::to_vec(&json!({"data": {"key": big}})).unwrap()),
        http::Request::delete(format!("{path}/small"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&json!({"kind": "DeleteOptions", "pad": big})).unwrap()),
    ];
    for request in requests {
        let request = request.unwrap();
        let method = request.method().clone();
        let status = api_error(client.request_text(request).await);
        assert_eq!(
            (status.code, status.reason.as_str()),
            (413, "RequestEntityTooLarge"),
            "{method}"
        );
        assert_eq!(
            status.message,
            format!("Request entity too large: limit is {limit}")
        );
    }
    // Just under the limit is accepted, and the refused writes changed nothing.
    let mut small = configmaps.get("small").await.unwrap();
    assert_eq!(small.data.as_ref().unwrap()["key"], "1");
    let overhead = serde_json::to_vec(&small).unwrap().len();
    small.data = Some([("key".to_string(), "b".repeat(limit - overhead))].into());
    assert!(serde_json::to_vec(&small).unwrap().len() <= limit);
    configmaps
        .replace("small", &PostParams::default(), &small)
        .await
        .unwrap();
    assert!(configmaps.get("big").await.is_err());

    // Without the token, the body is not even read: 401, not 413.
    let anonymous = self::client(&server, None);
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(object)
        .unwrap();
    let status = api_error(anonymous.request_text(request).await);
    assert_eq!(status.code, 401);
}

#[tokio::test]
async fn the_token_is_never_shown() {
    let token = BearerToken::new(TOKEN).unwrap();
    let rest = RestConfig {
        token: Some(token.clone()),
        admin: true,
        ..RestConfig::default()
    };
    let config = ApiServerConfig {
        rest: rest.clone(),
        ..ApiServerConfig::default()
    };
    let server = ApiServer::start(config.clone()).await.unwrap();
    let shown = [
        format!("{token:?}"),
        format!("{token:#?}"),
        format!("{rest:?}"),
        format!("{rest:#?}"),
        format!("{config:?}"),
        format!("{config:#?}"),
        format!("{server:?}"),
        format!("{:?}", server.service()),
        format!("{:?}", BearerToken::new("a b").unwrap_err()),
        BearerToken::new("a b").unwrap_err().to_string(),
    ];
    for text in &shown {
        assert!(!text.contains(TOKEN), "{text}");
    }
    assert!(format!("{config:?}").contains("BearerToken(<redacted>)"));

    // Neither a refusal nor the admin endpoint echo a token back.
    let near_miss = format!("{TOKEN}x");
    let (code, body) = raw_get(&server, "/version", Some(&format!("Bearer {near_miss}"))).await;
    assert_eq!(code, 401);
    assert!(!body.contains(TOKEN), "{body}");
    for action in ["clear", "fail?count=0&status=500", "nonsense"] {
        let client = client(&server, Some(TOKEN));
        let request = http::Request::post(format!("/admin/faults/{action}"))
            .body(Vec::new())
            .unwrap();
        let answer = match client.request_text(request).await {
            Ok(text) => text,
            Err(error) => format!("{error:?}"),
        };
        assert!(!answer.contains(TOKEN), "{action}: {answer}");
    }
}
