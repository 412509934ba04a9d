//! The fields an endpoint resets, so that no manager owns them through it: a write to the main
//! resource does not change `status`, one to `status` does not change `spec` (and for some
//! kinds `metadata`). Each kind's strategy in kube-apiserver declares them
//! (`GetResetFields`); the field manager leaves them out of every manager's fields and never
//! counts a change to them as a conflict.

use super::path::PathElement;
use super::set::Set;
use crate::resource::ResourceKind;

/// Kinds whose `status` endpoint resets all of `metadata` as well as `spec`.
const STATUS_RESETS_METADATA: &[(&str, &str)] = &[
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    ),
    ("apiregistration.k8s.io", "apiservices"),
    ("flowcontrol.apiserver.k8s.io", "flowschemas"),
    (
        "flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations",
    ),
    ("internal.apiserver.k8s.io", "storageversions"),
    ("networking.k8s.io", "servicecidrs"),
    ("resource.k8s.io", "devicetaintrules"),
    ("resource.k8s.io", "resourceclaims"),
    ("scheduling.k8s.io", "podgroups"),
    ("storage.k8s.io", "volumeattachments"),
    ("storagemigration.k8s.io", "storageversionmigrations"),
];

/// The fields `kind`'s endpoint `subresource` (empty for the main resource) resets.
pub fn reset_fields(kind: &ResourceKind, subresource: &str) -> Set {
    let paths: &[&[&str]] = match (kind.group.as_str(), kind.plural.as_str(), subresource) {
        ("certificates.k8s.io", "certificatesigningrequests", "") => &[&["spec"], &["status"]],
        ("certificates.k8s.io", "certificatesigningrequests", "status") => {
            &[&["spec"], &["status", "conditions"]]
        }
        ("certificates.k8s.io", "certificatesigningrequests", "approval") => {
            &[&["spec"], &["status", "certificate"]]
        }
        ("", "namespaces", "finalize") => &[&["status"]],
        ("apps", "deployments", "status") => &[&["spec"], &["metadata", "labels"]],
        ("", "pods", "status") => &[
            &["spec"],
            &["metadata", "deletionTimestamp"],
            &["metadata", "ownerReferences"],
        ],
        (_, _, "") if kind.status_subresource => &[&["status"]],
        (_, _, "status") if kind.builtin.is_none() => &[&["metadata"], &["spec"]],
        (group, plural, "status") if STATUS_RESETS_METADATA.contains(&(group, plural)) => {
            &[&["metadata"], &["spec"]]
        }
        (_, _, "status") => &[&["spec"]],
        _ => &[],
    };
    let mut set = Set::new();
    for path in paths {
        let path: Vec<PathElement> = path.iter().map(|name| PathElement::field(name)).collect();
        set.insert(&path);
    }
    set
}
