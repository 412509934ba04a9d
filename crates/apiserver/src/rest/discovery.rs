//! Discovery: what groups, versions and resources the server serves, and its version.
//!
//! `/api` and `/apis` answer in two forms, as kube-apiserver does: the aggregated discovery
//! document (`APIGroupDiscoveryList` of `apidiscovery.k8s.io/v2`, every group, version and
//! resource in one answer, with an `ETag`) to a client that asks for it in `Accept`, and the
//! legacy `APIVersions` / `APIGroupList` to any other; `/api/v1` and `/apis/<g>/<v>` are the
//! legacy per-group-version `APIResourceList`s.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::status::{ApiError, json_response};
use crate::kinds::subresources::{subresources, verbs};
use crate::registry::Registry;
use crate::resource::ResourceKind;

/// The media type of aggregated discovery.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn legacy_entries(kind: &ResourceKind) -> Vec<Value> {
    let mut main = json!({
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": verbs(kind),
    });
    if !kind.short_names.is_empty() {
        main["shortNames"] = json!(kind.short_names);
    }
    if !kind.categories.is_empty() {
        main["categories"] = json!(kind.categories);
    }
    let mut entries = vec![main];
    for subresource in subresources(kind) {
        let mut entry = json!({
            "name": format!("{}/{}", kind.plural, subresource.name),
            "singularName": "",
            "namespaced": kind.namespaced,
            "kind": subresource.kind,
            "verbs": subresource.verbs,
        });
        if subresource.group != kind.group || subresource.version != kind.version {
            entry["group"] = json!(subresource.group);
            entry["version"] = json!(subresource.version);
        }
        entries.push(entry);
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
    let resources: Vec<Value> = kinds.iter().flat_map(legacy_entries).collect();
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// Which form of `/api` or `/apis` the client asked for: `Some(true)` for aggregated
/// discovery, `Some(false)` for the legacy documents, `None` when it accepts neither (only
/// `v2beta1` of aggregated discovery, which kube-apiserver no longer serves).
fn wants_aggregated(headers: &HeaderMap) -> Option<bool> {
    let ranges: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|range| range.trim().to_ascii_lowercase())
        .collect();
    if ranges.is_empty() {
        return Some(false);
    }
    for range in &ranges {
        let mut parts = range.split(';').map(str::trim);
        let media_type = parts.next().unwrap_or_default();
        let parameters: Vec<&str> = parts.collect();
        if !matches!(media_type, "application/json" | "application/*" | "*/*") {
            continue;
        }
        let aggregated = parameters.contains(&"as=apigroupdiscoverylist");
        if !aggregated {
            return Some(false);
        }
        if parameters.contains(&"g=apidiscovery.k8s.io") && parameters.contains(&"v=v2") {
            return Some(true);
        }
    }
    None
}

fn aggregated_resource(kind: &ResourceKind) -> Value {
    let builtin = kind.builtin.is_some();
    let response_kind = |group: &str, version: &str, of: &str, own: bool| {
        if builtin && own {
            json!({"group": "", "version": "", "kind": of})
        } else {
            json!({"group": group, "version": version, "kind": of})
        }
    };
    let mut entry = json!({
        "resource": kind.plural,
        "responseKind": response_kind(&kind.group, &kind.version, &kind.kind, true),
        "scope": if kind.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": kind.singular,
        "verbs": verbs(kind),
    });
    if !kind.short_names.is_empty() {
        entry["shortNames"] = json!(kind.short_names);
    }
    if !kind.categories.is_empty() {
        entry["categories"] = json!(kind.categories);
    }
    let subresources: Vec<Value> = subresources(kind)
        .into_iter()
        .map(|subresource| {
            let own = subresource.group == kind.group && subresource.version == kind.version;
            json!({
                "subresource": subresource.name,
                "responseKind": response_kind(&subresource.group, &subresource.version, &subresource.kind, own),
                "verbs": subresource.verbs,
            })
        })
        .collect();
    if !subresources.is_empty() {
        entry["subresources"] = Value::Array(subresources);
    }
    entry
}

/// The aggregated discovery document of the core group (`core`) or of every other group.
fn aggregated(registry: &Registry, core: bool) -> Value {
    let groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_string()])]
    } else {
        registry.groups()
    };
    let items: Vec<Value> = groups
        .iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|version| {
                    let resources: Vec<Value> = registry
                        .resources(group, version)
                        .iter()
                        .map(aggregated_resource)
                        .collect();
                    json!({"version": version, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let metadata = if group.is_empty() {
                json!({})
            } else {
                json!({"name": group})
            };
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// `/api` (`core`) or `/apis` in the form the client asked for.
pub fn root(
    registry: &Registry,
    core: bool,
    server_address: &str,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    match wants_aggregated(headers) {
        None => Err(ApiError::not_acceptable(&[AGGREGATED, "application/json"])),
        Some(false) if core => Ok(json_response(200, &core_versions(server_address))),
        Some(false) => Ok(json_response(200, &groups(registry))),
        Some(true) => {
            let body = serde_json::to_vec(&aggregated(registry, core)).unwrap_or_default();
            let digest = ring::digest::digest(&ring::digest::SHA512, &body);
            let etag: String = digest
                .as_ref()
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect();
            let etag = format!("\"{etag}\"");
            let unchanged = headers
                .get(header::IF_NONE_MATCH)
                .and_then(|value| value.to_str().ok())
                .is_some_and(|value| value == etag);
            let mut response = if unchanged {
                let mut response = Response::new(axum::body::Body::empty());
                *response.status_mut() = StatusCode::NOT_MODIFIED;
                response
            } else {
                Response::new(axum::body::Body::from(body))
            };
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(AGGREGATED));
            headers.insert(header::VARY, HeaderValue::from_static("Accept"));
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("public"));
            if let Ok(value) = HeaderValue::from_str(&etag) {
                headers.insert(header::ETAG, value);
            }
            Ok(response)
        }
    }
}

/// `/version`, for the Kubernetes version the build's k8s-openapi serves.
pub fn version() -> Value {
    let minor = crate::kinds::kubernetes_minor();
    json!({
        "major": "1",
        "minor": minor.to_string(),
        "emulationMajor": "1",
        "emulationMinor": minor.to_string(),
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": (minor - 1).to_string(),
        "gitVersion": format!("v1.{minor}.0-ctrlkit"),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-11-22T00:00:00Z",
        "goVersion": "",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn clients_get_the_form_they_ask_for() {
        let kube_rs = accept(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
        );
        assert_eq!(wants_aggregated(&kube_rs), Some(true));
        assert_eq!(wants_aggregated(&accept("application/json")), Some(false));
        assert_eq!(wants_aggregated(&HeaderMap::new()), Some(false));
        assert_eq!(
            wants_aggregated(&accept(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            )),
            None
        );
    }

    #[test]
    fn the_aggregated_document_lists_every_resource_with_its_subresources() {
        let registry = Registry::default();
        let core = aggregated(&registry, true);
        let resources = core["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap();
        let pods = resources.iter().find(|r| r["resource"] == "pods").unwrap();
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(
            pods["responseKind"],
            json!({"group": "", "version": "", "kind": "Pod"})
        );
        let subresources: Vec<&str> = pods["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["subresource"].as_str().unwrap())
            .collect();
        assert!(subresources.contains(&"status") && subresources.contains(&"eviction"));
        let apps = aggregated(&registry, false);
        let apps = apps["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|group| group["metadata"]["name"] == "apps")
            .unwrap();
        let deployments = apps["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        assert_eq!(deployments["categories"], json!(["all"]));
        assert_eq!(
            deployments["subresources"][1]["responseKind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );
    }
}
