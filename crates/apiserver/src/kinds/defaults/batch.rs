//! Defaults of the `batch` group (`pkg/apis/batch/v1/defaults.go`).

use k8s_openapi::api::batch::v1::{CronJob, Job, JobSpec};

use super::core::pod_template;
use super::{or, or_str};

pub(super) fn job(job: &mut Job) {
    let Some(spec) = &mut job.spec else {
        return;
    };
    job_spec(spec);
    let template_labels = spec
        .template
        .metadata
        .as_ref()
        .and_then(|metadata| metadata.labels.clone());
    if let Some(labels) = template_labels
        && job.metadata.labels.as_ref().is_none_or(|l| l.is_empty())
    {
        job.metadata.labels = Some(labels);
    }
}

fn job_spec(spec: &mut JobSpec) {
    pod_template(&mut spec.template);
    if spec.completions.is_none() && spec.parallelism.is_none() {
        spec.completions = Some(1);
    }
    or(&mut spec.parallelism, 1);
    let backoff = if spec.backoff_limit_per_index.is_some() {
        i32::MAX
    } else {
        6
    };
    or(&mut spec.backoff_limit, backoff);
    or_str(&mut spec.completion_mode, "NonIndexed");
    or(&mut spec.suspend, false);
    let replacement = if spec.pod_failure_policy.is_some() {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    or_str(&mut spec.pod_replacement_policy, replacement);
    or(&mut spec.manual_selector, false);
    for rule in spec
        .pod_failure_policy
        .iter_mut()
        .flat_map(|policy| policy.rules.iter_mut())
    {
        for pattern in rule.on_pod_conditions.iter_mut().flatten() {
            or_str(&mut pattern.status, "True");
        }
    }
}

pub(super) fn cron_job(cron_job: &mut CronJob) {
    let spec = &mut cron_job.spec;
    or_str(&mut spec.concurrency_policy, "Allow");
    or(&mut spec.suspend, false);
    or(&mut spec.successful_jobs_history_limit, 3);
    or(&mut spec.failed_jobs_history_limit, 1);
    if let Some(job) = &mut spec.job_template.spec {
        job_spec(job);
    }
}
