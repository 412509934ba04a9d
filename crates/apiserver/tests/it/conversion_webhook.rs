//! A CRD whose versions a conversion webhook converts: the server posts `ConversionReview`s
//! over HTTPS to a webhook this test starts (trusted through the CRD's `caBundle`), stores
//! objects in the storage version, shows them in the version each request names (get, list,
//! watch, write answers), and answers a webhook's failure or bad answer with kube's 500.

use std::sync::{Arc, Mutex};

use crate::support;
use bytes::Bytes;

use ctrlkit_apiserver::tls::SelfSignedTls;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use futures::{StreamExt, TryStreamExt};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kube::api::{
    Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use serde_json::{Value, json};
use support::{api_error, send};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// What the test webhook does with a review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// Converts between `v1`'s `size: "WxH"` and `v2`'s `width` and `height`.
    Convert,
    /// Answers `Failure` with a message.
    Fail,
    /// Converts, but renames the object.
    Rename,
}

/// The webhook's state: how it behaves, and what each review asked (desired version, count).
#[derive(Debug)]
struct Webhook {
    behaviour: Behaviour,
    reviews: Vec<(String, usize)>,
}

type Shared = Arc<Mutex<Webhook>>;

/// `object` converted to `desired`.
fn convert(mut object: Value, desired: &str) -> Value {
    let spec = object["spec"].take();
    object["spec"] = if desired.ends_with("/v2") {
        let size = spec["size"].as_str().unwrap_or("0x0");
        let (width, height) = size.split_once('x').unwrap();
        json!({"width": width.parse::<i64>().unwrap(), "height": height.parse::<i64>().unwrap()})
    } else {
        json!({"size": format!("{}x{}", spec["width"], spec["height"])})
    };
    object["apiVersion"] = json!(desired);
    object
}

/// The answer to one `ConversionReview`.
fn review(shared: &Shared, body: &[u8]) -> Value {
    let review: Value = serde_json::from_slice(body).unwrap();
    let request = &review["request"];
    let desired = request["desiredAPIVersion"].as_str().unwrap().to_string();
    let objects = request["objects"].as_array().unwrap().clone();
    let behaviour = {
        let mut webhook = shared.lock().unwrap();
        webhook.reviews.push((desired.clone(), objects.len()));
        webhook.behaviour
    };
    let mut response = json!({"uid": request["uid"]});
    match behaviour {
        Behaviour::Fail => {
            response["result"] = json!({"status": "Failure", "message": "the webhook says no"});
        }
        Behaviour::Convert | Behaviour::Rename => {
            let converted: Vec<Value> = objects
                .into_iter()
                .map(|object| {
                    let mut converted = convert(object, &desired);
                    if behaviour == Behaviour::Rename {
                        converted["metadata"]["name"] = json!("renamed");
                    }
                    converted
                })
                .collect();
            response["result"] = json!({"status": "Success"});
            response["convertedObjects"] = json!(converted);
        }
    }
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response})
}

/// Starts the webhook on loopback over HTTPS; its URL and the CA that signed its certificate
/// (base64 of PEM, as a `caBundle`).
async fn start_webhook(shared: Shared) -> (String, String) {
    let tls = SelfSignedTls::generate(&[]).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.tls().server_config().clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/convert", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, shared) = (acceptor.clone(), shared.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    move |request: http::Request<hyper::body::Incoming>| {
                        let shared = shared.clone();
                        async move {
                            assert_eq!(request.uri().path(), "/convert");
                            let body = request.into_body().collect().await.unwrap().to_bytes();
                            let answer = serde_json::to_vec(&review(&shared, &body)).unwrap();
                            Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(
                                Bytes::from(answer),
                            )))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (url, tls.ca_data())
}

/// The Widget CRD: `v1` (storage) and `v2`, converted by the webhook at `url`.
fn widget_crd(url: &str, ca_bundle: &str) -> Value {
    let version = |name: &str, storage: bool, spec: Value| {
        json!({"name": name, "served": true, "storage": storage,
               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                   "spec": {"type": "object", "properties": spec}}}}})
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.convert.example.com"},
        "spec": {
            "group": "convert.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                version("v1", true, json!({"size": {"type": "string"}})),
                version("v2", false, json!({"width": {"type": "integer"}, "height": {"type": "integer"}})),
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": url, "caBundle": ca_bundle},
            }},
        },
    })
}

/// The server, the webhook's state, and the Widgets API of each version.
async fn setup(
    ca_bundle: Option<&str>,
) -> (ApiServer, Shared, Api<DynamicObject>, Api<DynamicObject>) {
    let shared = Arc::new(Mutex::new(Webhook {
        behaviour: Behaviour::Convert,
        reviews: Vec::new(),
    }));
    let (url, ca) = start_webhook(shared.clone()).await;
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
    send(
        &client,
        "POST",
        CRDS,
        "application/json",
        widget_crd(&url, ca_bundle.unwrap_or(&ca)),
    )
    .await
    .unwrap();
    let api = |version: &str| {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "convert.example.com",
            version,
            "Widget",
        ));
        Api::<DynamicObject>::namespaced_with(client.clone(), "default", &resource)
    };
    let (v1, v2) = (api("v1"), api("v2"));
    (server, shared, v1, v2)
}

fn widget(version: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("convert.example.com/{version}"), "kind": "Widget",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_stored_in_the_storage_version_and_shown_in_the_asked_one() {
    let (server, shared, v1, v2) = setup(None).await;

    // Written through v1 (the storage version): no conversion to store it.
    let a = v1
        .create(
            &PostParams::default(),
            &widget("v1", "a", json!({"size": "3x4"})),
        )
        .await
        .unwrap();
    assert_eq!(a.data["spec"], json!({"size": "3x4"}));
    assert!(shared.lock().unwrap().reviews.is_empty());

    // Read through v2: converted by the webhook.
    let shown = v2.get("a").await.unwrap();
    assert_eq!(
        shown.types.as_ref().unwrap().api_version,
        "convert.example.com/v2"
    );
    assert_eq!(shown.data["spec"], json!({"width": 3, "height": 4}));
    assert_eq!(shown.metadata.resource_version, a.metadata.resource_version);
    assert_eq!(
        shared.lock().unwrap().reviews,
        [("convert.example.com/v2".to_string(), 1)]
    );

    // Written through v2: stored as v1, answered as v2.
    shared.lock().unwrap().reviews.clear();
    let b = v2
        .create(
            &PostParams::default(),
            &widget("v2", "b", json!({"width": 5, "height": 6})),
        )
        .await
        .unwrap();
    assert_eq!(b.data["spec"], json!({"width": 5, "height": 6}));
    assert_eq!(
        shared.lock().unwrap().reviews,
        [
            ("convert.example.com/v1".to_string(), 1),
            ("convert.example.com/v2".to_string(), 1)
        ]
    );
    assert_eq!(
        v1.get("b").await.unwrap().data["spec"],
        json!({"size": "5x6"})
    );

    // A list through v2: one review for all its items.
    shared.lock().unwrap().reviews.clear();
    let list = v2.list(&ListParams::default()).await.unwrap();
    let specs: Vec<&Value> = list.items.iter().map(|item| &item.data["spec"]).collect();
    assert_eq!(
        specs,
        [
            &json!({"width": 3, "height": 4}),
            &json!({"width": 5, "height": 6})
        ]
    );
    assert_eq!(
        shared.lock().unwrap().reviews,
        [("convert.example.com/v2".to_string(), 2)]
    );

    // A merge patch through v2 applies to the object as v2 shows it, and is stored as v1.
    let patched = v2
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"width": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"], json!({"width": 7, "height": 4}));
    assert_eq!(
        v1.get("a").await.unwrap().data["spec"],
        json!({"size": "7x4"})
    );

    // A watch through v2 sees each change converted.
    let version = list.metadata.resource_version.clone().unwrap();
    let mut events = v2
        .watch(&WatchParams::default().timeout(5), &version)
        .await
        .unwrap()
        .boxed();
    v1.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": "8x9"}})),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    while let Some(event) = events.try_next().await.unwrap() {
        if let WatchEvent::Modified(object) = event {
            seen.push((
                object.metadata.name.clone().unwrap(),
                object.data["spec"].clone(),
            ));
            if seen.len() == 2 {
                break;
            }
        }
    }
    assert_eq!(
        seen,
        [
            ("a".to_string(), json!({"width": 7, "height": 4})),
            ("b".to_string(), json!({"width": 8, "height": 9})),
        ]
    );

    // An object a finalizer holds is answered on delete, in the version asked through.
    let finalizer = json!({"metadata": {"finalizers": ["example.com/hold"]}});
    v1.patch("a", &PatchParams::default(), &Patch::Merge(finalizer))
        .await
        .unwrap();
    let deleted = v2.delete("a", &Default::default()).await.unwrap();
    assert_eq!(
        deleted.left().map(|object| object.data["spec"].clone()),
        Some(json!({"width": 7, "height": 4}))
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_or_wrong_webhook_is_kubes_500_and_the_storage_version_still_reads() {
    let (server, shared, v1, v2) = setup(None).await;
    v1.create(
        &PostParams::default(),
        &widget("v1", "a", json!({"size": "1x2"})),
    )
    .await
    .unwrap();

    shared.lock().unwrap().behaviour = Behaviour::Fail;
    let status = api_error(v2.get("a").await.unwrap_err());
    assert_eq!(status.code, 500);
    assert_eq!(status.reason, "");
    assert_eq!(
        status.message,
        "conversion webhook for convert.example.com/v1, Kind=Widget failed: the webhook says no"
    );
    let status = api_error(
        v2.create(
            &PostParams::default(),
            &widget("v2", "b", json!({"width": 1, "height": 1})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (status.code, status.message.as_str()),
        (
            500,
            "conversion webhook for convert.example.com/v2, Kind=Widget failed: the webhook says no"
        )
    );
    // Nothing half-written: the create that failed stored nothing.
    assert_eq!(
        v1.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    shared.lock().unwrap().behaviour = Behaviour::Rename;
    let status = api_error(v2.get("a").await.unwrap_err());
    assert_eq!(
        status.message,
        "conversion webhook for convert.example.com/v1, Kind=Widget returned invalid object: must have the same name: a != renamed"
    );
    let status = api_error(v2.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        status.message,
        "conversion webhook for convert.example.com/v1, Kind=WidgetList returned invalid converted object at index 0: must have the same name: a != renamed"
    );

    // The storage version needs no webhook.
    assert_eq!(
        v1.get("a").await.unwrap().data["spec"],
        json!({"size": "1x2"})
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_the_ca_bundle_does_not_vouch_for_is_not_called() {
    // A CA of its own, not the one that signed the webhook's certificate.
    let other = SelfSignedTls::generate(&[]).unwrap();
    let (server, shared, v1, v2) = setup(Some(&other.ca_data())).await;
    v1.create(
        &PostParams::default(),
        &widget("v1", "a", json!({"size": "1x2"})),
    )
    .await
    .unwrap();
    let status = api_error(v2.get("a").await.unwrap_err());
    assert_eq!(status.code, 500);
    let prefix = "conversion webhook for convert.example.com/v1, Kind=Widget failed: Post \"https://127.0.0.1:";
    assert!(status.message.starts_with(prefix), "{}", status.message);
    assert!(status.message.contains("tls:"), "{}", status.message);
    assert!(shared.lock().unwrap().reviews.is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn a_crds_conversion_is_checked_as_kube_checks_it() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
    let with = |conversion: Value| {
        let mut crd = widget_crd("https://127.0.0.1:1/convert", "");
        crd["spec"]["conversion"] = conversion;
        crd
    };
    let cases = [
        (
            json!({"strategy": "Webhook"}),
            vec![
                "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
                "spec.conversion.conversionReviewVersions: Required value",
            ],
        ),
        (
            json!({"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": "http://example.com/convert?x=1"},
                "conversionReviewVersions": ["v3", "v3"]}}),
            vec![
                "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "spec.conversion.webhookClientConfig.url: Invalid value: \"x=1\": query parameters are not permitted in the URL",
                "spec.conversion.conversionReviewVersions[1]: Invalid value: \"v3\": duplicate version",
                "spec.conversion.conversionReviewVersions: Invalid value: [\"v3\",\"v3\"]: must include at least one of v1, v1beta1",
            ],
        ),
        (
            json!({"strategy": "Webhook", "webhook": {
                "clientConfig": {"service": {"namespace": "default", "name": "", "path": "/a//b"}},
                "conversionReviewVersions": ["v1"]}}),
            vec![
                "spec.conversion.webhookClientConfig.service.name: Required value",
                "spec.conversion.webhookClientConfig.service.path: Invalid value: \"/a//b\": segment[1] may not be empty",
            ],
        ),
        (
            json!({"strategy": "None", "webhook": {
                "clientConfig": {"url": "https://example.com"}, "conversionReviewVersions": ["v1"]}}),
            vec![
                "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
                "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
            ],
        ),
        (
            json!({"strategy": "Sometimes"}),
            vec![
                "spec.conversion.strategy: Unsupported value: \"Sometimes\": supported values: \"None\", \"Webhook\"",
            ],
        ),
    ];
    for (conversion, expected) in cases {
        let status = send(
            &client,
            "POST",
            CRDS,
            "application/json",
            with(conversion.clone()),
        )
        .await
        .expect_err("refused");
        assert_eq!(status.code, 422, "{conversion}");
        let mut found: Vec<String> = status
            .details
            .unwrap()
            .causes
            .iter()
            .map(|cause| format!("{}: {}", cause.field, cause.message))
            .collect();
        let mut expected: Vec<String> = expected.into_iter().map(String::from).collect();
        found.sort();
        expected.sort();
        assert_eq!(found, expected, "{conversion}");
    }
    server.shutdown().await;
}
