//! The subresources a resource has, as discovery lists them and the router serves them: `status`
//! and `scale` from the resource's facts, and those of single kinds (a Pod's
//! `ephemeralcontainers`, `eviction` and `binding`, a ServiceAccount's `token`, a CSR's
//! `approval`, a Namespace's `finalize`).

use crate::resource::ResourceKind;

/// One subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subresource {
    /// Its name in the URL, e.g. `status`.
    pub name: &'static str,
    /// The group of what it takes and answers; empty for the core group.
    pub group: String,
    /// Its version.
    pub version: String,
    /// Its kind, e.g. `Scale`.
    pub kind: String,
    /// The verbs it serves.
    pub verbs: &'static [&'static str],
}

const READ_WRITE: &[&str] = &["get", "patch", "update"];
const CREATE: &[&str] = &["create"];

/// The subresources of `kind`.
pub fn subresources(kind: &ResourceKind) -> Vec<Subresource> {
    let own = |name: &'static str, verbs: &'static [&'static str]| Subresource {
        name,
        group: kind.group.clone(),
        version: kind.version.clone(),
        kind: kind.kind.clone(),
        verbs,
    };
    let other = |name: &'static str, group: &str, version: &str, of: &str, verbs| Subresource {
        name,
        group: group.to_string(),
        version: version.to_string(),
        kind: of.to_string(),
        verbs,
    };
    let mut found = Vec::new();
    if kind.status_subresource {
        found.push(own("status", READ_WRITE));
    }
    if kind.scale {
        found.push(other("scale", "autoscaling", "v1", "Scale", READ_WRITE));
    }
    if kind.builtin.is_none() {
        return found;
    }
    match (kind.group.as_str(), kind.plural.as_str()) {
        ("", "pods") => {
            found.push(own("ephemeralcontainers", READ_WRITE));
            found.push(other("eviction", "policy", "v1", "Eviction", CREATE));
            found.push(other("binding", "", "v1", "Binding", CREATE));
        }
        ("", "serviceaccounts") => {
            found.push(other(
                "token",
                "authentication.k8s.io",
                "v1",
                "TokenRequest",
                CREATE,
            ));
        }
        ("", "namespaces") => found.push(own("finalize", &["update"])),
        ("certificates.k8s.io", "certificatesigningrequests") => {
            found.push(own("approval", READ_WRITE));
        }
        _ => {}
    }
    found
}

/// The verbs of the resource itself.
pub fn verbs(kind: &ResourceKind) -> &'static [&'static str] {
    if kind.create_only {
        return &["create"];
    }
    match (
        kind.group.as_str(),
        kind.plural.as_str(),
        kind.builtin.is_some(),
    ) {
        ("", "componentstatuses", true) => &["get", "list"],
        _ => &[
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ],
    }
}
