//! The API approval a CRD in a Kubernetes community group needs (`*.k8s.io`,
//! `*.kubernetes.io`): the `api-approved.kubernetes.io` annotation holding the URL of its
//! approval, or a reason starting with `unapproved` (apiextensions-apiserver's
//! `validateAPIApproval` and its API approval controller, in their words).

use serde_json::Value;

use super::field_error::FieldError;

/// The annotation that records the approval.
pub const ANNOTATION: &str = "api-approved.kubernetes.io";

/// What a CRD's annotation says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Neither a URL nor a reason starting with `unapproved`.
    Invalid,
    /// A URL.
    Approved,
    /// A reason starting with `unapproved`: allowed, but not approved.
    Bypassed,
    /// No annotation, or an empty one.
    Missing,
}

/// Whether `group` is one of the Kubernetes community's, whose CRDs need an approval.
pub fn is_protected_group(group: &str) -> bool {
    group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io")
}

/// The state of `annotation` and kube's reason for it.
fn state(annotation: &str) -> (State, String) {
    let is_url = annotation
        .parse::<axum::http::Uri>()
        .is_ok_and(|uri| uri.scheme().is_some() && uri.host().is_some_and(|host| !host.is_empty()));
    if annotation.is_empty() {
        (
            State::Missing,
            format!(
                "protected groups must have approval annotation {ANNOTATION:?}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )
    } else if annotation.starts_with("unapproved") {
        (State::Bypassed, format!("not approved: {annotation:?}"))
    } else if is_url {
        (State::Approved, format!("approved in {annotation}"))
    } else {
        (
            State::Invalid,
            format!(
                "protected groups must have approval annotation {ANNOTATION:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )
    }
}

fn annotation(crd: &Value) -> &str {
    crd["metadata"]["annotations"][ANNOTATION]
        .as_str()
        .unwrap_or_default()
}

/// The errors of `crd`'s approval, on create (`old` is `None`) or update: none outside the
/// protected groups, and none while the approval's state is the old one's (so that a client
/// that only changes the spec is not refused).
pub fn errors(crd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    if !is_protected_group(group) {
        return Vec::new();
    }
    let (new_state, reason) = state(annotation(crd));
    if old.is_some_and(|old| state(annotation(old)).0 == new_state) {
        return Vec::new();
    }
    let field = format!("metadata.annotations[{ANNOTATION}]");
    match new_state {
        State::Approved | State::Bypassed => Vec::new(),
        State::Missing => vec![FieldError::required(field, reason)],
        State::Invalid => vec![FieldError::invalid(
            field,
            Value::from(annotation(crd)),
            reason,
        )],
    }
}

/// The `KubernetesAPIApprovalPolicyConformant` condition's `(status, reason, message)` for a
/// CRD of a protected group; `None` for any other.
pub fn condition(crd: &Value) -> Option<(&'static str, &'static str, String)> {
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    if !is_protected_group(group) {
        return None;
    }
    let (state, reason) = state(annotation(crd));
    Some(match state {
        State::Invalid => ("False", "InvalidAnnotation", reason),
        State::Missing => ("False", "MissingAnnotation", reason),
        State::Approved => ("True", "ApprovedAnnotation", reason),
        State::Bypassed => ("False", "UnapprovedAnnotation", reason),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(group: &str, annotation: Option<&str>) -> Value {
        let mut crd = json!({"metadata": {"name": "x"}, "spec": {"group": group}});
        if let Some(annotation) = annotation {
            crd["metadata"]["annotations"] = json!({ANNOTATION: annotation});
        }
        crd
    }

    fn texts(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn only_community_groups_need_an_approval() {
        for group in ["example.com", "k8s.io.example.com", "notk8s.io"] {
            assert!(errors(&crd(group, None), None).is_empty(), "{group}");
            assert_eq!(condition(&crd(group, None)), None);
        }
        for group in ["k8s.io", "x.k8s.io", "kubernetes.io", "a.b.kubernetes.io"] {
            assert!(is_protected_group(group), "{group}");
        }
    }

    #[test]
    fn each_annotation_state_is_kubes() {
        let missing = errors(&crd("stable.k8s.io", None), None);
        assert_eq!(
            texts(&missing),
            [
                "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
            ]
        );
        let invalid = errors(&crd("stable.k8s.io", Some("yes please")), None);
        assert_eq!(
            texts(&invalid),
            [
                "metadata.annotations[api-approved.kubernetes.io]: Invalid value: \"yes please\": protected groups must have approval annotation \"api-approved.kubernetes.io\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
            ]
        );
        let url = "https://github.com/kubernetes/kubernetes/pull/78458";
        assert!(errors(&crd("stable.k8s.io", Some(url)), None).is_empty());
        assert!(errors(&crd("stable.k8s.io", Some("unapproved, testing")), None).is_empty());
        assert_eq!(
            condition(&crd("stable.k8s.io", Some(url))),
            Some(("True", "ApprovedAnnotation", format!("approved in {url}")))
        );
        assert_eq!(
            condition(&crd("stable.k8s.io", Some("unapproved, testing"))),
            Some((
                "False",
                "UnapprovedAnnotation",
                "not approved: \"unapproved, testing\"".to_owned()
            ))
        );
        assert_eq!(
            condition(&crd("stable.k8s.io", None)).map(|(_, reason, _)| reason),
            Some("MissingAnnotation")
        );
    }

    #[test]
    fn an_update_that_keeps_the_approval_state_passes() {
        let old = crd("stable.k8s.io", None);
        assert!(errors(&crd("stable.k8s.io", None), Some(&old)).is_empty());
        assert_eq!(
            errors(&crd("stable.k8s.io", Some("bad")), Some(&old)).len(),
            1,
            "a change to an invalid one is refused"
        );
    }
}
