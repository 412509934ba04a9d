//! A new Job: unless it picks its own selector (`manualSelector: true`), its pods are selected by
//! its uid, and its pod template carries the labels the Job controller matches
//! (`batch.kubernetes.io/controller-uid`, `batch.kubernetes.io/job-name`, and their legacy
//! forms), as the Job strategy generates them.

use serde_json::{Value, json};

pub(super) fn prepare_for_create(job: &mut Value) {
    if job["spec"]["manualSelector"] == true {
        return;
    }
    let (Some(uid), Some(name)) = (
        job["metadata"]["uid"].as_str().map(str::to_string),
        job["metadata"]["name"].as_str().map(str::to_string),
    ) else {
        return;
    };
    let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.insert(
        "selector".into(),
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
    );
    let template = spec.entry("template").or_insert_with(|| json!({}));
    if !template["metadata"].is_object() {
        template["metadata"] = json!({});
    }
    if !template["metadata"]["labels"].is_object() {
        template["metadata"]["labels"] = json!({});
    }
    let labels = &mut template["metadata"]["labels"];
    labels["batch.kubernetes.io/controller-uid"] = json!(uid);
    labels["batch.kubernetes.io/job-name"] = json!(name);
    labels["controller-uid"] = json!(uid);
    labels["job-name"] = json!(name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_selects_its_pods_by_its_uid() {
        let mut job = json!({"metadata": {"name": "j", "uid": "u-1"},
                             "spec": {"template": {"spec": {}}}});
        prepare_for_create(&mut job);
        assert_eq!(
            job["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"],
            "j"
        );
        let mut manual = json!({"metadata": {"name": "m", "uid": "u"},
                                "spec": {"manualSelector": true, "template": {}}});
        prepare_for_create(&mut manual);
        assert!(manual["spec"].get("selector").is_none());
    }
}
