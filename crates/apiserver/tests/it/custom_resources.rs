//! Custom resources against their CRD's schema, as kube-apiserver treats them: every schema rule
//! refused with kube's exact message, unknown fields pruned under the field validation policy,
//! defaults filled in, `status` kept to its subresource, and ratcheting on update.

use crate::support;

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use kube::{Client, Config};
use serde_json::{Value, json};
use support::send;

const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// The namespaced Widget CRD of `example.com` with these `versions`.
fn widget_crd(versions: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": versions},
    })
}

async fn server() -> (ApiServer, Client) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();
    (server, client)
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "minLength": 3, "maxLength": 5, "pattern": "^[a-z]+$"},
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
                    "mode": {"type": "string", "enum": ["fast", "slow"]},
                    "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1},
                    "tags": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "set",
                             "items": {"type": "string"}},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "required": ["name"], "properties": {
                                  "name": {"type": "string"},
                                  "port": {"type": "integer", "format": "int32"},
                              }}},
                    "size": {"type": "integer", "default": 3},
                    "when": {"type": "string", "format": "date-time"},
                    "labels": {"type": "object", "maxProperties": 1,
                               "additionalProperties": {"type": "string"}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "port": {"x-kubernetes-int-or-string": true},
                    "maybe": {"type": "string", "nullable": true},
                },
            },
            "status": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "phase": {"type": "string"},
            }},
        },
    })
}

/// Creates the Widget CRD with `schema`, a status and a scale subresource; it is served at once.
async fn widgets(client: &Client, schema: Value) {
    widgets_with(client, schema, true).await;
}

/// Creates the Widget CRD with `schema`, a status subresource, and a scale one if `scale`.
async fn widgets_with(client: &Client, schema: Value, scale: bool) {
    let mut subresources = json!({"status": {}});
    if scale {
        subresources["scale"] = json!({
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
        });
    }
    let crd = widget_crd(json!([{
        "name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": schema},
        "subresources": subresources,
    }]));
    send(client, "POST", CRDS, "application/json", crd)
        .await
        .unwrap();
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": name}, "spec": spec})
}

/// A JSON merge patch of the object at `path`; the object answered, or the refusal's `Status`.
async fn merge_patch(
    client: &Client,
    path: &str,
    patch: Value,
) -> Result<Value, Box<kube::core::Status>> {
    send(client, "PATCH", path, "application/merge-patch+json", patch).await
}

/// Creates `object` among the Widgets; the object answered, or the refusal's `Status`.
async fn create(client: &Client, object: Value) -> Result<Value, Box<kube::core::Status>> {
    send(client, "POST", WIDGETS, "application/json", object).await
}

/// Reads `path`; the object answered, or the refusal's `Status`.
async fn get(client: &Client, path: &str) -> Result<Value, Box<kube::core::Status>> {
    send(client, "GET", path, "application/json", Value::Null).await
}

/// A POST over a plain connection, for the `Warning` headers kube-client does not show.
async fn post_with_warnings(server: &ApiServer, path: &str, body: &Value) -> (u16, Vec<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = serde_json::to_string(body).unwrap();
    let mut stream = tokio::net::TcpStream::connect(server.address())
        .await
        .unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response[9..12].parse().unwrap();
    let head = response.split_once("\r\n\r\n").unwrap().0;
    let warnings = head
        .lines()
        .filter_map(|line| {
            line.strip_prefix("warning: ")
                .or(line.strip_prefix("Warning: "))
        })
        .map(str::to_string)
        .collect();
    (code, warnings)
}

#[tokio::test]
async fn each_schema_rule_is_refused_with_kubes_message() {
    let (_server, client) = server().await;
    // Without a scale subresource, which checks the replicas once more.
    widgets_with(&client, schema(), false).await;
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"name": "abc", "replicas": "two"}),
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
        ),
        (json!({"replicas": 1}), "spec.name: Required value"),
        (
            json!({"name": "abc", "mode": "warp"}),
            r#"spec.mode: Unsupported value: "warp": supported values: "fast", "slow""#,
        ),
        (
            json!({"name": "abc", "replicas": -1}),
            "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
        ),
        (
            json!({"name": "abc", "replicas": 11}),
            "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
        ),
        (
            json!({"name": "abcdef"}),
            "spec.name: Too long: may not be more than 5 bytes",
        ),
        (
            json!({"name": "ab"}),
            r#"spec.name: Invalid value: "ab": spec.name in body should be at least 3 chars long"#,
        ),
        (
            json!({"name": "AbC"}),
            r#"spec.name: Invalid value: "AbC": spec.name in body should match '^[a-z]+$'"#,
        ),
        (
            json!({"name": "abc", "ratio": 1.0}),
            "spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1",
        ),
        (
            json!({"name": "abc", "tags": ["a", "b", "c"]}),
            "spec.tags: Too many: 3: must have at most 2 items",
        ),
        (
            json!({"name": "abc", "tags": ["a", "a"]}),
            r#"spec.tags[1]: Duplicate value: "a""#,
        ),
        (
            json!({"name": "abc", "ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]}),
            r#"spec.ports[1]: Duplicate value: {"name":"a"}"#,
        ),
        (
            json!({"name": "abc", "ports": [{"port": 1}]}),
            "spec.ports[0].name: Required value",
        ),
        (
            json!({"name": "abc", "ports": [{"name": "a", "port": 3_000_000_000_i64}]}),
            r#"<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.ports[0].port"#,
        ),
        (
            json!({"name": "abc", "when": "yesterday"}),
            r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#,
        ),
        (
            json!({"name": "abc", "labels": {"a": "1", "b": "2"}}),
            "spec.labels: Too many: 2: must have at most 1 item",
        ),
        (
            json!({"name": "abc", "labels": {"a": 1}}),
            r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#,
        ),
        (
            json!({"name": "abc", "port": true}),
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
        ),
        (
            json!({"name": "abc", "mode": "warp", "replicas": 20}),
            r#"[spec.mode: Unsupported value: "warp": supported values: "fast", "slow", spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10]"#,
        ),
    ];
    for (index, (spec, expected)) in cases.into_iter().enumerate() {
        let name = format!("w{index}");
        let status = create(&client, widget(&name, spec.clone()))
            .await
            .expect_err(&format!("{spec} is refused"));
        assert_eq!(
            (status.code, status.reason.as_str()),
            (422, "Invalid"),
            "{spec}"
        );
        assert_eq!(
            status.message,
            format!("Widget.example.com {name:?} is invalid: {expected}"),
            "{spec}"
        );
    }
    // None of them was stored.
    let list = get(&client, WIDGETS).await.unwrap();
    assert_eq!(list["items"], json!([]));
}

#[tokio::test]
async fn the_causes_name_each_field() {
    let (_server, client) = server().await;
    widgets(&client, schema()).await;
    let status = create(&client, widget("w", json!({"mode": 1})))
        .await
        .unwrap_err();
    let details = status.details.unwrap();
    let causes: Vec<(String, String)> = details
        .causes
        .iter()
        .map(|cause| (cause.reason.clone(), cause.field.clone()))
        .collect();
    assert_eq!(
        causes,
        [
            ("FieldValueTypeInvalid".to_string(), "spec.mode".to_string()),
            (
                "FieldValueNotSupported".to_string(),
                "spec.mode".to_string()
            ),
            ("FieldValueRequired".to_string(), "spec.name".to_string()),
        ]
    );
    assert_eq!(
        (details.group.as_str(), details.kind.as_str()),
        ("example.com", "Widget")
    );
}

#[tokio::test]
async fn unknown_fields_are_pruned_under_the_field_validation_policy() {
    let (server, client) = server().await;
    widgets(&client, schema()).await;
    let body = json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "bogusMeta": 1},
        "spec": {"name": "abc", "bogus": true, "free": {"anything": {"goes": 1}},
                 "ports": [{"name": "a", "extra": 1}]},
        "extra": "x",
    });
    let (code, warnings) = post_with_warnings(&server, WIDGETS, &body).await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        [
            r#"299 - "unknown field \"metadata.bogusMeta\"""#,
            r#"299 - "unknown field \"extra\"""#,
            r#"299 - "unknown field \"spec.bogus\"""#,
            r#"299 - "unknown field \"spec.ports[0].extra\"""#,
        ]
    );
    let stored = get(&client, &format!("{WIDGETS}/w")).await.unwrap();
    assert!(stored.get("extra").is_none() && stored["metadata"].get("bogusMeta").is_none());
    assert_eq!(stored["spec"]["free"], json!({"anything": {"goes": 1}}));
    assert_eq!(stored["spec"]["ports"], json!([{"name": "a"}]));

    let strict = send(
        &client,
        "POST",
        &format!("{WIDGETS}?fieldValidation=Strict"),
        "application/json",
        widget("s", json!({"name": "abc", "bogus": 1})),
    )
    .await
    .unwrap_err();
    assert_eq!(strict.code, 400);
    assert_eq!(
        strict.message,
        r#"Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.bogus""#
    );
    let (code, warnings) = post_with_warnings(
        &server,
        &format!("{WIDGETS}?fieldValidation=Ignore"),
        &widget("i", json!({"name": "abc", "bogus": 1})),
    )
    .await;
    assert_eq!((code, warnings.len()), (201, 0));
}

#[tokio::test]
async fn defaults_fill_in_and_disallowed_nulls_go() {
    let (_server, client) = server().await;
    widgets(&client, schema()).await;
    let created = create(
        &client,
        widget(
            "w",
            json!({"name": "abc", "mode": null, "maybe": null, "size": null}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        created["spec"],
        json!({"name": "abc", "maybe": null, "size": 3})
    );
    // A merge patch that removes the defaulted field gets it back.
    let patched = merge_patch(
        &client,
        &format!("{WIDGETS}/w"),
        json!({"spec": {"size": null}}),
    )
    .await
    .unwrap();
    assert_eq!(patched["spec"]["size"], 3);
}

#[tokio::test]
async fn a_default_added_later_shows_on_reads_of_objects_stored_before() {
    let (_server, client) = server().await;
    let mut schema = schema();
    widgets(&client, schema.clone()).await;
    let created = create(&client, widget("old", json!({"name": "abc"})))
        .await
        .unwrap();
    assert_eq!(created["spec"]["size"], 3);
    assert!(created["spec"].get("mode").is_none());

    // The CRD gains a default: objects stored before show it when read, unchanged in store.
    schema["properties"]["spec"]["properties"]["mode"]["default"] = json!("fast");
    let crd = format!("{CRDS}/widgets.example.com");
    let patch = json!({"spec": {"versions": [{
        "name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": schema},
        "subresources": {"status": {}, "scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
    }]}});
    merge_patch(&client, &crd, patch).await.unwrap();
    let read = get(&client, &format!("{WIDGETS}/old")).await.unwrap();
    assert_eq!(read["spec"]["mode"], "fast");
    assert_eq!(
        read["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let list = get(&client, WIDGETS).await.unwrap();
    assert_eq!(list["items"][0]["spec"]["mode"], "fast");

    // An object written since is defaulted when written.
    let new = create(&client, widget("new", json!({"name": "def"})))
        .await
        .unwrap();
    assert_eq!(new["spec"]["mode"], "fast");
}

#[tokio::test]
async fn patches_and_status_writes_are_checked_too() {
    let (_server, client) = server().await;
    widgets(&client, schema()).await;
    let created = create(
        &client,
        widget("w", json!({"name": "abc", "replicas": 1}))
            .as_object()
            .cloned()
            .map(|mut object| {
                object.insert("status".into(), json!({"phase": "set by the creator"}));
                Value::Object(object)
            })
            .unwrap(),
    )
    .await
    .unwrap();
    // With a status subresource, a create does not set status.
    assert!(created.get("status").is_none());

    let patch = merge_patch(
        &client,
        &format!("{WIDGETS}/w"),
        json!({"spec": {"replicas": 99}}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        patch.message,
        r#"Widget.example.com "w" is invalid: spec.replicas: Invalid value: 99: spec.replicas in body should be less than or equal to 10"#
    );

    let status = merge_patch(
        &client,
        &format!("{WIDGETS}/w/status"),
        json!({"status": {"replicas": "many"}}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        status.message,
        r#"Widget.example.com "w" is invalid: [status.replicas: Invalid value: "string": replicas in body must be of type integer: "string", .status.replicas: Invalid value: 0: .status.replicas accessor error: many is of the type string, expected int64]"#
    );
    let status = merge_patch(
        &client,
        &format!("{WIDGETS}/w/status"),
        json!({"status": {"replicas": -1}}),
    )
    .await
    .unwrap_err();
    // The scale subresource's check of the same field.
    assert_eq!(
        status.message,
        r#"Widget.example.com "w" is invalid: .status.replicas: Invalid value: -1: should be a non-negative integer"#
    );
    let fine = merge_patch(
        &client,
        &format!("{WIDGETS}/w/status"),
        json!({"status": {"replicas": 1, "phase": "Ready"}}),
    )
    .await
    .unwrap();
    assert_eq!(fine["status"], json!({"replicas": 1, "phase": "Ready"}));

    let apply = send(
        &client,
        "PATCH",
        &format!("{WIDGETS}/w?fieldManager=test&force=true"),
        "application/apply-patch+yaml",
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
               "spec": {"name": "abc", "mode": "warp"}}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        apply.message,
        r#"Widget.example.com "w" is invalid: spec.mode: Unsupported value: "warp": supported values: "fast", "slow""#
    );
}

#[tokio::test]
async fn an_unchanged_invalid_value_does_not_block_an_update() {
    let (_server, client) = server().await;
    // First a loose schema, so that an object the strict one refuses can be stored.
    let mut loose = schema();
    loose["properties"]["spec"]["properties"]["name"] = json!({"type": "string"});
    widgets(&client, loose).await;
    create(
        &client,
        widget("w", json!({"name": "TOO-LONG-AND-UPPER", "replicas": 1})),
    )
    .await
    .unwrap();
    // Then the strict one.
    let crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";
    send(
        &client,
        "PATCH",
        crd_path,
        "application/json-patch+json",
        json!([{"op": "replace",
                "path": "/spec/versions/0/schema/openAPIV3Schema",
                "value": schema()}]),
    )
    .await
    .unwrap();
    // Changing another field is allowed: the bad name is not new.
    let patched = merge_patch(
        &client,
        &format!("{WIDGETS}/w"),
        json!({"spec": {"replicas": 2}}),
    )
    .await
    .unwrap();
    assert_eq!(patched["spec"]["replicas"], 2);
    // Changing the bad field to another bad value is not.
    let refused = merge_patch(
        &client,
        &format!("{WIDGETS}/w"),
        json!({"spec": {"name": "STILL-BAD"}}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        refused.message,
        r#"Widget.example.com "w" is invalid: spec.name: Too long: may not be more than 5 bytes"#
    );
}

#[tokio::test]
async fn dry_run_is_validated_and_stores_nothing() {
    let (_server, client) = server().await;
    widgets(&client, schema()).await;
    let refused = send(
        &client,
        "POST",
        &format!("{WIDGETS}?dryRun=All"),
        "application/json",
        widget("w", json!({"name": "x"})),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code, 422);
    let accepted = send(
        &client,
        "POST",
        &format!("{WIDGETS}?dryRun=All"),
        "application/json",
        widget("w", json!({"name": "abc"})),
    )
    .await
    .unwrap();
    assert_eq!(accepted["spec"]["size"], 3);
    let missing = get(&client, &format!("{WIDGETS}/w")).await.unwrap_err();
    assert_eq!(missing.code, 404);
}

#[tokio::test]
async fn a_crd_is_answered_established_and_a_bad_one_is_refused() {
    let (_server, client) = server().await;

    let good = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object"}}}],
        },
    });
    let created = send(&client, "POST", CRDS, "application/json", good.clone())
        .await
        .unwrap();
    // Defaults, and the status kube's controllers set at once.
    assert_eq!(created["spec"]["names"]["singular"], "gadget");
    assert_eq!(created["spec"]["names"]["listKind"], "GadgetList");
    assert_eq!(created["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(created["status"]["acceptedNames"]["kind"], "Gadget");
    let conditions: Vec<(&str, &str)> = created["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        conditions,
        [("NamesAccepted", "True"), ("Established", "True")]
    );

    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"metadata": {"name": "wrong.example.com"}}),
            r#"metadata.name: Invalid value: "wrong.example.com": must be spec.names.plural+"."+spec.group"#,
        ),
        (
            json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": false,
                                          "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
            r#"spec.versions: Invalid value: [{"name":"v1","schema":{"openAPIV3Schema":{"type":"object"}},"served":true,"storage":false}]: must have exactly one version marked as storage version"#,
        ),
        (
            json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": true}]}}),
            "spec.versions[0].schema.openAPIV3Schema: Required value",
        ),
        (
            json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"properties": {"size": {"type": "integer"}}}}}}}]}}),
            "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
        ),
        (
            json!({"spec": {"versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}},
                "subresources": {"scale": {"specReplicasPath": ".replicas",
                                           "statusReplicasPath": ".status.replicas"}}}]}}),
            r#"spec.subresources.scale.specReplicasPath: Invalid value: ".replicas": should be a json path under .spec"#,
        ),
        (
            json!({"spec": {"scope": "Everywhere"}}),
            r#"spec.scope: Unsupported value: "Everywhere": supported values: "Cluster", "Namespaced""#,
        ),
    ];
    for (change, expected) in cases {
        let mut bad = good.clone();
        bad["metadata"]["name"] = json!("gizmos.example.com");
        bad["spec"]["names"] = json!({"plural": "gizmos", "kind": "Gizmo"});
        ctrlkit_apiserver::patch::merge_patch(&mut bad, &change);
        let name = bad["metadata"]["name"].as_str().unwrap().to_string();
        let refused = send(&client, "POST", CRDS, "application/json", bad)
            .await
            .expect_err(expected);
        assert_eq!(refused.code, 422, "{expected}");
        assert_eq!(
            refused.message,
            format!(
                "CustomResourceDefinition.apiextensions.k8s.io {name:?} is invalid: {expected}"
            )
        );
    }
    // None of the refused ones is served.
    let missing = get(&client, "/apis/example.com/v1/gizmos")
        .await
        .unwrap_err();
    assert_eq!(missing.code, 404);
}

fn ruled_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                {"rule": "self.max >= oldSelf.max",
                 "messageExpression": "'max may not shrink below ' + string(oldSelf.max)"},
                {"rule": "!has(self.secret)", "reason": "FieldValueForbidden",
                 "fieldPath": ".secret", "message": "is set by the controller"},
            ],
            "properties": {
                "min": {"type": "integer"},
                "max": {"type": "integer"},
                "secret": {"type": "string"},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "name": {"type": "string",
                         "x-kubernetes-validations": [{"rule": "self.startsWith('w-')"}]},
            },
        }},
    })
}

#[tokio::test]
async fn cel_rules_hold_on_create_and_update() {
    let (_server, client) = server().await;
    widgets_with(&client, ruled_schema(), false).await;
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"min": 5, "max": 2}),
            "spec: Invalid value: min must not exceed max",
        ),
        (
            json!({"min": 1, "max": 2, "secret": "x"}),
            "spec.secret: Forbidden: is set by the controller",
        ),
        (
            json!({"min": 1, "max": 2, "name": "gadget"}),
            r#"spec.name: Invalid value: "gadget": failed rule: self.startsWith('w-')"#,
        ),
        (
            // A schema error keeps the rules from running, and says so.
            json!({"min": 5, "max": 2, "mode": "c"}),
            r#"[spec.mode: Unsupported value: "c": supported values: "a", "b", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"#,
        ),
    ];
    for (spec, expected) in cases {
        let refused = create(&client, widget("w", spec.clone()))
            .await
            .expect_err(expected);
        assert_eq!(refused.code, 422, "{spec}");
        assert_eq!(
            refused.message,
            format!("Widget.example.com \"w\" is invalid: {expected}"),
            "{spec}"
        );
    }

    create(&client, widget("w", json!({"min": 1, "max": 5})))
        .await
        .unwrap();
    // The transition rule compares with the stored object.
    let shrunk = merge_patch(
        &client,
        &format!("{WIDGETS}/w"),
        json!({"spec": {"max": 3}}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        shrunk.message,
        r#"Widget.example.com "w" is invalid: spec: Invalid value: max may not shrink below 5"#
    );
    let grown = merge_patch(
        &client,
        &format!("{WIDGETS}/w"),
        json!({"spec": {"max": 7}}),
    )
    .await
    .unwrap();
    assert_eq!(grown["spec"]["max"], 7);
}

#[tokio::test]
async fn a_rule_that_does_not_compile_refuses_the_crd() {
    let (_server, client) = server().await;
    let mut schema = ruled_schema();
    schema["properties"]["spec"]["x-kubernetes-validations"] = json!([
        {"rule": "self.min <="},
        {"rule": "true", "reason": "Because"},
        {"rule": "self.min >= 0", "optionalOldSelf": true},
    ]);
    let crd = widget_crd(json!([{"name": "v1", "served": true, "storage": true,
                                  "schema": {"openAPIV3Schema": schema}}]));
    let refused = send(&client, "POST", CRDS, "application/json", crd)
        .await
        .unwrap_err();
    assert_eq!(refused.code, 422);
    let details = refused.details.unwrap();
    let fields: Vec<&str> = details.causes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule",
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].reason",
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[2].optionalOldSelf",
        ]
    );
    assert_eq!(
        details.causes[2].message,
        "Invalid value: true: may not be set if oldSelf is not used in rule"
    );
    assert!(
        details.causes[0]
            .message
            .starts_with(r#"Invalid value: {"rule":"self.min <="}: compilation failed: "#),
        "{}",
        details.causes[0].message
    );
    assert_eq!(
        details.causes[1].message,
        r#"Unsupported value: "Because": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#
    );
}

/// Rules that use what kube's CEL offers beyond the standard library since 1.32–1.34:
/// two-variable comprehensions, semantic versions, cel-go's list extension.
#[tokio::test]
async fn rules_use_kubes_newer_cel_libraries() {
    let (_server, client) = server().await;
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {
            "version": {"type": "string", "maxLength": 32},
            "ports": {"type": "array", "maxItems": 16, "items": {"type": "integer"}},
            "weights": {"type": "object", "maxProperties": 16,
                        "additionalProperties": {"type": "integer"}},
        },
        "x-kubernetes-validations": [
            {"rule": "isSemver(self.version, true) && semver(self.version, true).isGreaterThan(semver('1.2.0'))",
             "message": "version must be a semantic version after 1.2.0"},
            {"rule": "self.ports.all(i, p, i == 0 || p > self.ports[i - 1])",
             "message": "ports must ascend"},
            {"rule": "self.ports.sort() == self.ports && self.ports.distinct().size() == size(self.ports)",
             "message": "ports must be sorted and distinct"},
            {"rule": "self.weights.transformList(k, w, w).sum() == 100",
             "messageExpression": "'weights add up to ' + string(self.weights.transformList(k, w, w).sum())"},
        ],
    }}});
    widgets_with(&client, schema, false).await;
    let good = json!({"version": "v1.3", "ports": [80, 443], "weights": {"a": 60, "b": 40}});
    create(&client, widget("good", good)).await.unwrap();
    let cases = [
        (
            json!({"version": "1.1.9", "ports": [80], "weights": {"a": 100}}),
            "spec: Invalid value: version must be a semantic version after 1.2.0",
        ),
        (
            json!({"version": "2.0.0", "ports": [443, 80], "weights": {"a": 100}}),
            "[spec: Invalid value: ports must ascend, spec: Invalid value: ports must be sorted and distinct]",
        ),
        (
            json!({"version": "2.0.0", "ports": [80], "weights": {"a": 50, "b": 20}}),
            "spec: Invalid value: weights add up to 70",
        ),
    ];
    for (spec, expected) in cases {
        let refused = create(&client, widget("bad", spec.clone()))
            .await
            .expect_err(expected);
        assert_eq!(refused.code, 422, "{spec}");
        assert_eq!(
            refused.message,
            format!("Widget.example.com \"bad\" is invalid: {expected}"),
            "{spec}"
        );
    }
}

/// Creates the Widget CRD with `schema`, which must be refused with 422: its causes, each as
/// (field, message).
async fn refused_widget_crd(client: &Client, schema: Value) -> Vec<(String, String)> {
    let crd = widget_crd(json!([{"name": "v1", "served": true, "storage": true,
                                  "schema": {"openAPIV3Schema": schema}}]));
    let refused = send(client, "POST", CRDS, "application/json", crd)
        .await
        .unwrap_err();
    assert_eq!(refused.code, 422);
    let causes = refused
        .details
        .map(|details| details.causes)
        .unwrap_or_default();
    causes
        .into_iter()
        .map(|cause| (cause.field, cause.message))
        .collect()
}

/// A rule that selects a field its schema does not declare is refused with the CRD, as cel-go's
/// type check refuses it; a presence test of it too, which would otherwise always be false. The
/// position is cel-go's: a selection's dot, a `has()`'s opening parenthesis.
#[tokio::test]
async fn a_rule_naming_an_undeclared_field_refuses_the_crd() {
    let (_server, client) = server().await;
    let mut schema = ruled_schema();
    schema["properties"]["spec"]["x-kubernetes-validations"] = json!([
        {"rule": "self.min <= self.maximum"},
        {"rule": "!has(self.secrets)"},
        {"rule": "self.min >= 0", "messageExpression": "'bad ' + self.nmae"},
    ]);
    schema["x-kubernetes-validations"] =
        json!([{"rule": "self.metadata.name.startsWith('w') && self.spec.min >= 0"}]);
    let base = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    let causes = refused_widget_crd(&client, schema).await;
    let found: Vec<(&str, &str)> = causes
        .iter()
        .map(|(field, message)| (field.as_str(), message.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (
                format!("{base}[0].rule").as_str(),
                "Invalid value: {\"rule\":\"self.min <= self.maximum\"}: compilation failed: ERROR: <input>:1:17: undefined field 'maximum'\n | self.min <= self.maximum\n | ................^"
            ),
            (
                format!("{base}[1].rule").as_str(),
                "Invalid value: {\"rule\":\"!has(self.secrets)\"}: compilation failed: ERROR: <input>:1:5: undefined field 'secrets'\n | !has(self.secrets)\n | ....^"
            ),
            (
                format!("{base}[2].messageExpression").as_str(),
                "Invalid value: {\"messageExpression\":\"'bad ' + self.nmae\",\"rule\":\"self.min >= 0\"}: messageExpression compilation failed: ERROR: <input>:1:14: undefined field 'nmae'\n | 'bad ' + self.nmae\n | .............^"
            ),
        ]
    );
}

/// kube's compile-time literal checks: mixed list literals, and constant arguments of
/// `duration`, `timestamp` and `matches` that do not parse, refuse the CRD.
#[tokio::test]
async fn a_rule_with_a_bad_literal_refuses_the_crd() {
    let (_server, client) = server().await;
    let mut schema = ruled_schema();
    schema["properties"]["spec"]["x-kubernetes-validations"] = json!([
        {"rule": "self.mode in ['a', 1]"},
        {"rule": "duration('10 minutes') > duration('1m')"},
        {"rule": "self.name.matches('(unclosed')"},
        {"rule": "self.mode in ['a', 'b'] && self.name.matches('^w-')"},
    ]);
    let causes = refused_widget_crd(&client, schema).await;
    let found: Vec<&str> = causes.iter().map(|(_, message)| message.as_str()).collect();
    assert_eq!(
        found,
        [
            "Invalid value: {\"rule\":\"self.mode in ['a', 1]\"}: compilation failed: ERROR: <input>:1:20: expected type 'string' but found 'int'\n | self.mode in ['a', 1]\n | ...................^",
            "Invalid value: {\"rule\":\"duration('10 minutes') > duration('1m')\"}: compilation failed: ERROR: <input>:1:10: invalid duration argument\n | duration('10 minutes') > duration('1m')\n | .........^",
            "Invalid value: {\"rule\":\"self.name.matches('(unclosed')\"}: compilation failed: ERROR: <input>:1:19: invalid matches argument\n | self.name.matches('(unclosed')\n | ..................^",
        ]
    );
}

/// A transition rule (one reading `oldSelf`) under the items of a list that is not a `map`
/// list is refused: there is no old item to compare with. Under a `map` list it is accepted.
#[tokio::test]
async fn a_transition_rule_under_an_uncorrelatable_list_refuses_the_crd() {
    let (_server, client) = server().await;
    let items = |list_type: &str| {
        let mut list = json!({"type": "array", "items": {
            "type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.size >= oldSelf.size"}]}});
        if list_type == "map" {
            list["x-kubernetes-list-type"] = json!("map");
            list["x-kubernetes-list-map-keys"] = json!(["name"]);
        } else if !list_type.is_empty() {
            list["x-kubernetes-list-type"] = json!(list_type);
        }
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"items": list}}}})
    };
    let list = "spec.validation.openAPIV3Schema.properties[spec].properties[items]";
    for list_type in ["", "atomic"] {
        assert_eq!(
            refused_widget_crd(&client, items(list_type)).await,
            [(
                format!("{list}.items.x-kubernetes-validations[0].rule"),
                format!(
                    "Invalid value: \"self.size >= oldSelf.size\": oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"
                ),
            )],
            "{list_type:?}"
        );
    }
    // A set's items must be atomic besides.
    let mut causes = refused_widget_crd(&client, items("set")).await;
    causes.sort();
    assert_eq!(
        causes,
        [
            (
                format!("{list}.items.x-kubernetes-map-type"),
                "Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set".to_string(),
            ),
            (
                format!("{list}.items.x-kubernetes-validations[0].rule"),
                format!(
                    "Invalid value: \"self.size >= oldSelf.size\": oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"
                ),
            ),
        ]
    );
    widgets_with(&client, items("map"), false).await;
}

#[tokio::test]
async fn an_object_reads_the_same_through_every_served_version() {
    let (_server, client) = server().await;
    let version = |name: &str, storage: bool, size_default: i64| {
        json!({"name": name, "served": true, "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
            "type": "object", "properties": {
                "name": {"type": "string"},
                "size": {"type": "integer", "default": size_default},
                "color": {"type": "string", "default": "blue"},
            }}}}}})
    };
    let crd = widget_crd(json!([
        version("v1beta1", false, 1),
        version("v1", true, 2)
    ]));
    send(&client, "POST", CRDS, "application/json", crd)
        .await
        .unwrap();
    let beta = "/apis/example.com/v1beta1/namespaces/default/widgets";
    let created = send(
        &client,
        "POST",
        beta,
        "application/json",
        json!({"apiVersion": "example.com/v1beta1", "kind": "Widget",
               "metadata": {"name": "w"}, "spec": {"name": "x", "color": "red"}}),
    )
    .await
    .unwrap();
    assert_eq!(created["apiVersion"], "example.com/v1beta1");
    assert_eq!(
        created["spec"],
        json!({"name": "x", "size": 1, "color": "red"})
    );

    // The same object through v1: its apiVersion, and no field lost or changed.
    let got = get(&client, &format!("{WIDGETS}/w")).await.unwrap();
    assert_eq!(got["apiVersion"], "example.com/v1");
    assert_eq!(got["spec"], created["spec"]);
    let listed = get(&client, WIDGETS).await.unwrap();
    assert_eq!(listed["items"][0]["apiVersion"], "example.com/v1");
    // A watch through v1 sees it in v1 too.
    {
        use futures::StreamExt;
        use kube::api::{
            Api, ApiResource, DynamicObject, GroupVersionKind, WatchEvent, WatchParams,
        };
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.com", "v1", "Widget"),
            "widgets",
        );
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
        let mut events = api
            .watch(&WatchParams::default(), "0")
            .await
            .unwrap()
            .boxed();
        match events.next().await.unwrap().unwrap() {
            WatchEvent::Added(object) => {
                assert_eq!(object.types.unwrap().api_version, "example.com/v1");
            }
            other => panic!("{other:?}"),
        }
    }
    // Through v1beta1 again, as written.
    let again = get(&client, &format!("{beta}/w")).await.unwrap();
    assert_eq!(again["apiVersion"], "example.com/v1beta1");
}

#[tokio::test]
async fn a_version_objects_were_stored_in_stays_listed_and_names_stay() {
    let (_server, client) = server().await;

    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
               "schema": {"openAPIV3Schema": {"type": "object"}}})
    };
    let mut crd = widget_crd(json!([version("v1", true)]));
    send(&client, "POST", CRDS, "application/json", crd.clone())
        .await
        .unwrap();
    // v2 becomes the storage version: both have now been stored in.
    crd["spec"]["versions"] = json!([version("v1", false), version("v2", true)]);
    let updated = merge_patch(
        &client,
        &format!("{CRDS}/widgets.example.com"),
        json!({"spec": {"versions": crd["spec"]["versions"]}}),
    )
    .await
    .unwrap();
    assert_eq!(updated["status"]["storedVersions"], json!(["v1", "v2"]));
    let refused = merge_patch(
        &client,
        &format!("{CRDS}/widgets.example.com"),
        json!({"spec": {"versions": [version("v2", true)]}}),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code, 422);
    let renamed = merge_patch(
        &client,
        &format!("{CRDS}/widgets.example.com"),
        json!({"spec": {"scope": "Cluster"}}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        renamed.message,
        r#"CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: spec.scope: Invalid value: "Cluster": field is immutable"#
    );
    assert_eq!(
        refused.message,
        r#"CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1 and removes v1 from status.storedVersions"#
    );
}

#[tokio::test]
async fn a_rule_over_its_cost_limit_or_the_objects_budget_is_kubes_error() {
    let (_server, client) = server().await;
    // Every pair of a list's numbers: a million pairs is over one rule's limit. Each group's
    // own rule costs less than that, but forty groups are over one object's budget.
    let pairs = "self.all(x, self.all(y, x != y || x == y))";
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "numbers": {"type": "array", "maxItems": 1000, "items": {"type": "integer"},
                    "x-kubernetes-validations": [{"rule": pairs}]},
        "groups": {"type": "array", "maxItems": 40, "items": {
            "type": "object",
            "properties": {"values": {"type": "array", "maxItems": 200, "items": {"type": "integer"}}},
            "x-kubernetes-validations": [{"rule": "self.values.all(x, self.values.all(y, x >= y || x < y))"}],
        }},
    }}}});
    widgets_with(&client, schema, false).await;

    let numbers: Vec<i64> = (0..1000).collect();
    let refused = create(&client, widget("many", json!({"numbers": numbers})))
        .await
        .unwrap_err();
    assert_eq!(refused.code, 422);
    assert_eq!(
        refused.message,
        format!(
            "Widget.example.com \"many\" is invalid: spec.numbers: Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {pairs}"
        )
    );

    let values: Vec<i64> = (0..200).collect();
    let groups: Vec<Value> = (0..40).map(|_| json!({"values": values})).collect();
    let refused = create(&client, widget("wide", json!({"groups": groups})))
        .await
        .unwrap_err();
    assert_eq!(refused.code, 422);
    let causes = refused.details.unwrap().causes;
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert!(causes[0].field.starts_with("spec.groups["), "{causes:?}");
    assert_eq!(
        causes[0].message,
        "Invalid value: \"object\": validation failed due to running out of cost budget, no further validation rules will be run"
    );

    // Within the limits, the same rules run and hold.
    create(
        &client,
        widget(
            "few",
            json!({"numbers": [1, 2, 3], "groups": [{"values": [1, 2]}]}),
        ),
    )
    .await
    .unwrap();
}

/// The NamesAccepted and Established conditions of a CRD, as `(type, status, reason, message)`.
fn conditions(crd: &Value) -> Vec<(String, String, String, String)> {
    crd["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|condition| {
            let text = |field: &str| condition[field].as_str().unwrap_or_default().to_string();
            (
                text("type"),
                text("status"),
                text("reason"),
                text("message"),
            )
        })
        .collect()
}

fn condition(
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> (String, String, String, String) {
    (kind.into(), status.into(), reason.into(), message.into())
}

#[tokio::test(start_paused = true)]
async fn a_crd_whose_names_another_holds_is_not_served_until_they_are_free() {
    let (_server, client) = support::in_process().await;
    let mut widget_crd = widget_crd(json!([{"name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]));
    widget_crd["spec"]["names"]["shortNames"] = json!(["wd"]);
    let first = send(
        &client,
        "POST",
        CRDS,
        "application/json",
        widget_crd.clone(),
    )
    .await
    .unwrap();
    assert_eq!(
        first["status"]["acceptedNames"]["shortNames"],
        json!(["wd"])
    );

    // A second CRD of the group asks for the kind (so the list kind) and a short name the
    // first holds; the last conflict found, in kube's order, is the one reported.
    let mut gadget_crd = widget_crd.clone();
    gadget_crd["metadata"]["name"] = json!("gadgets.example.com");
    gadget_crd["spec"]["names"] = json!({"plural": "gadgets", "singular": "gadget", "kind": "Widget", "shortNames": ["wd", "gd"]});
    let second = send(&client, "POST", CRDS, "application/json", gadget_crd)
        .await
        .unwrap();
    assert_eq!(
        conditions(&second),
        [
            condition(
                "NamesAccepted",
                "False",
                "ListKindConflict",
                "\"WidgetList\" is already in use"
            ),
            condition(
                "Established",
                "False",
                "NotAccepted",
                "not all names are accepted"
            ),
        ]
    );
    // What is free is accepted; the kind and the short names are not.
    assert_eq!(
        second["status"]["acceptedNames"],
        json!({"plural": "gadgets", "singular": "gadget"})
    );
    let gadgets = "/apis/example.com/v1/namespaces/default/gadgets";
    assert_eq!(get(&client, gadgets).await.unwrap_err().code, 404);

    // Once the first is gone (its deletion takes a moment: its custom resources go first), the
    // second gets its names and is served.
    send(
        &client,
        "DELETE",
        &format!("{CRDS}/widgets.example.com"),
        "application/json",
        Value::Null,
    )
    .await
    .unwrap();
    for _ in 0..100 {
        if get(&client, &format!("{CRDS}/widgets.example.com"))
            .await
            .is_err()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let second = get(&client, &format!("{CRDS}/gadgets.example.com"))
        .await
        .unwrap();
    assert_eq!(
        conditions(&second),
        [
            condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
            condition(
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted"
            ),
        ]
    );
    assert_eq!(
        second["status"]["acceptedNames"]["shortNames"],
        json!(["wd", "gd"])
    );
    assert_eq!(get(&client, gadgets).await.unwrap()["kind"], "WidgetList");
}

#[tokio::test]
async fn rules_use_kube_libraries_and_escaped_property_names() {
    let (_server, client) = server().await;
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "quantity(self.memory).isLessThan(quantity('1Gi'))", "message": "memory must be under 1Gi"},
            {"rule": "cidr('10.0.0.0/8').containsIP(self.address)", "message": "address must be in 10.0.0.0/8"},
            {"rule": "self.__namespace__.matches('^[a-z]+$') && !format.dns1123Label().validate(self.__namespace__).hasValue()"},
            {"rule": "self.ports.isSorted() && self.ports.max() < 65536", "message": "ports must be sorted and valid"},
            {"rule": "isURL(self.endpoint) && url(self.endpoint).getScheme() == 'https'", "message": "endpoint must be https"},
            {"rule": "self.owner__dash__team.find('[0-9]+') != ''", "message": "owner-team must have a number"},
        ],
        "properties": {
            "memory": {"type": "string"},
            "address": {"type": "string"},
            "namespace": {"type": "string"},
            "ports": {"type": "array", "items": {"type": "integer"}},
            "endpoint": {"type": "string"},
            "owner-team": {"type": "string"},
        },
    }}});
    widgets(&client, schema).await;
    let spec = json!({"memory": "512Mi", "address": "10.1.2.3", "namespace": "prod",
                      "ports": [80, 443], "endpoint": "https://example.com/hook", "owner-team": "team-7"});
    create(&client, widget("good", spec)).await.unwrap();

    let spec = json!({"memory": "2Gi", "address": "192.168.0.1", "namespace": "prod",
                      "ports": [443, 80], "endpoint": "http://example.com", "owner-team": "team"});
    let refused = create(&client, widget("bad", spec)).await.unwrap_err();
    assert_eq!(refused.code, 422);
    let messages: Vec<String> = refused
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|cause| cause.message)
        .collect();
    assert_eq!(
        messages,
        [
            "Invalid value: memory must be under 1Gi",
            "Invalid value: address must be in 10.0.0.0/8",
            "Invalid value: ports must be sorted and valid",
            "Invalid value: endpoint must be https",
            "Invalid value: owner-team must have a number",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn deleting_a_crd_deletes_its_custom_resources_first_and_waits_for_their_finalizers() {
    let (_server, client) = support::in_process().await;
    widgets(
        &client,
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    )
    .await;
    create(&client, widget("plain", json!({}))).await.unwrap();
    let mut held = widget("held", json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/keep"]);
    create(&client, held).await.unwrap();

    let crd = format!("{CRDS}/widgets.example.com");
    let marked = send(&client, "DELETE", &crd, "application/json", Value::Null)
        .await
        .unwrap();
    assert_eq!(marked["kind"], "CustomResourceDefinition");
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    let terminating = marked["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|condition| condition["type"] == "Terminating")
        .cloned()
        .unwrap();
    assert_eq!(terminating["status"], "True");
    assert_eq!(terminating["reason"], "InstanceDeletionPending");
    // No new custom resources meanwhile.
    let refused = create(&client, widget("late", json!({})))
        .await
        .unwrap_err();
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        refused.message,
        "widgets.example.com \"late\" is forbidden: create not allowed while custom resource definition is terminating"
    );
    // Nor by an apply that would create one (kube-apiserver refuses every create in admission).
    let applied = send(
        &client,
        "PATCH",
        &format!("{WIDGETS}/applied?fieldManager=test"),
        "application/apply-patch+yaml",
        widget("applied", json!({})),
    )
    .await
    .unwrap_err();
    assert_eq!((applied.code, applied.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        applied.message,
        "widgets.example.com \"applied\" is forbidden: create not allowed while custom resource definition is terminating"
    );

    // The plain one goes; the held one is marked, and holds the CRD.
    let item = |name: &str| format!("{WIDGETS}/{name}");
    for _ in 0..100 {
        if get(&client, &item("plain")).await.is_err() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(get(&client, &item("plain")).await.unwrap_err().code, 404);
    let waiting = get(&client, &item("held")).await.unwrap();
    assert!(waiting["metadata"]["deletionTimestamp"].is_string());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        get(&client, &crd).await.is_ok(),
        "held by a custom resource's finalizer"
    );

    // Its finalizer removed, the last custom resource goes, then the CRD.
    merge_patch(
        &client,
        &item("held"),
        json!({"metadata": {"finalizers": null}}),
    )
    .await
    .unwrap();
    for _ in 0..100 {
        if get(&client, &crd).await.is_err() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(get(&client, &crd).await.unwrap_err().code, 404);
    assert_eq!(
        get(&client, WIDGETS).await.unwrap_err().code,
        404,
        "no longer served"
    );
    // Made again, the CRD starts empty.
    widgets(
        &client,
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    )
    .await;
    let list = get(&client, WIDGETS).await.unwrap();
    assert_eq!(list["items"], json!([]));
}

#[tokio::test]
async fn a_crd_of_a_kubernetes_group_needs_its_api_approval_annotation() {
    let (_server, client) = server().await;
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let crd = |annotation: Option<&str>| {
        let mut crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gizmos.stable.k8s.io"},
            "spec": {"group": "stable.k8s.io", "scope": "Namespaced",
                     "names": {"plural": "gizmos", "kind": "Gizmo"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": open.clone()}}]},
        });
        if let Some(annotation) = annotation {
            crd["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": annotation});
        }
        crd
    };
    let missing = send(&client, "POST", CRDS, "application/json", crd(None))
        .await
        .unwrap_err();
    assert_eq!(missing.code, 422);
    assert_eq!(
        missing.message,
        "CustomResourceDefinition.apiextensions.k8s.io \"gizmos.stable.k8s.io\" is invalid: metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
    );
    let invalid = send(&client, "POST", CRDS, "application/json", crd(Some("sure")))
        .await
        .unwrap_err();
    assert_eq!(
        invalid.message,
        "CustomResourceDefinition.apiextensions.k8s.io \"gizmos.stable.k8s.io\" is invalid: metadata.annotations[api-approved.kubernetes.io]: Invalid value: \"sure\": protected groups must have approval annotation \"api-approved.kubernetes.io\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
    );
    let created = send(
        &client,
        "POST",
        CRDS,
        "application/json",
        crd(Some("unapproved, for testing")),
    )
    .await
    .unwrap();
    let conformant = created["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|condition| condition["type"] == "KubernetesAPIApprovalPolicyConformant")
        .cloned()
        .unwrap();
    assert_eq!(conformant["status"], "False");
    assert_eq!(conformant["reason"], "UnapprovedAnnotation");
    assert_eq!(
        conformant["message"],
        "not approved: \"unapproved, for testing\""
    );
}

#[tokio::test(start_paused = true)]
async fn a_crd_naming_a_built_in_resource_never_takes_its_place_or_its_objects() {
    let (_server, client) = support::in_process().await;
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "held"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}});
    send(&client, "POST", leases, "application/json", lease)
        .await
        .unwrap();
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "leases.coordination.k8s.io",
                     "annotations": {"api-approved.kubernetes.io": "unapproved, shadowing a built-in"}},
        "spec": {"group": "coordination.k8s.io", "scope": "Namespaced",
                 "names": {"plural": "leases", "kind": "Lease"},
                 "versions": [
                     {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": open.clone()}},
                     {"name": "v9", "served": true, "storage": false, "schema": {"openAPIV3Schema": open}},
                 ]},
    });
    send(&client, "POST", CRDS, "application/json", crd)
        .await
        .unwrap();

    // The built-in still answers, with its own schema and validation.
    let held = get(&client, &format!("{leases}/held")).await.unwrap();
    assert_eq!(held["spec"]["holderIdentity"], "a");
    let refused = send(
        &client,
        "POST",
        leases,
        "application/json",
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "bad"}, "spec": {"leaseDurationSeconds": "fifteen"}}),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code, 400, "decoded as the built-in");
    assert_eq!(
        get(
            &client,
            "/apis/coordination.k8s.io/v9/namespaces/default/leases"
        )
        .await
        .unwrap_err()
        .code,
        404
    );

    // Deleting the CRD deletes none of the built-in's objects, and it stays served.
    let crd_path = format!("{CRDS}/leases.coordination.k8s.io");
    send(
        &client,
        "DELETE",
        &crd_path,
        "application/json",
        Value::Null,
    )
    .await
    .unwrap();
    for _ in 0..100 {
        if get(&client, &crd_path).await.is_err() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(get(&client, &crd_path).await.unwrap_err().code, 404);
    let still = get(&client, &format!("{leases}/held")).await.unwrap();
    assert_eq!(still["spec"]["holderIdentity"], "a");
}

#[tokio::test]
async fn a_rule_whose_estimated_cost_is_far_over_budget_refuses_the_crd() {
    let (_server, client) = server().await;
    let crd = |max_items: Option<u64>| {
        let mut tags = json!({"type": "array", "items": {"type": "string"},
            "x-kubernetes-validations": [{"rule": "self.all(x, self.exists_one(y, x == y))",
                                          "message": "tags must be unique"}]});
        if let Some(max) = max_items {
            tags["maxItems"] = json!(max);
        }
        widget_crd(json!([{"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"tags": tags}}}}}}]))
    };
    let refused = send(&client, "POST", CRDS, "application/json", crd(None))
        .await
        .unwrap_err();
    assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        refused.message,
        "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: spec.validation.openAPIV3Schema.properties[spec].properties[tags].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    );
    // Bounded, the same rule is cheap enough.
    send(&client, "POST", CRDS, "application/json", crd(Some(64)))
        .await
        .unwrap();
}
