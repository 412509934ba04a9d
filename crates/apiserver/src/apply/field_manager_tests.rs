//! The field manager's steps, as kube-apiserver's behave: what a create, an update and an apply
//! record, before-first-apply, ancient-changes, reset fields, conflicts, and the bridge from
//! client-side apply.

use serde_json::{Value, json};

use super::field_manager::{ApplyError, FieldManager, conflict_report};
use super::last_applied::ANNOTATION;
use super::schema::Type;
use crate::resource::{ResourceKind, builtin_resources};

fn kind(group: &str, plural: &str) -> ResourceKind {
    builtin_resources()
        .into_iter()
        .find(|kind| kind.group == group && kind.plural == plural)
        .unwrap()
}

fn manager(group: &str, plural: &str, subresource: &str) -> FieldManager {
    let kind = kind(group, plural);
    FieldManager::new(&kind, Type::of_resource(&kind), subresource)
}

fn deployment(replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "u-1", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "nginx"}]}},
        },
        "status": {"replicas": 0},
    })
}

fn entries(object: &Value) -> Vec<(String, String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|entry| {
                    let text = |name: &str| entry[name].as_str().unwrap_or("").to_string();
                    (text("manager"), text("operation"), text("subresource"))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn owned_by(object: &Value, manager: &str) -> Value {
    object["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| entries.iter().find(|entry| entry["manager"] == manager))
        .map(|entry| entry["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

fn created(manager_name: &str) -> Value {
    let mut object = deployment(1);
    manager("apps", "deployments", "").update(None, &mut object, manager_name);
    object
}

#[test]
fn a_create_gives_its_manager_every_field_but_status_and_identity() {
    let object = created("kubectl-create");
    assert_eq!(
        entries(&object),
        [("kubectl-create".into(), "Update".into(), String::new())]
    );
    let entry = &object["metadata"]["managedFields"][0];
    assert_eq!(entry["apiVersion"], "apps/v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert!(entry["time"].as_str().unwrap().ends_with('Z'));
    let fields = &entry["fieldsV1"];
    assert_eq!(
        fields["f:metadata"],
        json!({"f:labels": {".": {}, "f:app": {}}})
    );
    assert_eq!(fields["f:spec"]["f:replicas"], json!({}));
    assert!(
        fields.get("f:status").is_none(),
        "status is reset: {fields}"
    );
    assert!(fields.get("f:apiVersion").is_none() && fields.get("f:kind").is_none());
}

#[test]
fn an_update_takes_what_it_changes_and_a_no_op_changes_nothing() {
    let live = created("creator");
    let mut new = live.clone();
    new["spec"]["replicas"] = json!(3);
    manager("apps", "deployments", "").update(Some(&live), &mut new, "scaler");
    assert_eq!(
        owned_by(&new, "scaler"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert!(
        owned_by(&new, "creator")["f:spec"]
            .get("f:replicas")
            .is_none()
    );

    let mut same = new.clone();
    manager("apps", "deployments", "").update(Some(&new), &mut same, "someone");
    assert_eq!(same, new, "an update that changes nothing records nothing");
}

#[test]
fn an_updater_adds_what_it_changes_to_what_it_owned() {
    let live = created("creator");
    let mut new = live.clone();
    new["spec"]["paused"] = json!(true);
    new["metadata"]["labels"]["tier"] = json!("web");
    manager("apps", "deployments", "").update(Some(&live), &mut new, "creator");
    let mut expected = owned_by(&live, "creator");
    expected["f:spec"]["f:paused"] = json!({});
    expected["f:metadata"]["f:labels"]["f:tier"] = json!({});
    assert_eq!(owned_by(&new, "creator"), expected);
    assert_eq!(entries(&new).len(), 1);
}

#[test]
fn managed_fields_a_client_writes_are_stored_as_the_server_writes_them() {
    let live = created("creator");
    let mut new = live.clone();
    new["spec"]["replicas"] = json!(2);
    // A member written with `"."` alone, which the server writes `{}`; a member with
    // children without `"."`, which then owns only them.
    new["metadata"]["managedFields"] = json!([
        {"manager": "creator", "operation": "Update", "apiVersion": "apps/v1",
         "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:spec": {"f:replicas": {".": {}}, "f:paused": {".": {}}}}},
        {"manager": "other", "operation": "Update", "apiVersion": "apps/v1",
         "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {".": {}}}}}},
    ]);
    manager("apps", "deployments", "").update(Some(&live), &mut new, "creator");
    assert_eq!(
        owned_by(&new, "creator"),
        json!({"f:spec": {"f:paused": {}, "f:replicas": {}}})
    );
    assert_eq!(
        owned_by(&new, "other"),
        json!({"f:metadata": {"f:labels": {"f:app": {}}}})
    );

    // An entry that does not read as a set: the live object's entries stay in force.
    let mut bad = live.clone();
    bad["spec"]["replicas"] = json!(4);
    bad["metadata"]["managedFields"] = json!([
        {"manager": "other", "operation": "Update", "apiVersion": "apps/v1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": 1}}},
    ]);
    manager("apps", "deployments", "").update(Some(&live), &mut bad, "scaler");
    assert_eq!(
        entries(&bad),
        [
            ("creator".into(), "Update".into(), String::new()),
            ("scaler".into(), "Update".into(), String::new())
        ]
    );
}

#[test]
fn an_untracked_object_stays_untracked_and_reset_clears_the_fields() {
    let mut live = deployment(1);
    let mut new = live.clone();
    new["spec"]["replicas"] = json!(2);
    manager("apps", "deployments", "").update(Some(&live), &mut new, "someone");
    assert!(new["metadata"].get("managedFields").is_none());

    live = created("creator");
    let mut reset = live.clone();
    reset["metadata"]["managedFields"] = json!([{}]);
    manager("apps", "deployments", "").update(Some(&live), &mut reset, "someone");
    assert!(reset["metadata"].get("managedFields").is_none());
}

#[test]
fn a_status_update_is_recorded_for_the_subresource_without_spec() {
    let live = created("creator");
    let mut new = live.clone();
    new["status"]["replicas"] = json!(1);
    new["spec"]["replicas"] = json!(9);
    manager("apps", "deployments", "status").update(Some(&live), &mut new, "controller");
    assert!(entries(&new).contains(&("controller".into(), "Update".into(), "status".into())));
    assert_eq!(
        owned_by(&new, "controller"),
        json!({"f:status": {"f:replicas": {}}})
    );
}

#[test]
fn the_first_apply_to_an_untracked_object_records_before_first_apply() {
    let live = deployment(1);
    let config = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "spec": {"replicas": 2}});
    let error = manager("apps", "deployments", "")
        .apply(Some(&live), config.clone(), "applier", false)
        .unwrap_err();
    let ApplyError::Conflicts(conflicts) = error else {
        panic!("{error:?}");
    };
    let (message, causes) = conflict_report(&conflicts);
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using apps/v1: .spec.replicas"
    );
    assert_eq!(
        causes,
        [(
            "conflict with \"before-first-apply\" using apps/v1".to_string(),
            ".spec.replicas".to_string()
        )]
    );
    let forced = manager("apps", "deployments", "")
        .apply(Some(&live), config.clone(), "applier", true)
        .unwrap()
        .object;
    assert_eq!(forced["spec"]["replicas"], 2);
    assert_eq!(
        entries(&forced),
        [
            ("applier".into(), "Apply".into(), String::new()),
            ("before-first-apply".into(), "Update".into(), String::new())
        ]
    );
}

#[test]
fn applies_conflict_with_updaters_merge_and_a_repeat_changes_nothing() {
    let live = created("creator");
    let config = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"team": "a"}},
        "spec": {"replicas": 1}});
    let first = manager("apps", "deployments", "")
        .apply(Some(&live), config.clone(), "applier", false)
        .unwrap();
    assert!(first.changed);
    let applied = first.object;
    assert_eq!(
        applied["metadata"]["labels"],
        json!({"app": "web", "team": "a"})
    );
    assert_eq!(
        owned_by(&applied, "applier"),
        json!({"f:metadata": {"f:labels": {"f:team": {}}}, "f:spec": {"f:replicas": {}}})
    );
    let again = manager("apps", "deployments", "")
        .apply(Some(&applied), config.clone(), "applier", false)
        .unwrap();
    assert!(!again.changed);
    assert_eq!(again.object, applied);

    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "spec": {"replicas": 5, "paused": true}});
    let ApplyError::Conflicts(conflicts) = manager("apps", "deployments", "")
        .apply(Some(&applied), other.clone(), "other", false)
        .unwrap_err()
    else {
        panic!("expected conflicts");
    };
    let (message, _) = conflict_report(&conflicts);
    assert_eq!(
        message,
        "Apply failed with 2 conflicts: conflicts with \"applier\":\n- .spec.replicas\nconflicts with \"creator\" using apps/v1:\n- .spec.replicas"
    );
}

#[test]
fn apply_checks_the_kind_the_managed_fields_and_the_schema() {
    let live = created("creator");
    let fm = manager("apps", "deployments", "");
    let bad = |config: Value| fm.apply(Some(&live), config, "a", false).unwrap_err();
    assert_eq!(
        bad(json!({"apiVersion": "v1", "kind": "Deployment", "metadata": {"name": "web"}})),
        ApplyError::BadRequest("invalid object type: /v1, Kind=Deployment".into())
    );
    assert_eq!(
        bad(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "managedFields": []}})),
        ApplyError::BadRequest("metadata.managedFields must be nil".into())
    );
    assert_eq!(
        bad(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web"}, "spec": {"replicaz": 1}})),
        ApplyError::Failed(
            "failed to create typed patch object (/web; apps/v1, Kind=Deployment): .spec.replicaz: field not declared in schema".into()
        )
    );
}

#[test]
fn status_applied_through_the_main_resource_is_owned_by_nobody() {
    let live = created("creator");
    let config = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}, "status": {"replicas": 7}});
    let applied = manager("apps", "deployments", "")
        .apply(Some(&live), config.clone(), "applier", false)
        .unwrap()
        .object;
    assert!(owned_by(&applied, "applier").is_null());
}

#[test]
fn many_updaters_are_folded_into_ancient_changes() {
    let fm = manager("", "configmaps", "");
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"}, "data": {}});
    fm.update(None, &mut object, "creator");
    object["metadata"]["uid"] = json!("u-1");
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c"}, "data": {"applied": "yes"}});
    object = fm
        .apply(Some(&object), config.clone(), "applier", false)
        .unwrap()
        .object;
    for i in 0..20 {
        let mut new = object.clone();
        new["data"][format!("k{i}")] = json!("v");
        fm.update(Some(&object), &mut new, &format!("updater-{i:02}"));
        object = new;
    }
    let entries = entries(&object);
    assert_eq!(entries.len(), 11, "{entries:?}");
    assert_eq!(entries[0].0, "applier");
    assert!(
        entries.iter().any(|entry| entry.0 == "ancient-changes"),
        "{entries:?}"
    );
}

#[test]
fn kubectl_takes_fields_its_client_side_apply_set_and_keeps_the_annotation() {
    let last = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"}, "data": {"k": "1"}});
    let mut live = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default",
                     "annotations": {ANNOTATION: last.to_string()}},
        "data": {"k": "1"}});
    let fm = manager("", "configmaps", "");
    let mut created = live.clone();
    fm.update(None, &mut created, "kubectl-client-side-apply");
    created["metadata"]["uid"] = json!("u-1");
    live = created;
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c"}, "data": {"k": "2"}});
    let applied = fm
        .apply(Some(&live), config.clone(), "kubectl", false)
        .unwrap()
        .object;
    assert_eq!(applied["data"]["k"], "2");
    assert_eq!(
        applied["metadata"]["annotations"][ANNOTATION],
        format!("{config}\n")
    );
    let refused = fm.apply(Some(&live), config.clone(), "someone-else", false);
    assert!(matches!(refused, Err(ApplyError::Conflicts(_))));
}
