//! The Deployment a [`Foo`] asks for, and whether a Deployment belongs to a Foo.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::Resource;

use super::Foo;

/// A [`Foo`] without a name or uid: one that was not read from the API server, which no owner
/// reference can point at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the Foo has no name or uid: it was not read from the API server")]
pub struct UnsavedFoo;

/// The Deployment `foo` asks for: named `spec.deploymentName` in the Foo's namespace, with
/// `spec.replicas` replicas of one nginx container, labelled `app=nginx` and
/// `controller=<the Foo's name>`, and controlled by the Foo (an owner reference with
/// `controller` and `blockOwnerDeletion` set, so the garbage collector deletes it with the Foo).
///
/// Fails if the Foo has no name or uid yet (it was not read from the API server).
pub fn new_deployment(foo: &Foo) -> Result<Deployment, UnsavedFoo> {
    let owner = foo.controller_owner_ref(&()).ok_or(UnsavedFoo)?;
    let labels = BTreeMap::from([
        ("app".to_owned(), "nginx".to_owned()),
        ("controller".to_owned(), owner.name.clone()),
    ]);
    Ok(Deployment {
        metadata: ObjectMeta {
            name: Some(foo.spec.deployment_name.clone()),
            namespace: foo.metadata.namespace.clone(),
            labels: Some(labels.clone()),
            owner_references: Some(vec![OwnerReference {
                block_owner_deletion: Some(true),
                ..owner
            }]),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            replicas: foo.spec.replicas,
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".into(),
                        image: Some("nginx:latest".into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        status: None,
    })
}

/// Whether `deployment`'s controller owner reference names `foo` by uid (`metav1.IsControlledBy`):
/// a Deployment owned by another object, or by none, is not the Foo's to change.
pub fn is_controlled_by(deployment: &Deployment, foo: &Foo) -> bool {
    let Some(uid) = foo.metadata.uid.as_deref() else {
        return false;
    };
    deployment
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.controller == Some(true) && owner.uid == uid)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::disallowed_names)]

    use super::*;
    use crate::sample_controller::FooSpec;

    fn foo() -> Foo {
        let mut foo = Foo::new(
            "example",
            FooSpec {
                deployment_name: "web".into(),
                replicas: Some(3),
            },
        );
        foo.metadata.namespace = Some("team".into());
        foo.metadata.uid = Some("uid-1".into());
        foo
    }

    #[test]
    fn the_new_deployment_is_controlled_by_its_foo() {
        let foo = foo();
        let deployment = new_deployment(&foo).unwrap();
        assert_eq!(deployment.metadata.name.as_deref(), Some("web"));
        assert_eq!(deployment.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(deployment.spec.replicas, Some(3));
        let owner = &deployment.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.controller, owner.block_owner_deletion),
            (Some(true), Some(true))
        );
        assert!(is_controlled_by(&deployment, &foo));
        assert_eq!(
            new_deployment(&Foo::default()),
            Err(UnsavedFoo),
            "no uid, no owner"
        );
    }

    #[test]
    fn orphans_foreign_and_non_controller_owners_do_not_count() {
        let foo = foo();
        let mut deployment = new_deployment(&foo).unwrap();
        let owners = deployment.metadata.owner_references.as_mut().unwrap();
        owners[0].controller = None;
        assert!(!is_controlled_by(&deployment, &foo), "a plain owner");
        let owners = deployment.metadata.owner_references.as_mut().unwrap();
        owners[0].controller = Some(true);
        owners[0].uid = "uid-2".into();
        assert!(!is_controlled_by(&deployment, &foo), "another Foo");
        deployment.metadata.owner_references = None;
        assert!(!is_controlled_by(&deployment, &foo), "an orphan");
    }
}
