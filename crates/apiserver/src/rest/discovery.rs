//! Discovery: what groups, versions and resources the server serves, and its version.

use serde_json::{Value, json};

use crate::registry::Registry;
use crate::resource::ResourceKind;

const VERBS_NAMESPACED_OR_CLUSTER: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn resource_entries(kind: &ResourceKind) -> Vec<Value> {
    let mut main = json!({
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": VERBS_NAMESPACED_OR_CLUSTER,
    });
    if !kind.short_names.is_empty() {
        main["shortNames"] = json!(kind.short_names);
    }
    let mut entries = vec![main];
    if kind.status_subresource {
        entries.push(json!({
            "name": format!("{}/status", kind.plural),
            "singularName": "",
            "namespaced": kind.namespaced,
            "kind": kind.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    entries
}

/// `/api`: the core group's versions.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_entry(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|version| json!({"groupVersion": format!("{group}/{version}"), "version": version}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

/// `/apis`: every non-core group.
pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(group, versions)| group_entry(group, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`: one group, if served.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    registry
        .groups()
        .iter()
        .find(|(group, _)| group == name)
        .map(|(group, versions)| {
            let mut entry = group_entry(group, versions);
            entry["kind"] = json!("APIGroup");
            entry["apiVersion"] = json!("v1");
            entry
        })
}

/// `/api/v1` or `/apis/<group>/<version>`: the resources of one group version, if served.
pub fn resources(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let kinds = registry.resources(group, version);
    if kinds.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let resources: Vec<Value> = kinds.iter().flat_map(resource_entries).collect();
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-ctrlkit",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-11-22T00:00:00Z",
        "goVersion": "",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}
