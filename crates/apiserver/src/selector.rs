//! Label and field selectors, as `labelSelector` and `fieldSelector` query parameters carry them.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::resource::SelectableField;

/// Why a selector could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The selector's text does not follow the grammar.
    #[error("unable to parse requirement: {0}")]
    Syntax(String),
    /// A field selector names a field this resource cannot be selected by.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (index, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_set(text: &str, requirement: &str) -> Result<BTreeSet<String>, SelectorError> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|rest| rest.strip_suffix(')'))
        .ok_or_else(|| SelectorError::Syntax(requirement.to_string()))?;
    let values: BTreeSet<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(|value| !valid_value(value)) {
        return Err(SelectorError::Syntax(requirement.to_string()));
    }
    Ok(values)
}

impl LabelSelector {
    /// Parses `text` (`a=b,c!=d,e in (f,g),h notin (i),j,!k`); empty selects everything.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if text.trim().is_empty() {
            return Ok(Self { requirements });
        }
        for part in split_top_level(text) {
            let part = part.trim();
            let syntax = || SelectorError::Syntax(part.to_string());
            let requirement = if let Some(key) = part.strip_prefix('!') {
                Requirement::DoesNotExist(key.trim().to_string())
            } else if let Some((key, value)) = part.split_once("!=") {
                Requirement::NotEquals(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, value)) = part.split_once("==") {
                Requirement::Equals(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, value)) = part.split_once('=') {
                Requirement::Equals(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, set)) = part.split_once(" notin ") {
                Requirement::NotIn(key.trim().to_string(), parse_set(set, part)?)
            } else if let Some((key, set)) = part.split_once(" in ") {
                Requirement::In(key.trim().to_string(), parse_set(set, part)?)
            } else {
                Requirement::Exists(part.to_string())
            };
            let (key, value) = match &requirement {
                Requirement::Equals(key, value) | Requirement::NotEquals(key, value) => {
                    (key, Some(value))
                }
                Requirement::In(key, _)
                | Requirement::NotIn(key, _)
                | Requirement::Exists(key)
                | Requirement::DoesNotExist(key) => (key, None),
            };
            if !valid_key(key) || value.is_some_and(|value| !valid_value(value)) {
                return Err(syntax());
            }
            requirements.push(requirement);
        }
        Ok(Self { requirements })
    }

    /// Whether `object`'s `metadata.labels` satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        if self.requirements.is_empty() {
            return true;
        }
        let labels = object["metadata"]["labels"].as_object();
        let label = |key: &str| {
            labels
                .and_then(|labels| labels.get(key))
                .and_then(Value::as_str)
        };
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::Equals(key, value) => label(key) == Some(value.as_str()),
                Requirement::NotEquals(key, value) => label(key) != Some(value.as_str()),
                Requirement::In(key, values) => label(key).is_some_and(|v| values.contains(v)),
                Requirement::NotIn(key, values) => !label(key).is_some_and(|v| values.contains(v)),
                Requirement::Exists(key) => label(key).is_some(),
                Requirement::DoesNotExist(key) => label(key).is_none(),
            })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// One requirement of a field selector: the field's path, what it reads when absent, whether
/// it must equal (or differ from) the value, and the value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    path: Vec<String>,
    absent: String,
    equal: bool,
    value: String,
}

/// A parsed field selector over `metadata.name`, `metadata.namespace` and the resource's own
/// selectable fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `metadata.name=x,metadata.namespace!=y`; empty selects everything. Only
    /// `metadata.name` and `metadata.namespace` may be named.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        Self::parse_for(text, &[])
    }

    /// Parses a selector that may also name the fields of `selectable`.
    pub fn parse_for(text: &str, selectable: &[SelectableField]) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if text.trim().is_empty() {
            return Ok(Self { requirements });
        }
        for part in text.split(',') {
            let part = part.trim();
            let (field, equal, value) = if let Some((field, value)) = part.split_once("!=") {
                (field, false, value)
            } else if let Some((field, value)) = part.split_once("==") {
                (field, true, value)
            } else if let Some((field, value)) = part.split_once('=') {
                (field, true, value)
            } else {
                return Err(SelectorError::Syntax(part.to_string()));
            };
            let field = field.trim();
            let (path, absent) = match field {
                "metadata.name" | "metadata.namespace" => (field, ""),
                _ => match selectable
                    .iter()
                    .find(|selectable| selectable.label == field)
                {
                    Some(selectable) => (selectable.path.as_str(), selectable.absent.as_str()),
                    None => return Err(SelectorError::UnsupportedField(field.to_string())),
                },
            };
            requirements.push(FieldRequirement {
                path: path.split('.').map(str::to_string).collect(),
                absent: absent.to_string(),
                equal,
                value: value.trim().to_string(),
            });
        }
        Ok(Self { requirements })
    }

    /// Whether `object` satisfies every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|requirement| {
            let found = requirement
                .path
                .iter()
                .try_fold(object, |value, segment| value.get(segment));
            let actual = match found {
                Some(Value::String(text)) => std::borrow::Cow::Borrowed(text.as_str()),
                Some(Value::Bool(flag)) => flag.to_string().into(),
                Some(Value::Number(number)) => number.to_string().into(),
                Some(Value::Null) | None => requirement.absent.as_str().into(),
                Some(other) => other.to_string().into(),
            };
            (actual == requirement.value.as_str()) == requirement.equal
        })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"name": "x", "namespace": "default", "labels": labels}})
    }

    #[test]
    fn every_label_operator() {
        let object = labelled(json!({"app": "web", "tier": "front"}));
        for (selector, expected) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web,db)", true),
            ("app in (db)", false),
            ("app notin (db)", true),
            ("missing notin (db)", true),
            ("app notin (web)", false),
            ("app", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("app=web,tier=front", true),
            ("app=web,tier in (back)", false),
            ("app in (web, db),!missing", true),
        ] {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&object), expected, "{selector}");
        }
    }

    #[test]
    fn bad_label_selectors_are_refused() {
        for bad in ["app in web", "a b", "app=(x)", "=x", "app in (x y)"] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn field_selectors() {
        let object = labelled(json!({}));
        assert!(
            FieldSelector::parse("metadata.name=x")
                .unwrap()
                .matches(&object)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=x")
                .unwrap()
                .matches(&object)
        );
        assert!(
            FieldSelector::parse("metadata.namespace==default,metadata.name=x")
                .unwrap()
                .matches(&object)
        );
        assert_eq!(
            FieldSelector::parse("spec.nodeName=a")
                .unwrap_err()
                .to_string(),
            "field label not supported: spec.nodeName"
        );
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}
