//! The JSONPath of a printer column (`.spec.replicas`, `.spec.ports[0].name`,
//! `.status.conditions[?(@.type=="Ready")].status`, `.metadata.labels['app\.io/name']`): the
//! subset of client-go's `jsonpath` that CRD columns use, read once and evaluated per object.
//! A missing key gives no value, as kube allows missing keys for columns.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// A field of an object.
    Field(String),
    /// An element of a list (negative: from the end).
    Index(i64),
    /// Every element of a list.
    All,
    /// The elements of a list whose `field` is (or, `equal` false, is not) `value`.
    Filter {
        field: Vec<String>,
        value: Value,
        equal: bool,
    },
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

impl JsonPath {
    /// Reads a path; `None` when it is not one this subset reads.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let text = text
            .strip_prefix('{')
            .and_then(|inner| inner.strip_suffix('}'))
            .unwrap_or(text);
        let mut steps = Vec::new();
        let mut rest = text.strip_prefix('$').unwrap_or(text);
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('.') {
                let end = after.find(['.', '[']).unwrap_or(after.len());
                if end == 0 {
                    return None;
                }
                steps.push(Step::Field(after[..end].to_string()));
                rest = &after[end..];
            } else if let Some(after) = rest.strip_prefix('[') {
                let end = closing_bracket(after)?;
                steps.push(bracket(&after[..end])?);
                rest = &after[end + 1..];
            } else {
                return None;
            }
        }
        Some(Self { steps })
    }

    /// The first value the path finds in `object`.
    pub fn first<'a>(&self, object: &'a Value) -> Option<&'a Value> {
        let mut found = vec![object];
        for step in &self.steps {
            let mut next = Vec::new();
            for value in found {
                match step {
                    Step::Field(name) => next.extend(value.get(name.as_str())),
                    Step::Index(index) => {
                        if let Some(items) = value.as_array() {
                            let position = if *index < 0 {
                                i64::try_from(items.len())
                                    .ok()
                                    .and_then(|length| length.checked_add(*index))
                            } else {
                                Some(*index)
                            };
                            next.extend(
                                position
                                    .and_then(|position| usize::try_from(position).ok())
                                    .and_then(|position| items.get(position)),
                            );
                        }
                    }
                    Step::All => next.extend(value.as_array().into_iter().flatten()),
                    Step::Filter {
                        field,
                        value: wanted,
                        equal,
                    } => next.extend(value.as_array().into_iter().flatten().filter(|item| {
                        let found = field
                            .iter()
                            .try_fold(*item, |value, name| value.get(name.as_str()));
                        (found == Some(wanted)) == *equal
                    })),
                }
            }
            found = next;
        }
        found.into_iter().next()
    }
}

/// Where the `]` that closes a bracket is, quotes respected.
fn closing_bracket(text: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (index, c) in text.char_indices() {
        match (quote, c) {
            (_, _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(open), c) if c == open => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, ']') => return Some(index),
            _ => {}
        }
    }
    None
}

/// A step in brackets: `0`, `*`, `'key'`, `?(@.field=="value")`.
fn bracket(inner: &str) -> Option<Step> {
    let inner = inner.trim();
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(index) = inner.parse::<i64>() {
        return Some(Step::Index(index));
    }
    if let Some(quoted) = unquote(inner) {
        return Some(Step::Field(quoted));
    }
    let condition = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let (left, right, equal) = if let Some((left, right)) = condition.split_once("==") {
        (left, right, true)
    } else {
        let (left, right) = condition.split_once("!=")?;
        (left, right, false)
    };
    let field = left
        .trim()
        .strip_prefix("@.")?
        .split('.')
        .map(str::to_string)
        .collect();
    let right = right.trim();
    let value = match unquote(right) {
        Some(text) => Value::String(text),
        None => serde_json::from_str(right).ok()?,
    };
    Some(Step::Filter {
        field,
        value,
        equal,
    })
}

/// The text of a quoted string (`'a\.b'` or `"a"`), escapes removed.
fn unquote(text: &str) -> Option<String> {
    let quote = text.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = text.strip_prefix(quote)?.strip_suffix(quote)?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_fields_indexes_keys_and_filtered_items() {
        let object = json!({
            "spec": {"replicas": 3, "ports": [{"name": "a"}, {"name": "b"}]},
            "metadata": {"labels": {"app.io/name": "web"}},
            "status": {"conditions": [
                {"type": "Synced", "status": "False"},
                {"type": "Ready", "status": "True"},
            ]},
        });
        let find = |path: &str| JsonPath::parse(path).unwrap().first(&object).cloned();
        assert_eq!(find(".spec.replicas"), Some(json!(3)));
        assert_eq!(find(".spec.ports[1].name"), Some(json!("b")));
        assert_eq!(find(".spec.ports[-1].name"), Some(json!("b")));
        assert_eq!(find(".spec.ports[*].name"), Some(json!("a")));
        assert_eq!(
            find(".metadata.labels['app\\.io/name']"),
            Some(json!("web"))
        );
        assert_eq!(
            find(r#".status.conditions[?(@.type=="Ready")].status"#),
            Some(json!("True"))
        );
        assert_eq!(find(".spec.missing"), None);
        assert!(JsonPath::parse("spec").is_none());
        assert!(JsonPath::parse(".spec[").is_none());
    }
}
