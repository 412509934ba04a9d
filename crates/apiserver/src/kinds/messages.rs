//! The messages of Kubernetes' built-in types, read from `messages.txt` (derived from the kube-rs
//! project's `k8s-pb` bindings and k8s-openapi's schemas by `tests/it/message_table.rs`): per
//! message, each field's protobuf number, JSON name and type, and how it merges (its list type
//! and keys, atomic maps and structs, its strategic merge patch strategy, its default), from the
//! markers of Kubernetes' Go types; under Kubernetes' definition names
//! (`io.k8s.api.core.v1.Pod`).

use std::collections::HashMap;
use std::sync::LazyLock;

/// The type of a field's values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar {
    /// `string`.
    String,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `bool`.
    Bool,
    /// `double`.
    Double,
    /// `bytes` (base64 in JSON).
    Bytes,
    /// A message, by name.
    Message(&'static str),
}

/// How many values a field has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// One.
    Single,
    /// A list.
    Repeated,
    /// A map with string keys.
    Map,
}

/// How a list merges (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ListType {
    /// Replaced whole.
    #[default]
    Atomic,
    /// A set of scalars, merged by value.
    Set,
    /// A map of objects, merged by these key fields.
    Map(Vec<&'static str>),
}

/// One field of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its number.
    pub number: u32,
    /// Its name in JSON.
    pub json: &'static str,
    /// One value, a list or a map.
    pub shape: Shape,
    /// The type of its values.
    pub scalar: Scalar,
    /// How it merges, when it is a list.
    pub list: ListType,
    /// Whether it is a map that merges whole (`+mapType=atomic`).
    pub atomic_map: bool,
    /// Its strategic merge patch strategy (`merge`, `retainKeys`, `merge,retainKeys`) and merge
    /// key.
    pub patch: Option<(&'static str, Option<&'static str>)>,
    /// Its default value, as JSON text.
    pub default: Option<&'static str>,
    /// Whether it is a struct Go embeds inline: its fields are the message's own in JSON (a
    /// Probe's `httpGet`), and it has no JSON name of its own.
    pub inline: bool,
}

/// A message: its fields in number order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    /// Whether it merges whole (`+structType=atomic`).
    pub atomic: bool,
    /// The fields.
    pub fields: Vec<Field>,
}

impl Message {
    /// The field named `json` in JSON: one of its own, or of a struct it embeds inline.
    pub fn by_name(&self, json: &str) -> Option<&Field> {
        self.fields.iter().find_map(|field| {
            if field.inline {
                match &field.scalar {
                    Scalar::Message(name) => message(name)?.by_name(json),
                    _ => None,
                }
            } else {
                (field.json == json).then_some(field)
            }
        })
    }
}

impl Message {
    /// The field numbered `number`.
    pub fn by_number(&self, number: u32) -> Option<&Field> {
        self.fields.iter().find(|field| field.number == number)
    }
}

const TABLE: &str = include_str!("messages.txt");

/// Every message, by name.
pub fn messages() -> &'static HashMap<&'static str, Message> {
    static MESSAGES: LazyLock<HashMap<&'static str, Message>> = LazyLock::new(parse);
    &MESSAGES
}

/// The message named `name`.
pub fn message(name: &str) -> Option<&'static Message> {
    messages().get(name)
}

fn parse() -> HashMap<&'static str, Message> {
    TABLE
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let mut columns = line.split('\t');
            let head = columns.next()?;
            let (name, atomic) = match head.strip_suffix(";atomic") {
                Some(name) => (name, true),
                None => (head, false),
            };
            let fields = columns.filter_map(parse_field).collect();
            Some((name, Message { atomic, fields }))
        })
        .collect()
}

fn parse_field(column: &'static str) -> Option<Field> {
    let mut options = column.split(';');
    let mut parts = options.next()?.splitn(3, ',');
    let number = parts.next()?.parse().ok()?;
    let json = parts.next()?;
    let mut kind = parts.next()?;
    let shape = if let Some(rest) = kind.strip_prefix("[]") {
        kind = rest;
        Shape::Repeated
    } else if let Some(rest) = kind.strip_prefix("map[string]") {
        kind = rest;
        Shape::Map
    } else {
        Shape::Single
    };
    let scalar = match kind {
        "string" => Scalar::String,
        "int32" => Scalar::Int32,
        "int64" => Scalar::Int64,
        "bool" => Scalar::Bool,
        "double" => Scalar::Double,
        "bytes" => Scalar::Bytes,
        message => Scalar::Message(message),
    };
    let mut field = Field {
        number,
        json,
        shape,
        scalar,
        list: ListType::Atomic,
        atomic_map: false,
        patch: None,
        default: None,
        inline: false,
    };
    for option in options {
        if option == "inline" {
            field.inline = true;
            continue;
        }
        let (key, value) = option.split_once('=')?;
        match key {
            "list" => {
                field.list = match value {
                    "set" => ListType::Set,
                    keys if keys.starts_with("map:") => {
                        ListType::Map(keys.trim_start_matches("map:").split('+').collect())
                    }
                    _ => ListType::Atomic,
                }
            }
            "map" => field.atomic_map = value == "atomic",
            "patch" => {
                field.patch = Some(match value.split_once(':') {
                    Some((strategy, key)) => (strategy, Some(key)),
                    None => (value, None),
                });
            }
            "default" => field.default = Some(value),
            _ => {}
        }
    }
    Some(field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_knows_pods_and_their_metadata() {
        let pod = message("io.k8s.api.core.v1.Pod").unwrap();
        assert_eq!(
            pod.by_number(2).unwrap(),
            &Field {
                number: 2,
                json: "spec",
                shape: Shape::Single,
                scalar: Scalar::Message("io.k8s.api.core.v1.PodSpec"),
                list: ListType::Atomic,
                atomic_map: false,
                patch: None,
                default: None,
                inline: false,
            }
        );
        let probe = message("io.k8s.api.core.v1.Probe").unwrap();
        assert!(probe.by_number(1).unwrap().inline);
        assert_eq!(probe.by_name("httpGet").unwrap().json, "httpGet");
        assert!(probe.by_name("handler").is_none());
        let container = message("io.k8s.api.core.v1.Container").unwrap();
        let ports = container.by_name("ports").unwrap();
        assert_eq!(ports.list, ListType::Map(vec!["containerPort", "protocol"]));
        assert_eq!(ports.patch, Some(("merge", Some("containerPort"))));
        let port = message("io.k8s.api.core.v1.ContainerPort").unwrap();
        assert_eq!(port.by_name("protocol").unwrap().default, Some("\"TCP\""));
        let metadata = message("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta").unwrap();
        assert_eq!(metadata.by_number(11).unwrap().json, "labels");
        assert_eq!(metadata.by_number(11).unwrap().shape, Shape::Map);
        let secret = message("io.k8s.api.core.v1.Secret").unwrap();
        assert_eq!(secret.by_number(2).unwrap().scalar, Scalar::Bytes);
    }
}
