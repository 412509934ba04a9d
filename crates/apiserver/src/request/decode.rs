//! The decoding stage: an object of a write read into its kind's type, defaulted, and checked
//! against the `fieldValidation` policy, with kube-apiserver's answers for what does not fit.
//!
//! A body (POST, PUT) that does not decode is a 400 (`<Kind> in version "<v>" cannot be handled
//! as a <Kind>: …`); a patch whose result does not decode is a 422 on the field `patch`. Fields the
//! type does not declare, and fields given twice, are "strict decoding errors": dropped, and
//! reported as warnings (`Warn`, the default), refused (`Strict`), or neither (`Ignore`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::body::ParsedBody;
use super::options::FieldValidation;
use crate::custom;
use crate::kinds::schema::type_error_message;
use crate::kinds::typed::{self, PathSegment, UnknownFields};
use crate::resource::ResourceKind;
use crate::rest::status::ApiError;
use crate::storage::Cause;

/// Where the object of a write came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A request body (create, update).
    Body,
    /// A patch applied to the stored object.
    Patch,
}

/// An object ready for the next stages, with the warnings its decoding gave.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedObject {
    /// The typed round trip of the object, defaulted.
    pub object: Value,
    /// `Warning` header texts.
    pub warnings: Vec<String>,
}

/// Decodes `parsed` as an object of `kind` under `validation`.
pub fn decode_object(
    kind: &ResourceKind,
    parsed: ParsedBody,
    validation: FieldValidation,
    origin: Origin,
) -> Result<DecodedObject, ApiError> {
    let ParsedBody {
        mut value,
        duplicate_fields,
    } = parsed;
    let Some(builtin) = kind.builtin else {
        return decode_custom(kind, value, &duplicate_fields, validation, origin);
    };
    let unknown = match validation {
        FieldValidation::Ignore => UnknownFields::Drop,
        FieldValidation::Warn | FieldValidation::Strict => UnknownFields::Report,
    };
    match builtin.decode(&mut value, unknown) {
        Ok(unknown_fields) => {
            let strict = strict_errors(&duplicate_fields, &unknown_fields);
            checked(kind, value, strict, validation, origin)
        }
        Err(error) => {
            let message = type_error_message(builtin, &error);
            Err(refusal(kind, &value, message, origin))
        }
    }
}

/// Decodes a custom resource: its `metadata` read into `ObjectMeta`, the rest made to fit its
/// version's schema (pruned, defaulted), as apiextensions-apiserver's decoder does.
fn decode_custom(
    kind: &ResourceKind,
    mut value: Value,
    duplicate_fields: &[String],
    validation: FieldValidation,
    origin: Origin,
) -> Result<DecodedObject, ApiError> {
    let mut unknown = Vec::new();
    if let Some(metadata) = value
        .get_mut("metadata")
        .filter(|metadata| metadata.is_object())
    {
        match typed::decode::<ObjectMeta>(metadata, UnknownFields::Report, |_| {}) {
            Ok(unknown_fields) => {
                unknown.extend(unknown_fields.iter().map(|path| format!("metadata.{path}")));
            }
            Err(error) => {
                let mut path = vec![PathSegment::Field("metadata".into())];
                path.extend(error.path.iter().cloned());
                let message = format!("{}: {}", typed::path_text(&path), error.detail);
                return Err(refusal(kind, &value, message, origin));
            }
        }
    }
    if let Some(custom) = &kind.custom {
        unknown.extend(custom::fit_to_schema(custom, &mut value));
    }
    let strict = strict_errors(duplicate_fields, &unknown);
    checked(kind, value, strict, validation, origin)
}

fn strict_errors(duplicates: &[String], unknown: &[String]) -> Vec<String> {
    duplicates
        .iter()
        .map(|path| format!("duplicate field {path:?}"))
        .chain(unknown.iter().map(|path| format!("unknown field {path:?}")))
        .collect()
}

/// Applies the policy to the strict decoding errors of `object`.
fn checked(
    kind: &ResourceKind,
    object: Value,
    strict: Vec<String>,
    validation: FieldValidation,
    origin: Origin,
) -> Result<DecodedObject, ApiError> {
    match validation {
        FieldValidation::Strict if !strict.is_empty() => {
            let message = format!("strict decoding error: {}", strict.join(", "));
            Err(refusal(kind, &object, message, origin))
        }
        FieldValidation::Warn => Ok(DecodedObject {
            object,
            warnings: strict,
        }),
        FieldValidation::Strict | FieldValidation::Ignore => Ok(DecodedObject {
            object,
            warnings: Vec::new(),
        }),
    }
}

/// kube-apiserver's answer to an object that does not decode: 400 for a body, 422 for a patch.
fn refusal(kind: &ResourceKind, object: &Value, message: String, origin: Origin) -> ApiError {
    match origin {
        Origin::Body => ApiError::bad_request(format!(
            "{kind_name} in version {version:?} cannot be handled as a {kind_name}: {message}",
            kind_name = kind.kind,
            version = kind.version,
        )),
        Origin::Patch => {
            let patched = serde_json::to_string(object).unwrap_or_default();
            ApiError::invalid(
                "",
                "",
                "",
                vec![Cause {
                    reason: "FieldValueInvalid",
                    field: "patch".to_string(),
                    message: format!("Invalid value: {patched:?}: {message}"),
                }],
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::body::parse_json;
    use crate::resource::builtin_resources;

    fn config_maps() -> ResourceKind {
        builtin_resources()
            .into_iter()
            .find(|kind| kind.plural == "configmaps")
            .unwrap()
    }

    #[test]
    fn unknown_and_duplicate_fields_follow_the_policy() {
        let body = br#"{"metadata": {"name": "c", "name": "c"}, "data": {"k": "v"}, "bogus": 1}"#;
        let warned = decode_object(
            &config_maps(),
            parse_json(body).unwrap(),
            FieldValidation::Warn,
            Origin::Body,
        )
        .unwrap();
        assert_eq!(
            warned.warnings,
            [
                "duplicate field \"metadata.name\"",
                "unknown field \"bogus\""
            ]
        );
        assert!(warned.object.get("bogus").is_none());

        let ignored = decode_object(
            &config_maps(),
            parse_json(body).unwrap(),
            FieldValidation::Ignore,
            Origin::Body,
        )
        .unwrap();
        assert!(ignored.warnings.is_empty());
        assert_eq!(ignored.object, warned.object);

        let refused = decode_object(
            &config_maps(),
            parse_json(body).unwrap(),
            FieldValidation::Strict,
            Origin::Body,
        )
        .unwrap_err();
        assert_eq!(refused.code, 400);
        assert_eq!(
            refused.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: duplicate field \"metadata.name\", unknown field \"bogus\""
        );
    }

    #[test]
    fn a_type_error_is_400_for_a_body_and_422_for_a_patch() {
        let body = br#"{"metadata": {"name": "c"}, "data": {"k": 1}}"#;
        let error = decode_object(
            &config_maps(),
            parse_json(body).unwrap(),
            FieldValidation::Ignore,
            Origin::Body,
        )
        .unwrap_err();
        assert_eq!((error.code, error.reason), (400, "BadRequest"));
        assert_eq!(
            error.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
        );
        let error = decode_object(
            &config_maps(),
            parse_json(body).unwrap(),
            FieldValidation::Warn,
            Origin::Patch,
        )
        .unwrap_err();
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            " \"\" is invalid: patch: Invalid value: \"{\\\"data\\\":{\\\"k\\\":1},\\\"metadata\\\":{\\\"name\\\":\\\"c\\\"}}\": json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
        );
    }
}
