//! Defaults of the core group (`pkg/apis/core/v1/defaults.go`).

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EphemeralContainer, Namespace, NamespaceStatus,
    ObjectFieldSelector, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, PersistentVolumeStatus, Pod, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, ReplicationController, ResourceRequirements, Service, Volume,
};
use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Endpoints};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{or, or_str};

/// The mode of files a secret, config map, downward API or projected volume makes: 0644.
const VOLUME_FILE_MODE: i32 = 0o644;

pub(super) fn pod(pod: &mut Pod) {
    if let Some(spec) = &mut pod.spec {
        pod_spec(spec);
        or(&mut spec.enable_service_links, true);
    }
}

/// A pod template of a workload (Deployment, Job …): the pod spec's defaults.
pub(crate) fn pod_template(template: &mut PodTemplateSpec) {
    if let Some(spec) = &mut template.spec {
        pod_spec(spec);
    }
}

fn pod_spec(spec: &mut PodSpec) {
    or_str(&mut spec.dns_policy, "ClusterFirst");
    or_str(&mut spec.restart_policy, "Always");
    or(&mut spec.security_context, PodSecurityContext::default());
    or(&mut spec.termination_grace_period_seconds, 30);
    or_str(&mut spec.scheduler_name, "default-scheduler");
    let host_network = spec.host_network == Some(true);
    for container in &mut spec.containers {
        container_defaults(container, host_network);
    }
    for container in spec.init_containers.iter_mut().flatten() {
        container_defaults(container, host_network);
    }
    for container in spec.ephemeral_containers.iter_mut().flatten() {
        ephemeral_container(container);
    }
    for volume in spec.volumes.iter_mut().flatten() {
        volume_defaults(volume);
    }
}

/// The defaults of a container's fields; `EphemeralContainer` has the same fields under another
/// type, so one body serves both.
macro_rules! container_fields {
    ($container:expr, $host_network:expr) => {{
        let container = $container;
        image_pull_policy(&mut container.image_pull_policy, container.image.as_deref());
        or_str(
            &mut container.termination_message_path,
            "/dev/termination-log",
        );
        or_str(&mut container.termination_message_policy, "File");
        for port in container.ports.iter_mut().flatten() {
            port_defaults(port, $host_network);
        }
        env(container.env.as_deref_mut());
        resources(container.resources.as_mut());
        for probe in [
            &mut container.liveness_probe,
            &mut container.readiness_probe,
            &mut container.startup_probe,
        ]
        .into_iter()
        .flatten()
        {
            probe_defaults(probe);
        }
    }};
}

fn container_defaults(container: &mut Container, host_network: bool) {
    container_fields!(container, host_network);
}

fn ephemeral_container(container: &mut EphemeralContainer) {
    container_fields!(container, false);
}

/// `Always` for an image tagged `latest` or not tagged (and not pinned by digest), otherwise
/// `IfNotPresent`.
fn image_pull_policy(policy: &mut Option<String>, image: Option<&str>) {
    if policy.as_deref().is_some_and(|policy| !policy.is_empty()) {
        return;
    }
    // An image that does not parse (none) has no tag: `IfNotPresent`.
    let tag = image
        .filter(|image| !image.is_empty())
        .map_or("", image_tag);
    let value = if tag == "latest" {
        "Always"
    } else {
        "IfNotPresent"
    };
    *policy = Some(value.to_string());
}

/// The tag of an image reference as the kubelet's parser reads it: after the last `:` of the
/// part after the last `/`; none (so `latest`) when absent; empty when pinned by digest
/// without a tag.
fn image_tag(image: &str) -> &str {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag,
        None if digest.is_some() => "",
        None => "latest",
    }
}

fn port_defaults(port: &mut ContainerPort, host_network: bool) {
    or_str(&mut port.protocol, "TCP");
    if host_network && port.host_port.unwrap_or(0) == 0 {
        port.host_port = Some(port.container_port);
    }
}

fn env(variables: Option<&mut [EnvVar]>) {
    for variable in variables.into_iter().flatten() {
        if let Some(field) = variable
            .value_from
            .as_mut()
            .and_then(|from| from.field_ref.as_mut())
        {
            field_selector(field);
        }
    }
}

fn field_selector(field: &mut ObjectFieldSelector) {
    or_str(&mut field.api_version, "v1");
}

/// Requests default to the limits set without a request.
fn resources(resources: Option<&mut ResourceRequirements>) {
    let Some(resources) = resources else {
        return;
    };
    let Some(limits) = &resources.limits else {
        return;
    };
    let requests = resources.requests.get_or_insert_with(Default::default);
    for (name, quantity) in limits {
        requests
            .entry(name.clone())
            .or_insert_with(|| quantity.clone());
    }
}

fn probe_defaults(probe: &mut Probe) {
    if probe.timeout_seconds.unwrap_or(0) == 0 {
        probe.timeout_seconds = Some(1);
    }
    if probe.period_seconds.unwrap_or(0) == 0 {
        probe.period_seconds = Some(10);
    }
    if probe.success_threshold.unwrap_or(0) == 0 {
        probe.success_threshold = Some(1);
    }
    if probe.failure_threshold.unwrap_or(0) == 0 {
        probe.failure_threshold = Some(3);
    }
    if let Some(http) = &mut probe.http_get {
        or_str(&mut http.path, "/");
        or_str(&mut http.scheme, "HTTP");
    }
    if let Some(grpc) = &mut probe.grpc {
        or(&mut grpc.service, String::new());
    }
}

fn volume_defaults(volume: &mut Volume) {
    // A volume with every source unset: everything but its name is the default.
    let name = std::mem::take(&mut volume.name);
    let has_source = *volume != Volume::default();
    volume.name = name;
    if !has_source {
        volume.empty_dir = Some(EmptyDirVolumeSource::default());
    }
    if let Some(host_path) = &mut volume.host_path {
        or(&mut host_path.type_, String::new());
    }
    if let Some(secret) = &mut volume.secret {
        or(&mut secret.default_mode, VOLUME_FILE_MODE);
    }
    if let Some(config_map) = &mut volume.config_map {
        or(&mut config_map.default_mode, VOLUME_FILE_MODE);
    }
    if let Some(downward) = &mut volume.downward_api {
        or(&mut downward.default_mode, VOLUME_FILE_MODE);
        for item in downward.items.iter_mut().flatten() {
            if let Some(field) = &mut item.field_ref {
                field_selector(field);
            }
        }
    }
    if let Some(projected) = &mut volume.projected {
        or(&mut projected.default_mode, VOLUME_FILE_MODE);
        for source in projected.sources.iter_mut().flatten() {
            if let Some(downward) = &mut source.downward_api {
                for item in downward.items.iter_mut().flatten() {
                    if let Some(field) = &mut item.field_ref {
                        field_selector(field);
                    }
                }
            }
            if let Some(token) = &mut source.service_account_token {
                or(&mut token.expiration_seconds, 3600);
            }
        }
    }
    if let Some(template) = volume
        .ephemeral
        .as_mut()
        .and_then(|ephemeral| ephemeral.volume_claim_template.as_mut())
    {
        claim_spec(&mut template.spec);
    }
}

pub(super) fn service(service: &mut Service) {
    let Some(spec) = &mut service.spec else {
        return;
    };
    or_str(&mut spec.session_affinity, "None");
    if spec.session_affinity.as_deref() == Some("None") {
        spec.session_affinity_config = None;
    }
    or_str(&mut spec.type_, "ClusterIP");
    for port in spec.ports.iter_mut().flatten() {
        or_str(&mut port.protocol, "TCP");
        let unset = match &port.target_port {
            None => true,
            Some(IntOrString::Int(0)) => true,
            Some(IntOrString::String(name)) => name.is_empty(),
            Some(IntOrString::Int(_)) => false,
        };
        if unset {
            port.target_port = Some(IntOrString::Int(port.port));
        }
    }
    let service_type = spec.type_.as_deref().unwrap_or("ClusterIP");
    let externally_accessible = matches!(service_type, "LoadBalancer" | "NodePort")
        || (service_type == "ClusterIP"
            && spec
                .external_ips
                .as_ref()
                .is_some_and(|ips| !ips.is_empty()));
    if externally_accessible {
        or_str(&mut spec.external_traffic_policy, "Cluster");
    }
    if matches!(service_type, "ClusterIP" | "NodePort" | "LoadBalancer") {
        or_str(&mut spec.internal_traffic_policy, "Cluster");
    }
    if service_type == "LoadBalancer" {
        or(&mut spec.allocate_load_balancer_node_ports, true);
    }
}

pub(super) fn namespace(namespace: &mut Namespace) {
    if let Some(name) = namespace
        .metadata
        .name
        .clone()
        .filter(|name| !name.is_empty())
    {
        namespace
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("kubernetes.io/metadata.name".to_string(), name);
    }
    let status = namespace
        .status
        .get_or_insert_with(NamespaceStatus::default);
    or_str(&mut status.phase, "Active");
}

pub(super) fn persistent_volume(volume: &mut PersistentVolume) {
    let status = volume
        .status
        .get_or_insert_with(PersistentVolumeStatus::default);
    or_str(&mut status.phase, "Pending");
    if let Some(spec) = &mut volume.spec {
        or_str(&mut spec.persistent_volume_reclaim_policy, "Retain");
        or_str(&mut spec.volume_mode, "Filesystem");
    }
}

pub(super) fn persistent_volume_claim(claim: &mut PersistentVolumeClaim) {
    let status = claim
        .status
        .get_or_insert_with(PersistentVolumeClaimStatus::default);
    or_str(&mut status.phase, "Pending");
    if let Some(spec) = &mut claim.spec {
        claim_spec(spec);
    }
}

fn claim_spec(spec: &mut PersistentVolumeClaimSpec) {
    or_str(&mut spec.volume_mode, "Filesystem");
}

pub(super) fn endpoints(endpoints: &mut Endpoints) {
    for subset in endpoints.subsets.iter_mut().flatten() {
        for port in subset.ports.iter_mut().flatten() {
            or_str(&mut port.protocol, "TCP");
        }
    }
}

pub(super) fn replication_controller(controller: &mut ReplicationController) {
    let Some(spec) = &mut controller.spec else {
        return;
    };
    if let Some(template) = &mut spec.template {
        pod_template(template);
        let labels = template
            .metadata
            .as_ref()
            .and_then(|metadata| metadata.labels.clone());
        if let Some(labels) = labels {
            if spec.selector.as_ref().is_none_or(|s| s.is_empty()) {
                spec.selector = Some(labels.clone());
            }
            if controller
                .metadata
                .labels
                .as_ref()
                .is_none_or(|l| l.is_empty())
            {
                controller.metadata.labels = Some(labels);
            }
        }
    }
    or(&mut spec.replicas, 1);
}

#[cfg(test)]
mod tests {
    use super::image_tag;

    #[test]
    fn image_tags_as_the_kubelet_parses_them() {
        assert_eq!(image_tag("nginx"), "latest");
        assert_eq!(image_tag("nginx:1.27"), "1.27");
        assert_eq!(image_tag("registry:5000/team/app"), "latest");
        assert_eq!(image_tag("registry:5000/team/app:v2"), "v2");
        assert_eq!(image_tag("nginx@sha256:abc"), "");
        assert_eq!(image_tag("nginx:1.27@sha256:abc"), "1.27");
    }
}
