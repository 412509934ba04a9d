//! A CRD's conversion webhook, called as kube-apiserver calls it: a `ConversionReview` POSTed
//! over HTTPS to the webhook's `url`, its certificate checked against the CRD's `caBundle`, and
//! the answer checked before any converted object is used
//! (apiextensions-apiserver's `pkg/apiserver/conversion/webhook_converter.go`).
//!
//! Connections are kept for the next call. The messages are kube's. A webhook named by
//! `service` cannot be reached: the embedded server has no cluster network to find a Service's
//! endpoints in, so the call fails with a message that says to give a `url`.

use std::time::Duration;

use axum::http::{self, Uri};
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, pem::PemObject};
use serde_json::{Value, json};

/// How long one call may take, as kube's webhook clients allow.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest answer read from a webhook.
const MAX_RESPONSE_BYTES: usize = 256 << 20;

/// The `ConversionReview` versions the server speaks, in the order a CRD's
/// `conversionReviewVersions` is searched for one.
pub const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// Where a CRD's conversion webhook is, and how it is called.
#[derive(Debug)]
pub struct ConversionWebhook {
    /// The CRD's name, for messages.
    crd: String,
    /// Where the reviews are posted.
    target: Target,
    /// The `caBundle` as the CRD gives it (base64 of PEM), compared when the CRD changes.
    ca_bundle: String,
    /// The `ConversionReview` version sent: the first of the CRD's that the server speaks.
    review_version: Option<&'static str>,
    /// HTTPS trusting the `caBundle`'s certificates only (`None` if TLS could not be set up).
    client: Option<HttpsClient>,
}

/// The client webhooks are called with: connections kept for the next call.
type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

impl PartialEq for ConversionWebhook {
    fn eq(&self, other: &Self) -> bool {
        self.crd == other.crd
            && self.target == other.target
            && self.ca_bundle == other.ca_bundle
            && self.review_version == other.review_version
    }
}

impl Eq for ConversionWebhook {}

/// Where the webhook listens.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// `clientConfig.url`, parsed.
    Url(Uri),
    /// `clientConfig.service`, as the URL kube-apiserver would post to.
    Service(String),
    /// A `url` that does not parse as one: every call fails, saying so.
    Unparsed(String),
}

/// Why a conversion failed; its text is the message kube-apiserver answers with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConversionError(pub String);

impl ConversionWebhook {
    /// Reads a CRD's `spec.conversion.webhook` (`None` when it names no webhook).
    pub fn read(crd_name: &str, webhook: &Value) -> Option<Self> {
        let config = webhook.get("clientConfig")?;
        let target = match (config["url"].as_str(), config.get("service")) {
            (Some(url), _) => url
                .parse()
                .map_or_else(|_| Target::Unparsed(url.to_string()), Target::Url),
            (None, Some(service)) => Target::Service(format!(
                "https://{}.{}.svc:{}{}",
                service["name"].as_str().unwrap_or_default(),
                service["namespace"].as_str().unwrap_or_default(),
                service["port"].as_i64().unwrap_or(443),
                service["path"].as_str().unwrap_or_default(),
            )),
            (None, None) => return None,
        };
        let ca_bundle = config["caBundle"].as_str().unwrap_or_default().to_string();
        let review_version = webhook["conversionReviewVersions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find_map(|version| REVIEW_VERSIONS.into_iter().find(|known| *known == version));
        Some(Self {
            crd: crd_name.to_string(),
            target,
            client: https_client(&ca_bundle),
            ca_bundle,
            review_version,
        })
    }

    /// `objects` (each of `kind`) converted to `desired_api_version` by the webhook; `subject`
    /// names what is converted in messages (`group/version, Kind=Kind`).
    ///
    /// A list's objects are converted in one call (`list`), and its messages say where in the
    /// list an object was wrong, as kube's do.
    pub async fn convert(
        &self,
        subject: &str,
        desired_api_version: &str,
        objects: &[&Value],
        list: bool,
    ) -> Result<Vec<Value>, ConversionError> {
        let failed = |detail: String| {
            ConversionError(format!("conversion webhook for {subject} failed: {detail}"))
        };
        let Some(review_version) = self.review_version else {
            return Err(ConversionError(
                "no supported conversion review versions".into(),
            ));
        };
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({
            "kind": "ConversionReview",
            "apiVersion": format!("apiextensions.k8s.io/{review_version}"),
            "request": {
                "uid": uid,
                "desiredAPIVersion": desired_api_version,
                "objects": objects,
            },
        });
        let body = serde_json::to_vec(&review).map_err(|error| failed(error.to_string()))?;
        let answer = match tokio::time::timeout(CALL_TIMEOUT, self.post(body)).await {
            Ok(answer) => answer,
            Err(_) => Err(format!(
                "Post \"{}\": context deadline exceeded",
                self.url_text()
            )),
        }
        .map_err(failed)?;
        let converted = read_answer(review_version, &uid, &answer).map_err(failed)?;
        if converted.len() != objects.len() {
            return Err(ConversionError(format!(
                "conversion webhook for {subject} returned {} objects, expected {}",
                converted.len(),
                objects.len()
            )));
        }
        converted
            .into_iter()
            .zip(objects)
            .enumerate()
            .map(|(index, (converted, original))| {
                checked_object(original, converted, desired_api_version).map_err(|wrong| {
                    let what = match (wrong, list) {
                        (Wrong::Type(detail), false) => {
                            format!("invalid object at index 0: {detail}")
                        }
                        (Wrong::Object(detail), false) => format!("invalid object: {detail}"),
                        (Wrong::Metadata(detail), false) => format!("invalid metadata: {detail}"),
                        (Wrong::Type(detail) | Wrong::Object(detail), true) => {
                            format!("invalid converted object at index {index}: {detail}")
                        }
                        (Wrong::Metadata(detail), true) => {
                            format!("invalid metadata in object at index {index}: {detail}")
                        }
                    };
                    ConversionError(format!("conversion webhook for {subject} returned {what}"))
                })
            })
            .collect()
    }

    fn url_text(&self) -> String {
        match &self.target {
            Target::Url(uri) => uri.to_string(),
            Target::Service(url) | Target::Unparsed(url) => url.clone(),
        }
    }

    /// POSTs `body` to the webhook; its answer's body when it answers 2xx.
    async fn post(&self, body: Vec<u8>) -> Result<Bytes, String> {
        let post_failed =
            |detail: &dyn std::fmt::Display| format!("Post \"{}\": {detail}", self.url_text());
        let uri = match &self.target {
            Target::Url(uri) => uri,
            Target::Service(_) => {
                return Err(post_failed(
                    &"a Service cannot be reached from the embedded API server; give the webhook as clientConfig.url",
                ));
            }
            Target::Unparsed(_) => return Err(post_failed(&"not a valid URL")),
        };
        let Some(client) = &self.client else {
            return Err(post_failed(&"TLS could not be configured"));
        };
        let request = http::Request::post(uri.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*")
            .body(Full::new(Bytes::from(body)))
            .map_err(|error| post_failed(&error))?;
        let response = client
            .request(request)
            .await
            .map_err(|error| post_failed(&innermost(&error)))?;
        let status = response.status();
        let bytes = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|error| post_failed(&error))?
            .to_bytes();
        if !status.is_success() {
            return Err(if bytes.is_empty() {
                format!(
                    "the server responded with the status code {} but did not return more information",
                    status.as_u16()
                )
            } else {
                format!(
                    "an error on the server ({:?}) has prevented the request from succeeding",
                    String::from_utf8_lossy(&bytes)
                )
            });
        }
        Ok(bytes)
    }
}

/// What a failed call says: the cause at the bottom of the client's error chain, a TLS
/// failure marked `tls:` as Go marks it.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    loop {
        // An I/O error carries the connector's error inside, not as its source.
        let carried = cause
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        if let Some(tls) = carried.and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            return format!("tls: {tls}");
        }
        match carried.or_else(|| cause.source()) {
            Some(next) => cause = next,
            None => return cause.to_string(),
        }
    }
}

/// A pooled HTTPS client trusting exactly the certificates of `ca_bundle` (base64 of PEM, as
/// the CRD carries it); none when it has none, so that no certificate is trusted.
fn https_client(ca_bundle: &str) -> Option<HttpsClient> {
    let mut roots = RootCertStore::empty();
    if let Ok(pem) = base64::engine::general_purpose::STANDARD.decode(ca_bundle.trim()) {
        for certificate in CertificateDer::pem_slice_iter(&pem).flatten() {
            // A certificate rustls cannot use is left out: the handshake then fails and says so.
            let _ = roots.add(certificate);
        }
    }
    let tls = crate::tls::client_config(roots).ok()?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    Some(Client::builder(TokioExecutor::new()).build(connector))
}

/// The `convertedObjects` of a webhook's answer, checked as kube checks them.
fn read_answer(review_version: &str, uid: &str, body: &[u8]) -> Result<Vec<Value>, String> {
    let review: Value = serde_json::from_slice(body).map_err(|error| error.to_string())?;
    if review_version == "v1" {
        let (group, version) = match review["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .rsplit_once('/')
        {
            Some((group, version)) => (group.to_string(), version.to_string()),
            None => (
                String::new(),
                review["apiVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ),
        };
        let kind = review["kind"].as_str().unwrap_or_default();
        if (group.as_str(), version.as_str(), kind)
            != ("apiextensions.k8s.io", "v1", "ConversionReview")
        {
            return Err(format!(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {group}/{version}, Kind={kind}"
            ));
        }
    }
    let Some(response) = review
        .get("response")
        .filter(|response| response.is_object())
    else {
        return Err("no response provided".into());
    };
    if review_version == "v1" {
        let answered = response["uid"].as_str().unwrap_or_default();
        if answered != uid {
            return Err(format!("expected response.uid={uid:?}, got {answered:?}"));
        }
    }
    let result = &response["result"];
    let status = result["status"].as_str().unwrap_or_default();
    if status != "Success" {
        return Err(match result["message"].as_str() {
            Some(message) if !message.is_empty() => message.to_string(),
            _ => format!("response.result.status was '{status}', not 'Success'"),
        });
    }
    Ok(match response.get("convertedObjects") {
        Some(Value::Array(objects)) => objects.clone(),
        _ => Vec::new(),
    })
}

/// What was wrong with a converted object, in the three kinds kube's messages tell apart.
#[derive(Debug, PartialEq, Eq)]
enum Wrong {
    /// Not an object, or not of the desired version or the original's kind.
    Type(String),
    /// Not the same object: another name, namespace or uid.
    Object(String),
    /// Metadata that cannot be kept.
    Metadata(String),
}

/// `converted` checked against `original` (same kind, name, namespace and uid, the desired
/// version) and given `original`'s metadata with the webhook's labels and annotations, as kube
/// keeps a webhook from changing anything else of an object's metadata.
fn checked_object(original: &Value, mut converted: Value, desired: &str) -> Result<Value, Wrong> {
    if !converted.is_object() {
        return Err(Wrong::Type(
            "Object 'Kind' is missing in converted object".into(),
        ));
    }
    let got = converted["apiVersion"].as_str().unwrap_or_default();
    if got != desired {
        return Err(Wrong::Type(format!(
            "invalid groupVersion (expected {desired}, received {got})"
        )));
    }
    let text = |object: &Value, field: &str| object[field].as_str().unwrap_or_default().to_string();
    let meta = |object: &Value, field: &str| {
        object["metadata"][field]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let (expected, got) = (text(original, "kind"), text(&converted, "kind"));
    if expected != got {
        return Err(Wrong::Type(format!(
            "invalid kind (expected {expected}, received {got})"
        )));
    }
    for (field, name) in [("name", "name"), ("namespace", "namespace"), ("uid", "UID")] {
        let (expected, got) = (meta(original, field), meta(&converted, field));
        if expected != got {
            return Err(Wrong::Object(format!(
                "must have the same {name}: {expected} != {got}"
            )));
        }
    }
    let answered = match converted.get("metadata") {
        Some(Value::Object(metadata)) => metadata.clone(),
        Some(Value::Null) | None => {
            return Err(Wrong::Metadata(
                "missing metadata in converted object".into(),
            ));
        }
        Some(_) => {
            return Err(Wrong::Metadata(
                "invalid metadata of type in converted object".into(),
            ));
        }
    };
    let mut metadata = original["metadata"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for field in ["labels", "annotations"] {
        match answered.get(field) {
            None | Some(Value::Null) => {
                metadata.remove(field);
            }
            Some(Value::Object(map)) => {
                if let Some((key, _)) = map.iter().find(|(_, value)| !value.is_string()) {
                    return Err(Wrong::Metadata(format!(
                        "metadata.{field}[{key}] must be a string in converted object"
                    )));
                }
                metadata.insert(field.into(), Value::Object(map.clone()));
            }
            Some(_) => {
                return Err(Wrong::Metadata(format!(
                    "invalid metadata.{field} in converted object"
                )));
            }
        }
    }
    converted["metadata"] = Value::Object(metadata);
    Ok(converted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_checked_as_kube_checks_it() {
        let ok = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Success"}, "convertedObjects": [{"a": 1}]}});
        let bytes = serde_json::to_vec(&ok).unwrap_or_default();
        assert_eq!(read_answer("v1", "u", &bytes), Ok(vec![json!({"a": 1})]));
        assert_eq!(
            read_answer("v1", "other", &bytes),
            Err("expected response.uid=\"other\", got \"u\"".into())
        );
        let wrong = json!({"apiVersion": "v1", "kind": "Status"});
        let bytes = serde_json::to_vec(&wrong).unwrap_or_default();
        assert_eq!(
            read_answer("v1", "u", &bytes),
            Err("expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got /v1, Kind=Status".into())
        );
        let failed = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Failure", "message": "no v3 here"}}});
        let bytes = serde_json::to_vec(&failed).unwrap_or_default();
        assert_eq!(read_answer("v1", "u", &bytes), Err("no v3 here".into()));
        let bare = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": "u", "result": {"status": "Failure"}}});
        let bytes = serde_json::to_vec(&bare).unwrap_or_default();
        assert_eq!(
            read_answer("v1", "u", &bytes),
            Err("response.result.status was 'Failure', not 'Success'".into())
        );
    }

    #[test]
    fn a_converted_object_keeps_its_identity_and_metadata() {
        let original = json!({"apiVersion": "g/v1", "kind": "W",
            "metadata": {"name": "a", "namespace": "n", "uid": "1", "resourceVersion": "5",
                         "labels": {"x": "1"}}});
        let converted = json!({"apiVersion": "g/v2", "kind": "W",
            "metadata": {"name": "a", "namespace": "n", "uid": "1", "resourceVersion": "99",
                         "labels": {"y": "2"}}});
        let checked = checked_object(&original, converted.clone(), "g/v2").unwrap_or_default();
        assert_eq!(checked["metadata"]["resourceVersion"], "5");
        assert_eq!(checked["metadata"]["labels"], json!({"y": "2"}));
        assert_eq!(
            checked_object(&original, converted.clone(), "g/v3"),
            Err(Wrong::Type(
                "invalid groupVersion (expected g/v3, received g/v2)".into()
            ))
        );
        let mut renamed = converted;
        renamed["metadata"]["name"] = json!("b");
        assert_eq!(
            checked_object(&original, renamed, "g/v2"),
            Err(Wrong::Object("must have the same name: a != b".into()))
        );
    }
}
