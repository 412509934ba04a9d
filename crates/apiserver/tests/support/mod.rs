//! What the custom resource tests share: a request sent through kube-client with its answer
//! or its refusal.

use serde_json::Value;

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
