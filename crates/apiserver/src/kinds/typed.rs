//! Typed decoding: an object of a built-in kind read into its k8s-openapi type and written back,
//! as kube-apiserver decodes a body into its Go type.
//!
//! What the type does not declare is reported (the paths of unknown fields, for the field
//! validation policy to warn about or refuse) and is not kept; a value of the wrong type is an
//! error naming where it is. What is stored is the round trip, so every typed client can read it
//! back.

use std::fmt::Write as _;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::write_back::write_back;
use crate::request::body::json_kind;

/// One step of a path into an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment {
    /// A field of an object, or a key of a map.
    Field(String),
    /// An element of a list.
    Index(usize),
}

/// A value of the wrong type: where, and what JSON was found there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeError {
    /// Where, from the object's root.
    pub path: Vec<PathSegment>,
    /// What JSON was found there, as Go's decoder names it: `string`, `number`, `bool`, `array`,
    /// `object`; empty when the value is missing or has the right type but a wrong form (a
    /// timestamp that does not parse).
    pub found: &'static str,
    /// What the type's decoder said.
    pub detail: String,
}

/// Whether a decoding names the fields its type does not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownFields {
    /// Their paths are returned (e.g. `spec.containers[0].foo`).
    Report,
    /// They are dropped unseen: for a write whose field validation ignores them, which need
    /// not pay for following the path of every field.
    Drop,
}

/// Reads `object` as a `T`, applies `defaults`, and writes it back over `object`: it becomes
/// the type's writing, defaults applied and fields the type does not declare gone. Returns the
/// paths of those fields as `unknown` asks. A value of the wrong type leaves `object` as it was.
pub(crate) fn decode<T>(
    object: &mut Value,
    unknown: UnknownFields,
    defaults: impl FnOnce(&mut T),
) -> Result<Vec<String>, TypeError>
where
    T: DeserializeOwned + Serialize,
{
    let mut unknown_fields = Vec::new();
    let mut on_ignored = |path: serde_ignored::Path<'_>| {
        let mut text = String::new();
        write_ignored_path(&path, &mut text);
        unknown_fields.push(text);
    };
    // Paths are tracked only to name an error: a value that reads is read without them, and
    // one that does not is read again with them.
    let source: &Value = object;
    let read = match unknown {
        UnknownFields::Report => {
            T::deserialize(serde_ignored::Deserializer::new(source, &mut on_ignored))
        }
        UnknownFields::Drop => T::deserialize(source),
    };
    let mut typed = match read {
        Ok(typed) => typed,
        Err(untracked) => {
            let mut track = serde_path_to_error::Track::new();
            let tracked = serde_path_to_error::Deserializer::new(source, &mut track);
            // Both reads see the same value, so the second fails too; should it not, the first
            // error still stands, without a path.
            let detail = match T::deserialize(tracked) {
                Ok(_) => untracked.to_string(),
                Err(error) => error.to_string(),
            };
            let path = segments(&track.path());
            // Go names no kind for a missing or null value.
            let found = lookup(source, &path)
                .filter(|value| !value.is_null())
                .map_or("", json_kind);
            return Err(TypeError {
                path,
                found,
                detail,
            });
        }
    };
    defaults(&mut typed);
    write_back(&typed, object).map_err(|error| TypeError {
        path: Vec::new(),
        found: "",
        detail: error.to_string(),
    })?;
    Ok(unknown_fields)
}

/// kube's way of writing a path: `spec.containers[0].name`, map keys as fields.
pub fn path_text(path: &[PathSegment]) -> String {
    let mut text = String::new();
    for segment in path {
        match segment {
            PathSegment::Field(name) => {
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(name);
            }
            PathSegment::Index(index) => {
                let _ = write!(text, "[{index}]");
            }
        }
    }
    text
}

fn write_ignored_path(path: &serde_ignored::Path<'_>, out: &mut String) {
    use serde_ignored::Path;
    match path {
        Path::Root => {}
        Path::Seq { parent, index } => {
            write_ignored_path(parent, out);
            let _ = write!(out, "[{index}]");
        }
        Path::Map { parent, key } => {
            write_ignored_path(parent, out);
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(key);
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => {
            write_ignored_path(parent, out);
        }
    }
}

fn segments(path: &serde_path_to_error::Path) -> Vec<PathSegment> {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|segment| match segment {
            Segment::Seq { index } => Some(PathSegment::Index(*index)),
            Segment::Map { key } => Some(PathSegment::Field(key.clone())),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
        .collect()
}

/// The value at `path` in `object`, if there is one.
fn lookup<'a>(object: &'a Value, path: &[PathSegment]) -> Option<&'a Value> {
    path.iter()
        .try_fold(object, |value, segment| match segment {
            PathSegment::Field(name) => value.get(name),
            PathSegment::Index(index) => value.get(index),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use serde_json::json;

    #[test]
    fn unknown_fields_are_reported_with_kube_paths_and_dropped() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "bogus": 1},
            "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicyX": "Always"}]},
            "extra": {"a": 1},
        });
        let mut decoded = pod.clone();
        let unknown_fields = decode::<Pod>(&mut decoded, UnknownFields::Report, |_| {}).unwrap();
        assert_eq!(
            unknown_fields,
            [
                "extra",
                "metadata.bogus",
                "spec.containers[0].imagePullPolicyX"
            ]
        );
        let round_trip = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        });
        assert_eq!(decoded, round_trip);
        // Dropped unseen, they leave the same object.
        let mut dropped = pod.clone();
        let unknown_fields = decode::<Pod>(&mut dropped, UnknownFields::Drop, |_| {}).unwrap();
        assert_eq!(unknown_fields, Vec::<String>::new());
        assert_eq!(dropped, round_trip);
    }

    #[test]
    fn a_value_of_the_wrong_type_names_its_path_and_what_was_found() {
        let config_map = json!({"metadata": {"name": "c"}, "data": {"k": 1}});
        for unknown in [UnknownFields::Report, UnknownFields::Drop] {
            let mut read = config_map.clone();
            let error = decode::<ConfigMap>(&mut read, unknown, |_| {}).unwrap_err();
            assert_eq!(path_text(&error.path), "data.k");
            assert_eq!(error.found, "number");
            assert_eq!(read, config_map, "left as it was");
        }
    }

    #[test]
    fn defaults_run_on_the_typed_object() {
        let mut config_map = json!({"metadata": {"name": "c"}});
        decode::<ConfigMap>(&mut config_map, UnknownFields::Report, |config_map| {
            config_map.immutable = Some(false);
        })
        .unwrap();
        assert_eq!(config_map["immutable"], json!(false));
    }
}
