//! The CustomResourceDefinition that makes the API server serve [`Foo`]s, and installing it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    CustomResourceSubresourceStatus, CustomResourceSubresources, CustomResourceValidation, JSON,
    JSONSchemaProps, ValidationRule,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use tokio::time::Instant;

use super::Foo;

/// Why [`install_crd`] failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The API server refused a request.
    #[error("installing the Foo CRD")]
    Api(#[from] kube::Error),
    /// The CRD exists but was not established in time.
    #[error("the Foo CRD was not established within {0:?}")]
    NotEstablished(Duration),
}

/// An object schema with `properties`.
fn object(
    properties: impl IntoIterator<Item = (&'static str, JSONSchemaProps)>,
) -> JSONSchemaProps {
    JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some(
            properties
                .into_iter()
                .map(|(name, schema)| (name.to_owned(), schema))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..JSONSchemaProps::default()
    }
}

/// A column of `kubectl get foos`.
fn column(name: &str, type_: &str, json_path: &str) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        name: name.into(),
        type_: type_.into(),
        json_path: json_path.into(),
        ..CustomResourceColumnDefinition::default()
    }
}

fn typed(type_: &str, description: &str) -> JSONSchemaProps {
    JSONSchemaProps {
        type_: Some(type_.into()),
        description: Some(description.into()),
        ..JSONSchemaProps::default()
    }
}

/// The CustomResourceDefinition `foos.samplecontroller.k8s.io`: namespaced, one served and
/// stored version `v1alpha1` whose schema describes [`FooSpec`](super::FooSpec) and
/// [`FooStatus`](super::FooStatus): a Deployment name that is a DNS label (or empty, which the
/// reconciler reports) and never changes (a CEL rule), 1 to 10 replicas defaulting to 1. The status subresource keeps spec
/// and status written apart, the scale subresource lets `kubectl scale foo` set the replicas,
/// and `kubectl get foos` shows the Deployment, desired and available replicas.
pub fn foo_crd() -> CustomResourceDefinition {
    let replicas = JSONSchemaProps {
        minimum: Some(1.0),
        maximum: Some(10.0),
        default: Some(JSON(serde_json::json!(1))),
        ..typed("integer", "How many replicas the Deployment should run.")
    };
    let deployment_name = JSONSchemaProps {
        max_length: Some(63),
        pattern: Some("^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$".into()),
        ..typed("string", "The name of the Deployment the Foo owns.")
    };
    let spec = JSONSchemaProps {
        required: Some(vec!["deploymentName".into()]),
        // The Foo owns the Deployment it names: renaming would orphan it.
        x_kubernetes_validations: Some(vec![ValidationRule {
            rule: "self.deploymentName == oldSelf.deploymentName".into(),
            message: Some("deploymentName is immutable".into()),
            ..ValidationRule::default()
        }]),
        ..object([("deploymentName", deployment_name), ("replicas", replicas)])
    };
    let status = object([(
        "availableReplicas",
        typed("integer", "The Deployment's available replicas."),
    )]);
    let (group, plural) = (Foo::group(&()), Foo::plural(&()));
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{plural}.{group}")),
            // Its group is a Kubernetes community one (`*.k8s.io`), whose CRDs need an API
            // approval; Kubernetes' sample-controller says, as this, that it has none.
            annotations: Some(
                [(
                    "api-approved.kubernetes.io".to_owned(),
                    "unapproved, experimental-only; please get an approval from Kubernetes API reviewers if you're trying to develop a CRD in the *.k8s.io or *.kubernetes.io groups".to_owned(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: group.into_owned(),
            names: CustomResourceDefinitionNames {
                kind: Foo::kind(&()).into_owned(),
                list_kind: Some("FooList".into()),
                plural: plural.into_owned(),
                singular: Some("foo".into()),
                ..CustomResourceDefinitionNames::default()
            },
            scope: "Namespaced".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: Foo::version(&()).into_owned(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(object([("spec", spec), ("status", status)])),
                }),
                subresources: Some(CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(serde_json::json!({}))),
                    scale: Some(CustomResourceSubresourceScale {
                        spec_replicas_path: ".spec.replicas".into(),
                        status_replicas_path: ".status.availableReplicas".into(),
                        label_selector_path: None,
                    }),
                }),
                additional_printer_columns: Some(vec![
                    column("Deployment", "string", ".spec.deploymentName"),
                    column("Desired", "integer", ".spec.replicas"),
                    column("Available", "integer", ".status.availableReplicas"),
                    column("Age", "date", ".metadata.creationTimestamp"),
                ]),
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        status: None,
    }
}

/// Whether the API server reports `crd` as established (its resource is served).
pub fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|condition| condition.type_ == "Established" && condition.status == "True")
        })
}

/// Creates [`foo_crd`] (an existing one is kept as it is) and waits up to `timeout` until it is
/// established, polling every 100 ms.
pub async fn install_crd(client: Client, timeout: Duration) -> Result<(), InstallError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let crd = foo_crd();
    let name = crd.metadata.name.clone().unwrap_or_default();
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_already_exists() => {}
        Err(error) => return Err(error.into()),
    }
    let deadline = Instant::now() + timeout;
    loop {
        if is_established(&crds.get(&name).await?) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(InstallError::NotEstablished(timeout));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn the_crd_serves_foos_with_a_status_subresource() {
        let crd = serde_json::to_value(foo_crd()).unwrap();
        assert_eq!(crd["metadata"]["name"], "foos.samplecontroller.k8s.io");
        let spec = &crd["spec"];
        assert_eq!(spec["group"], "samplecontroller.k8s.io");
        assert_eq!(spec["scope"], "Namespaced");
        assert_eq!(spec["names"]["kind"], "Foo");
        assert_eq!(spec["names"]["plural"], "foos");
        let version = &spec["versions"][0];
        assert_eq!(version["name"], "v1alpha1");
        assert_eq!(
            version["subresources"],
            json!({"status": {}, "scale": {
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.availableReplicas",
            }})
        );
        assert_eq!(version["additionalPrinterColumns"][0]["name"], "Deployment");
        let schema = &version["schema"]["openAPIV3Schema"]["properties"];
        assert_eq!(
            schema["spec"]["properties"]["replicas"]["default"],
            json!(1)
        );
        assert_eq!(
            schema["spec"]["properties"]["deploymentName"]["type"],
            "string"
        );
        assert_eq!(schema["spec"]["properties"]["replicas"]["minimum"], 1.0);
        assert_eq!(
            schema["status"]["properties"]["availableReplicas"]["type"],
            "integer"
        );
        assert!(!is_established(&foo_crd()));
    }
}
