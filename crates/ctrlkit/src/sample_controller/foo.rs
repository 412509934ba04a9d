//! The `Foo` custom resource: a wish for a Deployment of a given name and size.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::NamespaceResourceScope;
use serde::{Deserialize, Serialize, Serializer};

/// A `Foo` of `samplecontroller.k8s.io/v1alpha1`: the controller keeps a Deployment named
/// `spec.deploymentName` with `spec.replicas` replicas in the Foo's namespace, and reports the
/// Deployment's available replicas in `status`.
///
/// Decoding is lenient (a missing field takes its default), so that one malformed object cannot
/// stop an informer; the reconciler rejects what it cannot act on.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Foo {
    /// The object's metadata.
    pub metadata: ObjectMeta,
    /// What the Foo asks for.
    pub spec: FooSpec,
    /// What the controller last saw; written through the status subresource only.
    pub status: Option<FooStatus>,
}

/// What a [`Foo`] asks for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FooSpec {
    /// The name of the Deployment to keep; an empty name is an error that retrying cannot fix.
    pub deployment_name: String,
    /// How many replicas the Deployment should have (the CRD's schema defaults it to 1); when
    /// unset, the Deployment's own count is left alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}

/// What the controller reports about a [`Foo`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FooStatus {
    /// The available replicas of the Foo's Deployment.
    pub available_replicas: i32,
}

impl Foo {
    /// A Foo named `name` (in the client's or the API's namespace) with `spec`.
    pub fn new(name: &str, spec: FooSpec) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

impl Resource for Foo {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Foo".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "samplecontroller.k8s.io".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1alpha1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "foos".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Written with its `apiVersion` and `kind`, which the type itself does not store.
impl Serialize for Foo {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Typed<'a> {
            api_version: &'a str,
            kind: &'a str,
            metadata: &'a ObjectMeta,
            spec: &'a FooSpec,
            #[serde(skip_serializing_if = "Option::is_none")]
            status: &'a Option<FooStatus>,
        }
        Typed {
            api_version: &Foo::api_version(&()),
            kind: &Foo::kind(&()),
            metadata: &self.metadata,
            spec: &self.spec,
            status: &self.status,
        }
        .serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_in_camel_case_with_its_type() {
        let mut foo = Foo::new(
            "example",
            FooSpec {
                deployment_name: "web".into(),
                replicas: Some(2),
            },
        );
        foo.status = Some(FooStatus {
            available_replicas: 1,
        });
        let json = serde_json::to_value(&foo).unwrap();
        assert_eq!(
            json,
            json!({
                "apiVersion": "samplecontroller.k8s.io/v1alpha1",
                "kind": "Foo",
                "metadata": {"name": "example"},
                "spec": {"deploymentName": "web", "replicas": 2},
                "status": {"availableReplicas": 1},
            })
        );
        assert_eq!(serde_json::from_value::<Foo>(json).unwrap(), foo);
    }

    #[test]
    fn missing_fields_decode_to_defaults() {
        let foo: Foo = serde_json::from_value(json!({"metadata": {"name": "bare"}})).unwrap();
        assert_eq!(foo.spec, FooSpec::default());
        assert_eq!(foo.status, None);
        assert_eq!(
            Foo::url_path(&(), Some("ns")),
            "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos"
        );
    }
}
