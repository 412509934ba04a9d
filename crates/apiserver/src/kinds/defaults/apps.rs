//! Defaults of the `apps` group (`pkg/apis/apps/v1/defaults.go`).

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetUpdateStrategy, Deployment, DeploymentStrategy, ReplicaSet,
    RollingUpdateDaemonSet, RollingUpdateDeployment, RollingUpdateStatefulSetStrategy, StatefulSet,
    StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetUpdateStrategy,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::core::pod_template;
use super::{or, or_str};

pub(super) fn deployment(deployment: &mut Deployment) {
    let spec = &mut deployment.spec;
    pod_template(&mut spec.template);
    or(&mut spec.replicas, 1);
    let strategy = spec
        .strategy
        .get_or_insert_with(DeploymentStrategy::default);
    or_str(&mut strategy.type_, "RollingUpdate");
    if strategy.type_.as_deref() == Some("RollingUpdate") {
        let rolling = strategy
            .rolling_update
            .get_or_insert_with(RollingUpdateDeployment::default);
        or(
            &mut rolling.max_unavailable,
            IntOrString::String("25%".to_string()),
        );
        or(
            &mut rolling.max_surge,
            IntOrString::String("25%".to_string()),
        );
    }
    or(&mut spec.revision_history_limit, 10);
    or(&mut spec.progress_deadline_seconds, 600);
}

pub(super) fn replica_set(replica_set: &mut ReplicaSet) {
    let spec = &mut replica_set.spec;
    if let Some(template) = &mut spec.template {
        pod_template(template);
    }
    or(&mut spec.replicas, 1);
}

pub(super) fn stateful_set(stateful_set: &mut StatefulSet) {
    let spec = &mut stateful_set.spec;
    pod_template(&mut spec.template);
    or_str(&mut spec.pod_management_policy, "OrderedReady");
    let strategy = spec
        .update_strategy
        .get_or_insert_with(StatefulSetUpdateStrategy::default);
    if strategy.type_.as_deref().is_none_or(str::is_empty) {
        strategy.type_ = Some("RollingUpdate".to_string());
        strategy
            .rolling_update
            .get_or_insert_with(RollingUpdateStatefulSetStrategy::default);
    }
    if strategy.type_.as_deref() == Some("RollingUpdate")
        && let Some(rolling) = &mut strategy.rolling_update
    {
        or(&mut rolling.partition, 0);
    }
    let retention = spec
        .persistent_volume_claim_retention_policy
        .get_or_insert_with(StatefulSetPersistentVolumeClaimRetentionPolicy::default);
    or_str(&mut retention.when_deleted, "Retain");
    or_str(&mut retention.when_scaled, "Retain");
    or(&mut spec.replicas, 1);
    or(&mut spec.revision_history_limit, 10);
    for claim in spec.volume_claim_templates.iter_mut().flatten() {
        super::core::persistent_volume_claim(claim);
    }
}

pub(super) fn daemon_set(daemon_set: &mut DaemonSet) {
    let spec = &mut daemon_set.spec;
    pod_template(&mut spec.template);
    let strategy = spec
        .update_strategy
        .get_or_insert_with(DaemonSetUpdateStrategy::default);
    or_str(&mut strategy.type_, "RollingUpdate");
    if strategy.type_.as_deref() == Some("RollingUpdate") {
        let rolling = strategy
            .rolling_update
            .get_or_insert_with(RollingUpdateDaemonSet::default);
        or(&mut rolling.max_unavailable, IntOrString::Int(1));
        or(&mut rolling.max_surge, IntOrString::Int(0));
    }
    or(&mut spec.revision_history_limit, 10);
}
