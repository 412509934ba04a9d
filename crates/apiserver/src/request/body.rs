//! Reading a request body into a JSON tree: JSON or YAML, as its `Content-Type` says, noting the
//! fields that appear twice in one object (kube-apiserver's strict decoding reports them; the
//! last value is kept, as its decoder keeps it).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};

use crate::kinds::PathSegment;
use crate::kinds::typed::path_text;

/// A body read into a tree.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedBody {
    /// The document.
    pub value: Value,
    /// The paths of fields given more than once in their object, e.g. `metadata.name`.
    pub duplicate_fields: Vec<String>,
}

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Not JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// Not YAML.
    #[error("{0}")]
    Yaml(#[from] serde_saphyr::Error),
}

/// Reads a JSON body.
pub fn parse_json(bytes: &[u8]) -> Result<ParsedBody, BodyError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let mut tracker = Tracker::default();
    let value = tracker.seed().deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(ParsedBody {
        value,
        duplicate_fields: tracker.duplicate_fields(),
    })
}

/// Reads a YAML body (JSON is YAML too): one document.
pub fn parse_yaml(bytes: &[u8]) -> Result<ParsedBody, BodyError> {
    let mut options = serde_saphyr::Options::default();
    options.duplicate_keys = serde_saphyr::options::DuplicateKeyPolicy::PassThrough;
    let mut tracker = Tracker::default();
    let value = serde_saphyr::with_deserializer_from_slice_with_options(bytes, options, |yaml| {
        tracker.seed().deserialize(yaml)
    })?;
    Ok(ParsedBody {
        value,
        duplicate_fields: tracker.duplicate_fields(),
    })
}

/// The fields found twice, each as the path from the object that holds it up to the root:
/// a level adds its own step to what was found below it as it returns, so that no step is
/// copied while nothing is found twice (the usual case).
#[derive(Default)]
struct Tracker {
    duplicates: Vec<Vec<PathSegment>>,
}

impl Tracker {
    fn seed(&mut self) -> Seed<'_> {
        Seed(self)
    }

    /// Adds `step` to the paths found since the first `since` were.
    fn under(&mut self, since: usize, step: impl Fn() -> PathSegment) {
        for path in self.duplicates.iter_mut().skip(since) {
            path.push(step());
        }
    }

    /// The paths of the fields found twice, in the order found, e.g. `metadata.name`.
    fn duplicate_fields(self) -> Vec<String> {
        self.duplicates
            .into_iter()
            .map(|mut path| {
                path.reverse();
                path_text(&path)
            })
            .collect()
    }
}

/// Builds a [`Value`] as serde_json's own `Deserialize` does, keeping track of the path.
struct Seed<'a>(&'a mut Tracker);

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut sequence: A) -> Result<Value, A::Error> {
        let tracker = self.0;
        let mut items = Vec::with_capacity(sequence.size_hint().unwrap_or(0).min(4096));
        loop {
            let since = tracker.duplicates.len();
            let next = sequence.next_element_seed(Seed(tracker))?;
            let index = items.len();
            tracker.under(since, || PathSegment::Index(index));
            match next {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let tracker = self.0;
        let mut fields = Map::new();
        while let Some(KeyText(key)) = map.next_key::<KeyText>()? {
            let since = tracker.duplicates.len();
            let value = map.next_value_seed(Seed(tracker))?;
            tracker.under(since, || PathSegment::Field(key.clone()));
            match fields.entry(key) {
                Entry::Occupied(mut given) => {
                    tracker
                        .duplicates
                        .push(vec![PathSegment::Field(given.key().clone())]);
                    given.insert(value);
                }
                Entry::Vacant(first) => {
                    first.insert(value);
                }
            }
        }
        Ok(Value::Object(fields))
    }
}

/// A map key as text: YAML keys may be numbers or booleans, which JSON writes as strings.
struct KeyText(String);

impl<'de> de::Deserialize<'de> for KeyText {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = KeyText;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a map key")
            }
            fn visit_str<E>(self, value: &str) -> Result<KeyText, E> {
                Ok(KeyText(value.to_string()))
            }
            fn visit_string<E>(self, value: String) -> Result<KeyText, E> {
                Ok(KeyText(value))
            }
            fn visit_bool<E>(self, value: bool) -> Result<KeyText, E> {
                Ok(KeyText(value.to_string()))
            }
            fn visit_i64<E>(self, value: i64) -> Result<KeyText, E> {
                Ok(KeyText(value.to_string()))
            }
            fn visit_u64<E>(self, value: u64) -> Result<KeyText, E> {
                Ok(KeyText(value.to_string()))
            }
            fn visit_f64<E>(self, value: f64) -> Result<KeyText, E> {
                Ok(KeyText(value.to_string()))
            }
            fn visit_unit<E>(self) -> Result<KeyText, E> {
                Ok(KeyText("null".to_string()))
            }
        }
        deserializer.deserialize_any(KeyVisitor)
    }
}

/// The kind of a JSON value as Go's decoder names it in its errors: `string`, `number`,
/// `bool`, `array`, `object` or `null`.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_and_yaml_read_alike_and_name_their_duplicates() {
        let json = parse_json(
            br#"{"metadata": {"name": "a", "name": "b"}, "data": {"k": "1"}, "items": [{"x": 1, "x": 2}]}"#,
        )
        .unwrap();
        assert_eq!(
            json.value,
            json!({"metadata": {"name": "b"}, "data": {"k": "1"}, "items": [{"x": 2}]})
        );
        assert_eq!(json.duplicate_fields, ["metadata.name", "items[0].x"]);

        let nested = parse_json(
            br#"{"a": [{"b": {"c": 1, "c": 2}}, {"d": 1}], "a": [1, {"e": [{}, {"f": 1, "f": 1}]}]}"#,
        )
        .unwrap();
        assert_eq!(
            nested.duplicate_fields,
            ["a[0].b.c", "a[1].e[1].f", "a"],
            "below a field found twice, then the field"
        );
        assert_eq!(nested.value, json!({"a": [1, {"e": [{}, {"f": 1}]}]}));

        let yaml = parse_yaml(
            b"metadata:\n  name: a\n  name: b\ndata:\n  k: \"1\"\nitems:\n- x: 1\n  x: 2\n",
        )
        .unwrap();
        assert_eq!(yaml, json);
    }

    #[test]
    fn yaml_scalars_keep_their_types() {
        let yaml = parse_yaml(b"a: 1\nb: true\nc: \"1\"\nd: 1.5\ne: null\nf: [1, x]\n").unwrap();
        assert_eq!(
            yaml.value,
            json!({"a": 1, "b": true, "c": "1", "d": 1.5, "e": null, "f": [1, "x"]})
        );
    }

    #[test]
    fn bad_bodies_are_errors() {
        assert!(parse_json(b"{").is_err());
        assert!(parse_json(b"{} x").is_err());
        assert!(parse_yaml(b"a: [").is_err());
    }
}
