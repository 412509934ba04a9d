//! Printers of the workload groups: `apps`, `batch`, `autoscaling`, `policy`.

use serde_json::{Value, json};

use super::cells::{
    age, containers_and_images, human_duration, int, int_or_string, is_true, label_selector,
    labels, name, object_age, text,
};
use super::{AGE, Column, NAME, Printer, column, field, text as words, wide};

const DEPLOYMENT_STATUS: &str = "io.k8s.api.apps.v1.DeploymentStatus";
const DEPLOYMENT_SPEC: &str = "io.k8s.api.apps.v1.DeploymentSpec";
const REPLICA_SET_SPEC: &str = "io.k8s.api.apps.v1.ReplicaSetSpec";
const REPLICA_SET_STATUS: &str = "io.k8s.api.apps.v1.ReplicaSetStatus";
const DAEMON_SET_STATUS: &str = "io.k8s.api.apps.v1.DaemonSetStatus";
const DAEMON_SET_SPEC: &str = "io.k8s.api.apps.v1.DaemonSetSpec";
const JOB_SPEC: &str = "io.k8s.api.batch.v1.JobSpec";
const JOB_STATUS: &str = "io.k8s.api.batch.v1.JobStatus";
const CRON_JOB_SPEC: &str = "io.k8s.api.batch.v1.CronJobSpec";
const CRON_JOB_STATUS: &str = "io.k8s.api.batch.v1.CronJobStatus";

const CONTAINERS: Column = wide(
    "Containers",
    "string",
    words("Names of each container in the template."),
);
const IMAGES: Column = wide(
    "Images",
    "string",
    words("Images referenced by each container in the template."),
);

/// The printer of the workload resource `plural`.
pub(super) fn printer(plural: &str) -> Option<Printer> {
    Some(match plural {
        "deployments" => Printer {
            columns: DEPLOYMENTS_COLUMNS,
            cells: |object, now| {
                let (spec, status) = (&object["spec"], &object["status"]);
                let (containers, images) = containers_and_images(&spec["template"]["spec"]);
                vec![
                    json!(name(object)),
                    json!(format!(
                        "{}/{}",
                        int(&status["readyReplicas"]),
                        int(&spec["replicas"])
                    )),
                    json!(int(&status["updatedReplicas"])),
                    json!(int(&status["availableReplicas"])),
                    json!(object_age(object, now)),
                    json!(containers),
                    json!(images),
                    json!(label_selector(&spec["selector"])),
                ]
            },
        },
        "replicasets" => Printer {
            columns: REPLICASETS_COLUMNS,
            cells: |object, now| {
                let (spec, status) = (&object["spec"], &object["status"]);
                let (containers, images) = containers_and_images(&spec["template"]["spec"]);
                vec![
                    json!(name(object)),
                    json!(int(&spec["replicas"])),
                    json!(int(&status["replicas"])),
                    json!(int(&status["readyReplicas"])),
                    json!(object_age(object, now)),
                    json!(containers),
                    json!(images),
                    json!(label_selector(&spec["selector"])),
                ]
            },
        },
        "statefulsets" => Printer {
            columns: STATEFULSETS_COLUMNS,
            cells: |object, now| {
                let (spec, status) = (&object["spec"], &object["status"]);
                let (containers, images) = containers_and_images(&spec["template"]["spec"]);
                vec![
                    json!(name(object)),
                    json!(format!(
                        "{}/{}",
                        int(&status["readyReplicas"]),
                        int(&spec["replicas"])
                    )),
                    json!(object_age(object, now)),
                    json!(containers),
                    json!(images),
                ]
            },
        },
        "daemonsets" => Printer {
            columns: DAEMONSETS_COLUMNS,
            cells: |object, now| {
                let (spec, status) = (&object["spec"], &object["status"]);
                let (containers, images) = containers_and_images(&spec["template"]["spec"]);
                vec![
                    json!(name(object)),
                    json!(int(&status["desiredNumberScheduled"])),
                    json!(int(&status["currentNumberScheduled"])),
                    json!(int(&status["numberReady"])),
                    json!(int(&status["updatedNumberScheduled"])),
                    json!(int(&status["numberAvailable"])),
                    json!(labels(&spec["template"]["spec"]["nodeSelector"])),
                    json!(object_age(object, now)),
                    json!(containers),
                    json!(images),
                    json!(label_selector(&spec["selector"])),
                ]
            },
        },
        "jobs" => Printer {
            columns: JOBS_COLUMNS,
            cells: job,
        },
        "cronjobs" => Printer {
            columns: CRONJOBS_COLUMNS,
            cells: |object, now| {
                let (spec, status) = (&object["spec"], &object["status"]);
                let job = &spec["jobTemplate"]["spec"];
                let (containers, images) = containers_and_images(&job["template"]["spec"]);
                let suspend = match spec["suspend"].as_bool() {
                    Some(true) => "True",
                    Some(false) => "False",
                    None => "<unset>",
                };
                let last = if status["lastScheduleTime"].is_string() {
                    age(&status["lastScheduleTime"], now)
                } else {
                    "<none>".to_string()
                };
                vec![
                    json!(name(object)),
                    json!(spec["schedule"].as_str().unwrap_or_default()),
                    json!(text(&spec["timeZone"], "<none>")),
                    json!(suspend),
                    json!(status["active"].as_array().map_or(0, Vec::len)),
                    json!(last),
                    json!(object_age(object, now)),
                    json!(containers),
                    json!(images),
                    json!(label_selector(&job["selector"])),
                ]
            },
        },
        "horizontalpodautoscalers" => Printer {
            columns: HORIZONTALPODAUTOSCALERS_COLUMNS,
            cells: |object, now| {
                let (spec, status) = (&object["spec"], &object["status"]);
                let target = &spec["scaleTargetRef"];
                let reference = format!(
                    "{}/{}",
                    target["kind"].as_str().unwrap_or_default(),
                    target["name"].as_str().unwrap_or_default()
                );
                let min = spec["minReplicas"]
                    .as_i64()
                    .map_or_else(|| "<unset>".to_string(), |min| min.to_string());
                vec![
                    json!(name(object)),
                    json!(reference),
                    json!(hpa_targets(spec, status)),
                    json!(min),
                    json!(int(&spec["maxReplicas"])),
                    json!(int(&status["currentReplicas"])),
                    json!(object_age(object, now)),
                ]
            },
        },
        "poddisruptionbudgets" => Printer {
            columns: PODDISRUPTIONBUDGETS_COLUMNS,
            cells: |object, now| {
                let spec = &object["spec"];
                vec![
                    json!(name(object)),
                    json!(int_or_string(&spec["minAvailable"], "N/A")),
                    json!(int_or_string(&spec["maxUnavailable"], "N/A")),
                    json!(int(&object["status"]["disruptionsAllowed"])),
                    json!(object_age(object, now)),
                ]
            },
        },
        "controllerrevisions" => Printer {
            columns: CONTROLLERREVISIONS_COLUMNS,
            cells: |object, now| {
                let controller = object["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|owner| owner["controller"] == true)
                    .map_or_else(
                        || "<none>".to_string(),
                        |owner| {
                            let kind = owner["kind"]
                                .as_str()
                                .unwrap_or_default()
                                .to_ascii_lowercase();
                            let group = owner["apiVersion"]
                                .as_str()
                                .and_then(|version| version.split_once('/'))
                                .map(|(group, _)| group)
                                .unwrap_or_default();
                            let kind = if group.is_empty() {
                                kind
                            } else {
                                format!("{kind}.{group}")
                            };
                            format!("{kind}/{}", owner["name"].as_str().unwrap_or_default())
                        },
                    );
                vec![
                    json!(name(object)),
                    json!(controller),
                    json!(int(&object["revision"])),
                    json!(object_age(object, now)),
                ]
            },
        },
        _ => return None,
    })
}

/// A job's cells: its state, completions and how long it ran.
fn job(object: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let (spec, status) = (&object["spec"], &object["status"]);
    let conditions = &status["conditions"];
    let state = if is_true(conditions, "Complete") {
        "Complete"
    } else if is_true(conditions, "Failed") {
        "Failed"
    } else if object["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else if is_true(conditions, "Suspended") {
        "Suspended"
    } else if is_true(conditions, "FailureTarget") {
        "FailureTarget"
    } else if is_true(conditions, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let succeeded = int(&status["succeeded"]);
    let completions = match spec["completions"].as_i64() {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match int(&spec["parallelism"]) {
            parallelism if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let seconds = |value: &Value| {
        value
            .as_str()
            .and_then(|text| text.parse::<jiff::Timestamp>().ok())
            .map(|time| time.as_second())
    };
    let duration = match (
        seconds(&status["startTime"]),
        seconds(&status["completionTime"]),
    ) {
        (None, _) => String::new(),
        (Some(start), Some(end)) => human_duration(end - start),
        (Some(start), None) => human_duration(now.as_second() - start),
    };
    let (containers, images) = containers_and_images(&spec["template"]["spec"]);
    vec![
        json!(name(object)),
        json!(state),
        json!(completions),
        json!(duration),
        json!(object_age(object, now)),
        json!(containers),
        json!(images),
        json!(label_selector(&spec["selector"])),
    ]
}

/// An autoscaler's metrics, `current/target` each, at most two then `+ N more...`.
fn hpa_targets(spec: &Value, status: &Value) -> String {
    let metrics = spec["metrics"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if metrics.is_empty() {
        return "<none>".to_string();
    }
    let current = status["currentMetrics"].as_array();
    let shown: Vec<String> = metrics
        .iter()
        .take(2)
        .enumerate()
        .map(|(index, metric)| {
            let resource = &metric["resource"];
            let target = &resource["target"];
            let now = current
                .and_then(|list| list.get(index))
                .map(|m| &m["resource"]["current"]);
            match target["averageUtilization"].as_i64() {
                Some(utilization) => {
                    let current = now
                        .and_then(|c| c["averageUtilization"].as_i64())
                        .map_or_else(|| "<unknown>".to_string(), |c| format!("{c}%"));
                    format!(
                        "{}: {current}/{utilization}%",
                        resource["name"].as_str().unwrap_or_default()
                    )
                }
                None => {
                    let target = target["averageValue"]
                        .as_str()
                        .or_else(|| target["value"].as_str())
                        .unwrap_or_default();
                    format!("<unknown>/{target}")
                }
            }
        })
        .collect();
    let shown = shown.join(", ");
    match metrics.len() {
        0..=2 => shown,
        more => format!("{shown} + {} more...", more - 2),
    }
}

const DEPLOYMENTS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Ready",
        "string",
        words("Number of the pod with ready state"),
    ),
    column(
        "Up-to-date",
        "string",
        field(DEPLOYMENT_STATUS, "updatedReplicas"),
    ),
    column(
        "Available",
        "string",
        field(DEPLOYMENT_STATUS, "availableReplicas"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", field(DEPLOYMENT_SPEC, "selector")),
];

const REPLICASETS_COLUMNS: &[Column] = &[
    NAME,
    column("Desired", "integer", field(REPLICA_SET_SPEC, "replicas")),
    column("Current", "integer", field(REPLICA_SET_STATUS, "replicas")),
    column(
        "Ready",
        "integer",
        field(REPLICA_SET_STATUS, "readyReplicas"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", field(REPLICA_SET_SPEC, "selector")),
];

const STATEFULSETS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Ready",
        "string",
        words("Number of the pod with ready state"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
];

const DAEMONSETS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Desired",
        "integer",
        field(DAEMON_SET_STATUS, "desiredNumberScheduled"),
    ),
    column(
        "Current",
        "integer",
        field(DAEMON_SET_STATUS, "currentNumberScheduled"),
    ),
    column("Ready", "integer", field(DAEMON_SET_STATUS, "numberReady")),
    column(
        "Up-to-date",
        "integer",
        field(DAEMON_SET_STATUS, "updatedNumberScheduled"),
    ),
    column(
        "Available",
        "integer",
        field(DAEMON_SET_STATUS, "numberAvailable"),
    ),
    column(
        "Node Selector",
        "string",
        field("io.k8s.api.core.v1.PodSpec", "nodeSelector"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", field(DAEMON_SET_SPEC, "selector")),
];

const JOBS_COLUMNS: &[Column] = &[
    NAME,
    column("Status", "string", words("Status of the job.")),
    column("Completions", "string", field(JOB_STATUS, "succeeded")),
    column(
        "Duration",
        "string",
        words("Time required to complete the job."),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", field(JOB_SPEC, "selector")),
];

const CRONJOBS_COLUMNS: &[Column] = &[
    NAME,
    column("Schedule", "string", field(CRON_JOB_SPEC, "schedule")),
    column("Timezone", "string", field(CRON_JOB_SPEC, "timeZone")),
    column("Suspend", "boolean", field(CRON_JOB_SPEC, "suspend")),
    column("Active", "integer", field(CRON_JOB_STATUS, "active")),
    column(
        "Last Schedule",
        "string",
        field(CRON_JOB_STATUS, "lastScheduleTime"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", field(JOB_SPEC, "selector")),
];

const HORIZONTALPODAUTOSCALERS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Reference",
        "string",
        words("Reference to the scaled resource"),
    ),
    column("Targets", "string", words("The current and target metrics")),
    column("MinPods", "string", words("The minimum number of replicas")),
    column("MaxPods", "string", words("The maximum number of replicas")),
    column(
        "Replicas",
        "string",
        words("The current number of replicas"),
    ),
    AGE,
];

const PODDISRUPTIONBUDGETS_COLUMNS: &[Column] = &[
    NAME,
    column(
        "Min Available",
        "string",
        words("The minimum number of pods that must be available."),
    ),
    column(
        "Max Unavailable",
        "string",
        words("The maximum number of pods that may be unavailable."),
    ),
    column(
        "Allowed Disruptions",
        "integer",
        words("Calculated number of pods that may be disrupted at this time."),
    ),
    AGE,
];

const CONTROLLERREVISIONS_COLUMNS: &[Column] = &[
    NAME,
    column("Controller", "string", words("Controller of the object")),
    column(
        "Revision",
        "string",
        field("io.k8s.api.apps.v1.ControllerRevision", "revision"),
    ),
    AGE,
];
