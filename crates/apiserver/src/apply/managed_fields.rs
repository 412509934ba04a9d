//! `metadata.managedFields` as kube-apiserver reads and writes it: one entry per manager, keyed
//! by its identity (name, operation, the API version for updates, the subresource), with the
//! fields it owns and when it last changed the object.
//!
//! A manager's identity is the JSON of its entry without fields and time, byte for byte as Go
//! writes it: kube-apiserver sorts by it (the order of conflicts, which updaters are folded into
//! `ancient-changes` first), so the same text keeps the same order here.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::fields::Fields;
use super::set::Set;
use super::updater::{Managers, Owned};
use crate::custom::go_quoted;

/// What a manager did: apply a configuration, or update the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Apply => "Apply",
            Self::Update => "Update",
        }
    }
}

/// A manager's identity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    /// Its name (`kubectl`, `kube-controller-manager`).
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// The API version, for an update (an applier is one manager whatever version it applies).
    pub api_version: String,
    /// The subresource written through (`status`), if any.
    pub subresource: String,
}

impl Identity {
    /// The identity of `manager` doing `operation` at `api_version` through `subresource`.
    pub fn new(manager: &str, operation: Operation, api_version: &str, subresource: &str) -> Self {
        Self {
            manager: manager.to_string(),
            operation: operation.as_str().to_string(),
            api_version: match operation {
                Operation::Apply => String::new(),
                Operation::Update => api_version.to_string(),
            },
            subresource: subresource.to_string(),
        }
    }

    /// The key: Go's JSON of the entry's identity fields, empty ones left out.
    pub fn key(&self) -> String {
        let mut out = String::from("{");
        let mut first = true;
        for (name, value) in [
            ("manager", &self.manager),
            ("operation", &self.operation),
            ("apiVersion", &self.api_version),
            ("subresource", &self.subresource),
        ] {
            if value.is_empty() {
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            let _ = write!(out, "\"{name}\":{}", go_json_string(value));
        }
        out.push('}');
        out
    }

    /// Reads a key back.
    pub fn from_key(key: &str) -> Option<Self> {
        let Value::Object(fields) = serde_json::from_str(key).ok()? else {
            return None;
        };
        let text = |name: &str| {
            fields
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Some(Self {
            manager: text("manager"),
            operation: text("operation"),
            api_version: text("apiVersion"),
            subresource: text("subresource"),
        })
    }

    /// How conflict messages name the manager with key `key`: `"kubectl"`,
    /// `"kube-controller-manager" using apps/v1`, `"kubelet" with subresource "status" using v1`.
    pub fn describe(key: &str) -> String {
        let Some(identity) = Self::from_key(key) else {
            return go_quoted(key);
        };
        let mut text = go_quoted(&identity.manager);
        if !identity.subresource.is_empty() {
            let _ = write!(
                text,
                " with subresource {}",
                go_quoted(&identity.subresource)
            );
        }
        if identity.operation == "Update" {
            let _ = write!(text, " using {}", identity.api_version);
        }
        text
    }
}

/// Who owns what of an object, and when each manager last changed it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ManagedFields {
    /// The fields of each manager, by key.
    pub managers: Managers,
    /// When each manager last changed the object (RFC 3339, seconds), by key; a manager without
    /// one has no time.
    pub times: BTreeMap<String, String>,
}

/// Why an object's `managedFields` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(String);

impl ManagedFields {
    /// Whether no manager owns anything.
    pub fn is_empty(&self) -> bool {
        self.managers.is_empty()
    }

    /// Each manager's fields read into a set, so that they are written as this server writes
    /// them (kube-apiserver decodes and encodes every entry); `None` if an entry does not read
    /// as a set (a value under a key that is not an object), which fails kube-apiserver's
    /// decoding too.
    pub fn read_into_sets(mut self) -> Option<Self> {
        for owned in self.managers.values_mut() {
            if let Fields::Encoded(json) = &owned.set {
                owned.set = Fields::Decoded(Set::from_fields_v1(json)?);
            }
        }
        Some(self)
    }

    /// Reads `managedFields` (absent or `null`: none); the first bad entry fails it all. Of two
    /// entries with one identity, the later wins.
    pub fn decode(entries: Option<&Value>) -> Result<Self, DecodeError> {
        let mut managed = Self::default();
        let entries = match entries {
            None | Some(Value::Null) => return Ok(managed),
            Some(Value::Array(entries)) => entries,
            Some(other) => return Err(DecodeError(format!("expected a list, got {other}"))),
        };
        for (index, entry) in entries.iter().enumerate() {
            let text = |name: &str| entry[name].as_str().unwrap_or("");
            let operation = match text("operation") {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return Err(DecodeError("operation must be `Apply` or `Update`".into())),
            };
            let api_version = text("apiVersion");
            if api_version.is_empty() {
                return Err(DecodeError("apiVersion must not be empty".into()));
            }
            match text("fieldsType") {
                "FieldsV1" => {}
                "" => {
                    return Err(DecodeError(format!(
                        "missing fieldsType in managed fields entry {index}"
                    )));
                }
                other => {
                    return Err(DecodeError(format!(
                        "invalid fieldsType {} in managed fields entry {index}",
                        go_quoted(other)
                    )));
                }
            }
            let set = match entry.get("fieldsV1") {
                None | Some(Value::Null) => Fields::default(),
                Some(fields @ Value::Object(_)) => Fields::Encoded(fields.clone()),
                Some(_) => {
                    return Err(DecodeError(format!(
                        "error decoding versioned set from {entry}: error decoding set: not a field set"
                    )));
                }
            };
            let key =
                Identity::new(text("manager"), operation, api_version, text("subresource")).key();
            managed.managers.insert(
                key.clone(),
                Owned {
                    set,
                    api_version: api_version.to_string(),
                    applied: operation == Operation::Apply,
                },
            );
            match entry["time"].as_str() {
                Some(time) => managed.times.insert(key, time.to_string()),
                None => managed.times.remove(&key),
            };
        }
        Ok(managed)
    }

    /// The `managedFields` entries, in kube-apiserver's order: appliers first, then by time
    /// (none first), manager, API version and subresource; `None` when no manager owns anything.
    pub fn encode(self) -> Option<Value> {
        if self.managers.is_empty() {
            return None;
        }
        let Self {
            managers,
            mut times,
        } = self;
        let mut entries: Vec<(Identity, Option<String>, Owned)> = managers
            .into_iter()
            .map(|(key, owned)| {
                let identity = Identity::from_key(&key).unwrap_or_default();
                let time = times.remove(&key);
                (identity, time, owned)
            })
            .collect();
        entries.sort_by(|(a, a_time, a_owned), (b, b_time, b_owned)| {
            operation_of(a_owned)
                .cmp(operation_of(b_owned))
                .then_with(|| unix_seconds(a_time.as_ref()).cmp(&unix_seconds(b_time.as_ref())))
                .then_with(|| a.manager.cmp(&b.manager))
                .then_with(|| a_owned.api_version.cmp(&b_owned.api_version))
                .then_with(|| a.subresource.cmp(&b.subresource))
        });
        let entries = entries
            .into_iter()
            .map(|(identity, time, owned)| {
                let mut entry = Map::new();
                if !identity.manager.is_empty() {
                    entry.insert("manager".into(), json!(identity.manager));
                }
                entry.insert("operation".into(), json!(operation_of(&owned)));
                entry.insert("apiVersion".into(), json!(owned.api_version));
                if let Some(time) = time {
                    entry.insert("time".into(), Value::String(time));
                }
                entry.insert("fieldsType".into(), json!("FieldsV1"));
                entry.insert("fieldsV1".into(), owned.set.into_fields_v1());
                if !identity.subresource.is_empty() {
                    entry.insert("subresource".into(), json!(identity.subresource));
                }
                Value::Object(entry)
            })
            .collect();
        Some(Value::Array(entries))
    }
}

fn operation_of(owned: &Owned) -> &'static str {
    if owned.applied { "Apply" } else { "Update" }
}

/// Seconds since the epoch of an RFC 3339 time; 0 for none (or one that does not parse).
pub(super) fn unix_seconds(time: Option<&String>) -> i64 {
    time.and_then(|time| time.parse::<jiff::Timestamp>().ok())
        .map_or(0, |time| time.as_second())
}

/// Whether `entries` asks for the managed fields to be cleared: an empty list, or one empty
/// entry.
pub fn is_reset(entries: Option<&Value>) -> bool {
    match entries {
        Some(Value::Array(entries)) => match entries.as_slice() {
            [] => true,
            [only] => only.as_object().is_some_and(Map::is_empty),
            _ => false,
        },
        _ => false,
    }
}

/// A string as Go's `encoding/json` writes it: like JSON, with `<`, `>`, `&`, U+2028 and U+2029
/// escaped.
fn go_json_string(text: &str) -> String {
    go_escape_html(&serde_json::to_string(text).unwrap_or_default())
}

/// JSON text with the characters Go's `encoding/json` escapes (`<`, `>`, `&`, U+2028, U+2029)
/// escaped; they can only occur in strings, so the text stays the same JSON.
pub(super) fn go_escape_html(plain: &str) -> String {
    let mut out = String::with_capacity(plain.len());
    for c in plain.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_go_json_and_appliers_have_no_version() {
        assert_eq!(
            Identity::new("kubectl", Operation::Apply, "apps/v1", "").key(),
            r#"{"manager":"kubectl","operation":"Apply"}"#
        );
        assert_eq!(
            Identity::new("kubelet", Operation::Update, "v1", "status").key(),
            r#"{"manager":"kubelet","operation":"Update","apiVersion":"v1","subresource":"status"}"#
        );
        assert_eq!(
            Identity::new("a<b", Operation::Update, "v1", "").key(),
            r#"{"manager":"a\u003cb","operation":"Update","apiVersion":"v1"}"#
        );
        let key = Identity::new("kubelet", Operation::Update, "v1", "status").key();
        assert_eq!(
            Identity::describe(&key),
            r#""kubelet" with subresource "status" using v1"#
        );
        let key = Identity::new("kubectl", Operation::Apply, "v1", "").key();
        assert_eq!(Identity::describe(&key), r#""kubectl""#);
    }

    #[test]
    fn entries_round_trip_in_kube_order() {
        let entries = json!([
            {"manager": "b", "operation": "Update", "apiVersion": "v1",
             "time": "2026-01-01T00:00:02Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:b": {}}}},
            {"manager": "a", "operation": "Update", "apiVersion": "v1",
             "time": "2026-01-01T00:00:03Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}},
            {"manager": "z", "operation": "Apply", "apiVersion": "v1",
             "time": "2026-01-01T00:00:09Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:z": {}}}},
            {"manager": "y", "operation": "Apply", "apiVersion": "v1",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:y": {}}}},
        ]);
        let managed = ManagedFields::decode(Some(&entries)).unwrap();
        let encoded = managed.clone().encode().unwrap();
        let order: Vec<&str> = encoded
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| entry["manager"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["y", "z", "b", "a"]);
        assert_eq!(encoded[1], entries[2]);
        assert!(ManagedFields::default().encode().is_none());
    }

    #[test]
    fn bad_entries_fail_the_whole_list() {
        let cases = [
            (
                json!([{"operation": "Patch", "apiVersion": "v1", "fieldsType": "FieldsV1"}]),
                "operation must be `Apply` or `Update`",
            ),
            (
                json!([{"operation": "Apply", "fieldsType": "FieldsV1"}]),
                "apiVersion must not be empty",
            ),
            (
                json!([{"operation": "Apply", "apiVersion": "v1"}]),
                "missing fieldsType in managed fields entry 0",
            ),
            (
                json!([{"operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV2"}]),
                "invalid fieldsType \"FieldsV2\" in managed fields entry 0",
            ),
        ];
        for (entries, message) in cases {
            assert_eq!(
                ManagedFields::decode(Some(&entries))
                    .unwrap_err()
                    .to_string(),
                message
            );
        }
        assert!(is_reset(Some(&json!([]))));
        assert!(is_reset(Some(&json!([{}]))));
        assert!(!is_reset(Some(&json!(null))));
        assert!(!is_reset(None));
    }
}
