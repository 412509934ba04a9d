//! What the server's kube-client tests share: a server called in process, a request sent with
//! its answer or its refusal, and the `Status` of a refusal.

// Not every module uses every part.
#![allow(dead_code)]

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use serde_json::Value;

/// A server and a kube-client that calls it in process ([`ApiServer::service`]). Under a paused
/// clock (`#[tokio::test(start_paused = true)]`) the server's own controllers (namespace and CRD
/// cleanup, garbage collection) and the test's waits for them run on virtual time: a test that
/// polls for their work takes no real time, and no request's socket I/O moves the clock.
pub async fn in_process() -> (ApiServer, kube::Client) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = kube::Client::new(server.service(), "default");
    (server, client)
}

/// The `Status` of an API error (a failure of any other kind fails the test).
pub fn api_error(error: kube::Error) -> Box<kube::core::Status> {
    match error {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Sends a request; the object answered, or the refusal's `Status`.
pub async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Value,
) -> Result<Value, Box<kube::core::Status>> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    match client.request_text(request).await {
        Ok(text) => Ok(serde_json::from_str(&text).unwrap()),
        Err(kube::Error::Api(status)) => Err(status),
        Err(other) => panic!("{other}"),
    }
}
