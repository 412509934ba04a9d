//! How a schema's property names are spelled in CEL rules, as kube-apiserver spells them
//! (apiserver's `pkg/cel/escaping.go`): a name that is a CEL reserved word is `__word__`
//! (`self.__namespace__`), and in other names `__`, `.`, `-` and `/` are written
//! `__underscores__`, `__dot__`, `__dash__` and `__slash__`. Names that cannot be spelled (a
//! leading digit, other characters) cannot be selected in a rule.

use std::borrow::Cow;

/// CEL's reserved words.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// `name` as a rule selects it; `None` when it cannot.
pub fn escape(name: &str) -> Option<Cow<'_, str>> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(Cow::Owned(format!("__{name}__")));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/');
    if !name.chars().all(allowed) {
        return None;
    }
    if !name.contains(['.', '-', '/']) && !name.contains("__") {
        return Some(Cow::Borrowed(name));
    }
    let mut escaped = String::with_capacity(name.len() + 16);
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("__") {
            escaped.push_str("__underscores__");
            rest = after;
            continue;
        }
        match c {
            '.' => escaped.push_str("__dot__"),
            '-' => escaped.push_str("__dash__"),
            '/' => escaped.push_str("__slash__"),
            _ => escaped.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(Cow::Owned(escaped))
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn names_are_escaped_as_kube_escapes_them() {
        let cases = [
            ("replicas", Some("replicas")),
            ("namespace", Some("__namespace__")),
            ("if", Some("__if__")),
            ("my-field", Some("my__dash__field")),
            ("a.b/c", Some("a__dot__b__slash__c")),
            ("a__b", Some("a__underscores__b")),
            ("a_b", Some("a_b")),
            ("___a", Some("__underscores___a")),
            ("1field", None),
            ("with space", None),
            ("", None),
        ];
        for (name, expected) in cases {
            assert_eq!(escape(name).as_deref(), expected, "{name}");
        }
    }
}
