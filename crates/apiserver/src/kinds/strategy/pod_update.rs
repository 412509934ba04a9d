//! What an update may change of a Pod's spec, as kube-apiserver's `ValidatePodUpdate` checks it:
//! the containers' and init containers' images, `activeDeadlineSeconds` (set, or lowered),
//! tolerations (added, or their `tolerationSeconds` changed), scheduling gates (removed),
//! `terminationGracePeriodSeconds` from a negative value to 1, and for a Pod still gated, node
//! selector entries and node affinity terms added. Anything else is refused with kube's
//! `Forbidden` at `spec`. (Resources change through `pods/resize`, the status through
//! `pods/status`; neither is an update of the Pod itself.)
//!
//! The objects compared are decoded and defaulted, as kube compares its typed specs: a field
//! absent on one side and empty, zero or false on the other is the same field.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::custom::{FieldError, FieldErrorKind};

/// The fields an update may change, as kube-apiserver's message names them.
const UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// The errors of updating the Pod `old` to `new`, in kube-apiserver's order.
pub(super) fn update_errors(new: &Value, old: &Value) -> Vec<FieldError> {
    let nothing = Map::new();
    let new_spec = new["spec"].as_object().unwrap_or(&nothing);
    let old_spec = old["spec"].as_object().unwrap_or(&nothing);
    let mut errors = Vec::new();
    for list in ["containers", "initContainers"] {
        let new_items = items(new_spec.get(list));
        if new_items.len() != items(old_spec.get(list)).len() {
            errors.push(forbidden(
                format!("spec.{list}"),
                "pod updates may not add or remove containers",
            ));
            return errors;
        }
        for (index, container) in new_items.iter().enumerate() {
            if container["image"].as_str().is_none_or(str::is_empty) {
                errors.push(FieldError::required(
                    format!("spec.{list}[{index}].image"),
                    "",
                ));
            }
        }
    }
    if let Some((refused, stop)) = deadline_error(new_spec, old_spec) {
        errors.push(refused);
        if stop {
            return errors;
        }
    }
    errors.extend(toleration_error(new_spec, old_spec));
    errors.extend(gate_errors(new_spec, old_spec));
    let gated = !items(old_spec.get("schedulingGates")).is_empty();
    let mut changes = Vec::new();
    let mut note = |path: &[Step<'_>], old: &Value, new: &Value| {
        changes.push(format!("{}: {old} -> {new}", path_text(path)));
    };
    let mut path = Vec::new();
    let only_old = old_spec.keys().filter(|name| !new_spec.contains_key(*name));
    for name in new_spec.keys().chain(only_old) {
        let (new_value, old_value) = (or_null(new_spec.get(name)), or_null(old_spec.get(name)));
        path.push(Step::Field(name));
        match name.as_str() {
            "containers" | "initContainers" => {
                let olds = items(Some(old_value));
                for (index, (new_item, old_item)) in
                    items(Some(new_value)).iter().zip(olds).enumerate()
                {
                    path.push(Step::Index(index));
                    match (new_item.as_object(), old_item.as_object()) {
                        (Some(new_item), Some(old_item)) => field_differences(
                            &mut path,
                            Some(new_item),
                            Some(old_item),
                            &["image"],
                            &mut note,
                        ),
                        _ => differences(&mut path, new_item, old_item, &mut note),
                    }
                    path.pop();
                }
            }
            "activeDeadlineSeconds" | "tolerations" | "schedulingGates" => {}
            "terminationGracePeriodSeconds"
                if old_value.as_i64().is_some_and(|old| old < 0)
                    && new_value.as_i64() == Some(1) => {}
            "nodeSelector" if gated => {
                errors.extend(node_selector_error(new_value, old_value));
            }
            "affinity" if gated => {
                errors.extend(node_affinity_errors(
                    &new_value["nodeAffinity"],
                    &old_value["nodeAffinity"],
                ));
                field_differences(
                    &mut path,
                    new_value.as_object(),
                    old_value.as_object(),
                    &["nodeAffinity"],
                    &mut note,
                );
            }
            _ => differences(&mut path, new_value, old_value, &mut note),
        }
        path.pop();
    }
    if !changes.is_empty() {
        let mut detail = format!("pod updates may not change fields other than {UPDATABLE}\n");
        for change in changes {
            let _ = writeln!(detail, "  {change}");
        }
        errors.push(forbidden("spec", detail.trim_end()));
    }
    errors
}

/// `activeDeadlineSeconds` may be set where it was not, or lowered; never raised or removed.
/// With the error, whether the checks stop there (all but a deadline taken away stop them).
fn deadline_error(
    new_spec: &Map<String, Value>,
    old_spec: &Map<String, Value>,
) -> Option<(FieldError, bool)> {
    const FIELD: &str = "spec.activeDeadlineSeconds";
    let old = old_spec
        .get("activeDeadlineSeconds")
        .filter(|value| !value.is_null());
    let Some(new) = new_spec
        .get("activeDeadlineSeconds")
        .filter(|value| !value.is_null())
    else {
        let detail = "must not update from a positive integer to nil value";
        return old.map(|_| {
            (
                FieldError::invalid(FIELD, Value::from("null"), detail),
                false,
            )
        });
    };
    let seconds = new.as_i64().unwrap_or(-1);
    if !(0..=i64::from(i32::MAX)).contains(&seconds) {
        let detail = format!("must be between 0 and {}, inclusive", i32::MAX);
        return Some((FieldError::invalid(FIELD, new.clone(), detail), true));
    }
    old.and_then(Value::as_i64)
        .filter(|old| *old < seconds)
        .map(|_| {
            let detail = "must be less than or equal to previous value";
            (FieldError::invalid(FIELD, new.clone(), detail), true)
        })
}

/// Every old toleration must still be there, but for its `tolerationSeconds`.
fn toleration_error(
    new_spec: &Map<String, Value>,
    old_spec: &Map<String, Value>,
) -> Option<FieldError> {
    let news = items(new_spec.get("tolerations"));
    // Each old toleration is compared with every new one, and most pairs differ: a difference
    // is only noted, not written out.
    let kept = items(old_spec.get("tolerations")).iter().all(|old| {
        news.iter().any(|new| {
            let mut same = true;
            field_differences(
                &mut Vec::new(),
                new.as_object(),
                old.as_object(),
                &["tolerationSeconds"],
                &mut |_, _, _| same = false,
            );
            same
        })
    });
    (!kept).then(|| {
        forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        )
    })
}

/// Scheduling gates may only be removed.
fn gate_errors(new_spec: &Map<String, Value>, old_spec: &Map<String, Value>) -> Vec<FieldError> {
    let olds = items(old_spec.get("schedulingGates"));
    items(new_spec.get("schedulingGates"))
        .iter()
        .enumerate()
        .filter(|(_, gate)| !olds.iter().any(|old| old["name"] == gate["name"]))
        .map(|(index, gate)| {
            forbidden(
                format!("spec.schedulingGates[{index}].name"),
                format!(
                    "only deletion is allowed, but found new scheduling gate '{}'",
                    gate["name"].as_str().unwrap_or_default()
                ),
            )
        })
        .collect()
}

/// A gated Pod's node selector may gain entries, not lose or change them.
fn node_selector_error(new: &Value, old: &Value) -> Option<FieldError> {
    let kept = old
        .as_object()
        .into_iter()
        .flatten()
        .all(|(key, value)| new.get(key) == Some(value));
    (!kept).then(|| {
        FieldError::invalid(
            "spec.nodeSelector",
            new.clone(),
            "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
        )
    })
}

/// A gated Pod's required node affinity terms may gain match expressions and fields; where
/// there were terms, their number stays.
fn node_affinity_errors(new: &Value, old: &Value) -> Vec<FieldError> {
    const TERMS: &str = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    let required = "requiredDuringSchedulingIgnoredDuringExecution";
    if old[required].is_null() {
        return Vec::new();
    }
    let olds = items(old[required].get("nodeSelectorTerms"));
    let news = items(new[required].get("nodeSelectorTerms"));
    if !olds.is_empty() && news.len() != olds.len() {
        return vec![FieldError::invalid(
            TERMS,
            new[required]["nodeSelectorTerms"].clone(),
            "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
        )];
    }
    news.iter()
        .zip(olds)
        .enumerate()
        .filter(|(_, (new_term, old_term))| {
            ["matchExpressions", "matchFields"].iter().any(|list| {
                let news = items(new_term.get(*list));
                let olds = items(old_term.get(*list));
                news.len() < olds.len() || news.iter().zip(olds).any(|(new, old)| new != old)
            })
        })
        .map(|(index, (new_term, _))| {
            FieldError::invalid(
                format!("{TERMS}[{index}]"),
                new_term.clone(),
                "only additions are allowed (no mutations or deletions)",
            )
        })
        .collect()
}

fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
    FieldError::new(FieldErrorKind::Forbidden, field, Value::Null, detail)
}

/// The items of a list (none for anything else).
fn items(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn or_null(value: Option<&Value>) -> &Value {
    value.unwrap_or(&Value::Null)
}

/// Whether `value` is what Go holds for a field left out: nothing, or an empty, zero or false
/// value.
fn is_unset(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(flag) => !flag,
        Value::Number(number) => number.as_f64() == Some(0.0),
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(fields) => fields.is_empty(),
    }
}

/// One step of a path under `spec`.
#[derive(Clone, Copy)]
enum Step<'a> {
    Field(&'a str),
    Index(usize),
}

/// A path's text, as kube writes field paths (`spec.containers[0].ports[0].containerPort`).
fn path_text(path: &[Step<'_>]) -> String {
    let mut text = String::from("spec");
    for step in path {
        let _ = match step {
            Step::Field(name) => write!(text, ".{name}"),
            Step::Index(index) => write!(text, "[{index}]"),
        };
    }
    text
}

/// Hands `note` each place under `path` where `new` differs from `old` (the path, old, new).
/// Nothing is allocated where they agree.
fn differences<'a>(
    path: &mut Vec<Step<'a>>,
    new: &'a Value,
    old: &'a Value,
    note: &mut dyn FnMut(&[Step<'_>], &Value, &Value),
) {
    match (new, old) {
        (Value::Array(news), Value::Array(olds)) if news.len() == olds.len() => {
            for (index, (new, old)) in news.iter().zip(olds).enumerate() {
                path.push(Step::Index(index));
                differences(path, new, old, note);
                path.pop();
            }
        }
        _ if new == old || (is_unset(new) && is_unset(old)) => {}
        (Value::Object(news), old) if old.is_object() || is_unset(old) => {
            field_differences(path, Some(news), old.as_object(), &[], note);
        }
        (new, Value::Object(olds)) if is_unset(new) => {
            field_differences(path, None, Some(olds), &[], note);
        }
        _ => note(path, old, new),
    }
}

/// [`differences`] of two maps (`None`: no map), the fields `skipped` aside.
fn field_differences<'a>(
    path: &mut Vec<Step<'a>>,
    news: Option<&'a Map<String, Value>>,
    olds: Option<&'a Map<String, Value>>,
    skipped: &[&str],
    note: &mut dyn FnMut(&[Step<'_>], &Value, &Value),
) {
    let both = news.into_iter().flatten().map(|(name, new)| {
        let old = olds.and_then(|olds| olds.get(name)).unwrap_or(&Value::Null);
        (name, new, old)
    });
    let only_old = olds
        .into_iter()
        .flatten()
        .filter(|(name, _)| news.is_none_or(|news| !news.contains_key(*name)))
        .map(|(name, old)| (name, &Value::Null, old));
    for (name, new, old) in both.chain(only_old) {
        if skipped.contains(&name.as_str()) {
            continue;
        }
        path.push(Step::Field(name));
        differences(path, new, old, note);
        path.pop();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    fn texts(errors: Vec<FieldError>) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    fn base() -> Value {
        json!({
            "containers": [{"name": "app", "image": "app:1", "ports": [{"containerPort": 80}]}],
            "nodeName": "a",
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
            "activeDeadlineSeconds": 100,
            "restartPolicy": "Always",
        })
    }

    fn with(mut spec: Value, field: &str, value: Value) -> Value {
        spec[field] = value;
        spec
    }

    #[test]
    fn images_deadline_lowered_and_tolerations_added_may_change() {
        let mut new = base();
        new["containers"][0]["image"] = json!("app:2");
        new["activeDeadlineSeconds"] = json!(50);
        new["tolerations"] = json!([
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
            {"key": "other", "operator": "Exists"},
        ]);
        assert!(update_errors(&pod(new), &pod(base())).is_empty());
        // Absent and empty, zero or false are the same field.
        let filled = with(base(), "hostNetwork", json!(false));
        let filled = with(filled, "volumes", json!([]));
        assert!(update_errors(&pod(filled), &pod(base())).is_empty());
    }

    #[test]
    fn other_fields_are_forbidden_with_kube_message() {
        let moved = with(base(), "nodeName", json!("b"));
        let errors = update_errors(&pod(moved), &pod(base()));
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "spec");
        assert_eq!(errors[0].kind, FieldErrorKind::Forbidden);
        assert_eq!(
            errors[0].detail,
            format!(
                "pod updates may not change fields other than {UPDATABLE}\n  spec.nodeName: \"a\" -> \"b\""
            )
        );
        assert!(errors[0].to_string().starts_with(
            "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
        ));
        let mut ported = base();
        ported["containers"][0]["ports"][0]["containerPort"] = json!(81);
        assert_eq!(
            update_errors(&pod(ported), &pod(base()))[0]
                .detail
                .lines()
                .nth(1),
            Some("  spec.containers[0].ports[0].containerPort: 80 -> 81")
        );
    }

    #[test]
    fn containers_added_deadlines_raised_or_removed_and_tolerations_changed_are_refused() {
        let mut added = base();
        added["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "b", "image": "b"}));
        assert_eq!(
            texts(update_errors(&pod(added), &pod(base()))),
            ["spec.containers: Forbidden: pod updates may not add or remove containers"]
        );
        let raised = with(base(), "activeDeadlineSeconds", json!(200));
        assert_eq!(
            texts(update_errors(&pod(raised), &pod(base()))),
            [
                "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"
            ]
        );
        let mut removed = base();
        removed
            .as_object_mut()
            .unwrap()
            .remove("activeDeadlineSeconds");
        assert_eq!(
            texts(update_errors(&pod(removed), &pod(base()))),
            [
                "spec.activeDeadlineSeconds: Invalid value: \"null\": must not update from a positive integer to nil value"
            ]
        );
        let changed = with(
            base(),
            "tolerations",
            json!([{"key": "k", "operator": "Exists"}]),
        );
        assert_eq!(
            texts(update_errors(&pod(changed), &pod(base()))),
            [
                "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
            ]
        );
        let mut blank = base();
        blank["containers"][0]["image"] = json!("");
        assert_eq!(
            texts(update_errors(&pod(blank), &pod(base()))),
            ["spec.containers[0].image: Required value"]
        );
    }

    #[test]
    fn gates_only_go_and_a_gated_pod_may_gain_node_selector_entries() {
        let gated = with(base(), "schedulingGates", json!([{"name": "wait"}]));
        let gated = with(gated, "nodeSelector", json!({"zone": "a"}));
        let released = with(gated.clone(), "schedulingGates", json!([]));
        let narrowed = with(
            released,
            "nodeSelector",
            json!({"zone": "a", "disk": "ssd"}),
        );
        assert!(update_errors(&pod(narrowed), &pod(gated.clone())).is_empty());
        let gained = with(
            gated.clone(),
            "schedulingGates",
            json!([{"name": "wait"}, {"name": "more"}]),
        );
        assert_eq!(
            texts(update_errors(&pod(gained), &pod(gated.clone()))),
            [
                "spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'more'"
            ]
        );
        let moved = with(gated.clone(), "nodeSelector", json!({"zone": "b"}));
        assert_eq!(
            texts(update_errors(&pod(moved), &pod(gated))),
            [
                "spec.nodeSelector: Invalid value: {\"zone\":\"b\"}: only additions to spec.nodeSelector are allowed (no mutations or deletions)"
            ]
        );
        let ungated = with(base(), "nodeSelector", json!({"zone": "a"}));
        assert_eq!(update_errors(&pod(ungated), &pod(base())).len(), 1);
    }

    #[test]
    fn a_negative_grace_period_may_become_one() {
        let negative = with(base(), "terminationGracePeriodSeconds", json!(-1));
        let one = with(base(), "terminationGracePeriodSeconds", json!(1));
        assert!(update_errors(&pod(one.clone()), &pod(negative)).is_empty());
        let thirty = with(base(), "terminationGracePeriodSeconds", json!(30));
        assert_eq!(update_errors(&pod(one), &pod(thirty)).len(), 1);
    }
}
