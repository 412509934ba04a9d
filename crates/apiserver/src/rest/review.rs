//! The review kinds, which kube-apiserver answers without storing anything: a `TokenReview`
//! authenticates a token (the server's own service account tokens, which it signs), the access
//! reviews answer whether a user may do something (always: this server authorizes every
//! request), and a `SelfSubjectReview` says who the caller is. A POST answers 201 with the
//! review and its status.

use base64::Engine;
use ring::hmac;
use serde_json::{Value, json};

use super::App;
use super::status::{ApiError, json_response};
use crate::resource::ResourceKind;

/// The key the server signs its service account tokens with: new at every start, so a token
/// reviews as authentic on the server that issued it.
#[derive(Debug)]
pub(crate) struct TokenKey(hmac::Key);

impl Default for TokenKey {
    fn default() -> Self {
        let mut secret = [0u8; 32];
        secret[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        secret[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        Self(hmac::Key::new(hmac::HMAC_SHA256, &secret))
    }
}

impl TokenKey {
    /// `header.payload` of a token, with its signature appended.
    pub(crate) fn sign(&self, header: &Value, claims: &Value) -> String {
        let unsigned = format!("{}.{}", encode(header), encode(claims));
        let signature = hmac::sign(&self.0, unsigned.as_bytes());
        format!(
            "{unsigned}.{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signature.as_ref())
        )
    }

    /// The claims of a token this key signed; `None` for any other text.
    fn verify(&self, token: &str) -> Option<Value> {
        let (unsigned, signature) = token.rsplit_once('.')?;
        let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(signature)
            .ok()?;
        hmac::verify(&self.0, unsigned.as_bytes(), &signature).ok()?;
        let (_, claims) = unsigned.split_once('.')?;
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(claims)
            .ok()?;
        serde_json::from_slice(&claims).ok()
    }
}

fn encode(value: &Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(value).unwrap_or_default())
}

/// The audience of tokens that do not name one.
pub(crate) const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// Answers a review of `kind` (already decoded and defaulted).
pub(super) fn create(
    app: &App,
    kind: &ResourceKind,
    mut review: Value,
) -> Result<axum::response::Response, ApiError> {
    let status = match kind.kind.as_str() {
        "TokenReview" => token_review(app, &review["spec"]),
        "SubjectAccessReview" | "SelfSubjectAccessReview" | "LocalSubjectAccessReview" => {
            json!({"allowed": true, "reason": "every request is authorized"})
        }
        "SelfSubjectRulesReview" => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        }),
        "SelfSubjectReview" => json!({"userInfo": {
            "username": "kubernetes-admin",
            "groups": ["kubeadm:cluster-admins", "system:authenticated"],
        }}),
        _ => return Err(ApiError::method_not_allowed("POST")),
    };
    review["status"] = status;
    if review["metadata"].is_null() {
        review["metadata"] = json!({});
    }
    Ok(json_response(201, &review))
}

/// Whether the token is one of the server's, unexpired, for one of the audiences asked for.
fn token_review(app: &App, spec: &Value) -> Value {
    let wanted: Vec<&str> = spec["audiences"]
        .as_array()
        .filter(|audiences| !audiences.is_empty())
        .map(|audiences| audiences.iter().filter_map(Value::as_str).collect())
        .unwrap_or_else(|| vec![API_AUDIENCE]);
    let refused = |error: &str| json!({"user": {}, "error": error});
    let Some(claims) = spec["token"]
        .as_str()
        .and_then(|token| app.tokens.verify(token))
    else {
        return refused("[invalid bearer token, token lookup failed]");
    };
    if claims["exp"].as_i64().unwrap_or(0) <= jiff::Timestamp::now().as_second() {
        return refused("[invalid bearer token, service account token has expired]");
    }
    let granted: Vec<&str> = claims["aud"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|audience| wanted.contains(audience))
        .collect();
    if granted.is_empty() {
        return refused(
            "[invalid bearer token, token audiences is invalid for the target audiences]",
        );
    }
    let identity = &claims["kubernetes.io"];
    let namespace = identity["namespace"].as_str().unwrap_or_default();
    let account = &identity["serviceaccount"];
    json!({
        "authenticated": true,
        "user": {
            "username": format!("system:serviceaccount:{namespace}:{}", account["name"].as_str().unwrap_or_default()),
            "uid": account["uid"],
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{namespace}"), "system:authenticated"],
        },
        "audiences": granted,
    })
}
