//! A Service's cluster IP and node ports: allocated on create from the service range
//! (10.96.0.0/12, kubeadm's and kind's; the `default/kubernetes` Service has its first address)
//! and the node port range (30000-32767), kept on update when the update leaves them out, as
//! kube-apiserver's Service registry does. A headless Service (`clusterIP: None`) and an
//! `ExternalName` one get no address.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use super::{Context, map_at};
use crate::resource::{ResourceKind, builtin_resource};
use crate::rest::status::ApiError;
use crate::storage::Cause;

/// The first address of the service range, and how many addresses it has.
const SERVICE_RANGE: (Ipv4Addr, u32) = (Ipv4Addr::new(10, 96, 0, 0), 1 << 20);
/// The node port range.
const NODE_PORTS: std::ops::RangeInclusive<u16> = 30000..=32767;

/// The address of the `default/kubernetes` Service: the range's first.
pub(crate) const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";

/// Serializes allocations: two Services written at once never get the same address or port.
#[derive(Debug, Default)]
pub(crate) struct ServiceAllocations {
    lock: Mutex<()>,
}

impl ServiceAllocations {
    /// Runs `write` (a write's strategy, which allocates for a Service, and the store write
    /// that records it) alone among the writes of Services; the writes of other kinds
    /// allocate nothing and run as they come.
    pub(crate) fn serialized<T>(
        &self,
        kind: &ResourceKind,
        write: impl FnOnce() -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let _held = (kind.group.is_empty() && kind.plural == "services").then(|| self.lock.lock());
        write()
    }
}

pub(super) fn prepare_for_create(
    service: &mut Value,
    old: Option<&Value>,
    context: &Context<'_>,
) -> Result<(), ApiError> {
    let name = service["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    if let Some(old) = old {
        keep_allocated(service, old);
    } else if let Some(status) = map_at(service, "status") {
        status
            .entry("loadBalancer")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    let Some(spec) = map_at(service, "spec") else {
        return Ok(());
    };
    let service_type = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    if service_type == "ExternalName" {
        return Ok(());
    }
    let (used_ips, used_ports) = used(context);
    match spec.get("clusterIP").and_then(Value::as_str) {
        Some("None") => {
            spec.insert("clusterIPs".into(), json!(["None"]));
        }
        Some(ip) if !ip.is_empty() => {
            if old.is_none() {
                check_requested(&name, ip, &used_ips)?;
            }
            spec.insert("clusterIPs".into(), json!([ip]));
        }
        _ => {
            let ip = free_ip(&used_ips).ok_or_else(|| {
                ApiError::internal("failed to allocate a serviceIP: range is full")
            })?;
            spec.insert("clusterIP".into(), json!(ip.to_string()));
            spec.insert("clusterIPs".into(), json!([ip.to_string()]));
        }
    }
    spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
    spec.entry("ipFamilyPolicy")
        .or_insert_with(|| json!("SingleStack"));
    if matches!(service_type.as_str(), "NodePort" | "LoadBalancer") {
        let mut taken = used_ports;
        if let Some(Value::Array(ports)) = spec.get_mut("ports") {
            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                if port.get("nodePort").and_then(Value::as_u64).unwrap_or(0) != 0 {
                    continue;
                }
                let free = NODE_PORTS
                    .clone()
                    .find(|candidate| !taken.contains(candidate))
                    .ok_or_else(|| {
                        ApiError::internal("failed to allocate a nodePort: range is full")
                    })?;
                taken.insert(free);
                port.insert("nodePort".into(), json!(free));
            }
        }
    }
    Ok(())
}

/// An update that leaves out what was allocated keeps it (kube's `patchAllocatedValues`).
fn keep_allocated(service: &mut Value, old: &Value) {
    let Some(spec) = map_at(service, "spec") else {
        return;
    };
    let same_type = spec.get("type") == old["spec"].get("type");
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        let unset = spec
            .get(field)
            .is_none_or(|value| value.is_null() || value == "" || value == &json!([]));
        if unset && let Some(kept) = old["spec"].get(field) {
            spec.insert(field.into(), kept.clone());
        }
    }
    if !same_type {
        return;
    }
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            if port.get("nodePort").is_some() {
                continue;
            }
            let matching = old["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|old| {
                    old["port"] == port.get("port").cloned().unwrap_or_default()
                        && old["protocol"] == port.get("protocol").cloned().unwrap_or_default()
                });
            if let Some(node_port) = matching.and_then(|old| old.get("nodePort")) {
                port.insert("nodePort".into(), node_port.clone());
            }
        }
    }
}

/// The addresses and node ports the stored Services hold.
fn used(context: &Context<'_>) -> (HashSet<Ipv4Addr>, HashSet<u16>) {
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    let Some(services) = builtin_resource("", "services") else {
        return (ips, ports);
    };
    let stored = context.store.list_latest(&services, None);
    for service in stored {
        let spec = &service["spec"];
        for ip in spec["clusterIPs"].as_array().into_iter().flatten() {
            if let Some(ip) = ip.as_str().and_then(|ip| ip.parse().ok()) {
                ips.insert(ip);
            }
        }
        for port in spec["ports"].as_array().into_iter().flatten() {
            if let Some(port) = port["nodePort"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
            {
                ports.insert(port);
            }
        }
    }
    (ips, ports)
}

/// A random free address of the range (not its network address, nor its first, which the
/// `kubernetes` Service has).
fn free_ip(used: &HashSet<Ipv4Addr>) -> Option<Ipv4Addr> {
    let (base, size) = SERVICE_RANGE;
    let base = u32::from(base);
    let start = fastrand_offset(size);
    (0..size)
        .map(|step| (start + step) % size)
        .filter(|offset| *offset > 1 && *offset < size - 1)
        .map(|offset| Ipv4Addr::from(base + offset))
        .find(|ip| !used.contains(ip))
}

/// A random offset into a range of `size` addresses.
fn fastrand_offset(size: u32) -> u32 {
    let random = uuid::Uuid::new_v4();
    let bytes = random.as_bytes();
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) % size
}

/// A Service that asks for an address must ask for a free one in the range.
fn check_requested(name: &str, ip: &str, used: &HashSet<Ipv4Addr>) -> Result<(), ApiError> {
    let invalid = |detail: &str| {
        ApiError::invalid(
            "",
            "Service",
            name,
            vec![Cause {
                reason: "FieldValueInvalid",
                field: "spec.clusterIPs".to_string(),
                message: format!("Invalid value: [{ip:?}]: {detail}"),
            }],
        )
    };
    let Ok(address) = ip.parse::<Ipv4Addr>() else {
        return Err(invalid("must be a valid IP address"));
    };
    let (base, size) = SERVICE_RANGE;
    let offset = u32::from(address).wrapping_sub(u32::from(base));
    if offset >= size {
        return Err(invalid(
            "failed to allocate IP: the provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12",
        ));
    }
    if used.contains(&address) {
        return Err(invalid(&format!(
            "failed to allocate IP {ip}: provided IP is already allocated"
        )));
    }
    Ok(())
}
