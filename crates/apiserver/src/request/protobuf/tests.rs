//! Transcoding checked against an independent encoder: the kube-rs project's prost bindings
//! (`k8s-pb`) write and read the same messages.

use k8s_pb::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_pb::api::core::v1::{Container, ContainerPort, PodSpec, PodTemplateSpec, Secret};
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;

use super::*;

/// `raw` in the envelope kubectl sends.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    wire::put_bytes(1, api_version.as_bytes(), &mut type_meta);
    wire::put_bytes(2, kind.as_bytes(), &mut type_meta);
    let mut out = b"k8s\0".to_vec();
    wire::put_bytes(1, &type_meta, &mut out);
    wire::put_bytes(2, raw, &mut out);
    out
}

fn deployment() -> Deployment {
    Deployment {
        metadata: Some(ObjectMeta {
            name: Some("web".into()),
            namespace: Some(String::new()),
            labels: [("app".to_string(), "web".to_string())].into(),
            creation_timestamp: Some(Time::default()),
            ..Default::default()
        }),
        spec: Some(DeploymentSpec {
            replicas: Some(0),
            selector: Some(LabelSelector {
                match_labels: [("app".to_string(), "web".to_string())].into(),
                ..Default::default()
            }),
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: [("app".to_string(), "web".to_string())].into(),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: Some("nginx".into()),
                        image: Some("nginx".into()),
                        ports: vec![ContainerPort {
                            container_port: Some(80),
                            ..Default::default()
                        }],
                        resources: Some(k8s_pb::api::core::v1::ResourceRequirements {
                            limits: [(
                                "cpu".to_string(),
                                Quantity {
                                    string: Some("500m".into()),
                                },
                            )]
                            .into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            strategy: Some(k8s_pb::api::apps::v1::DeploymentStrategy {
                r#type: Some("RollingUpdate".into()),
                rolling_update: Some(k8s_pb::api::apps::v1::RollingUpdateDeployment {
                    max_surge: Some(IntOrString {
                        r#type: Some(1),
                        str_val: Some("25%".into()),
                        ..Default::default()
                    }),
                    max_unavailable: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        ..Default::default()
                    }),
                }),
            }),
            ..Default::default()
        }),
        status: None,
    }
}

#[test]
fn a_deployment_as_kubectl_sends_it_reads_as_its_json() {
    let body = envelope("apps/v1", "Deployment", &deployment().encode_to_vec());
    let object = decode_body(&body, "io.k8s.api.apps.v1.Deployment").unwrap();
    assert_eq!(
        object,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            // Go's unset namespace and zero creation time read as absent.
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "nginx", "image": "nginx",
                        "ports": [{"containerPort": 80}],
                        "resources": {"limits": {"cpu": "500m"}},
                    }]},
                },
                "strategy": {"type": "RollingUpdate",
                             "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            },
        })
    );
}

#[test]
fn what_is_encoded_decodes_alike_in_the_bindings() {
    let object = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "creationTimestamp": "2026-01-02T03:04:05Z",
                     "managedFields": [{"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]},
        "data": {"k": "aGk="},
        "type": "Opaque",
    });
    let body = encode_body(&object, "io.k8s.api.core.v1.Secret").unwrap();
    let raw = {
        let mut reader = wire::Reader::new(&body[4..]);
        let mut raw = Vec::new();
        while let Some((number, value)) = reader.next_field().unwrap() {
            if let (2, wire::Value::Bytes(bytes)) = (number, value) {
                raw = bytes.to_vec();
            }
        }
        raw
    };
    let secret = Secret::decode(raw.as_slice()).unwrap();
    assert_eq!(secret.data["k"], b"hi");
    assert_eq!(secret.r#type.as_deref(), Some("Opaque"));
    let metadata = secret.metadata.unwrap();
    assert_eq!(
        metadata.creation_timestamp.unwrap().seconds,
        Some(1_767_323_045)
    );
    let fields = metadata.managed_fields[0].fields_v1.clone().unwrap();
    assert_eq!(fields.raw.as_deref(), Some(&br#"{"f:data":{}}"#[..]));
    assert_eq!(
        decode_body(&body, "io.k8s.api.core.v1.Secret").unwrap(),
        object
    );
}

#[test]
fn structs_go_embeds_inline_are_the_messages_own_fields_in_json() {
    let object = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "app", "image": "nginx",
                            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080},
                                               "periodSeconds": 5}}],
            "volumes": [{"name": "config", "configMap": {"name": "settings"}}],
        },
    });
    let body = encode_body(&object, "io.k8s.api.core.v1.Pod").unwrap();
    let raw = {
        let mut reader = wire::Reader::new(&body[4..]);
        let mut raw = Vec::new();
        while let Some((number, value)) = reader.next_field().unwrap() {
            if let (2, wire::Value::Bytes(bytes)) = (number, value) {
                raw = bytes.to_vec();
            }
        }
        raw
    };
    let pod = k8s_pb::api::core::v1::Pod::decode(raw.as_slice()).unwrap();
    let spec = pod.spec.unwrap();
    let probe = spec.containers[0].readiness_probe.clone().unwrap();
    let http = probe.handler.unwrap().http_get.unwrap();
    assert_eq!(http.path.as_deref(), Some("/ready"));
    assert_eq!(probe.period_seconds, Some(5));
    let config_map = spec.volumes[0]
        .clone()
        .volume_source
        .unwrap()
        .config_map
        .unwrap();
    assert_eq!(
        config_map.local_object_reference.unwrap().name.as_deref(),
        Some("settings")
    );
    assert_eq!(
        decode_body(&body, "io.k8s.api.core.v1.Pod").unwrap(),
        object
    );
}

#[test]
fn broken_bodies_are_errors() {
    assert_eq!(
        decode_body(b"{}", "io.k8s.api.core.v1.Pod").unwrap_err(),
        ProtobufError::Magic
    );
    let truncated = envelope("v1", "Pod", &[0x0a, 0x20, 0x01]);
    assert!(decode_body(&truncated, "io.k8s.api.core.v1.Pod").is_err());
    // A schema whose `not` nests two hundred deep is refused, not recursed into.
    let props = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps";
    let not = message(props)
        .unwrap()
        .fields
        .iter()
        .find(|field| field.json == "not")
        .unwrap()
        .number;
    let mut deep = Vec::new();
    for _ in 0..200 {
        let mut outer = Vec::new();
        wire::put_bytes(not, &deep, &mut outer);
        deep = outer;
    }
    assert_eq!(
        to_json(props, &deep, 0).unwrap_err(),
        ProtobufError::Invalid("messages nest too deep".to_string())
    );
}
