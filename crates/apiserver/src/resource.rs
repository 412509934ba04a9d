//! What the server knows about each resource it serves: its group, version, names, scope, and
//! the storage rules that differ between resources.

use std::fmt;
use std::sync::Arc;

use crate::custom::CustomVersion;
use crate::kinds::{BuiltinType, builtin_types};

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
    /// Categories, e.g. `all`.
    pub categories: Vec<String>,
    /// Whether it has a `scale` subresource.
    pub scale: bool,
    /// Whether a DELETE that removes an object answers with the object (rather than a `Status`).
    pub returns_deleted_object: bool,
    /// The fields a field selector may name besides `metadata.name` and `metadata.namespace`.
    pub selectable_fields: Vec<SelectableField>,
    /// The built-in type behind it; `None` for a custom resource.
    pub builtin: Option<&'static BuiltinType>,
    /// Whether it is only created and answered, never stored (the review kinds).
    pub create_only: bool,
    /// What a custom resource's CRD says of this version (its schema, scale, columns); `None`
    /// for built-in kinds, whose types are their schemas.
    pub custom: Option<Arc<CustomVersion>>,
}

impl ResourceKind {
    /// Whether this is one of [`builtin_resources`], not a custom resource: only those take a
    /// strategic merge patch.
    pub fn is_builtin(&self) -> bool {
        self.builtin.is_some()
    }

    /// Whether this is the CustomResourceDefinition resource itself.
    pub fn is_crd(&self) -> bool {
        self.builtin.is_some()
            && self.group == "apiextensions.k8s.io"
            && self.plural == "customresourcedefinitions"
    }

    /// `<plural>` for the core group and `<plural>.<group>` otherwise: how error messages name it.
    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `<Kind>` for the core group and `<Kind>.<group>` otherwise: how validation errors (and
    /// a delete's preconditions) name it.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
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

/// A field a field selector may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectableField {
    /// Its name in a selector, e.g. `spec.nodeName`.
    pub label: String,
    /// The dotted JSON path it reads.
    pub path: String,
    /// Its value when the object leaves the path out.
    pub absent: String,
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

impl ResourceKind {
    /// The resource a built-in type defines.
    pub fn builtin(builtin: &'static BuiltinType) -> Self {
        let facts = &builtin.facts;
        let strings = |names: &[&str]| names.iter().map(|name| name.to_string()).collect();
        Self {
            group: builtin.group.to_string(),
            version: builtin.version.to_string(),
            plural: builtin.plural.to_string(),
            singular: builtin.kind.to_ascii_lowercase(),
            kind: builtin.kind.to_string(),
            namespaced: builtin.namespaced,
            short_names: strings(facts.short_names),
            status_subresource: facts.status,
            tracks_generation: facts.generation,
            requires_resource_version_on_update: facts.requires_resource_version,
            create_on_update: facts.create_on_update,
            categories: strings(facts.categories),
            scale: facts.scale,
            returns_deleted_object: facts.returns_deleted_object,
            selectable_fields: facts
                .selectable_fields
                .iter()
                .map(|(label, path, absent)| SelectableField {
                    label: label.to_string(),
                    path: path.to_string(),
                    absent: absent.to_string(),
                })
                .collect(),
            builtin: Some(builtin),
            create_only: facts.create_only,
            custom: None,
        }
    }
}

/// The built-in resources the server serves before any CRD is created.
pub fn builtin_resources() -> Vec<ResourceKind> {
    builtin_types().iter().map(ResourceKind::builtin).collect()
}

/// The built-in resource `plural` of `group`, if there is one.
pub fn builtin_resource(group: &str, plural: &str) -> Option<ResourceKind> {
    builtin_types()
        .iter()
        .find(|builtin| builtin.group == group && builtin.plural == plural)
        .map(ResourceKind::builtin)
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
