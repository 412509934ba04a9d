//! The options of a write: `dryRun`, `fieldValidation`, `fieldManager` and `force`, read from
//! the query (and, for a delete, its `DeleteOptions` body) and checked as kube-apiserver checks
//! them: anything else is its 422 on `CreateOptions`, `UpdateOptions`, `PatchOptions` or
//! `DeleteOptions`.

use serde_json::Value;

use crate::request::body::json_kind;
use crate::rest::Query;
use crate::rest::status::ApiError;
use crate::storage::Cause;

/// Which write the options are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH; `apply` for server-side apply.
    Patch {
        /// Whether the patch is an apply patch.
        apply: bool,
    },
    /// DELETE (one object or a collection).
    Delete,
}

impl Verb {
    fn options_kind(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Patch { .. } => "PatchOptions",
            Self::Delete => "DeleteOptions",
        }
    }
}

/// What the server does with fields the kind does not declare, and with duplicate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in `Warning` headers (the default).
    #[default]
    Warn,
    /// Refuse the request.
    Strict,
}

/// The checked options of one write.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: do everything but store.
    pub dry_run: bool,
    /// The `fieldValidation` policy.
    pub field_validation: FieldValidation,
    /// The `fieldManager`, when given.
    pub field_manager: Option<String>,
    /// `force=true` (apply only).
    pub force: bool,
}

/// The longest field manager name kube-apiserver accepts.
const FIELD_MANAGER_MAX_LENGTH: usize = 128;

impl WriteOptions {
    /// Reads and checks the options of `verb` from `query` (and, for a delete, from its
    /// `DeleteOptions` body, which wins where both say something).
    pub fn parse(verb: Verb, query: &Query, delete_body: Option<&Value>) -> Result<Self, ApiError> {
        let mut causes = Vec::new();
        let mut dry_run: Vec<String> = query.get("dryRun").cloned().into_iter().collect();
        if let Some(values) = delete_body.and_then(|body| body.get("dryRun")) {
            dry_run = match values {
                Value::Array(values) => values
                    .iter()
                    .map(|value| value.as_str().unwrap_or_default().to_string())
                    .collect(),
                Value::Null => Vec::new(),
                other => {
                    return Err(ApiError::bad_request(format!(
                        "json: cannot unmarshal {} into Go struct field DeleteOptions.dryRun of type []string",
                        json_kind(other)
                    )));
                }
            };
        }
        if dry_run.iter().any(|value| value != "All") {
            let shown = serde_json::to_string(&dry_run).unwrap_or_default();
            causes.push(Cause {
                reason: "FieldValueNotSupported",
                field: "dryRun".to_string(),
                message: format!("Unsupported value: {shown}: supported values: \"All\""),
            });
        }
        let mut field_validation = FieldValidation::Warn;
        if verb != Verb::Delete {
            match query.get("fieldValidation").map(String::as_str) {
                None | Some("" | "Warn") => {}
                Some("Ignore") => field_validation = FieldValidation::Ignore,
                Some("Strict") => field_validation = FieldValidation::Strict,
                Some(other) => causes.push(Cause {
                    reason: "FieldValueNotSupported",
                    field: "fieldValidation".to_string(),
                    message: format!(
                        "Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
                    ),
                }),
            }
        }
        let field_manager = query
            .get("fieldManager")
            .filter(|manager| !manager.is_empty() && verb != Verb::Delete)
            .cloned();
        let mut force = false;
        if let Verb::Patch { apply } = verb {
            if apply && field_manager.is_none() {
                causes.push(Cause {
                    reason: "FieldValueRequired",
                    field: "fieldManager".to_string(),
                    message: "Required value: is required for apply patch".to_string(),
                });
            }
            if !apply && query.contains_key("force") {
                causes.push(Cause {
                    reason: "FieldValueForbidden",
                    field: "force".to_string(),
                    message: "Forbidden: may not be specified for non-apply patch".to_string(),
                });
            }
            if let Some(value) = query.get("force") {
                force = parse_bool(value)?;
            }
        }
        if let Some(manager) = &field_manager {
            if manager.chars().count() > FIELD_MANAGER_MAX_LENGTH {
                causes.push(Cause {
                    reason: "FieldValueTooLong",
                    field: "fieldManager".to_string(),
                    message: format!(
                        "Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"
                    ),
                });
            }
            for (position, character) in manager.chars().enumerate() {
                if character.is_control() {
                    causes.push(Cause {
                        reason: "FieldValueInvalid",
                        field: "fieldManager".to_string(),
                        message: format!(
                            "Invalid value: {manager:?}: invalid character U+{:04X} (at position {position})",
                            u32::from(character)
                        ),
                    });
                }
            }
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                verb.options_kind(),
                "",
                causes,
            ));
        }
        Ok(Self {
            dry_run: !dry_run.is_empty(),
            field_validation,
            field_manager,
            force,
        })
    }
}

/// An integer query parameter (`limit`, `timeoutSeconds`, `gracePeriodSeconds`) as
/// kube-apiserver's parameter codec reads it, with Go's `strconv.ParseInt` and its words when
/// it cannot (a 400); `None` when the query does not have it.
pub fn int_param(query: &Query, name: &str) -> Result<Option<i64>, ApiError> {
    let Some(text) = query.get(name) else {
        return Ok(None);
    };
    text.parse::<i64>().map(Some).map_err(|error| {
        let why = match error.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        ApiError::bad_request(format!("strconv.ParseInt: parsing {text:?}: {why}"))
    })
}

/// A boolean query parameter as Go's `strconv.ParseBool` reads it.
fn parse_bool(value: &str) -> Result<bool, ApiError> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" | "" => Ok(false),
        other => Err(ApiError::bad_request(format!(
            "strconv.ParseBool: parsing {other:?}: invalid syntax"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn query(pairs: &[(&str, &str)]) -> Query {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn dry_run_all_is_the_only_value() {
        let options =
            WriteOptions::parse(Verb::Create, &query(&[("dryRun", "All")]), None).unwrap();
        assert!(options.dry_run);
        let error =
            WriteOptions::parse(Verb::Update, &query(&[("dryRun", "Bogus")]), None).unwrap_err();
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            "UpdateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Bogus\"]: supported values: \"All\""
        );
        let body = json!({"dryRun": ["All"]});
        assert!(
            WriteOptions::parse(Verb::Delete, &Query::new(), Some(&body))
                .unwrap()
                .dry_run
        );
    }

    #[test]
    fn field_validation_takes_kube_values_only() {
        for (value, expected) in [
            ("", FieldValidation::Warn),
            ("Warn", FieldValidation::Warn),
            ("Ignore", FieldValidation::Ignore),
            ("Strict", FieldValidation::Strict),
        ] {
            let options =
                WriteOptions::parse(Verb::Create, &query(&[("fieldValidation", value)]), None)
                    .unwrap();
            assert_eq!(options.field_validation, expected);
        }
        let error = WriteOptions::parse(
            Verb::Patch { apply: false },
            &query(&[("fieldValidation", "Bogus")]),
            None,
        )
        .unwrap_err();
        assert_eq!(
            error.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Bogus\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
        );
    }

    #[test]
    fn apply_needs_a_field_manager_and_only_apply_takes_force() {
        let error =
            WriteOptions::parse(Verb::Patch { apply: true }, &Query::new(), None).unwrap_err();
        assert_eq!(
            error.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        let error = WriteOptions::parse(
            Verb::Patch { apply: false },
            &query(&[("force", "true")]),
            None,
        )
        .unwrap_err();
        assert_eq!(
            error.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
        let options = WriteOptions::parse(
            Verb::Patch { apply: true },
            &query(&[("force", "true"), ("fieldManager", "me")]),
            None,
        )
        .unwrap();
        assert!(options.force);
        assert_eq!(options.field_manager.as_deref(), Some("me"));
    }
}
