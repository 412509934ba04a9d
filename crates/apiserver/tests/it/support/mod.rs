//! What the server's kube-client tests share: a request sent with its answer or its refusal,
//! and the `Status` of a refusal.

// Not every module uses every part.
#![allow(dead_code)]

use serde_json::Value;

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
