//! The defaults kube-apiserver's decoding sets on built-in kinds (`SetDefaults_*` in
//! kubernetes' `pkg/apis/*/v1/defaults.go` and the generated functions that walk nested
//! objects), applied to every object a write decodes, as kube-apiserver does.
//!
//! Each kind's defaults are written on its k8s-openapi type; [`apply`] finds them by the type.

mod apps;
mod batch;
mod core;

use std::any::Any;

use k8s_openapi::api::{apps as apps_api, batch as batch_api, core::v1 as core_api};

/// Sets the defaults of `object`'s type, if it has any.
pub(crate) fn apply(object: &mut dyn Any) {
    if let Some(pod) = object.downcast_mut::<core_api::Pod>() {
        core::pod(pod);
    } else if let Some(template) = object.downcast_mut::<core_api::PodTemplate>() {
        if let Some(template) = &mut template.template {
            core::pod_template(template);
        }
    } else if let Some(service) = object.downcast_mut::<core_api::Service>() {
        core::service(service);
    } else if let Some(secret) = object.downcast_mut::<core_api::Secret>() {
        secret.type_.get_or_insert_with(|| "Opaque".to_string());
    } else if let Some(namespace) = object.downcast_mut::<core_api::Namespace>() {
        core::namespace(namespace);
    } else if let Some(volume) = object.downcast_mut::<core_api::PersistentVolume>() {
        core::persistent_volume(volume);
    } else if let Some(claim) = object.downcast_mut::<core_api::PersistentVolumeClaim>() {
        core::persistent_volume_claim(claim);
    } else if let Some(endpoints) = object.downcast_mut::<core_api::Endpoints>() {
        core::endpoints(endpoints);
    } else if let Some(controller) = object.downcast_mut::<core_api::ReplicationController>() {
        core::replication_controller(controller);
    } else if let Some(deployment) = object.downcast_mut::<apps_api::v1::Deployment>() {
        apps::deployment(deployment);
    } else if let Some(replica_set) = object.downcast_mut::<apps_api::v1::ReplicaSet>() {
        apps::replica_set(replica_set);
    } else if let Some(stateful_set) = object.downcast_mut::<apps_api::v1::StatefulSet>() {
        apps::stateful_set(stateful_set);
    } else if let Some(daemon_set) = object.downcast_mut::<apps_api::v1::DaemonSet>() {
        apps::daemon_set(daemon_set);
    } else if let Some(job) = object.downcast_mut::<batch_api::v1::Job>() {
        batch::job(job);
    } else if let Some(cron_job) = object.downcast_mut::<batch_api::v1::CronJob>() {
        batch::cron_job(cron_job);
    }
}

/// `value`, unless `field` already holds one.
fn or<T>(field: &mut Option<T>, value: T) {
    if field.is_none() {
        *field = Some(value);
    }
}

/// `value`, unless `field` holds a non-empty string.
fn or_str(field: &mut Option<String>, value: &str) {
    if field.as_deref().is_none_or(str::is_empty) {
        *field = Some(value.to_string());
    }
}

#[cfg(test)]
mod tests;
