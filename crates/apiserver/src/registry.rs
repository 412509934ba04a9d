//! The resources the server serves, looked up by URL, and listed for discovery.

use parking_lot::RwLock;

use crate::resource::{ResourceKind, builtin_resources};

/// The served resources: the built-ins, then every custom resource as its CRD is created.
#[derive(Debug)]
pub struct Registry {
    kinds: RwLock<Vec<ResourceKind>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            kinds: RwLock::new(builtin_resources()),
        }
    }
}

impl Registry {
    /// The resource `plural` of `group`/`version`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<ResourceKind> {
        self.kinds
            .read()
            .iter()
            .find(|kind| kind.group == group && kind.version == version && kind.plural == plural)
            .cloned()
    }

    /// The resource named `plural` in any version of `group`.
    pub fn find_in_group(&self, group: &str, plural: &str) -> Option<ResourceKind> {
        self.kinds
            .read()
            .iter()
            .find(|kind| kind.group == group && kind.plural == plural)
            .cloned()
    }

    /// Every served version of the resource `plural` of `group`.
    pub fn all_versions(&self, group: &str, plural: &str) -> Vec<ResourceKind> {
        self.kinds
            .read()
            .iter()
            .filter(|kind| kind.group == group && kind.plural == plural)
            .cloned()
            .collect()
    }

    /// Serves the custom resource `kind` (replacing one of the same group, version and
    /// plural). A built-in resource is never replaced: a CRD whose group and plural name one
    /// (`deployments.apps`) is not served, and the built-in goes on answering its URLs, as
    /// kube-apiserver routes a built-in group before any CRD. The two would also share the
    /// store's objects, which is why no version of it is served, not only the built-in's.
    pub fn add(&self, kind: ResourceKind) {
        let mut kinds = self.kinds.write();
        if kind.builtin.is_none() && is_builtin(&kinds, &kind.group, &kind.plural) {
            return;
        }
        kinds.retain(|known| {
            !(known.group == kind.group
                && known.version == kind.version
                && known.plural == kind.plural)
        });
        kinds.push(kind);
    }

    /// Stops serving the custom resource `plural` of `group` (all versions); a built-in one is
    /// always served.
    pub fn remove(&self, group: &str, plural: &str) {
        self.kinds.write().retain(|known| {
            known.builtin.is_some() || !(known.group == group && known.plural == plural)
        });
    }

    /// Every served version of the custom resource `plural` of `group` (none for a built-in).
    pub fn custom_versions(&self, group: &str, plural: &str) -> Vec<ResourceKind> {
        self.kinds
            .read()
            .iter()
            .filter(|kind| kind.builtin.is_none() && kind.group == group && kind.plural == plural)
            .cloned()
            .collect()
    }

    /// The resources of `group`/`version`.
    pub fn resources(&self, group: &str, version: &str) -> Vec<ResourceKind> {
        self.kinds
            .read()
            .iter()
            .filter(|kind| kind.group == group && kind.version == version)
            .cloned()
            .collect()
    }

    /// Every non-core group with its versions, in the order they were first served.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for kind in self
            .kinds
            .read()
            .iter()
            .filter(|kind| !kind.group.is_empty())
        {
            match groups.iter_mut().find(|(group, _)| *group == kind.group) {
                Some((_, versions)) => {
                    if !versions.contains(&kind.version) {
                        versions.push(kind.version.clone());
                    }
                }
                None => groups.push((kind.group.clone(), vec![kind.version.clone()])),
            }
        }
        groups
    }
}

/// Whether `kinds` holds a built-in resource `plural` of `group`.
fn is_builtin(kinds: &[ResourceKind], group: &str, plural: &str) -> bool {
    kinds
        .iter()
        .any(|kind| kind.builtin.is_some() && kind.group == group && kind.plural == plural)
}
