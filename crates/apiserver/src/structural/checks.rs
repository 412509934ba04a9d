//! The value validations of a schema node: what kube-openapi's validator checks a value against
//! (`format`, `enum`, bounds, lengths, counts, `pattern`, `uniqueItems`, `required`, and the
//! `allOf` / `anyOf` / `oneOf` / `not` combinations), read once with the node.

use std::sync::Arc;

use serde_json::Value;

use super::Node;

/// A `pattern`: the regular expression, or why it does not compile (kube-openapi reports that
/// on every value it checks, as the CRD's validation should have refused it).
#[derive(Debug, Clone)]
pub struct Pattern {
    /// The expression as written.
    pub source: String,
    /// The compiled expression, or the compiler's complaint.
    pub regex: Result<regex::Regex, String>,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Pattern {}

impl Pattern {
    fn compile(source: &str) -> Self {
        Self {
            source: source.to_string(),
            regex: go_regex(source),
        }
    }
}

/// Compiles a pattern as Go's `regexp` (RE2) reads it. The regex crate reads the same syntax,
/// and both find a match anywhere unless anchored, but its Perl classes (`\d`, `\w`, `\s`,
/// `\b`) are Unicode-aware where Go's are ASCII: they are rewritten to Go's meaning first.
pub fn go_regex(source: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&ascii_perl_classes(source)).map_err(|error| error.to_string())
}

/// `source` with its Perl classes spelled as the ASCII sets Go gives them.
fn ascii_perl_classes(source: &str) -> String {
    let mut out = String::with_capacity(source.len() + 16);
    let mut chars = source.chars().peekable();
    // Inside a bracketed class, and whether its first character is still to come (where a `]`
    // is a literal).
    let mut in_class = false;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push(c);
                    break;
                };
                let replacement = match (in_class, next) {
                    (false, 'd') => Some("[0-9]"),
                    (false, 'D') => Some("[^0-9]"),
                    (false, 'w') => Some("[0-9A-Za-z_]"),
                    (false, 'W') => Some("[^0-9A-Za-z_]"),
                    (false, 's') => Some("[\\t\\n\\f\\r ]"),
                    (false, 'S') => Some("[^\\t\\n\\f\\r ]"),
                    (false, 'b') => Some("(?-u:\\b)"),
                    (false, 'B') => Some("(?-u:\\B)"),
                    (true, 'd') => Some("0-9"),
                    (true, 'w') => Some("0-9A-Za-z_"),
                    (true, 's') => Some("\\t\\n\\f\\r "),
                    _ => None,
                };
                match replacement {
                    Some(ascii) => out.push_str(ascii),
                    None => {
                        out.push(c);
                        out.push(next);
                    }
                }
                class_start = false;
                continue;
            }
            '[' if !in_class => {
                in_class = true;
                class_start = true;
                out.push(c);
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                continue;
            }
            ']' if in_class && !class_start => in_class = false,
            _ => {}
        }
        class_start = false;
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_classes_are_ascii_as_in_go() {
        let digits = go_regex(r"^\d+$").unwrap();
        assert!(digits.is_match("123"));
        assert!(!digits.is_match("١٢٣"));
        let word = go_regex(r"^[\w.-]+$").unwrap();
        assert!(word.is_match("a_b.c-d"));
        assert!(!word.is_match("é"));
        assert!(go_regex(r"^[]a]+$").unwrap().is_match("]a"));
        assert!(go_regex(r"\bcat\b").unwrap().is_match("a cat here"));
        assert!(go_regex("(unclosed").is_err());
    }
}

/// A bound on a number: its value and whether it is exclusive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    /// The bound.
    pub value: f64,
    /// Whether the bound itself is outside (`exclusiveMaximum` / `exclusiveMinimum`).
    pub exclusive: bool,
}

// Numbers read from JSON are never NaN, so equality is total.
impl Eq for Bound {}

/// The value validations of one node. All absent for most nodes, so a node holds them boxed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Checks {
    /// `format` of a string or number.
    pub format: Option<Arc<str>>,
    /// `enum`: the values allowed.
    pub enumeration: Option<Vec<Value>>,
    /// `maximum` (with `exclusiveMaximum`).
    pub maximum: Option<Bound>,
    /// `minimum` (with `exclusiveMinimum`).
    pub minimum: Option<Bound>,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `maxLength`, in characters.
    pub max_length: Option<i64>,
    /// `minLength`, in characters.
    pub min_length: Option<i64>,
    /// `pattern`.
    pub pattern: Option<Pattern>,
    /// `maxItems`.
    pub max_items: Option<i64>,
    /// `minItems`.
    pub min_items: Option<i64>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `maxProperties`.
    pub max_properties: Option<i64>,
    /// `minProperties`.
    pub min_properties: Option<i64>,
    /// `required`: the properties an object must have.
    pub required: Vec<Arc<str>>,
    /// `allOf`: schemas the value must all satisfy.
    pub all_of: Vec<Arc<Node>>,
    /// `anyOf`: schemas of which the value must satisfy one at least.
    pub any_of: Vec<Arc<Node>>,
    /// `oneOf`: schemas of which the value must satisfy exactly one.
    pub one_of: Vec<Arc<Node>>,
    /// `not`: a schema the value must not satisfy.
    pub not: Option<Arc<Node>>,
}

// Numbers read from JSON are never NaN, so equality is total.
impl Eq for Checks {}

impl Checks {
    /// Reads the value validations of `schema`; `None` when it has none.
    pub(super) fn read(schema: &Value) -> Option<Box<Checks>> {
        let count = |field: &str| schema.get(field).and_then(Value::as_i64);
        let number = |field: &str| schema.get(field).and_then(Value::as_f64);
        let flag = |field: &str| schema.get(field) == Some(&Value::Bool(true));
        let schemas = |field: &str| -> Vec<Arc<Node>> {
            schema
                .get(field)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|item| item.is_object())
                .map(Node::compile)
                .collect()
        };
        let checks = Checks {
            format: schema
                .get("format")
                .and_then(Value::as_str)
                .filter(|format| !format.is_empty())
                .map(Arc::from),
            enumeration: schema.get("enum").and_then(Value::as_array).cloned(),
            maximum: number("maximum").map(|value| Bound {
                value,
                exclusive: flag("exclusiveMaximum"),
            }),
            minimum: number("minimum").map(|value| Bound {
                value,
                exclusive: flag("exclusiveMinimum"),
            }),
            multiple_of: number("multipleOf"),
            max_length: count("maxLength"),
            min_length: count("minLength"),
            pattern: schema
                .get("pattern")
                .and_then(Value::as_str)
                .map(Pattern::compile),
            max_items: count("maxItems"),
            min_items: count("minItems"),
            unique_items: flag("uniqueItems"),
            max_properties: count("maxProperties"),
            min_properties: count("minProperties"),
            required: schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(Arc::from)
                .collect(),
            all_of: schemas("allOf"),
            any_of: schemas("anyOf"),
            one_of: schemas("oneOf"),
            not: schema
                .get("not")
                .filter(|not| not.is_object())
                .map(Node::compile),
        };
        (checks != Checks::default()).then(|| Box::new(checks))
    }
}
