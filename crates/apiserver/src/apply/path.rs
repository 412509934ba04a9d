//! Paths into an object, as server-side apply names fields: a field of a map or struct, an item
//! of an associative list by its keys or by its value, or an item by position; with their total
//! order (fields, then keys, then values, then positions), their text in `managedFields`
//! (`f:name`, `k:{"name":"a"}`, `v:"x"`, `i:0`) and in conflict messages (`.spec.x`,
//! `[name="a"]`, `[="x"]`, `[0]`).

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// A field's name, shared: the names of declared fields are made once, when their type is,
/// and every path through them shares it.
pub type Name = Arc<str>;

/// One step of a path. Clones are cheap: names and keys are shared.
#[derive(Debug, Clone)]
pub enum PathElement {
    /// A field of a map or struct.
    Field(Name),
    /// An item of an associative list with keys: the key fields and their values, by name.
    Key(Arc<[(Name, Value)]>),
    /// An item of a set: its value.
    Value(Value),
    /// An item by position.
    Index(usize),
}

/// A path: steps from the root.
pub type Path = Vec<PathElement>;

impl PathElement {
    /// A field step.
    pub fn field(name: &str) -> Self {
        Self::Field(Name::from(name))
    }

    /// The text of this step in `managedFields`.
    pub fn to_fields_v1(&self) -> String {
        let mut text = Vec::new();
        self.write_fields_v1(&mut text);
        // Only UTF-8 is written (see `write_fields_v1`).
        String::from_utf8(text).unwrap_or_default()
    }

    /// Appends the text of this step in `managedFields` to `out`, as UTF-8.
    pub fn write_fields_v1(&self, out: &mut Vec<u8>) {
        use std::io::Write as _;
        // Writing to a Vec cannot fail; names are UTF-8 and JSON is written as UTF-8.
        match self {
            Self::Field(name) => Self::write_field_fields_v1(name, out),
            Self::Key(fields) => {
                // The key fields are sorted by name, as JSON objects are written here.
                out.extend_from_slice(b"k:{");
                for (index, (name, value)) in fields.iter().enumerate() {
                    if index > 0 {
                        out.push(b',');
                    }
                    let _ = serde_json::to_writer(&mut *out, &**name);
                    out.push(b':');
                    let _ = serde_json::to_writer(&mut *out, value);
                }
                out.push(b'}');
            }
            Self::Value(value) => {
                out.extend_from_slice(b"v:");
                let _ = serde_json::to_writer(&mut *out, value);
            }
            Self::Index(index) => {
                let _ = write!(out, "i:{index}");
            }
        }
    }

    /// Appends the `FieldsV1` key of the field `name` (what [`write_fields_v1`] writes for
    /// `Field(name)`), for a walker that has the name but no step.
    ///
    /// [`write_fields_v1`]: PathElement::write_fields_v1
    pub fn write_field_fields_v1(name: &str, out: &mut Vec<u8>) {
        out.extend_from_slice(b"f:");
        out.extend_from_slice(name.as_bytes());
    }

    /// Reads a step of `managedFields`; `None` for a kind of step this format does not have
    /// (skipped, as kube-apiserver skips them) or text that does not parse.
    pub fn from_fields_v1(text: &str) -> Option<Self> {
        let (kind, rest) = text.split_at_checked(2)?;
        match kind {
            "f:" => Some(Self::Field(Name::from(rest))),
            "k:" => {
                let Value::Object(object) = serde_json::from_str(rest).ok()? else {
                    return None;
                };
                let mut fields: Vec<(Name, Value)> = object
                    .into_iter()
                    .map(|(name, value)| (Name::from(name), value))
                    .collect();
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                Some(Self::Key(fields.into()))
            }
            "v:" => serde_json::from_str(rest).ok().map(Self::Value),
            "i:" => rest.parse().ok().map(Self::Index),
            _ => None,
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Self::Field(_) => 0,
            Self::Key(_) => 1,
            Self::Value(_) => 2,
            Self::Index(_) => 3,
        }
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Field(a), Self::Field(b)) => a.cmp(b),
            (Self::Key(a), Self::Key(b)) => {
                for ((name_a, value_a), (name_b, value_b)) in a.iter().zip(b.iter()) {
                    let order = name_a
                        .cmp(name_b)
                        .then_with(|| compare_values(value_a, value_b));
                    if order != Ordering::Equal {
                        return order;
                    }
                }
                a.len().cmp(&b.len())
            }
            (Self::Value(a), Self::Value(b)) => compare_values(a, b),
            (Self::Index(a), Self::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

/// The total order of values structured-merge-diff sorts by: numbers (integers and floats
/// compared as numbers), then strings, booleans, lists, maps, and null.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(value: &Value) -> u8 {
        match value {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => {
                let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                x.total_cmp(&y)
            }
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (x, y) in x.iter().zip(y) {
                let order = compare_values(x, y);
                if order != Ordering::Equal {
                    return order;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            for ((kx, vx), (ky, vy)) in x.iter().zip(y) {
                let order = kx.cmp(ky).then_with(|| compare_values(vx, vy));
                if order != Ordering::Equal {
                    return order;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

impl fmt::Display for PathElement {
    /// As conflict messages write a step: `.name`, `[name="a",port=80]`, `[="x"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Field(name) => write!(f, ".{name}"),
            Self::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| format!("{name}={}", value_text(value)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            Self::Value(value) => write!(f, "[={}]", value_text(value)),
            Self::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// A value as structured-merge-diff's `ToString` writes it: JSON.
fn value_text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// A path as conflict messages write it: `.spec.containers[name="a"].image`.
pub fn path_text(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn steps_read_back_what_they_write() {
        let steps = [
            PathElement::field("spec"),
            PathElement::Key(
                vec![
                    ("containerPort".into(), json!(80)),
                    ("protocol".into(), json!("TCP")),
                ]
                .into(),
            ),
            PathElement::Value(json!("x")),
            PathElement::Index(3),
        ];
        for step in &steps {
            let text = step.to_fields_v1();
            assert_eq!(
                PathElement::from_fields_v1(&text).as_ref(),
                Some(step),
                "{text}"
            );
        }
        assert_eq!(
            steps[1].to_fields_v1(),
            r#"k:{"containerPort":80,"protocol":"TCP"}"#
        );
        assert_eq!(
            path_text(&steps),
            r#".spec[containerPort=80,protocol="TCP"][="x"][3]"#
        );
    }

    #[test]
    fn steps_order_fields_keys_values_positions() {
        let mut steps = [
            PathElement::Index(0),
            PathElement::Value(json!(1)),
            PathElement::Key(vec![("name".into(), json!("b"))].into()),
            PathElement::field("b"),
            PathElement::Key(vec![("name".into(), json!("a"))].into()),
            PathElement::field("a"),
        ];
        steps.sort();
        let texts: Vec<String> = steps.iter().map(PathElement::to_fields_v1).collect();
        assert_eq!(
            texts,
            [
                "f:a",
                "f:b",
                r#"k:{"name":"a"}"#,
                r#"k:{"name":"b"}"#,
                "v:1",
                "i:0"
            ]
        );
        assert_eq!(compare_values(&json!(1), &json!(1.5)), Ordering::Less);
        assert_eq!(compare_values(&json!("a"), &json!(1)), Ordering::Greater);
    }
}
