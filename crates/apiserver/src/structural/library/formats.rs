//! kube's named string formats: `format.dns1123Label()` and its siblings, `format.named(name)`,
//! and `<format>.validate(text)`, which is `optional.none()` for valid text and otherwise the
//! list of apimachinery's messages for it.

use std::sync::Arc;

use cel::common::types::{STRING_TYPE, Type};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, Value};

use super::{Outcome, opaque_arg, optional, overload, string_arg};
use crate::custom::formats::is_valid;
use crate::storage::meta::{
    DNS1035_LABEL_MESSAGE, DNS1123_LABEL_MESSAGE, DNS1123_SUBDOMAIN_MESSAGE, is_dns1035_label,
    is_dns1123_label, is_dns1123_subdomain,
};
use crate::storage::{label_key_problems, label_value_problems};

const TYPE_NAME: &str = "kubernetes.NamedFormat";

/// The formats kube names, in `format.named`'s spelling.
const NAMES: [&str; 13] = [
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

/// One of [`NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format(&'static str);

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

fn too_long(limit: usize) -> String {
    format!("must be no more than {limit} characters")
}

/// apimachinery's checks of a name (`NameIsDNS…`): its length, then its pattern; a prefix
/// may end in `-` (a name is generated from it).
fn name_problems(
    text: &str,
    limit: usize,
    valid: fn(&str) -> bool,
    message: &str,
    prefix: bool,
) -> Vec<String> {
    // apimachinery's `maskTrailingDash`: a prefix's trailing `-` (and the character before it)
    // stand for the generated suffix.
    let text = match text.strip_suffix('-') {
        Some(stem) if prefix && text.len() > 1 => {
            let mut masked = stem.to_string();
            masked.pop();
            masked.push('a');
            masked
        }
        _ => text.to_string(),
    };
    let mut problems = Vec::new();
    if text.len() > limit {
        problems.push(too_long(limit));
    }
    if !valid(&text) {
        problems.push(message.to_string());
    }
    problems
}

/// What is wrong with `text` as `format`; empty when nothing is.
fn problems(format: &str, text: &str) -> Vec<String> {
    let dns1035_label = |text: &str| !text.is_empty() && is_dns1035_label(text);
    let other = |message: &str| {
        if is_valid(format, text) == Some(true) {
            Vec::new()
        } else {
            vec![message.to_string()]
        }
    };
    match format {
        "dns1123Label" | "dns1123LabelPrefix" => name_problems(
            text,
            63,
            is_dns1123_label,
            DNS1123_LABEL_MESSAGE,
            format.ends_with("Prefix"),
        ),
        "dns1123Subdomain" | "dns1123SubdomainPrefix" => name_problems(
            text,
            253,
            is_dns1123_subdomain,
            DNS1123_SUBDOMAIN_MESSAGE,
            format.ends_with("Prefix"),
        ),
        "dns1035Label" | "dns1035LabelPrefix" => name_problems(
            text,
            63,
            dns1035_label,
            DNS1035_LABEL_MESSAGE,
            format.ends_with("Prefix"),
        ),
        "qualifiedName" => label_key_problems(text),
        "labelValue" => label_value_problems(text),
        "uri" => other(&format!("parse {text:?}: invalid URI for request")),
        "uuid" => other("does not match the UUID format"),
        "byte" => other("invalid base64"),
        "date" => other("invalid date"),
        _ => other("invalid datetime"),
    }
}

fn format_value(name: &'static str) -> Value {
    Value::Opaque(Arc::new(Format(name)))
}

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    overload!(named, "format.named", |name, args| {
        let wanted = string_arg(name, args, 0)?;
        Ok(optional(
            NAMES
                .iter()
                .find(|known| **known == wanted)
                .map(|known| format_value(known)),
        ))
    });
    overload!(validate, "validate", |name, args| -> Outcome {
        let format = opaque_arg::<Format>(name, args, 0)?;
        let problems = problems(format.0, string_arg(name, args, 1)?);
        Ok(optional((!problems.is_empty()).then(|| {
            Value::List(Arc::new(
                problems
                    .into_iter()
                    .map(|p| Value::String(Arc::new(p)))
                    .collect(),
            ))
        })))
    });
    env.add_overload("format.named", "format-named", vec![STRING_TYPE], named)?;
    env.add_member_overload(
        "validate",
        "format-validate",
        Type::new_opaque_type(TYPE_NAME),
        vec![STRING_TYPE],
        validate,
    )?;
    // `format.<name>()`: one function per format, each returning it.
    macro_rules! constant {
        ($($wrapper:ident = $name:literal),* $(,)?) => {$(
            overload!($wrapper, $name, |_, _| Ok(format_value(&$name[7..])));
            env.add_overload($name, $name, vec![], $wrapper)?;
        )*};
    }
    constant!(
        dns1123_label = "format.dns1123Label",
        dns1123_subdomain = "format.dns1123Subdomain",
        dns1035_label = "format.dns1035Label",
        qualified_name = "format.qualifiedName",
        dns1123_label_prefix = "format.dns1123LabelPrefix",
        dns1123_subdomain_prefix = "format.dns1123SubdomainPrefix",
        dns1035_label_prefix = "format.dns1035LabelPrefix",
        label_value = "format.labelValue",
        uri = "format.uri",
        uuid = "format.uuid",
        byte = "format.byte",
        date = "format.date",
        datetime = "format.datetime",
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_true, eval};

    #[test]
    fn named_formats_validate_as_kube_does() {
        assert_true(&[
            "!format.dns1123Label().validate('my-name').hasValue()",
            "format.dns1123Label().validate('My_Name').hasValue()",
            "format.named('dns1123Label').hasValue()",
            "!format.named('nope').hasValue()",
            "!format.dns1123LabelPrefix().validate('gen-').hasValue()",
            "format.dns1123Label().validate('gen-').hasValue()",
            "!format.qualifiedName().validate('example.com/MyName').hasValue()",
            "format.qualifiedName().validate('a/b/c').hasValue()",
            "!format.labelValue().validate('').hasValue()",
            "!format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()",
            "format.byte().validate('@@').value() == ['invalid base64']",
            "!format.named('uri').value().validate('https://example.com/a').hasValue()",
        ]);
        assert_eq!(
            eval("format.dns1035Label().validate('1abc').value()[0]").map(|v| format!("{v:?}")),
            Ok(format!("String({:?})", super::DNS1035_LABEL_MESSAGE)),
        );
    }
}
