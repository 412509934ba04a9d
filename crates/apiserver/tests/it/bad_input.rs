//! Bad requests get the right 4xx `Status`, and the server keeps serving with nothing lost.

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use kube::{Client, Config};

async fn server() -> (ApiServer, Client) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
    (server, client)
}

/// Sends a request and returns the `Status` of its refusal.
async fn refusal(client: &Client, request: http::Request<Vec<u8>>) -> Box<kube::core::Status> {
    match client.request_text(request).await {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A GET over a plain HTTP/1.1 connection: the status code and the body.
async fn raw_get(server: &ApiServer, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.address())
        .await
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response[9..12].parse().unwrap();
    let body = response.split_once("\r\n\r\n").unwrap().1.to_string();
    (code, body)
}

fn post(path: &str, body: impl Into<Vec<u8>>) -> http::Request<Vec<u8>> {
    http::Request::post(path)
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap()
}

#[tokio::test]
async fn each_bad_request_gets_its_status_and_nothing_is_lost() {
    let (server, client) = server().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    client
        .request_text(post(configmaps, r#"{"metadata":{"name":"kept"}}"#))
        .await
        .unwrap();
    let version = server.store().resource_version();

    let malformed = refusal(&client, post(configmaps, "{\"metadata\": {")).await;
    assert_eq!(
        (malformed.code, malformed.reason.as_str()),
        (400, "BadRequest")
    );

    let not_an_object = refusal(&client, post(configmaps, "[1, 2]")).await;
    assert_eq!(not_an_object.code, 400);

    let huge = format!(
        r#"{{"metadata":{{"name":"huge"}},"data":{{"x":"{}"}}}}"#,
        "a".repeat(3 * 1024 * 1024)
    );
    let too_large = refusal(&client, post(configmaps, huge)).await;
    assert_eq!(
        (too_large.code, too_large.reason.as_str()),
        (413, "RequestEntityTooLarge")
    );

    // Under the body limit but over etcd's: a Lease, whose fields have no length limit.
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let beyond_etcd = format!(
        r#"{{"metadata":{{"name":"huge"}},"spec":{{"holderIdentity":"{}"}}}}"#,
        "a".repeat(2 * 1024 * 1024)
    );
    let too_large_for_etcd = refusal(&client, post(leases, beyond_etcd)).await;
    assert_eq!(
        (
            too_large_for_etcd.code,
            too_large_for_etcd.reason.as_str(),
            too_large_for_etcd.message.as_str()
        ),
        (500, "", "etcdserver: request is too large")
    );

    let wrong_version = refusal(
        &client,
        post(
            configmaps,
            r#"{"apiVersion":"apps/v1","metadata":{"name":"x"}}"#,
        ),
    )
    .await;
    assert_eq!(wrong_version.code, 400);
    assert_eq!(
        wrong_version.message,
        "the API version in the data (apps/v1) does not match the expected API version (v1)"
    );
    let wrong_kind = refusal(
        &client,
        post(configmaps, r#"{"kind":"Secret","metadata":{"name":"x"}}"#),
    )
    .await;
    assert_eq!(wrong_kind.code, 400);

    let unknown = refusal(
        &client,
        http::Request::get("/api/v1/namespaces/default/widgets")
            .body(Vec::new())
            .unwrap(),
    )
    .await;
    assert_eq!((unknown.code, unknown.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        unknown.message,
        "the server could not find the requested resource"
    );

    let bad_selector = refusal(
        &client,
        http::Request::get(format!("{configmaps}?labelSelector=app%20in%20web"))
            .body(Vec::new())
            .unwrap(),
    )
    .await;
    assert_eq!(
        (bad_selector.code, bad_selector.reason.as_str()),
        (400, "BadRequest")
    );

    let bad_field = refusal(
        &client,
        http::Request::get(format!("{configmaps}?fieldSelector=spec.x%3Dy"))
            .body(Vec::new())
            .unwrap(),
    )
    .await;
    assert_eq!(bad_field.code, 400);

    let not_allowed = refusal(
        &client,
        http::Request::put(configmaps).body(b"{}".to_vec()).unwrap(),
    )
    .await;
    assert_eq!(
        (not_allowed.code, not_allowed.reason.as_str()),
        (405, "MethodNotAllowed")
    );

    let bad_patch_type = refusal(
        &client,
        http::Request::patch(format!("{configmaps}/kept"))
            .header("content-type", "text/plain")
            .body(b"{}".to_vec())
            .unwrap(),
    )
    .await;
    assert_eq!(bad_patch_type.code, 415);

    let failed_test = refusal(
        &client,
        http::Request::patch(format!("{configmaps}/kept"))
            .header("content-type", "application/json-patch+json")
            .body(br#"[{"op":"test","path":"/metadata/name","value":"other"}]"#.to_vec())
            .unwrap(),
    )
    .await;
    assert_eq!(
        (failed_test.code, failed_test.reason.as_str()),
        (422, "Invalid")
    );

    let operation = r#"{"op":"test","path":"/metadata/name","value":"kept"}"#;
    let operations = format!("[{}]", vec![operation; 10_001].join(","));
    let too_many_operations = refusal(
        &client,
        http::Request::patch(format!("{configmaps}/kept"))
            .header("content-type", "application/json-patch+json")
            .body(operations.into_bytes())
            .unwrap(),
    )
    .await;
    assert_eq!(
        (
            too_many_operations.code,
            too_many_operations.reason.as_str(),
            too_many_operations.message.as_str()
        ),
        (
            413,
            "RequestEntityTooLarge",
            "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
        )
    );

    let invalid_name = refusal(
        &client,
        post(configmaps, r#"{"metadata":{"name":"Bad_Name"}}"#),
    )
    .await;
    assert_eq!(
        (invalid_name.code, invalid_name.reason.as_str()),
        (422, "Invalid")
    );

    let options = refusal(
        &client,
        http::Request::get(format!("{configmaps}?resourceVersionMatch=Exact"))
            .body(Vec::new())
            .unwrap(),
    )
    .await;
    assert_eq!((options.code, options.reason.as_str()), (422, "Invalid"));

    // kube-client retries a 504 with backoff (as it would against kube-apiserver, which answers
    // the same), so this one is asked over a plain connection.
    let (code, body) = raw_get(
        &server,
        &format!("{configmaps}?watch=true&resourceVersion=999999"),
    )
    .await;
    assert_eq!(code, 504);
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "Timeout");
    assert_eq!(
        status["message"],
        format!("Timeout: Too large resource version: 999999, current: {version}")
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );

    // Nothing was written by any refused request, and the server still serves.
    assert_eq!(server.store().resource_version(), version);
    let kept = client
        .request_text(
            http::Request::get(format!("{configmaps}/kept"))
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(kept.contains("\"name\":\"kept\""));
}

#[tokio::test]
async fn lists_page_with_limit_and_continue() {
    let (_server, client) = server().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    for i in 0..5 {
        client
            .request_text(post(
                configmaps,
                format!(r#"{{"metadata":{{"name":"cm-{i}"}}}}"#),
            ))
            .await
            .unwrap();
    }
    let mut names = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = client
            .request_text(
                http::Request::get(format!("{configmaps}?limit=2&continue={token}"))
                    .body(Vec::new())
                    .unwrap(),
            )
            .await
            .unwrap();
        let page: serde_json::Value = serde_json::from_str(&page).unwrap();
        pages += 1;
        for item in page["items"].as_array().unwrap() {
            names.push(item["metadata"]["name"].as_str().unwrap().to_string());
        }
        match page["metadata"]["continue"].as_str() {
            Some(next) => {
                assert!(page["metadata"]["remainingItemCount"].as_u64().unwrap() > 0);
                token = next.to_string();
            }
            None => {
                assert!(page["metadata"].get("remainingItemCount").is_none());
                break;
            }
        }
    }
    assert_eq!(pages, 3);
    // Every namespace also holds the cluster's `kube-root-ca.crt`, listed last.
    assert_eq!(
        names,
        ["cm-0", "cm-1", "cm-2", "cm-3", "cm-4", "kube-root-ca.crt"]
    );
}

/// Bodies the request_body fuzz target found to panic a handler (the connection dropped with no
/// answer): a patch whose result is not an object, a namespace whose `spec` is not an object,
/// and a namespace `status` that is not an object. Each gets its answer now, and the data is
/// unchanged.
#[tokio::test]
async fn bodies_that_panicked_a_handler_are_answered() {
    let (server, client) = server().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    client
        .request_text(post(configmaps, r#"{"metadata":{"name":"kept"}}"#))
        .await
        .unwrap();
    let version = server.store().resource_version();
    let patch = |content_type: &str, body: &str| {
        http::Request::patch(format!("{configmaps}/kept"))
            .header("content-type", content_type)
            .body(body.as_bytes().to_vec())
            .unwrap()
    };

    let scalar = refusal(&client, patch("application/merge-patch+json", "5")).await;
    assert_eq!((scalar.code, scalar.reason.as_str()), (400, "BadRequest"));
    let no_metadata = refusal(
        &client,
        patch(
            "application/json-patch+json",
            r#"[{"op":"replace","path":"/metadata","value":"x"}]"#,
        ),
    )
    .await;
    assert_eq!(no_metadata.code, 400);
    let spec = refusal(
        &client,
        post(
            "/api/v1/namespaces",
            r#"{"metadata":{"name":"team-b"},"spec":"x"}"#,
        ),
    )
    .await;
    assert_eq!((spec.code, spec.reason.as_str()), (400, "BadRequest"));
    assert_eq!(server.store().resource_version(), version);

    client
        .request_text(post("/api/v1/namespaces", r#"{"metadata":{"name":"odd"}}"#))
        .await
        .unwrap();
    let status = refusal(
        &client,
        http::Request::put("/api/v1/namespaces/odd/status")
            .header("content-type", "application/json")
            .body(br#"{"metadata":{"name":"odd"},"status":"Terminating"}"#.to_vec())
            .unwrap(),
    )
    .await;
    assert_eq!((status.code, status.reason.as_str()), (400, "BadRequest"));
    let deleted = client
        .request_text(
            http::Request::delete("/api/v1/namespaces/odd")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let deleted: serde_json::Value = serde_json::from_str(&deleted).unwrap();
    assert_eq!(deleted["status"]["phase"], "Terminating");
    let kept = client
        .request_text(
            http::Request::get(format!("{configmaps}/kept"))
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(kept.contains("\"name\":\"kept\""));
}

/// A body that breaks off (an invalid chunk in a chunked body) is a 400 saying so, not the 413
/// of a body over the size limit, and the server keeps serving.
#[tokio::test]
async fn a_broken_body_is_a_bad_request_not_too_large() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (server, client) = server().await;
    let mut stream = tokio::net::TcpStream::connect(server.address())
        .await
        .unwrap();
    let request = "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: localhost\r\n\
                   Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
                   5\r\n{\"met\r\nzz-not-a-chunk-size\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 400"), "{response}");
    assert!(
        response.contains("the request body could not be read"),
        "{response}"
    );
    // Still serving.
    client
        .request_text(post(
            "/api/v1/namespaces/default/configmaps",
            r#"{"metadata":{"name":"after"}}"#,
        ))
        .await
        .unwrap();
}

/// A request with one malformed option or content type.
struct Malformed {
    method: &'static str,
    path: &'static str,
    content_type: &'static str,
    accept: &'static str,
    body: &'static [u8],
    code: u16,
    reason: &'static str,
    message: &'static str,
}

#[tokio::test]
async fn malformed_options_and_content_types_change_nothing() {
    let (server, client) = server().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    client
        .request_text(post(
            configmaps,
            r#"{"metadata":{"name":"kept"},"data":{"k":"v"}}"#,
        ))
        .await
        .unwrap();
    let version = server.store().resource_version();
    let item = "/api/v1/namespaces/default/configmaps/kept";
    let json = "application/json";
    let merge = "application/merge-patch+json";
    let apply = "application/apply-patch+yaml";
    let replace = br#"{"metadata":{"name":"kept"},"data":{"k":"changed"}}"#;
    let cases = [
        Malformed {
            method: "PUT",
            path: "/api/v1/namespaces/default/configmaps/kept?dryRun=Bogus",
            content_type: json,
            accept: json,
            body: replace,
            code: 422,
            reason: "Invalid",
            message: "dryRun: Unsupported value: [\"Bogus\"]",
        },
        Malformed {
            method: "PATCH",
            path: "/api/v1/namespaces/default/configmaps/kept?fieldValidation=Bogus",
            content_type: merge,
            accept: json,
            body: br#"{"data":{"k":"changed"}}"#,
            code: 422,
            reason: "Invalid",
            message: "fieldValidation: Unsupported value: \"Bogus\"",
        },
        Malformed {
            method: "PATCH",
            path: "/api/v1/namespaces/default/configmaps/kept?force=true",
            content_type: merge,
            accept: json,
            body: br#"{"data":{"k":"changed"}}"#,
            code: 422,
            reason: "Invalid",
            message: "force: Forbidden",
        },
        Malformed {
            method: "PATCH",
            path: "/api/v1/namespaces/default/configmaps/kept",
            content_type: apply,
            accept: json,
            body: br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kept"},"data":{"k":"changed"}}"#,
            code: 422,
            reason: "Invalid",
            message: "fieldManager: Required value",
        },
        Malformed {
            method: "PATCH",
            path: "/api/v1/namespaces/default/configmaps/kept?fieldManager=x",
            content_type: apply,
            accept: json,
            body: b"data: [unclosed",
            code: 400,
            reason: "BadRequest",
            message: "error decoding YAML",
        },
        Malformed {
            method: "PATCH",
            path: "/api/v1/namespaces/default/configmaps/kept?fieldManager=x",
            content_type: apply,
            accept: json,
            body: br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kept"},"data":{"k":7}}"#,
            code: 500,
            reason: "",
            message: "failed to create typed patch object",
        },
        Malformed {
            method: "PUT",
            path: "/api/v1/namespaces/default/configmaps/kept",
            content_type: "application/vnd.kubernetes.protobuf",
            accept: json,
            body: b"k8s\x00\x0a\xff\xff\xff\xff\x0f",
            code: 400,
            reason: "BadRequest",
            message: "",
        },
        Malformed {
            method: "PUT",
            path: "/api/v1/namespaces/default/configmaps/kept",
            content_type: "text/plain",
            accept: json,
            body: replace,
            code: 415,
            reason: "UnsupportedMediaType",
            message: "the body of the request was in an unknown format",
        },
        Malformed {
            method: "GET",
            path: item,
            content_type: json,
            accept: "application/json;as=Table;v=v9;g=meta.k8s.io",
            body: b"",
            code: 406,
            reason: "NotAcceptable",
            message: "",
        },
        Malformed {
            method: "PUT",
            path: "/api/v1/namespaces/default/configmaps/kept?fieldValidation=Strict",
            content_type: json,
            accept: json,
            body: br#"{"metadata":{"name":"kept"},"data":{"k":"changed"},"extra":1}"#,
            code: 400,
            reason: "BadRequest",
            message: "strict decoding error: unknown field \"extra\"",
        },
        Malformed {
            method: "DELETE",
            path: "/api/v1/namespaces/default/configmaps/kept?gracePeriodSeconds=abc",
            content_type: json,
            accept: json,
            body: b"",
            code: 400,
            reason: "BadRequest",
            message: "strconv.ParseInt: parsing \"abc\": invalid syntax",
        },
        Malformed {
            method: "GET",
            path: "/api/v1/namespaces/default/configmaps?limit=many",
            content_type: json,
            accept: json,
            body: b"",
            code: 400,
            reason: "BadRequest",
            message: "strconv.ParseInt: parsing \"many\": invalid syntax",
        },
        Malformed {
            method: "GET",
            path: "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=99999999999999999999",
            content_type: json,
            accept: json,
            body: b"",
            code: 400,
            reason: "BadRequest",
            message: "strconv.ParseInt: parsing \"99999999999999999999\": value out of range",
        },
        Malformed {
            method: "GET",
            path: "/api/v1/namespaces/default/configmaps?resourceVersionMatch=Bogus",
            content_type: json,
            accept: json,
            body: b"",
            code: 422,
            reason: "Invalid",
            message: "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\"]",
        },
        Malformed {
            method: "PUT",
            path: item,
            content_type: json,
            accept: json,
            body: br#"{"metadata":{"name":"kept","uid":"another-uid"},"data":{"k":"changed"}}"#,
            code: 409,
            reason: "Conflict",
            message: "Operation cannot be fulfilled on configmaps \"kept\": StorageError: invalid object, Code: 4, Key: /registry/configmaps/default/kept, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: another-uid, UID in object meta: ",
        },
        Malformed {
            method: "PATCH",
            path: item,
            content_type: merge,
            accept: json,
            body: br#"{"metadata":{"labels":{"bad key!":"v"},"finalizers":["mine"]}}"#,
            code: 422,
            reason: "Invalid",
            message: "ConfigMap \"kept\" is invalid: [metadata.labels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), metadata.finalizers[0]: Invalid value: \"mine\": name is neither a standard finalizer name nor is it fully qualified]",
        },
        Malformed {
            method: "PATCH",
            path: item,
            content_type: merge,
            accept: json,
            body: br#"{"data":{"bad key":"v"}}"#,
            code: 422,
            reason: "Invalid",
            message: "ConfigMap \"kept\" is invalid: data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
        },
        Malformed {
            method: "PATCH",
            path: item,
            content_type: merge,
            accept: json,
            body: br#"{"metadata":{"uid":"another-uid"},"data":{"k":"changed"}}"#,
            code: 422,
            reason: "Invalid",
            message: "ConfigMap \"kept\" is invalid: metadata.uid: Invalid value: \"another-uid\": field is immutable",
        },
        Malformed {
            method: "DELETE",
            path: item,
            content_type: json,
            accept: json,
            body: br#"{"preconditions":{"uid":"another-uid"}}"#,
            code: 409,
            reason: "Conflict",
            message: "Operation cannot be fulfilled on ConfigMap \"kept\": the UID in the precondition (another-uid) does not match the UID in record (",
        },
        Malformed {
            method: "DELETE",
            path: item,
            content_type: json,
            accept: json,
            body: br#"{"preconditions":{"resourceVersion":"1"}}"#,
            code: 409,
            reason: "Conflict",
            message: "Operation cannot be fulfilled on ConfigMap \"kept\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (",
        },
    ];
    for case in &cases {
        let request = http::Request::builder()
            .method(case.method)
            .uri(case.path)
            .header("content-type", case.content_type)
            .header("accept", case.accept)
            .body(case.body.to_vec())
            .unwrap();
        let status = refusal(&client, request).await;
        let what = format!("{} {} ({})", case.method, case.path, case.content_type);
        assert_eq!(status.code, case.code, "{what}: {status:?}");
        assert_eq!(status.reason, case.reason, "{what}: {status:?}");
        assert!(
            status.message.contains(case.message),
            "{what}: {:?} does not say {:?}",
            status.message,
            case.message
        );
    }
    assert_eq!(
        server.store().resource_version(),
        version,
        "nothing was written"
    );
    let kept = client
        .request_text(http::Request::get(item).body(Vec::new()).unwrap())
        .await
        .unwrap();
    let kept: serde_json::Value = serde_json::from_str(&kept).unwrap();
    assert_eq!(kept["data"]["k"], "v");
}

#[tokio::test]
async fn a_negative_limit_lists_everything_and_any_watch_timeout_is_served() {
    let (server, client) = server().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    for name in ["a", "b"] {
        let body = format!(r#"{{"metadata":{{"name":"{name}"}}}}"#);
        client.request_text(post(configmaps, body)).await.unwrap();
    }
    let (code, body) = raw_get(&server, &format!("{configmaps}?limit=-1")).await;
    assert_eq!(code, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    // `kube-root-ca.crt` is there too.
    assert_eq!(list["items"].as_array().unwrap().len(), 3, "{body}");
    assert!(list["metadata"].get("continue").is_none(), "{body}");

    // The largest timeout there is starts a watch that stays open (once it panicked the
    // handler); a negative one ends it at once.
    use futures::{AsyncBufReadExt, AsyncReadExt};
    let watch = |query: &str| {
        http::Request::get(format!("{configmaps}?watch=1&{query}"))
            .body(Vec::new())
            .unwrap()
    };
    let mut longest = Box::pin(
        client
            .request_stream(watch("timeoutSeconds=9223372036854775807"))
            .await
            .unwrap(),
    );
    let mut line = String::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        longest.read_line(&mut line),
    )
    .await;
    assert!(
        read.is_ok_and(|read| read.is_ok()),
        "the watch sends its initial events"
    );
    assert!(line.contains("\"ADDED\""), "{line}");
    let mut ended = Box::pin(
        client
            .request_stream(watch("timeoutSeconds=-5"))
            .await
            .unwrap(),
    );
    let mut rest = String::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        ended.read_to_string(&mut rest),
    )
    .await;
    assert!(
        read.is_ok_and(|read| read.is_ok()),
        "a negative timeout ends the watch at once"
    );
}
