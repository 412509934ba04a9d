//! Printers of the other built-in groups.

use serde_json::{Value, json};

use super::cells::{condition, human_duration, int, label_selector, name, object_age, text};
use super::{AGE, Column, NAME, Printer, column, field, text as words, wide};

/// The printer of `plural` in `group`.
pub(super) fn printer(group: &str, plural: &str) -> Option<Printer> {
    Some(match (group, plural) {
        ("events.k8s.io", "events") => Printer {
            columns: super::core::printer("events")?.columns,
            cells: super::core::event,
        },
        ("networking.k8s.io", "ingresses") => Printer {
            columns: INGRESSES_COLUMNS,
            cells: ingress,
        },
        ("networking.k8s.io", "ingressclasses") => Printer {
            columns: INGRESSCLASSES_COLUMNS,
            cells: |object, now| {
                let parameters = &object["spec"]["parameters"];
                let parameters = match parameters["kind"].as_str() {
                    Some(kind) => {
                        let group = parameters["apiGroup"]
                            .as_str()
                            .map(|group| format!(".{group}"))
                            .unwrap_or_default();
                        format!(
                            "{kind}{group}/{}",
                            parameters["name"].as_str().unwrap_or_default()
                        )
                    }
                    None => "<none>".to_string(),
                };
                vec![
                    json!(name(object)),
                    json!(object["spec"]["controller"].as_str().unwrap_or_default()),
                    json!(parameters),
                    json!(object_age(object, now)),
                ]
            },
        },
        ("networking.k8s.io", "networkpolicies") => Printer {
            columns: NETWORKPOLICIES_COLUMNS,
            cells: |object, now| {
                vec![
                    json!(name(object)),
                    json!(label_selector(&object["spec"]["podSelector"])),
                    json!(object_age(object, now)),
                ]
            },
        },
        ("discovery.k8s.io", "endpointslices") => Printer {
            columns: ENDPOINTSLICES_COLUMNS,
            cells: |object, now| {
                let ports: Vec<String> = object["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|port| match port["port"].as_i64() {
                        Some(number) => number.to_string(),
                        None => text(&port["name"], "*").to_string(),
                    })
                    .collect();
                let addresses: Vec<String> = object["endpoints"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|endpoint| endpoint["addresses"].as_array().into_iter().flatten())
                    .filter_map(|address| address.as_str().map(str::to_string))
                    .collect();
                vec![
                    json!(name(object)),
                    json!(object["addressType"].as_str().unwrap_or_default()),
                    json!(three_or_more(&ports, "<unset>")),
                    json!(three_or_more(&addresses, "<unset>")),
                    json!(object_age(object, now)),
                ]
            },
        },
        ("coordination.k8s.io", "leases") => Printer {
            columns: LEASES_COLUMNS,
            cells: |object, now| {
                vec![
                    json!(name(object)),
                    json!(
                        object["spec"]["holderIdentity"]
                            .as_str()
                            .unwrap_or_default()
                    ),
                    json!(object_age(object, now)),
                ]
            },
        },
        ("storage.k8s.io", "storageclasses") => Printer {
            columns: STORAGECLASSES_COLUMNS,
            cells: |object, now| {
                let annotations = &object["metadata"]["annotations"];
                let default = annotations["storageclass.kubernetes.io/is-default-class"] == "true"
                    || annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true";
                let shown = if default {
                    format!("{} (default)", name(object))
                } else {
                    name(object).to_string()
                };
                vec![
                    json!(shown),
                    json!(object["provisioner"].as_str().unwrap_or_default()),
                    json!(text(&object["reclaimPolicy"], "Delete")),
                    json!(text(&object["volumeBindingMode"], "Immediate")),
                    json!(object["allowVolumeExpansion"].as_bool().unwrap_or(false)),
                    json!(object_age(object, now)),
                ]
            },
        },
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => Printer {
            columns: CLUSTERROLEBINDINGS_COLUMNS,
            cells: |object, now| {
                let role = &object["roleRef"];
                let subjects = |kind: &str| -> String {
                    object["subjects"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|subject| subject["kind"] == kind)
                        .map(|subject| {
                            let subject_name = subject["name"].as_str().unwrap_or_default();
                            match (kind, subject["namespace"].as_str()) {
                                ("ServiceAccount", Some(namespace)) => {
                                    format!("{namespace}/{subject_name}")
                                }
                                _ => subject_name.to_string(),
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                vec![
                    json!(name(object)),
                    json!(format!(
                        "{}/{}",
                        role["kind"].as_str().unwrap_or_default(),
                        role["name"].as_str().unwrap_or_default()
                    )),
                    json!(object_age(object, now)),
                    json!(subjects("User")),
                    json!(subjects("Group")),
                    json!(subjects("ServiceAccount")),
                ]
            },
        },
        ("scheduling.k8s.io", "priorityclasses") => Printer {
            columns: PRIORITYCLASSES_COLUMNS,
            cells: |object, now| {
                vec![
                    json!(name(object)),
                    json!(int(&object["value"])),
                    json!(object["globalDefault"].as_bool().unwrap_or(false)),
                    json!(object_age(object, now)),
                    json!(object["preemptionPolicy"].as_str().unwrap_or_default()),
                ]
            },
        },
        ("certificates.k8s.io", "certificatesigningrequests") => Printer {
            columns: CERTIFICATESIGNINGREQUESTS_COLUMNS,
            cells: |object, now| {
                let spec = &object["spec"];
                let conditions = &object["status"]["conditions"];
                let mut state = if condition(conditions, "Denied").is_some() {
                    "Denied".to_string()
                } else if condition(conditions, "Approved").is_some() {
                    "Approved".to_string()
                } else {
                    "Pending".to_string()
                };
                if condition(conditions, "Failed").is_some() {
                    state.push_str(",Failed");
                }
                if object["status"]["certificate"]
                    .as_str()
                    .is_some_and(|c| !c.is_empty())
                {
                    state.push_str(",Issued");
                }
                let duration = spec["expirationSeconds"]
                    .as_i64()
                    .map_or_else(|| "<none>".to_string(), human_duration);
                vec![
                    json!(name(object)),
                    json!(object_age(object, now)),
                    json!(text(&spec["signerName"], "<none>")),
                    json!(spec["username"].as_str().unwrap_or_default()),
                    json!(duration),
                    json!(state),
                ]
            },
        },
        ("node.k8s.io", "runtimeclasses") => Printer {
            columns: RUNTIMECLASSES_COLUMNS,
            cells: |object, now| {
                vec![
                    json!(name(object)),
                    json!(object["handler"].as_str().unwrap_or_default()),
                    json!(object_age(object, now)),
                ]
            },
        },
        (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations" | "mutatingwebhookconfigurations",
        ) => Printer {
            columns: MUTATINGWEBHOOKCONFIGURATIONS_COLUMNS,
            cells: |object, now| {
                vec![
                    json!(name(object)),
                    json!(object["webhooks"].as_array().map_or(0, Vec::len)),
                    json!(object_age(object, now)),
                ]
            },
        },
        ("apiregistration.k8s.io", "apiservices") => Printer {
            columns: APISERVICES_COLUMNS,
            cells: |object, now| {
                let service = &object["spec"]["service"];
                let service = match (service["namespace"].as_str(), service["name"].as_str()) {
                    (Some(namespace), Some(service)) => format!("{namespace}/{service}"),
                    _ => "Local".to_string(),
                };
                let available = match condition(&object["status"]["conditions"], "Available") {
                    None => "Unknown".to_string(),
                    Some(found) => match found["reason"].as_str().filter(|r| !r.is_empty()) {
                        Some(reason) => {
                            format!(
                                "{} ({reason})",
                                found["status"].as_str().unwrap_or_default()
                            )
                        }
                        None => found["status"].as_str().unwrap_or_default().to_string(),
                    },
                };
                vec![
                    json!(name(object)),
                    json!(service),
                    json!(available),
                    json!(object_age(object, now)),
                ]
            },
        },
        _ => return None,
    })
}

fn ingress(object: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let spec = &object["spec"];
    let rules = spec["rules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let hosts: Vec<&str> = rules
        .iter()
        .filter_map(|rule| rule["host"].as_str())
        .filter(|host| !host.is_empty())
        .take(3)
        .collect();
    let mut hosts = if hosts.is_empty() {
        "*".to_string()
    } else {
        hosts.join(",")
    };
    if rules.len() > 3 {
        hosts.push_str(&format!(" + {} more...", rules.len() - 3));
    }
    let mut addresses: Vec<&str> = object["status"]["loadBalancer"]["ingress"]
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
    let ports = if spec["tls"].as_array().is_some_and(|tls| !tls.is_empty()) {
        "80, 443"
    } else {
        "80"
    };
    vec![
        json!(name(object)),
        json!(text(&spec["ingressClassName"], "<none>")),
        json!(hosts),
        json!(addresses.join(",")),
        json!(ports),
        json!(object_age(object, now)),
    ]
}

/// Up to three items joined with `,`, then `+ N more...`; `empty` when there are none.
fn three_or_more(items: &[String], empty: &str) -> String {
    if items.is_empty() {
        return empty.to_string();
    }
    let shown = items.iter().take(3).cloned().collect::<Vec<_>>().join(",");
    match items.len() {
        0..=3 => shown,
        more => format!("{shown} + {} more...", more - 3),
    }
}

const INGRESSES_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Class",
        "string",
        words(
            "The name of the IngressClass resource that should be used for additional configuration",
        ),
    ),
    column(
        "Hosts",
        "string",
        words("Hosts that incoming requests are matched against before the ingress rule"),
    ),
    column(
        "Address",
        "string",
        words("Address is a list containing ingress points for the load-balancer"),
    ),
    column(
        "Ports",
        "string",
        words("Ports of TLS configurations that open"),
    ),
    AGE,
];

const INGRESSCLASSES_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Controller",
        "string",
        words("Controller that is responsible for handling this class"),
    ),
    column(
        "Parameters",
        "string",
        words("A reference to a resource with additional parameters"),
    ),
    AGE,
];

const NETWORKPOLICIES_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Pod-Selector",
        "string",
        field("io.k8s.api.networking.v1.NetworkPolicySpec", "podSelector"),
    ),
    AGE,
];

const ENDPOINTSLICES_COLUMNS: &[Column] = &[
    NAME,
    column(
        "AddressType",
        "string",
        field("io.k8s.api.discovery.v1.EndpointSlice", "addressType"),
    ),
    column(
        "Ports",
        "string",
        field("io.k8s.api.discovery.v1.EndpointSlice", "ports"),
    ),
    column(
        "Endpoints",
        "string",
        field("io.k8s.api.discovery.v1.EndpointSlice", "endpoints"),
    ),
    AGE,
];

const LEASES_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Holder",
        "string",
        field("io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity"),
    ),
    AGE,
];

const STORAGECLASSES_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Provisioner",
        "string",
        field("io.k8s.api.storage.v1.StorageClass", "provisioner"),
    ),
    column(
        "ReclaimPolicy",
        "string",
        field("io.k8s.api.storage.v1.StorageClass", "reclaimPolicy"),
    ),
    column(
        "VolumeBindingMode",
        "string",
        field("io.k8s.api.storage.v1.StorageClass", "volumeBindingMode"),
    ),
    column(
        "AllowVolumeExpansion",
        "string",
        field("io.k8s.api.storage.v1.StorageClass", "allowVolumeExpansion"),
    ),
    AGE,
];

const CLUSTERROLEBINDINGS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Role",
        "string",
        field("io.k8s.api.rbac.v1.RoleBinding", "roleRef"),
    ),
    AGE,
    wide("Users", "string", words("Users in the roleBinding")),
    wide("Groups", "string", words("Groups in the roleBinding")),
    wide(
        "ServiceAccounts",
        "string",
        words("ServiceAccounts in the roleBinding"),
    ),
];

const PRIORITYCLASSES_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Value",
        "integer",
        field("io.k8s.api.scheduling.v1.PriorityClass", "value"),
    ),
    column(
        "Global-Default",
        "boolean",
        field("io.k8s.api.scheduling.v1.PriorityClass", "globalDefault"),
    ),
    AGE,
    column(
        "PreemptionPolicy",
        "string",
        field("io.k8s.api.scheduling.v1.PriorityClass", "preemptionPolicy"),
    ),
];

const CERTIFICATESIGNINGREQUESTS_COLUMNS: &[Column] = &[
    NAME,
    AGE,
    column(
        "SignerName",
        "string",
        field(
            "io.k8s.api.certificates.v1.CertificateSigningRequestSpec",
            "signerName",
        ),
    ),
    column(
        "Requestor",
        "string",
        words("Name of the user requesting the certificate."),
    ),
    column(
        "RequestedDuration",
        "string",
        field(
            "io.k8s.api.certificates.v1.CertificateSigningRequestSpec",
            "expirationSeconds",
        ),
    ),
    column(
        "Condition",
        "string",
        words("State of the signing request."),
    ),
];

const RUNTIMECLASSES_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Handler",
        "string",
        field("io.k8s.api.node.v1.RuntimeClass", "handler"),
    ),
    AGE,
];

const MUTATINGWEBHOOKCONFIGURATIONS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Webhooks",
        "integer",
        words("Webhooks indicates the number of webhooks included in the configuration."),
    ),
    AGE,
];

const APISERVICES_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Service",
        "string",
        words("The reference to the service that hosts this API endpoint."),
    ),
    column(
        "Available",
        "string",
        words("Whether this service is available."),
    ),
    AGE,
];
