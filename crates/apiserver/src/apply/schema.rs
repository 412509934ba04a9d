//! What server-side apply needs to know of a type: whether a value is a scalar (and of which
//! kind), a struct with declared fields, a map, or a list, and how each merges (atomic, or
//! granular: a list as a set or as a map by its keys). Built-in kinds take it from the message
//! table (their Go types' markers), read once into a graph of message types; custom resources
//! from their CRD's structural schema.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, OnceLock};

use serde_json::Value;

use super::path::{Name, PathElement};
use crate::kinds::messages::{self, ListType, Message, Scalar, Shape};
use crate::resource::ResourceKind;
use crate::structural::{self, JsonType};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// How an associative or atomic list merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced whole.
    Atomic,
    /// A set of scalars.
    Set,
    /// Objects merged by these key fields.
    Map(Arc<[Name]>),
}

impl From<&ListType> for ListKind {
    fn from(list: &ListType) -> Self {
        match list {
            ListType::Atomic => Self::Atomic,
            ListType::Set => Self::Set,
            ListType::Map(keys) => Self::Map(keys.iter().map(|key| Name::from(*key)).collect()),
        }
    }
}

impl From<&structural::ListType> for ListKind {
    fn from(list: &structural::ListType) -> Self {
        match list {
            structural::ListType::Atomic => Self::Atomic,
            structural::ListType::Set => Self::Set,
            structural::ListType::Map(keys) => Self::Map(keys.clone()),
        }
    }
}

/// The kind of a scalar, as a schema checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarKind {
    /// A string.
    String,
    /// An integer or a float.
    Numeric,
    /// A boolean.
    Boolean,
    /// Any scalar (an int-or-string, a quantity).
    Untyped,
}

/// A built-in message as a type: its fields' names and types, made once (on first use), its
/// inline structs' fields among them.
pub struct MessageType {
    name: &'static str,
    message: &'static Message,
    /// Its fields by JSON name, each with its name (shared by the paths that step into it).
    fields: OnceLock<HashMap<Name, (Name, Type), foldhash::fast::FixedState>>,
}

impl fmt::Debug for MessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl MessageType {
    /// The type of the message `name`.
    pub fn named(name: &str) -> Option<&'static MessageType> {
        static TYPES: LazyLock<HashMap<&'static str, MessageType>> = LazyLock::new(|| {
            messages::messages()
                .iter()
                .map(|(name, message)| {
                    let message_type = MessageType {
                        name,
                        message,
                        fields: OnceLock::new(),
                    };
                    (*name, message_type)
                })
                .collect()
        });
        TYPES.get(name)
    }

    /// The field `name`. The fields are hashed by name, rather than sorted and searched with a
    /// string comparison at each step: every field of every object an apply or an update walks
    /// is looked up in its type.
    fn field(&self, name: &str) -> Option<&(Name, Type)> {
        self.fields
            .get_or_init(|| {
                let mut fields = Vec::new();
                collect_fields(self.message, &mut fields);
                fields
                    .into_iter()
                    .map(|(name, ty)| (name.clone(), (name, ty)))
                    .collect()
            })
            .get(name)
    }
}

/// The fields of `message` as JSON has them: its own, and those of the structs it embeds inline.
fn collect_fields(message: &'static Message, out: &mut Vec<(Name, Type)>) {
    for field in &message.fields {
        match (&field.scalar, field.inline) {
            (Scalar::Message(inner), true) => {
                if let Some(inner) = messages::message(inner) {
                    collect_fields(inner, out);
                }
            }
            _ => out.push((Name::from(field.json), field_type(field))),
        }
    }
}

/// The type of a value.
#[derive(Debug, Clone)]
pub enum Type {
    /// A leaf of this kind: replaced whole, owned as one field.
    Scalar(ScalarKind),
    /// Owned and replaced whole, whatever it holds.
    Atomic,
    /// Without a schema: maps granular (every key a field), lists atomic, anything allowed.
    Deduced,
    /// A built-in message.
    Message(&'static MessageType),
    /// A map with string keys, of values of one type; atomic or granular.
    Map(Arc<Type>, bool),
    /// A list of values of one type.
    List(Arc<Type>, ListKind),
    /// A node of a CRD's structural schema.
    Schema(Arc<structural::Node>),
    /// A whole object of a kind: `apiVersion` and `kind` strings, `metadata` an `ObjectMeta`,
    /// the rest as the kind's type says.
    Root(Arc<Type>),
}

/// The shape a type gives a value, for the walkers.
#[derive(Debug, Clone)]
pub enum Node<'a> {
    /// A leaf.
    Leaf,
    /// A map or struct whose fields merge one by one.
    Granular,
    /// A list whose items merge by key or value (a built-in type's list kind borrowed).
    Associative(Cow<'a, ListKind>),
}

/// What a type expects a value to be, for validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// A scalar of this kind.
    Scalar(ScalarKind),
    /// A map (or struct).
    Map,
    /// A list.
    List,
    /// Anything.
    Any,
}

/// The names a whole object declares besides its kind's fields.
static ROOT_NAMES: LazyLock<[Name; 3]> = LazyLock::new(|| {
    [
        Name::from("apiVersion"),
        Name::from("kind"),
        Name::from("metadata"),
    ]
});

impl Type {
    /// The type of the objects of the built-in message `name` (`io.k8s.api.apps.v1.Deployment`):
    /// `None` for a name the table does not have.
    pub fn of_kind_message(name: &str) -> Option<Self> {
        MessageType::named(name).map(|message| Self::Root(Arc::new(Self::Message(message))))
    }

    /// The type of the objects of a custom resource with this schema.
    pub fn of_schema(schema: Arc<structural::Node>) -> Self {
        Self::Root(Arc::new(Self::Schema(schema)))
    }

    /// The type of objects nothing is known of.
    pub fn deduced_root() -> Self {
        Self::Root(Arc::new(Self::Deduced))
    }

    /// The type of `kind`'s objects: its built-in type, its CRD's schema, or deduced.
    pub fn of_resource(kind: &ResourceKind) -> Self {
        if let Some(builtin) = kind.builtin {
            return Self::of_kind_message(&builtin.schema_name())
                .unwrap_or_else(Self::deduced_root);
        }
        match kind
            .custom
            .as_ref()
            .and_then(|custom| custom.schema.as_ref())
        {
            Some(schema) => Self::of_schema(schema.clone()),
            None => Self::deduced_root(),
        }
    }

    /// How `value` (of this type) merges.
    pub fn node(&self, value: &Value) -> Node<'_> {
        match self {
            Self::Scalar(_) | Self::Atomic => Node::Leaf,
            Self::Deduced | Self::Root(_) => match value {
                Value::Object(_) => Node::Granular,
                _ => Node::Leaf,
            },
            Self::Message(message) => {
                if !message.message.atomic && value.is_object() {
                    Node::Granular
                } else {
                    Node::Leaf
                }
            }
            Self::Map(_, atomic) => {
                if *atomic || !value.is_object() {
                    Node::Leaf
                } else {
                    Node::Granular
                }
            }
            Self::List(_, list) => match (list, value) {
                (ListKind::Atomic, _) => Node::Leaf,
                (_, Value::Array(_)) => Node::Associative(Cow::Borrowed(list)),
                _ => Node::Leaf,
            },
            Self::Schema(schema) => schema_node(schema, value),
        }
    }

    /// The type of field `name` of a granular map or struct of this type, and whether the
    /// struct declares it (a declared field that holds a non-empty value is not owned itself,
    /// only what it holds). A field the type does not allow is deduced.
    pub fn field(&self, name: &str) -> (Cow<'_, Type>, bool) {
        match self.allowed_field(name) {
            Some((ty, declared)) => (ty, declared.is_some()),
            None => (Cow::Owned(Self::Deduced), false),
        }
    }

    /// Like [`field`](Type::field), with the path step to the field (sharing the name the type
    /// holds, for a declared field).
    pub fn field_step(&self, name: &str) -> (Cow<'_, Type>, bool, PathElement) {
        match self.allowed_field(name) {
            Some((ty, Some(shared))) => (ty, true, PathElement::Field(shared.clone())),
            Some((ty, None)) => (ty, false, PathElement::field(name)),
            None => (Cow::Owned(Self::Deduced), false, PathElement::field(name)),
        }
    }

    /// The type of field `name`, and its shared name when the type declares it; `None` when the
    /// type does not allow the field (what the strict reading of an applied configuration
    /// rejects).
    ///
    /// A built-in type's field types are borrowed: every request walks the same schema, and
    /// counting references to it on each step would make both cores write to its counts.
    pub fn allowed_field(&self, name: &str) -> Option<(Cow<'_, Type>, Option<&Name>)> {
        match self {
            Self::Root(inner) => object_field(name).or_else(|| inner.allowed_field(name)),
            Self::Message(message) => message
                .field(name)
                .map(|(shared, ty)| (Cow::Borrowed(ty), Some(shared))),
            Self::Map(element, _) => Some((Cow::Borrowed(&**element), None)),
            Self::Schema(schema) => schema_field(schema, name),
            Self::Deduced | Self::Atomic => Some((Cow::Owned(Self::Deduced), None)),
            Self::Scalar(_) | Self::List(..) => None,
        }
    }

    /// The type of the items of a list of this type.
    pub fn item(&self) -> Cow<'_, Type> {
        match self {
            Self::List(element, _) => Cow::Borrowed(&**element),
            Self::Schema(schema) => Cow::Owned(match &schema.items {
                Some(items) => Self::Schema(items.clone()),
                None => Self::Deduced,
            }),
            _ => Cow::Owned(Self::Deduced),
        }
    }

    /// The default of a list item's key field `name`, when the item's type declares one.
    pub fn key_default(&self, name: &str) -> Option<Value> {
        match self {
            Self::Message(message) => message
                .message
                .by_name(name)?
                .default
                .and_then(|text| serde_json::from_str(text).ok()),
            Self::Schema(schema) => schema.properties.get(name)?.default.clone(),
            _ => None,
        }
    }

    /// What a value of this type must be.
    pub fn expected(&self) -> Expected {
        match self {
            Self::Scalar(kind) => Expected::Scalar(*kind),
            Self::Atomic | Self::Deduced => Expected::Any,
            Self::Message(_) | Self::Map(..) | Self::Root(_) => Expected::Map,
            Self::List(..) => Expected::List,
            Self::Schema(schema) => match schema.json_type {
                _ if schema.int_or_string => Expected::Scalar(ScalarKind::Untyped),
                Some(JsonType::Object) => Expected::Map,
                Some(JsonType::Array) => Expected::List,
                Some(JsonType::String) => Expected::Scalar(ScalarKind::String),
                Some(JsonType::Integer | JsonType::Number) => Expected::Scalar(ScalarKind::Numeric),
                Some(JsonType::Boolean) => Expected::Scalar(ScalarKind::Boolean),
                None if !schema.properties.is_empty() => Expected::Map,
                None => Expected::Any,
            },
        }
    }
}

/// The type of a built-in message's field.
fn field_type(field: &messages::Field) -> Type {
    let value = match &field.scalar {
        Scalar::Message(name) => message_type(name),
        Scalar::String | Scalar::Bytes => Type::Scalar(ScalarKind::String),
        Scalar::Int32 | Scalar::Int64 | Scalar::Double => Type::Scalar(ScalarKind::Numeric),
        Scalar::Bool => Type::Scalar(ScalarKind::Boolean),
    };
    match field.shape {
        Shape::Single => value,
        Shape::Repeated => Type::List(Arc::new(value), ListKind::from(&field.list)),
        Shape::Map => Type::Map(Arc::new(value), field.atomic_map),
    }
}

/// The type of a built-in message used as a field's value: Kubernetes' types that are written
/// as one JSON value are scalars (times and durations strings; quantities and int-or-strings
/// any scalar, as `cpu: 1` and `cpu: 500m` both are); raw extensions are deduced; `FieldsV1`
/// is atomic.
fn message_type(name: &str) -> Type {
    match name.rsplit_once('.').map(|(_, short)| short) {
        Some("Time" | "MicroTime" | "Duration") => Type::Scalar(ScalarKind::String),
        Some("Quantity" | "IntOrString") => Type::Scalar(ScalarKind::Untyped),
        Some("RawExtension" | "JSON") => Type::Deduced,
        Some("FieldsV1") => Type::Atomic,
        _ => MessageType::named(name).map_or(Type::Deduced, Type::Message),
    }
}

/// How `value` of a CRD schema node merges: `x-kubernetes-map-type` and
/// `x-kubernetes-list-type` (lists atomic by default).
fn schema_node(schema: &structural::Node, value: &Value) -> Node<'static> {
    match value {
        Value::Object(_) => {
            let scalar = matches!(
                schema.json_type,
                Some(JsonType::String | JsonType::Integer | JsonType::Number | JsonType::Boolean)
            );
            if schema.atomic_map || scalar || schema.int_or_string {
                Node::Leaf
            } else {
                Node::Granular
            }
        }
        Value::Array(_) => match &schema.list_type {
            structural::ListType::Atomic => Node::Leaf,
            list => Node::Associative(Cow::Owned(ListKind::from(list))),
        },
        _ => Node::Leaf,
    }
}

/// The type and shared name of `apiVersion`, `kind` and `metadata`, which a whole object (or
/// an embedded one) declares besides its kind's fields; `None` for any other name.
fn object_field(name: &str) -> Option<(Cow<'static, Type>, Option<&'static Name>)> {
    match name {
        "apiVersion" => Some((
            Cow::Owned(Type::Scalar(ScalarKind::String)),
            Some(&ROOT_NAMES[0]),
        )),
        "kind" => Some((
            Cow::Owned(Type::Scalar(ScalarKind::String)),
            Some(&ROOT_NAMES[1]),
        )),
        "metadata" => Some((Cow::Owned(message_type(OBJECT_META)), Some(&ROOT_NAMES[2]))),
        _ => None,
    }
}

/// The type of field `name` of a CRD schema node (with its name when it is declared); `None`
/// when the node does not allow it.
fn schema_field<'a>(
    schema: &'a structural::Node,
    name: &str,
) -> Option<(Cow<'a, Type>, Option<&'a Name>)> {
    if schema.embedded_resource
        && let Some(field) = object_field(name)
    {
        return Some(field);
    }
    match schema.field(name) {
        Some((field, declared)) => Some((Cow::Owned(Type::Schema(field.clone())), declared)),
        None if schema.preserve_unknown_fields || schema.json_type.is_none() => {
            Some((Cow::Owned(Type::Deduced), None))
        }
        None => None,
    }
}
