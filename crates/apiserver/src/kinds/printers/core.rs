//! Printers of the core group.

use serde_json::{Value, json};

use super::cells::{
    age, condition, containers_and_images, int, is_true, labels, name, object_age, text,
};
use super::{AGE, Column, NAME, Printer, column, field, text as words, wide};

const POD_STATUS: &str = "io.k8s.api.core.v1.PodStatus";
const POD_SPEC: &str = "io.k8s.api.core.v1.PodSpec";
const SERVICE_SPEC: &str = "io.k8s.api.core.v1.ServiceSpec";
const EVENT: &str = "io.k8s.api.core.v1.Event";
const NODE_INFO: &str = "io.k8s.api.core.v1.NodeSystemInfo";
const NODE_STATUS: &str = "io.k8s.api.core.v1.NodeStatus";
const PV_SPEC: &str = "io.k8s.api.core.v1.PersistentVolumeSpec";
const PV_STATUS: &str = "io.k8s.api.core.v1.PersistentVolumeStatus";
const PVC_SPEC: &str = "io.k8s.api.core.v1.PersistentVolumeClaimSpec";
const PVC_STATUS: &str = "io.k8s.api.core.v1.PersistentVolumeClaimStatus";
const RC_SPEC: &str = "io.k8s.api.core.v1.ReplicationControllerSpec";
const RC_STATUS: &str = "io.k8s.api.core.v1.ReplicationControllerStatus";

/// The printer of the core resource `plural`.
pub(super) fn printer(plural: &str) -> Option<Printer> {
    Some(match plural {
        "pods" => Printer {
            columns: POD_COLUMNS,
            cells: pod,
        },
        "services" => Printer {
            columns: SERVICE_COLUMNS,
            cells: service,
        },
        "configmaps" => Printer {
            columns: CONFIGMAPS_COLUMNS,
            cells: |object, now| {
                let count = object["data"].as_object().map_or(0, |d| d.len())
                    + object["binaryData"].as_object().map_or(0, |d| d.len());
                vec![
                    json!(name(object)),
                    json!(count),
                    json!(object_age(object, now)),
                ]
            },
        },
        "secrets" => Printer {
            columns: SECRETS_COLUMNS,
            cells: |object, now| {
                let count = object["data"].as_object().map_or(0, |d| d.len());
                vec![
                    json!(name(object)),
                    json!(object["type"].as_str().unwrap_or_default()),
                    json!(count),
                    json!(object_age(object, now)),
                ]
            },
        },
        "namespaces" => Printer {
            columns: NAMESPACES_COLUMNS,
            cells: |object, now| {
                vec![
                    json!(name(object)),
                    json!(object["status"]["phase"].as_str().unwrap_or_default()),
                    json!(object_age(object, now)),
                ]
            },
        },
        "serviceaccounts" => Printer {
            columns: &[NAME, AGE],
            cells: |object, now| vec![json!(name(object)), json!(object_age(object, now))],
        },
        "nodes" => Printer {
            columns: NODE_COLUMNS,
            cells: node,
        },
        "events" => Printer {
            columns: EVENT_COLUMNS,
            cells: event,
        },
        "endpoints" => Printer {
            columns: ENDPOINTS_COLUMNS,
            cells: |object, now| {
                vec![
                    json!(name(object)),
                    json!(endpoints(object)),
                    json!(object_age(object, now)),
                ]
            },
        },
        "replicationcontrollers" => Printer {
            columns: REPLICATIONCONTROLLERS_COLUMNS,
            cells: |object, now| {
                let (containers, images) =
                    containers_and_images(&object["spec"]["template"]["spec"]);
                vec![
                    json!(name(object)),
                    json!(int(&object["spec"]["replicas"])),
                    json!(int(&object["status"]["replicas"])),
                    json!(int(&object["status"]["readyReplicas"])),
                    json!(object_age(object, now)),
                    json!(containers),
                    json!(images),
                    json!(labels(&object["spec"]["selector"])),
                ]
            },
        },
        "persistentvolumes" => Printer {
            columns: PV_COLUMNS,
            cells: persistent_volume,
        },
        "persistentvolumeclaims" => Printer {
            columns: PVC_COLUMNS,
            cells: persistent_volume_claim,
        },
        "podtemplates" => Printer {
            columns: PODTEMPLATES_COLUMNS,
            cells: |object, _| {
                let (containers, images) = containers_and_images(&object["template"]["spec"]);
                vec![
                    json!(name(object)),
                    json!(containers),
                    json!(images),
                    json!(labels(&object["template"]["metadata"]["labels"])),
                ]
            },
        },
        "resourcequotas" => Printer {
            columns: RESOURCEQUOTAS_COLUMNS,
            cells: |object, now| {
                let (requests, limits) = quota(object);
                vec![
                    json!(name(object)),
                    json!(requests),
                    json!(limits),
                    json!(object_age(object, now)),
                ]
            },
        },
        _ => return None,
    })
}

const POD_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Ready",
        "string",
        words("The aggregate readiness state of this pod for accepting traffic."),
    ),
    column(
        "Status",
        "string",
        words("The aggregate status of the containers in this pod."),
    ),
    column(
        "Restarts",
        "string",
        words(
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
    ),
    AGE,
    wide("IP", "string", field(POD_STATUS, "podIP")),
    wide("Node", "string", field(POD_SPEC, "nodeName")),
    wide(
        "Nominated Node",
        "string",
        field(POD_STATUS, "nominatedNodeName"),
    ),
    wide(
        "Readiness Gates",
        "string",
        field(POD_SPEC, "readinessGates"),
    ),
];

/// A pod's cells: its readiness, its aggregate status as kubectl words it, its restarts.
fn pod(pod: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let spec = &pod["spec"];
    let status = &pod["status"];
    let sidecars: Vec<&str> = spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|container| container["restartPolicy"] == "Always")
        .filter_map(|container| container["name"].as_str())
        .collect();
    let total = spec["containers"].as_array().map_or(0, Vec::len) + sidecars.len();
    let mut ready = 0;
    let mut restarts = 0;
    let mut sidecar_restarts = 0;
    let mut last_restart: Option<&Value> = None;
    let mut last_sidecar_restart: Option<&Value> = None;
    let mut reason = text(
        &status["reason"],
        status["phase"].as_str().unwrap_or_default(),
    )
    .to_string();
    if condition(&status["conditions"], "PodScheduled")
        .is_some_and(|scheduled| scheduled["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".to_string();
    }
    let init_count = spec["initContainers"].as_array().map_or(0, Vec::len);
    let mut initializing = false;
    let init_statuses = status["initContainerStatuses"].as_array();
    for (index, container) in init_statuses.into_iter().flatten().enumerate() {
        let count = int(&container["restartCount"]);
        restarts += count;
        let finished = &container["lastState"]["terminated"]["finishedAt"];
        if finished.is_string() {
            last_restart = later(last_restart, finished);
        }
        let sidecar = container["name"]
            .as_str()
            .is_some_and(|name| sidecars.contains(&name));
        if sidecar {
            sidecar_restarts += count;
            if finished.is_string() {
                last_sidecar_restart = later(last_sidecar_restart, finished);
            }
        }
        let terminated = &container["state"]["terminated"];
        let waiting = &container["state"]["waiting"];
        if terminated.is_object() && int(&terminated["exitCode"]) == 0 {
            continue;
        }
        if sidecar && container["started"] == true {
            if container["ready"] == true {
                ready += 1;
            }
            continue;
        }
        reason = if terminated.is_object() {
            match terminated["reason"].as_str().filter(|r| !r.is_empty()) {
                Some(why) => format!("Init:{why}"),
                None if int(&terminated["signal"]) != 0 => {
                    format!("Init:Signal:{}", int(&terminated["signal"]))
                }
                None => format!("Init:ExitCode:{}", int(&terminated["exitCode"])),
            }
        } else if let Some(why) = waiting["reason"]
            .as_str()
            .filter(|r| !r.is_empty() && *r != "PodInitializing")
        {
            format!("Init:{why}")
        } else {
            format!("Init:{index}/{init_count}")
        };
        initializing = true;
        break;
    }
    if !initializing || is_true(&status["conditions"], "Initialized") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut running = false;
        let mut error_reason = None;
        let statuses = status["containerStatuses"].as_array();
        for container in statuses.into_iter().flatten().rev() {
            restarts += int(&container["restartCount"]);
            let finished = &container["lastState"]["terminated"]["finishedAt"];
            if finished.is_string() {
                last_restart = later(last_restart, finished);
            }
            let state = &container["state"];
            if let Some(why) = state["waiting"]["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
            {
                reason = why.to_string();
            } else if state["terminated"].is_object() {
                let terminated = &state["terminated"];
                reason = match terminated["reason"].as_str().filter(|r| !r.is_empty()) {
                    Some(why) => why.to_string(),
                    None if int(&terminated["signal"]) != 0 => {
                        format!("Signal:{}", int(&terminated["signal"]))
                    }
                    None => format!("ExitCode:{}", int(&terminated["exitCode"])),
                };
                if int(&terminated["exitCode"]) != 0 {
                    error_reason = Some(reason.clone());
                }
            } else if container["ready"] == true && state["running"].is_object() {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" {
            if running && is_true(&status["conditions"], "Ready") {
                reason = "Running".to_string();
            } else if let Some(error) = error_reason {
                reason = error;
            } else if running {
                reason = "NotReady".to_string();
            }
        }
    }
    let deleting = pod["metadata"]["deletionTimestamp"].is_string();
    if deleting && status["reason"] == "NodeLost" {
        reason = "Unknown".to_string();
    } else if deleting && !matches!(status["phase"].as_str(), Some("Succeeded" | "Failed")) {
        reason = "Terminating".to_string();
    }
    let restarts_text = match last_restart {
        Some(when) if restarts > 0 => format!("{restarts} ({} ago)", age(when, now)),
        _ => restarts.to_string(),
    };
    let ip = status["podIPs"][0]["ip"]
        .as_str()
        .or_else(|| status["podIP"].as_str())
        .filter(|ip| !ip.is_empty())
        .unwrap_or("<none>");
    let gates = match spec["readinessGates"].as_array().filter(|g| !g.is_empty()) {
        Some(gates) => {
            let passed = gates
                .iter()
                .filter(|gate| {
                    gate["conditionType"]
                        .as_str()
                        .is_some_and(|kind| is_true(&status["conditions"], kind))
                })
                .count();
            format!("{passed}/{}", gates.len())
        }
        None => "<none>".to_string(),
    };
    vec![
        json!(name(pod)),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_text),
        json!(object_age(pod, now)),
        json!(ip),
        json!(text(&spec["nodeName"], "<none>")),
        json!(text(&status["nominatedNodeName"], "<none>")),
        json!(gates),
    ]
}

/// The later of two RFC 3339 timestamps (as text, which sorts as time for kube's format).
fn later<'a>(current: Option<&'a Value>, candidate: &'a Value) -> Option<&'a Value> {
    match current {
        Some(current) if current.as_str() >= candidate.as_str() => Some(current),
        _ => Some(candidate),
    }
}

const SERVICE_COLUMNS: &[Column] = &[
    NAME,
    column("Type", "string", field(SERVICE_SPEC, "type")),
    column("Cluster-IP", "string", field(SERVICE_SPEC, "clusterIP")),
    column("External-IP", "string", field(SERVICE_SPEC, "externalIPs")),
    column("Port(s)", "string", field(SERVICE_SPEC, "ports")),
    AGE,
    wide("Selector", "string", field(SERVICE_SPEC, "selector")),
];

fn service(service: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let spec = &service["spec"];
    let service_type = spec["type"].as_str().unwrap_or("ClusterIP");
    let cluster_ip = spec["clusterIPs"][0]
        .as_str()
        .or_else(|| spec["clusterIP"].as_str())
        .filter(|ip| !ip.is_empty())
        .unwrap_or("<none>");
    let external: Vec<&str> = spec["externalIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let external_ip = match service_type {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_string(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let mut addresses: Vec<&str> = service["status"]["loadBalancer"]["ingress"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|ingress| {
                    ingress["ip"]
                        .as_str()
                        .filter(|ip| !ip.is_empty())
                        .or_else(|| ingress["hostname"].as_str())
                })
                .collect();
            addresses.sort_unstable();
            addresses.dedup();
            addresses.extend(external);
            if addresses.is_empty() {
                "<pending>".to_string()
            } else {
                addresses.join(",")
            }
        }
        "ExternalName" => spec["externalName"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|port| {
            let protocol = port["protocol"].as_str().unwrap_or("TCP");
            match port["nodePort"].as_i64().filter(|p| *p != 0) {
                Some(node_port) => format!("{}:{node_port}/{protocol}", int(&port["port"])),
                None => format!("{}/{protocol}", int(&port["port"])),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    vec![
        json!(name(service)),
        json!(service_type),
        json!(cluster_ip),
        json!(external_ip),
        json!(ports),
        json!(object_age(service, now)),
        json!(labels(&spec["selector"])),
    ]
}

const NODE_COLUMNS: &[Column] = &[
    NAME,
    column("Status", "string", words("The status of the node")),
    column("Roles", "string", words("The roles of the node")),
    AGE,
    column("Version", "string", field(NODE_INFO, "kubeletVersion")),
    wide("Internal-IP", "string", field(NODE_STATUS, "addresses")),
    wide("External-IP", "string", field(NODE_STATUS, "addresses")),
    wide("OS-Image", "string", field(NODE_INFO, "osImage")),
    wide(
        "Kernel-Version",
        "string",
        field(NODE_INFO, "kernelVersion"),
    ),
    wide(
        "Container-Runtime",
        "string",
        field(NODE_INFO, "containerRuntimeVersion"),
    ),
];

fn node(node: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let status = &node["status"];
    let mut state = match condition(&status["conditions"], "Ready") {
        Some(ready) if ready["status"] == "True" => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if node["spec"]["unschedulable"] == true {
        state.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = node["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(key, value)| {
            if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                Some(role.to_string())
            } else if key == "kubernetes.io/role" {
                value.as_str().map(str::to_string)
            } else {
                None
            }
        })
        .filter(|role| !role.is_empty())
        .collect();
    roles.sort();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    let address = |kind: &str| -> String {
        status["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|address| address["type"] == kind)
            .and_then(|address| address["address"].as_str())
            .unwrap_or("<none>")
            .to_string()
    };
    let info = &status["nodeInfo"];
    vec![
        json!(name(node)),
        json!(state),
        json!(roles),
        json!(object_age(node, now)),
        json!(info["kubeletVersion"].as_str().unwrap_or_default()),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(text(&info["osImage"], "<unknown>")),
        json!(text(&info["kernelVersion"], "<unknown>")),
        json!(text(&info["containerRuntimeVersion"], "<unknown>")),
    ]
}

const EVENT_COLUMNS: &[Column] = &[
    column("Last Seen", "string", field(EVENT, "lastTimestamp")),
    column("Type", "string", field(EVENT, "type")),
    column("Reason", "string", field(EVENT, "reason")),
    column("Object", "string", field(EVENT, "involvedObject")),
    wide(
        "Subobject",
        "string",
        field("io.k8s.api.core.v1.ObjectReference", "fieldPath"),
    ),
    wide("Source", "string", field(EVENT, "source")),
    column("Message", "string", field(EVENT, "message")),
    wide("First Seen", "string", field(EVENT, "firstTimestamp")),
    wide("Count", "string", field(EVENT, "count")),
    super::Column {
        priority: 1,
        ..NAME
    },
];

/// An event's cells, for core events and (mapped to their fields) `events.k8s.io` ones.
pub(super) fn event(event: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let core = event.get("involvedObject").is_some() || event.get("source").is_some();
    let (object, first, last, source, message, count) = if core {
        (
            &event["involvedObject"],
            &event["firstTimestamp"],
            &event["lastTimestamp"],
            [
                event["source"]["component"].as_str(),
                event["source"]["host"].as_str(),
            ],
            &event["message"],
            &event["count"],
        )
    } else {
        (
            &event["regarding"],
            &event["deprecatedFirstTimestamp"],
            &event["deprecatedLastTimestamp"],
            [
                event["reportingController"].as_str(),
                event["reportingInstance"].as_str(),
            ],
            &event["note"],
            &event["deprecatedCount"],
        )
    };
    let first_seen = if first.is_string() {
        age(first, now)
    } else {
        age(&event["eventTime"], now)
    };
    let last_seen = if event["series"].is_object() {
        age(&event["series"]["lastObservedTime"], now)
    } else if last.is_string() {
        age(last, now)
    } else {
        first_seen.clone()
    };
    let kind = object["kind"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let object_text = match object["name"].as_str().filter(|n| !n.is_empty()) {
        Some(object_name) => format!("{kind}/{object_name}"),
        None => kind,
    };
    let source_text = source
        .iter()
        .flatten()
        .filter(|part| !part.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let count = if event["series"].is_object() {
        int(&event["series"]["count"])
    } else {
        int(count).max(1)
    };
    vec![
        json!(last_seen),
        json!(event["type"].as_str().unwrap_or_default()),
        json!(event["reason"].as_str().unwrap_or_default()),
        json!(object_text),
        json!(object["fieldPath"].as_str().unwrap_or_default()),
        json!(source_text),
        json!(message.as_str().unwrap_or_default().trim()),
        json!(first_seen),
        json!(count),
        json!(name(event)),
    ]
}

/// Up to three `ip:port` endpoints, then `+ N more...`; `<none>` without any.
fn endpoints(object: &Value) -> String {
    let mut all = Vec::new();
    for subset in object["subsets"].as_array().into_iter().flatten() {
        let addresses = subset["addresses"].as_array().into_iter().flatten();
        let ports: Vec<i64> = subset["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|port| int(&port["port"]))
            .collect();
        for address in addresses {
            let ip = address["ip"].as_str().unwrap_or_default();
            if ports.is_empty() {
                all.push(ip.to_string());
            } else {
                all.extend(ports.iter().map(|port| format!("{ip}:{port}")));
            }
        }
    }
    if all.is_empty() {
        return "<none>".to_string();
    }
    let shown = all.iter().take(3).cloned().collect::<Vec<_>>().join(",");
    match all.len() {
        0..=3 => shown,
        more => format!("{shown} + {} more...", more - 3),
    }
}

const PV_COLUMNS: &[Column] = &[
    NAME,
    column("Capacity", "string", field(PV_SPEC, "capacity")),
    column("Access Modes", "string", field(PV_SPEC, "accessModes")),
    column(
        "Reclaim Policy",
        "string",
        field(PV_SPEC, "persistentVolumeReclaimPolicy"),
    ),
    column("Status", "string", field(PV_STATUS, "phase")),
    column("Claim", "string", field(PV_SPEC, "claimRef")),
    column("StorageClass", "string", words("StorageClass of the pv")),
    column(
        "VolumeAttributesClass",
        "string",
        words("VolumeAttributesClass of the pv"),
    ),
    column("Reason", "string", field(PV_STATUS, "reason")),
    AGE,
    wide("VolumeMode", "string", field(PV_SPEC, "volumeMode")),
];

/// Access modes as kubectl abbreviates them.
fn access_modes(modes: &Value) -> String {
    let modes: Vec<&str> = modes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    [
        "ReadWriteOnce",
        "ReadOnlyMany",
        "ReadWriteMany",
        "ReadWriteOncePod",
    ]
    .iter()
    .zip(["RWO", "ROX", "RWX", "RWOP"])
    .filter(|(mode, _)| modes.contains(mode))
    .map(|(_, short)| short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The storage class: the beta annotation if set, else the spec's.
fn storage_class(object: &Value) -> &str {
    object["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"]
        .as_str()
        .or_else(|| object["spec"]["storageClassName"].as_str())
        .unwrap_or_default()
}

fn persistent_volume(volume: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let spec = &volume["spec"];
    let claim = &spec["claimRef"];
    let claim = match (claim["namespace"].as_str(), claim["name"].as_str()) {
        (Some(namespace), Some(claim)) => format!("{namespace}/{claim}"),
        _ => String::new(),
    };
    let phase = if volume["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else {
        volume["status"]["phase"].as_str().unwrap_or_default()
    };
    vec![
        json!(name(volume)),
        json!(spec["capacity"]["storage"].as_str().unwrap_or("0")),
        json!(access_modes(&spec["accessModes"])),
        json!(
            spec["persistentVolumeReclaimPolicy"]
                .as_str()
                .unwrap_or_default()
        ),
        json!(phase),
        json!(claim),
        json!(storage_class(volume)),
        json!(text(&spec["volumeAttributesClassName"], "<unset>")),
        json!(volume["status"]["reason"].as_str().unwrap_or_default()),
        json!(object_age(volume, now)),
        json!(text(&spec["volumeMode"], "<unset>")),
    ]
}

const PVC_COLUMNS: &[Column] = &[
    NAME,
    column("Status", "string", field(PVC_STATUS, "phase")),
    column("Volume", "string", field(PVC_SPEC, "volumeName")),
    column("Capacity", "string", field(PVC_STATUS, "capacity")),
    column("Access Modes", "string", field(PVC_STATUS, "accessModes")),
    column("StorageClass", "string", words("StorageClass of the pvc")),
    column(
        "VolumeAttributesClass",
        "string",
        words("VolumeAttributesClass of the pvc"),
    ),
    AGE,
    wide("VolumeMode", "string", field(PVC_SPEC, "volumeMode")),
];

fn persistent_volume_claim(claim: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let spec = &claim["spec"];
    let status = &claim["status"];
    let phase = if claim["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else {
        status["phase"].as_str().unwrap_or_default()
    };
    let bound = spec["volumeName"].as_str().is_some_and(|v| !v.is_empty());
    let (capacity, modes) = if bound {
        (
            status["capacity"]["storage"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            access_modes(&status["accessModes"]),
        )
    } else {
        (String::new(), String::new())
    };
    vec![
        json!(name(claim)),
        json!(phase),
        json!(spec["volumeName"].as_str().unwrap_or_default()),
        json!(capacity),
        json!(modes),
        json!(storage_class(claim)),
        json!(text(&spec["volumeAttributesClassName"], "<unset>")),
        json!(object_age(claim, now)),
        json!(text(&spec["volumeMode"], "<unset>")),
    ]
}

/// A quota's used/hard pairs: `limits.*` keys in the second, the rest in the first.
fn quota(object: &Value) -> (String, String) {
    let hard = object["status"]["hard"]
        .as_object()
        .or_else(|| object["spec"]["hard"].as_object());
    let mut requests = Vec::new();
    let mut limits = Vec::new();
    for (resource, limit) in hard.into_iter().flatten() {
        let used = object["status"]["used"][resource].as_str().unwrap_or("0");
        let entry = format!("{resource}: {used}/{}", limit.as_str().unwrap_or_default());
        if resource.starts_with("limits.") {
            limits.push(entry);
        } else {
            requests.push(entry);
        }
    }
    (requests.join(", "), limits.join(", "))
}

const CONFIGMAPS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Data",
        "string",
        words("Data contains the configuration data"),
    ),
    AGE,
];

const SECRETS_COLUMNS: &[Column] = &[
    NAME,
    column("Type", "string", field("io.k8s.api.core.v1.Secret", "type")),
    column("Data", "string", field("io.k8s.api.core.v1.Secret", "data")),
    AGE,
];

const NAMESPACES_COLUMNS: &[Column] = &[
    NAME,
    column("Status", "string", words("The status of the namespace")),
    AGE,
];

const ENDPOINTS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Endpoints",
        "string",
        field("io.k8s.api.core.v1.Endpoints", "subsets"),
    ),
    AGE,
];

const REPLICATIONCONTROLLERS_COLUMNS: &[Column] = &[
    NAME,
    column("Desired", "integer", field(RC_SPEC, "replicas")),
    column("Current", "integer", field(RC_STATUS, "replicas")),
    column("Ready", "integer", field(RC_STATUS, "readyReplicas")),
    AGE,
    wide(
        "Containers",
        "string",
        words("Names of each container in the template."),
    ),
    wide(
        "Images",
        "string",
        words("Images referenced by each container in the template."),
    ),
    wide("Selector", "string", field(RC_SPEC, "selector")),
];

const PODTEMPLATES_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Containers",
        "string",
        words("Names of each container in the template."),
    ),
    column(
        "Images",
        "string",
        words("Images referenced by each container in the template."),
    ),
    column(
        "Pod Labels",
        "string",
        words("The labels for the pod template."),
    ),
];

const RESOURCEQUOTAS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Request",
        "string",
        words("Request represents a minimum amount of cpu/memory that a container may consume."),
    ),
    column(
        "Limit",
        "string",
        words(
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        ),
    ),
    AGE,
];
