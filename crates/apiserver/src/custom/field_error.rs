//! A validation error on one field, worded as apimachinery's `field.Error` is: its type's text,
//! the bad value as Go prints it, and the detail (`spec.n: Invalid value: "X": spec.n in body
//! should match '^[a-z]+$'`), and turned into the `StatusCause` of a 422.

use std::fmt::Write as _;

use serde_json::Value;

use crate::storage::Cause;

/// What kind of error a field has (apimachinery's `field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// A value that must be given is missing.
    Required,
    /// A value that may not be given here.
    Forbidden,
    /// A string longer than allowed (its value is not shown).
    TooLong,
    /// A list or object with more items than allowed.
    TooMany,
    /// A value that is not allowed.
    Invalid,
    /// A value of the wrong type.
    TypeInvalid,
    /// A value outside an enumeration.
    NotSupported,
    /// A value given twice where values must be unique.
    Duplicate,
}

impl FieldErrorKind {
    /// The cause type of a `Status`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Invalid => "FieldValueInvalid",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Duplicate => "FieldValueDuplicate",
        }
    }

    /// The words that open the message.
    fn text(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Duplicate => "Duplicate value",
        }
    }

    /// Whether the message shows the bad value.
    fn shows_value(self) -> bool {
        !matches!(self, Self::Required | Self::Forbidden | Self::TooLong)
    }
}

/// An error on one field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// The field's path, e.g. `spec.items[0].name`.
    pub field: String,
    /// The bad value, shown in the message where its kind shows one.
    pub value: Value,
    /// Whether the message leaves the value out even so (a CEL rule's error on an object).
    pub value_omitted: bool,
    /// What more the message says.
    pub detail: String,
}

impl FieldError {
    /// An error of `kind` on `field`.
    pub fn new(
        kind: FieldErrorKind,
        field: impl Into<String>,
        value: Value,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            field: field.into(),
            value,
            value_omitted: false,
            detail: detail.into(),
        }
    }

    /// This error without its value in the message.
    #[must_use]
    pub fn omitting_value(mut self) -> Self {
        self.value_omitted = true;
        self
    }

    /// `Required value` on `field`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Required, field, Value::Null, detail)
    }

    /// `Invalid value: <value>: <detail>` on `field`.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Invalid, field, value, detail)
    }

    /// The message without the field (`field.Error.ErrorBody`).
    pub fn body(&self) -> String {
        let mut body = self.kind.text().to_string();
        if self.kind.shows_value() && !self.value_omitted {
            body.push_str(": ");
            write_go_value(&mut body, &self.value);
        }
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }

    /// The `StatusCause` of a 422.
    pub fn cause(&self) -> Cause {
        Cause {
            reason: self.kind.reason(),
            field: self.field.clone(),
            message: self.body(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Writes `value` as apimachinery shows a bad value: numbers and booleans as Go's `%v`, a
/// string quoted as Go's `%q`, anything else as its JSON.
pub fn write_go_value(out: &mut String, value: &Value) {
    match value {
        Value::String(text) => write_go_quoted(out, text),
        Value::Number(number) => write_go_number(out, number),
        Value::Bool(flag) => {
            let _ = write!(out, "{flag}");
        }
        other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
    }
}

/// Go's name for the type a JSON value decodes into (`%T` of an unstructured value).
pub fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(number) if number.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A JSON number as Go's `%v` prints the `int64` or `float64` it decodes into.
pub fn write_go_number(out: &mut String, number: &serde_json::Number) {
    if let Some(integer) = number.as_i64() {
        let _ = write!(out, "{integer}");
    } else if let Some(integer) = number.as_u64() {
        let _ = write!(out, "{integer}");
    } else if let Some(float) = number.as_f64() {
        out.push_str(&go_float(float));
    }
}

/// A float as Go's `%v` (`%g` at the shortest precision) prints it: the shortest digits that
/// read back, in exponent form when the decimal exponent is below -4 or at least 6.
pub fn go_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `d[.ddd]e<exp>`.
    let scientific = format!("{value:e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return scientific;
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        // Plain decimal form, as Rust's `Display` prints it (shortest digits too).
        return format!("{value}");
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
}

/// `text` quoted as Go's `%q` (`strconv.Quote`): printable characters as they are, the rest
/// escaped.
pub fn write_go_quoted(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            // Control characters are all below U+00A0.
            c if c.is_control() => {
                let code = u32::from(c);
                let _ = if code < 0x80 {
                    write!(out, "\\x{code:02x}")
                } else {
                    write!(out, "\\u{code:04x}")
                };
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `text` quoted as Go's `%q`.
pub fn go_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    write_go_quoted(&mut out, text);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_are_worded_as_apimachinery_words_them() {
        let cases = [
            (FieldError::required("spec.f", ""), "spec.f: Required value"),
            (
                FieldError::new(
                    FieldErrorKind::TooLong,
                    "spec.n",
                    json!("abcdef"),
                    "may not be more than 5 bytes",
                ),
                "spec.n: Too long: may not be more than 5 bytes",
            ),
            (
                FieldError::new(
                    FieldErrorKind::NotSupported,
                    "spec.c",
                    json!("x"),
                    "supported values: \"a\", \"b\"",
                ),
                "spec.c: Unsupported value: \"x\": supported values: \"a\", \"b\"",
            ),
            (
                FieldError::invalid(
                    "spec.r",
                    json!(-1),
                    "spec.r in body should be greater than or equal to 0",
                ),
                "spec.r: Invalid value: -1: spec.r in body should be greater than or equal to 0",
            ),
            (
                FieldError::new(
                    FieldErrorKind::TooMany,
                    "spec.l",
                    json!(3),
                    "must have at most 2 items",
                ),
                "spec.l: Too many: 3: must have at most 2 items",
            ),
            (
                FieldError::new(
                    FieldErrorKind::Duplicate,
                    "spec.m[1]",
                    json!({"name": "a"}),
                    "",
                ),
                "spec.m[1]: Duplicate value: {\"name\":\"a\"}",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
        assert_eq!(
            FieldErrorKind::TypeInvalid.reason(),
            "FieldValueTypeInvalid"
        );
    }

    #[test]
    fn floats_print_as_go_prints_them() {
        for (value, text) in [
            (1.5, "1.5"),
            (100.0, "100"),
            (1e6, "1e+06"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5e-7, "-2.5e-07"),
            (1e21, "1e+21"),
        ] {
            assert_eq!(go_float(value), text, "{value}");
        }
    }

    #[test]
    fn strings_quote_as_go_quotes_them() {
        assert_eq!(go_quoted("a\"b\\c\n\u{0}é"), "\"a\\\"b\\\\c\\n\\x00é\"");
    }
}
