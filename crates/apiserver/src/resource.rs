//! What the server knows about each resource it serves: its group, version, names, scope, and
//! the storage rules that differ between resources.

use std::fmt;

/// A resource the server serves, as its discovery document describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceKind {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version served (and stored).
    pub version: String,
    /// The plural name used in URLs, e.g. `configmaps`.
    pub plural: String,
    /// The singular name, e.g. `configmap`.
    pub singular: String,
    /// The kind of its objects, e.g. `ConfigMap`.
    pub kind: String,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
    /// Short names for kubectl, e.g. `cm`.
    pub short_names: Vec<String>,
    /// Whether it has a `status` subresource (then writes to the main resource keep status, and
    /// `generation` ignores status).
    pub status_subresource: bool,
    /// Whether `metadata.generation` is tracked (set to 1 on create, bumped on spec changes).
    pub tracks_generation: bool,
    /// Whether an update must carry a resourceVersion (custom resources and leases); others
    /// accept an unconditional update.
    pub requires_resource_version_on_update: bool,
    /// Whether an update of a missing object creates it (leases do; custom resources do not).
    pub create_on_update: bool,
}

/// The API groups of the built-in resources. A CRD cannot define a resource in the core or
/// `apps` group, and in a `*.k8s.io` group only with Kubernetes' API approval.
const BUILTIN_GROUPS: [&str; 5] = [
    "",
    "apps",
    "coordination.k8s.io",
    "events.k8s.io",
    "apiextensions.k8s.io",
];

impl ResourceKind {
    /// Whether this is one of [`builtin_resources`], not a custom resource: only those take a
    /// strategic merge patch.
    pub fn is_builtin(&self) -> bool {
        BUILTIN_GROUPS.contains(&self.group.as_str())
    }

    /// `<plural>` for the core group and `<plural>.<group>` otherwise: how error messages name it.
    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `v1` for the core group and `<group>/<version>` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The key the store files this resource's objects under.
    pub fn key(&self) -> ResourceKey {
        ResourceKey {
            group: self.group.clone(),
            plural: self.plural.clone(),
        }
    }
}

/// A resource's identity in the store: its group and plural name (all versions share storage).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    /// The API group; empty for the core group.
    pub group: String,
    /// The plural name.
    pub plural: String,
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.plural)
        } else {
            write!(f, "{}.{}", self.plural, self.group)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    singular: &str,
    kind: &str,
    namespaced: bool,
    short_names: &[&str],
    status_subresource: bool,
    tracks_generation: bool,
) -> ResourceKind {
    ResourceKind {
        group: group.to_string(),
        version: version.to_string(),
        plural: plural.to_string(),
        singular: singular.to_string(),
        kind: kind.to_string(),
        namespaced,
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        status_subresource,
        tracks_generation,
        requires_resource_version_on_update: false,
        create_on_update: false,
    }
}

/// The built-in resources the server serves before any CRD is created.
pub fn builtin_resources() -> Vec<ResourceKind> {
    let mut lease = builtin(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
        &[],
        false,
        false,
    );
    lease.requires_resource_version_on_update = true;
    lease.create_on_update = true;
    let mut crd = builtin(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        true,
        true,
    );
    crd.requires_resource_version_on_update = true;
    vec![
        builtin(
            "",
            "v1",
            "namespaces",
            "namespace",
            "Namespace",
            false,
            &["ns"],
            true,
            false,
        ),
        builtin("", "v1", "pods", "pod", "Pod", true, &["po"], true, true),
        builtin(
            "",
            "v1",
            "configmaps",
            "configmap",
            "ConfigMap",
            true,
            &["cm"],
            false,
            false,
        ),
        builtin(
            "",
            "v1",
            "secrets",
            "secret",
            "Secret",
            true,
            &[],
            false,
            false,
        ),
        builtin(
            "",
            "v1",
            "services",
            "service",
            "Service",
            true,
            &["svc"],
            true,
            false,
        ),
        builtin(
            "",
            "v1",
            "endpoints",
            "endpoints",
            "Endpoints",
            true,
            &["ep"],
            false,
            false,
        ),
        builtin(
            "",
            "v1",
            "events",
            "event",
            "Event",
            true,
            &["ev"],
            false,
            false,
        ),
        builtin(
            "apps",
            "v1",
            "deployments",
            "deployment",
            "Deployment",
            true,
            &["deploy"],
            true,
            true,
        ),
        builtin(
            "apps",
            "v1",
            "replicasets",
            "replicaset",
            "ReplicaSet",
            true,
            &["rs"],
            true,
            true,
        ),
        lease,
        builtin(
            "events.k8s.io",
            "v1",
            "events",
            "event",
            "Event",
            true,
            &["ev"],
            false,
            false,
        ),
        crd,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_error_messages_and_urls_need_them() {
        let resources = builtin_resources();
        let configmaps = resources.iter().find(|r| r.plural == "configmaps").unwrap();
        assert_eq!(configmaps.qualified_name(), "configmaps");
        assert_eq!(configmaps.api_version(), "v1");
        let leases = resources.iter().find(|r| r.plural == "leases").unwrap();
        assert_eq!(leases.qualified_name(), "leases.coordination.k8s.io");
        assert_eq!(leases.api_version(), "coordination.k8s.io/v1");
        assert_eq!(leases.key().to_string(), "leases.coordination.k8s.io");
        assert!(leases.create_on_update && leases.requires_resource_version_on_update);
    }
}
