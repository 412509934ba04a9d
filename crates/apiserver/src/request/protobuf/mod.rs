//! Kubernetes' protobuf encoding of built-in kinds (`application/vnd.kubernetes.protobuf`), as
//! kubectl 1.32 and later send its generator commands' objects and as clients that ask for it
//! first receive answers: the `k8s\0` magic, then a `runtime.Unknown` envelope whose `typeMeta`
//! names the object's `apiVersion` and `kind` and whose `raw` is the object's message.
//!
//! Objects are transcoded between that encoding and the JSON tree the rest of the server works
//! on, guided by the message table ([`messages`](crate::kinds::messages)): what Go writes for its unset fields (empty
//! strings, the zero time) reads as absent, as Go's JSON encoder would leave it out; Kubernetes'
//! types with a JSON form of their own (times, durations, quantities, int-or-strings, raw
//! extensions, CRD schema unions) read and write as their JSON form does.

mod time;
pub mod wire;

use base64::Engine;
use serde_json::{Map, Value, json};

use self::wire::{Reader, Value as Wire, WireError};
use crate::kinds::messages::{Field, Message, Scalar, Shape, message};
use crate::kinds::schema::definitions;

/// The media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// What every object in this encoding starts with.
const MAGIC: &[u8] = b"k8s\0";

/// How deep messages may nest: deeper input is refused rather than recursed into.
const MAX_DEPTH: usize = 64;

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";
const APIEXTENSIONS: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1";

/// Why a body or an object could not be transcoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("provided object does not start with the protobuf magic bytes")]
    Magic,
    /// The wire format is broken.
    #[error("{0}")]
    Wire(#[from] WireError),
    /// A field holds a value its type cannot have.
    #[error("{0}")]
    Invalid(String),
    /// The kind has no protobuf message.
    #[error("no protobuf message for {0}")]
    Unknown(String),
}

/// The `apiVersion`, `kind` and object of a body.
pub fn decode_body(bytes: &[u8], message_name: &str) -> Result<Value, ProtobufError> {
    let envelope = bytes.strip_prefix(MAGIC).ok_or(ProtobufError::Magic)?;
    let mut reader = Reader::new(envelope);
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    while let Some((number, value)) = reader.next_field()? {
        match (number, value) {
            (1, Wire::Bytes(type_meta)) => {
                let mut type_meta = Reader::new(type_meta);
                while let Some((number, value)) = type_meta.next_field()? {
                    match (number, value) {
                        (1, Wire::Bytes(text)) => api_version = string(text)?,
                        (2, Wire::Bytes(text)) => kind = string(text)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(bytes)) => raw = bytes,
            _ => {}
        }
    }
    let mut object = to_json(message_name, raw, 0)?;
    if let Value::Object(fields) = &mut object {
        if !api_version.is_empty() {
            fields.insert("apiVersion".into(), json!(api_version));
        }
        if !kind.is_empty() {
            fields.insert("kind".into(), json!(kind));
        }
    }
    Ok(object)
}

/// `object` (with its `apiVersion` and `kind`) as a body.
pub fn encode_body(object: &Value, message_name: &str) -> Result<Vec<u8>, ProtobufError> {
    let raw = from_json(message_name, object, 0)?;
    let mut type_meta = Vec::new();
    for (number, field) in [(1, "apiVersion"), (2, "kind")] {
        if let Some(text) = object[field].as_str() {
            wire::put_bytes(number, text.as_bytes(), &mut type_meta);
        }
    }
    let mut out = MAGIC.to_vec();
    wire::put_bytes(1, &type_meta, &mut out);
    wire::put_bytes(2, &raw, &mut out);
    // contentEncoding and contentType: empty, as kube-apiserver writes them.
    wire::put_bytes(3, b"", &mut out);
    wire::put_bytes(4, b"", &mut out);
    Ok(out)
}

fn string(bytes: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| ProtobufError::Invalid("a string is not UTF-8".to_string()))
}

fn find(name: &str) -> Result<&'static Message, ProtobufError> {
    message(name).ok_or_else(|| ProtobufError::Unknown(name.to_string()))
}

fn too_deep(depth: usize) -> Result<(), ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::Invalid("messages nest too deep".to_string()));
    }
    Ok(())
}

/// The JSON of the message `name` in `bytes`.
fn to_json(name: &str, bytes: &[u8], depth: usize) -> Result<Value, ProtobufError> {
    too_deep(depth)?;
    if let Some(special) = special_to_json(name, bytes, depth)? {
        return Ok(special);
    }
    let message = find(name)?;
    let required: Vec<&str> = definitions()
        .get(name)
        .and_then(|definition| definition["required"].as_array())
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut fields = Map::new();
    let mut reader = Reader::new(bytes);
    while let Some((number, value)) = reader.next_field()? {
        let Some(field) = message.by_number(number) else {
            continue;
        };
        match field.shape {
            Shape::Single if field.inline => {
                // An embedded struct: its fields are this message's in JSON.
                if let Value::Object(inner) = scalar_to_json(&field.scalar, value, depth)? {
                    fields.extend(inner);
                }
            }
            Shape::Single => {
                let value = scalar_to_json(&field.scalar, value, depth)?;
                let unset = match &value {
                    Value::Null => true,
                    Value::String(text) => text.is_empty() && !required.contains(&field.json),
                    _ => false,
                };
                if unset {
                    fields.remove(field.json);
                } else {
                    fields.insert(field.json.to_string(), value);
                }
            }
            Shape::Repeated => {
                let items = fields
                    .entry(field.json.to_string())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(items) = items {
                    items.push(scalar_to_json(&field.scalar, value, depth)?);
                }
            }
            Shape::Map => {
                let Wire::Bytes(entry) = value else {
                    return Err(ProtobufError::Invalid(format!(
                        "the map {} holds a value that is not an entry",
                        field.json
                    )));
                };
                let (key, value) = map_entry_to_json(field, entry, depth)?;
                let map = fields
                    .entry(field.json.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
        }
    }
    Ok(Value::Object(fields))
}

fn map_entry_to_json(
    field: &Field,
    entry: &[u8],
    depth: usize,
) -> Result<(String, Value), ProtobufError> {
    let mut reader = Reader::new(entry);
    let mut key = String::new();
    let mut value = None;
    while let Some((number, item)) = reader.next_field()? {
        match (number, item) {
            (1, Wire::Bytes(text)) => key = string(text)?,
            (2, item) => value = Some(scalar_to_json(&field.scalar, item, depth)?),
            _ => {}
        }
    }
    let value = value.unwrap_or_else(|| match field.scalar {
        Scalar::String | Scalar::Bytes => json!(""),
        Scalar::Message(_) => json!({}),
        _ => json!(0),
    });
    Ok((key, value))
}

fn scalar_to_json(scalar: &Scalar, value: Wire<'_>, depth: usize) -> Result<Value, ProtobufError> {
    let mismatch =
        || ProtobufError::Invalid(format!("a field of type {scalar:?} has another wire type"));
    Ok(match (scalar, value) {
        (Scalar::String, Wire::Bytes(text)) => Value::String(string(text)?),
        (Scalar::Bytes, Wire::Bytes(bytes)) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
        }
        (Scalar::Int32, Wire::Varint(number)) => json!(number as i64 as i32),
        (Scalar::Int64, Wire::Varint(number)) => json!(number as i64),
        (Scalar::Bool, Wire::Varint(number)) => json!(number != 0),
        (Scalar::Double, Wire::Fixed64(bits)) => {
            serde_json::Number::from_f64(f64::from_bits(bits)).map_or(Value::Null, Value::Number)
        }
        (Scalar::Message(name), Wire::Bytes(bytes)) => to_json(name, bytes, depth + 1)?,
        _ => return Err(mismatch()),
    })
}

/// The JSON form of the types that have one of their own.
fn special_to_json(name: &str, bytes: &[u8], depth: usize) -> Result<Option<Value>, ProtobufError> {
    let Some((package, type_name)) = name.rsplit_once('.') else {
        return Ok(None);
    };
    let fields = || -> Result<Vec<(u32, Wire<'_>)>, ProtobufError> {
        let mut reader = Reader::new(bytes);
        let mut fields = Vec::new();
        while let Some(field) = reader.next_field()? {
            fields.push(field);
        }
        Ok(fields)
    };
    let varint = |number: u32| -> Result<i64, ProtobufError> {
        Ok(fields()?
            .into_iter()
            .rev()
            .find_map(|(n, value)| match (n, value) {
                (n, Wire::Varint(value)) if n == number => Some(value as i64),
                _ => None,
            })
            .unwrap_or(0))
    };
    let bytes_field = |number: u32| -> Result<&[u8], ProtobufError> {
        Ok(fields()?
            .into_iter()
            .rev()
            .find_map(|(n, value)| match (n, value) {
                (n, Wire::Bytes(bytes)) if n == number => Some(bytes),
                _ => None,
            })
            .unwrap_or_default())
    };
    let raw_json = |bytes: &[u8]| -> Result<Value, ProtobufError> {
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(bytes)
            .map_err(|error| ProtobufError::Invalid(format!("raw JSON: {error}")))
    };
    let value = match (package, type_name) {
        // Go writes the zero time as an empty message.
        (META, "Time" | "MicroTime") if bytes.is_empty() => Value::Null,
        (META, "Time") => time::to_text(varint(1)?, 0, false),
        (META, "MicroTime") => time::to_text(varint(1)?, varint(2)?, true),
        (META, "Duration") => Value::String(time::go_duration(varint(1)?)),
        (META, "FieldsV1") => raw_json(bytes_field(1)?)?,
        ("io.k8s.apimachinery.pkg.api.resource", "Quantity") => {
            Value::String(string(bytes_field(1)?)?)
        }
        ("io.k8s.apimachinery.pkg.util.intstr", "IntOrString") => {
            if varint(1)? == 1 {
                Value::String(string(bytes_field(3)?)?)
            } else {
                json!(varint(2)? as i32)
            }
        }
        ("io.k8s.apimachinery.pkg.runtime", "RawExtension") | (APIEXTENSIONS, "JSON") => {
            raw_json(bytes_field(1)?)?
        }
        (APIEXTENSIONS, "JSONSchemaPropsOrArray") => {
            let schemas: Vec<Value> = fields()?
                .into_iter()
                .filter_map(|(number, value)| match (number, value) {
                    (2, Wire::Bytes(bytes)) => Some(bytes),
                    _ => None,
                })
                .map(|bytes| {
                    to_json(
                        &format!("{APIEXTENSIONS}.JSONSchemaProps"),
                        bytes,
                        depth + 1,
                    )
                })
                .collect::<Result<_, _>>()?;
            if schemas.is_empty() {
                to_json(
                    &format!("{APIEXTENSIONS}.JSONSchemaProps"),
                    bytes_field(1)?,
                    depth + 1,
                )?
            } else {
                Value::Array(schemas)
            }
        }
        (APIEXTENSIONS, "JSONSchemaPropsOrBool") => {
            let schema = bytes_field(2)?;
            if schema.is_empty() && !fields()?.iter().any(|(number, _)| *number == 2) {
                json!(varint(1)? != 0)
            } else {
                to_json(
                    &format!("{APIEXTENSIONS}.JSONSchemaProps"),
                    schema,
                    depth + 1,
                )?
            }
        }
        (APIEXTENSIONS, "JSONSchemaPropsOrStringArray") => {
            let properties: Vec<Value> = fields()?
                .into_iter()
                .filter_map(|(number, value)| match (number, value) {
                    (2, Wire::Bytes(text)) => Some(string(text).map(Value::String)),
                    _ => None,
                })
                .collect::<Result<_, _>>()?;
            if properties.is_empty() {
                to_json(
                    &format!("{APIEXTENSIONS}.JSONSchemaProps"),
                    bytes_field(1)?,
                    depth + 1,
                )?
            } else {
                Value::Array(properties)
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(value))
}

/// The message `name` holding `value`.
fn from_json(name: &str, value: &Value, depth: usize) -> Result<Vec<u8>, ProtobufError> {
    too_deep(depth)?;
    let mut out = Vec::new();
    if special_from_json(name, value, depth, &mut out)? {
        return Ok(out);
    }
    let message = find(name)?;
    let Value::Object(fields) = value else {
        return Err(ProtobufError::Invalid(format!(
            "{name} must be a JSON object"
        )));
    };
    for field in &message.fields {
        if field.inline {
            // An embedded struct: written from this object's own fields, when it has any.
            if let Scalar::Message(inner) = &field.scalar {
                let bytes = from_json(inner, value, depth + 1)?;
                if !bytes.is_empty() {
                    wire::put_bytes(field.number, &bytes, &mut out);
                }
            }
            continue;
        }
        let Some(value) = fields.get(field.json).filter(|value| !value.is_null()) else {
            continue;
        };
        match field.shape {
            Shape::Single => scalar_from_json(field, value, depth, &mut out)?,
            Shape::Repeated => {
                for item in value.as_array().into_iter().flatten() {
                    scalar_from_json(field, item, depth, &mut out)?;
                }
            }
            Shape::Map => {
                for (key, item) in value.as_object().into_iter().flatten() {
                    let mut entry = Vec::new();
                    wire::put_bytes(1, key.as_bytes(), &mut entry);
                    let value_field = Field {
                        number: 2,
                        ..field.clone()
                    };
                    scalar_from_json(&value_field, item, depth, &mut entry)?;
                    wire::put_bytes(field.number, &entry, &mut out);
                }
            }
        }
    }
    Ok(out)
}

fn scalar_from_json(
    field: &Field,
    value: &Value,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    let invalid = || ProtobufError::Invalid(format!("{} cannot hold {value}", field.json));
    let number = field.number;
    match &field.scalar {
        Scalar::String => {
            wire::put_bytes(number, value.as_str().ok_or_else(invalid)?.as_bytes(), out)
        }
        Scalar::Bytes => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(value.as_str().ok_or_else(invalid)?)
                .map_err(|_| invalid())?;
            wire::put_bytes(number, &bytes, out);
        }
        Scalar::Int32 | Scalar::Int64 => {
            wire::put_varint_field(number, value.as_i64().ok_or_else(invalid)? as u64, out);
        }
        Scalar::Bool => {
            wire::put_varint_field(number, u64::from(value.as_bool().ok_or_else(invalid)?), out)
        }
        Scalar::Double => {
            wire::put_fixed64_field(number, value.as_f64().ok_or_else(invalid)?.to_bits(), out);
        }
        Scalar::Message(name) => {
            let bytes = from_json(name, value, depth + 1)?;
            wire::put_bytes(number, &bytes, out);
        }
    }
    Ok(())
}

/// Writes the types with a JSON form of their own; false for the others.
fn special_from_json(
    name: &str,
    value: &Value,
    depth: usize,
    out: &mut Vec<u8>,
) -> Result<bool, ProtobufError> {
    let Some((package, type_name)) = name.rsplit_once('.') else {
        return Ok(false);
    };
    let invalid = || ProtobufError::Invalid(format!("{type_name} cannot be {value}"));
    let raw = |out: &mut Vec<u8>| {
        let bytes = serde_json::to_vec(value).unwrap_or_default();
        wire::put_bytes(1, &bytes, out);
    };
    match (package, type_name) {
        (META, "Time" | "MicroTime") => {
            let (seconds, nanos) =
                time::from_text(value.as_str().ok_or_else(invalid)?).ok_or_else(invalid)?;
            wire::put_varint_field(1, seconds as u64, out);
            if nanos != 0 {
                wire::put_varint_field(2, u64::from(nanos), out);
            }
        }
        (META, "Duration") => {
            let nanos =
                time::parse_go_duration(value.as_str().ok_or_else(invalid)?).ok_or_else(invalid)?;
            wire::put_varint_field(1, nanos as u64, out);
        }
        (META, "FieldsV1")
        | ("io.k8s.apimachinery.pkg.runtime", "RawExtension")
        | (APIEXTENSIONS, "JSON") => {
            raw(out);
        }
        ("io.k8s.apimachinery.pkg.api.resource", "Quantity") => {
            let text = match value {
                Value::String(text) => text.clone(),
                Value::Number(number) => number.to_string(),
                _ => return Err(invalid()),
            };
            wire::put_bytes(1, text.as_bytes(), out);
        }
        ("io.k8s.apimachinery.pkg.util.intstr", "IntOrString") => match value {
            Value::Number(number) => {
                wire::put_varint_field(1, 0, out);
                wire::put_varint_field(2, number.as_i64().ok_or_else(invalid)? as u64, out);
            }
            Value::String(text) => {
                wire::put_varint_field(1, 1, out);
                wire::put_bytes(3, text.as_bytes(), out);
            }
            _ => return Err(invalid()),
        },
        (
            APIEXTENSIONS,
            "JSONSchemaPropsOrArray" | "JSONSchemaPropsOrBool" | "JSONSchemaPropsOrStringArray",
        ) => {
            let props = format!("{APIEXTENSIONS}.JSONSchemaProps");
            match (type_name, value) {
                ("JSONSchemaPropsOrBool", Value::Bool(allows)) => {
                    wire::put_varint_field(1, u64::from(*allows), out);
                }
                ("JSONSchemaPropsOrArray", Value::Array(schemas)) => {
                    for schema in schemas {
                        wire::put_bytes(2, &from_json(&props, schema, depth + 1)?, out);
                    }
                }
                ("JSONSchemaPropsOrStringArray", Value::Array(properties)) => {
                    for property in properties {
                        wire::put_bytes(2, property.as_str().ok_or_else(invalid)?.as_bytes(), out);
                    }
                }
                (_, Value::Object(_)) => {
                    let number = if type_name == "JSONSchemaPropsOrBool" {
                        2
                    } else {
                        1
                    };
                    if type_name == "JSONSchemaPropsOrBool" {
                        wire::put_varint_field(1, 1, out);
                    }
                    wire::put_bytes(number, &from_json(&props, value, depth + 1)?, out);
                }
                _ => return Err(invalid()),
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

#[cfg(test)]
mod tests;
