//! Writing a typed object back over the JSON tree it was read from.
//!
//! Every write of a built-in kind is read into its type and written back (see
//! [`super::typed`]). The tree it was read from is almost always what writing the type out
//! gives, but for the defaults just filled in: [`write_back`] walks the two together, keeps each
//! key, string and node that is already right, and builds only what differs. Where the tree
//! has a field the type did not write (one the type does not declare, or a `null`), it gives up
//! and the caller writes the type out anew; so the result is always exactly what
//! `serde_json::to_value` makes of the typed object.

use serde::ser::{self, Serialize};
use serde_json::{Map, Value};

/// Makes `target` what `serde_json::to_value(typed)` is, reusing what it already holds.
pub fn write_back<T: Serialize>(typed: &T, target: &mut Value) -> Result<(), serde_json::Error> {
    match typed.serialize(Over(target)) {
        Ok(()) => Ok(()),
        Err(Stop::GaveUp) => {
            *target = serde_json::to_value(typed)?;
            Ok(())
        }
        Err(Stop::Failed(error)) => Err(error),
    }
}

/// Why the walk stopped.
#[derive(Debug)]
enum Stop {
    /// The tree has a field the type did not write: the type is written out anew.
    GaveUp,
    /// The type cannot be written as JSON.
    Failed(serde_json::Error),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::GaveUp => f.write_str("the tree holds a field the type did not write"),
            Self::Failed(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<M: std::fmt::Display>(message: M) -> Self {
        Self::Failed(serde_json::Error::custom(message))
    }
}

impl From<serde_json::Error> for Stop {
    fn from(error: serde_json::Error) -> Self {
        Self::Failed(error)
    }
}

/// A serializer that writes over the node it holds.
struct Over<'a>(&'a mut Value);

impl<'a> Over<'a> {
    fn set(self, value: Value) -> Result<(), Stop> {
        *self.0 = value;
        Ok(())
    }

    /// The node as an object, made an empty one if it is not.
    fn object(self) -> Result<&'a mut Map<String, Value>, Stop> {
        if !self.0.is_object() {
            *self.0 = Value::Object(Map::new());
        }
        self.0.as_object_mut().ok_or(Stop::GaveUp)
    }

    /// The node as a list, made an empty one if it is not.
    fn list(self) -> Result<&'a mut Vec<Value>, Stop> {
        if !self.0.is_array() {
            *self.0 = Value::Array(Vec::new());
        }
        self.0.as_array_mut().ok_or(Stop::GaveUp)
    }
}

/// The node under `key` of `map`, made (`null`) if it is not there. (An entry would copy the key
/// even when it is there.)
fn slot<'a>(map: &'a mut Map<String, Value>, key: &str) -> Result<&'a mut Value, Stop> {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), Value::Null);
    }
    map.get_mut(key).ok_or(Stop::GaveUp)
}

/// `{variant: …}`: the node of an externally tagged enum variant's content.
fn variant_slot<'a>(target: &'a mut Value, variant: &str) -> Result<&'a mut Value, Stop> {
    let map = Over(target).object()?;
    if map.len() > 1 || map.keys().any(|key| key != variant) {
        return Err(Stop::GaveUp);
    }
    slot(map, variant)
}

/// `Serializer` methods that set the node to what `serde_json::to_value` makes of a scalar.
macro_rules! scalars {
    ($($method:ident($type:ty);)*) => {
        $(fn $method(self, value: $type) -> Result<(), Stop> {
            self.set(serde_json::to_value(value)?)
        })*
    };
}

impl<'a> ser::Serializer for Over<'a> {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = Items<'a>;
    type SerializeTuple = Items<'a>;
    type SerializeTupleStruct = Items<'a>;
    type SerializeTupleVariant = Items<'a>;
    type SerializeMap = Entries<'a>;
    type SerializeStruct = Entries<'a>;
    type SerializeStructVariant = Entries<'a>;

    // Numbers and booleans are written as serde_json writes them (floats that are not finite
    // become null); making them allocates nothing.
    scalars! {
        serialize_bool(bool);
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_i128(i128);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_u128(u128);
        serialize_f32(f32);
        serialize_f64(f64);
    }
    fn serialize_char(self, value: char) -> Result<(), Stop> {
        self.serialize_str(value.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, value: &str) -> Result<(), Stop> {
        match self.0 {
            Value::String(text) if text == value => {}
            Value::String(text) => {
                text.clear();
                text.push_str(value);
            }
            other => *other = Value::String(value.to_owned()),
        }
        Ok(())
    }
    fn serialize_bytes(self, value: &[u8]) -> Result<(), Stop> {
        self.set(Value::Array(
            value.iter().map(|&byte| byte.into()).collect(),
        ))
    }
    fn serialize_none(self) -> Result<(), Stop> {
        self.set(Value::Null)
    }
    fn serialize_some<V: ?Sized + Serialize>(self, value: &V) -> Result<(), Stop> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Stop> {
        self.set(Value::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Stop> {
        self.set(Value::Null)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Stop> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<V: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &V,
    ) -> Result<(), Stop> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<V: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &V,
    ) -> Result<(), Stop> {
        value.serialize(Over(variant_slot(self.0, variant)?))
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Items<'a>, Stop> {
        Ok(Items {
            items: self.list()?,
            written: 0,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Items<'a>, Stop> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Items<'a>, Stop> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Items<'a>, Stop> {
        Ok(Items {
            items: Over(variant_slot(self.0, variant)?).list()?,
            written: 0,
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Entries<'a>, Stop> {
        Ok(Entries::new(self.object()?))
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Entries<'a>, Stop> {
        Ok(Entries::new(self.object()?))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Entries<'a>, Stop> {
        Ok(Entries::new(Over(variant_slot(self.0, variant)?).object()?))
    }
}

/// Writing over a list: item by item, the rest cut off at the end.
struct Items<'a> {
    items: &'a mut Vec<Value>,
    written: usize,
}

impl Items<'_> {
    fn item<V: ?Sized + Serialize>(&mut self, value: &V) -> Result<(), Stop> {
        if self.written == self.items.len() {
            self.items.push(Value::Null);
        }
        let target = self.items.get_mut(self.written).ok_or(Stop::GaveUp)?;
        self.written += 1;
        value.serialize(Over(target))
    }

    fn finish(self) -> Result<(), Stop> {
        self.items.truncate(self.written);
        Ok(())
    }
}

/// The four ways serde hands a list's items differ only in the method's name.
macro_rules! items_impl {
    ($($trait:ident::$method:ident),*) => {$(
        impl ser::$trait for Items<'_> {
            type Ok = ();
            type Error = Stop;
            fn $method<V: ?Sized + Serialize>(&mut self, value: &V) -> Result<(), Stop> {
                self.item(value)
            }
            fn end(self) -> Result<(), Stop> {
                self.finish()
            }
        }
    )*};
}

items_impl!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// Writing over an object: field by field; a field the tree has and the type did not write
/// makes the walk give up, which [`Entries::finish`] tells by counting: every field written is
/// in the tree, so the tree holds no other exactly when it holds as many as were written.
///
/// Counting needs each field written once. A struct's `Serialize` writes each of its fields once
/// (k8s-openapi's do); a map's keys are taken only in increasing order (a `BTreeMap`'s, as
/// every map of these types is), and out of order the walk gives up.
struct Entries<'a> {
    map: &'a mut Map<String, Value>,
    /// Fields written.
    written: usize,
    /// A map's key, between `serialize_key` and `serialize_value`.
    key: String,
    /// The map's key before it.
    previous: String,
}

impl<'a> Entries<'a> {
    fn new(map: &'a mut Map<String, Value>) -> Self {
        Self {
            map,
            written: 0,
            key: String::new(),
            previous: String::new(),
        }
    }

    fn entry<V: ?Sized + Serialize>(&mut self, key: &str, value: &V) -> Result<(), Stop> {
        self.written += 1;
        value.serialize(Over(slot(self.map, key)?))
    }

    fn finish(self) -> Result<(), Stop> {
        if self.map.len() == self.written {
            Ok(())
        } else {
            Err(Stop::GaveUp)
        }
    }
}

impl ser::SerializeMap for Entries<'_> {
    type Ok = ();
    type Error = Stop;
    fn serialize_key<K: ?Sized + Serialize>(&mut self, key: &K) -> Result<(), Stop> {
        std::mem::swap(&mut self.key, &mut self.previous);
        self.key.clear();
        key.serialize(KeyText(&mut self.key))?;
        if self.written > 0 && self.key <= self.previous {
            return Err(Stop::GaveUp);
        }
        Ok(())
    }
    fn serialize_value<V: ?Sized + Serialize>(&mut self, value: &V) -> Result<(), Stop> {
        self.written += 1;
        value.serialize(Over(slot(self.map, &self.key)?))
    }
    fn end(self) -> Result<(), Stop> {
        self.finish()
    }
}

/// A struct's fields and a struct variant's are handed alike.
macro_rules! fields_impl {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Entries<'_> {
            type Ok = ();
            type Error = Stop;
            fn serialize_field<V: ?Sized + Serialize>(
                &mut self,
                key: &'static str,
                value: &V,
            ) -> Result<(), Stop> {
                self.entry(key, value)
            }
            fn end(self) -> Result<(), Stop> {
                self.finish()
            }
        }
    )*};
}

fields_impl!(SerializeStruct, SerializeStructVariant);

/// Reads a map key that is a string into a buffer; any other kind of key makes the walk give
/// up (serde_json writes numbers and booleans as keys too, and the type is then written out
/// anew).
struct KeyText<'a>(&'a mut String);

macro_rules! give_up {
    ($($method:ident($($arg:ty),*);)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<(), Stop> {
            Err(Stop::GaveUp)
        })*
    };
}

impl ser::Serializer for KeyText<'_> {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = ser::Impossible<(), Stop>;
    type SerializeTuple = ser::Impossible<(), Stop>;
    type SerializeTupleStruct = ser::Impossible<(), Stop>;
    type SerializeTupleVariant = ser::Impossible<(), Stop>;
    type SerializeMap = ser::Impossible<(), Stop>;
    type SerializeStruct = ser::Impossible<(), Stop>;
    type SerializeStructVariant = ser::Impossible<(), Stop>;

    fn serialize_str(self, value: &str) -> Result<(), Stop> {
        self.0.push_str(value);
        Ok(())
    }
    fn serialize_newtype_struct<V: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &V,
    ) -> Result<(), Stop> {
        value.serialize(self)
    }
    give_up! {
        serialize_bool(bool);
        serialize_i8(i8);
        serialize_i16(i16);
        serialize_i32(i32);
        serialize_i64(i64);
        serialize_u8(u8);
        serialize_u16(u16);
        serialize_u32(u32);
        serialize_u64(u64);
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_char(char);
        serialize_bytes(&[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(&'static str);
        serialize_unit_variant(&'static str, u32, &'static str);
    }
    fn serialize_some<V: ?Sized + Serialize>(self, _value: &V) -> Result<(), Stop> {
        Err(Stop::GaveUp)
    }
    fn serialize_newtype_variant<V: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &V,
    ) -> Result<(), Stop> {
        Err(Stop::GaveUp)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Stop> {
        Err(Stop::GaveUp)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Stop> {
        Err(Stop::GaveUp)
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Stop> {
        Err(Stop::GaveUp)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Stop> {
        Err(Stop::GaveUp)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Stop> {
        Err(Stop::GaveUp)
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Stop> {
        Err(Stop::GaveUp)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Stop> {
        Err(Stop::GaveUp)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::Pod;
    use proptest::prelude::*;
    use serde::Serialize;
    use serde_json::json;

    use super::*;

    /// What `write_back` makes of `typed` over `start`, and what `to_value` makes of it.
    fn both<T: Serialize>(typed: &T, start: Value) -> (Value, Value) {
        let mut written = start;
        write_back(typed, &mut written).unwrap();
        (written, serde_json::to_value(typed).unwrap())
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-3..3i64).prop_map(Value::from),
            prop::sample::select(vec![0.5, -1.0, 2.0]).prop_map(Value::from),
            prop::sample::select(vec!["", "a", "b", "é\n"]).prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop::sample::select(vec!["a", "b", "c", "d"]),
                    inner,
                    0..5
                )
                .prop_map(|map| Value::Object(
                    map.into_iter()
                        .map(|(key, value)| (key.to_string(), value))
                        .collect()
                )),
            ]
        })
    }

    /// A type with every shape serde writes: struct fields, options, lists, maps, enums of
    /// each variant kind, newtypes, floats, chars, units.
    #[derive(Debug, Clone, Serialize)]
    struct Sample {
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        count: Option<i32>,
        ratio: f64,
        letter: char,
        nothing: (),
        tags: Vec<Shape>,
        labels: BTreeMap<String, Option<Inner>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        inner: Option<Box<Inner>>,
    }

    #[derive(Debug, Clone, Serialize)]
    struct Inner(String, u8);

    #[derive(Debug, Clone, Serialize)]
    enum Shape {
        Unit,
        Newtype(u64),
        Tuple(bool, String),
        Struct { side: i64 },
    }

    fn sample() -> impl Strategy<Value = Sample> {
        let shape = prop_oneof![
            Just(Shape::Unit),
            any::<u64>().prop_map(Shape::Newtype),
            (any::<bool>(), "[ab]{0,2}").prop_map(|(flag, text)| Shape::Tuple(flag, text)),
            (-5..5i64).prop_map(|side| Shape::Struct { side }),
        ];
        let inner = ("[ab]{0,2}", any::<u8>()).prop_map(|(text, byte)| Inner(text, byte));
        (
            "[ab]{0,3}",
            prop::option::of(any::<i32>()),
            prop::sample::select(vec![0.0, 1.5, f64::NAN]),
            prop::sample::select(vec!['x', 'é']),
            prop::collection::vec(shape, 0..4),
            prop::collection::btree_map("[abc]", prop::option::of(inner.clone()), 0..3),
            prop::option::of(inner.prop_map(Box::new)),
        )
            .prop_map(|(name, count, ratio, letter, tags, labels, inner)| Sample {
                name,
                count,
                ratio,
                letter,
                nothing: (),
                tags,
                labels,
                inner,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn json_written_over_any_tree_is_that_json(typed in any_json(), start in any_json()) {
            let (written, expected) = both(&typed, start);
            prop_assert_eq!(written, expected);
        }

        #[test]
        fn a_type_written_over_any_tree_is_what_to_value_makes(
            typed in sample(),
            other in sample(),
            start in any_json(),
        ) {
            // Over any tree; over its own writing (the usual case); over another value's.
            for start in [start, serde_json::to_value(&typed).unwrap(), serde_json::to_value(&other).unwrap()] {
                let (written, expected) = both(&typed, start);
                prop_assert_eq!(written, expected);
            }
        }
    }

    #[test]
    fn a_pod_keeps_what_is_right_and_loses_what_its_type_lacks() {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]},
        }))
        .unwrap();
        let written = serde_json::to_value(&pod).unwrap();
        let mut extra = written.clone();
        extra["spec"]["containers"][0]["bogus"] = json!(1);
        let mut longer = written.clone();
        longer["spec"]["containers"][0]["ports"]
            .as_array_mut()
            .unwrap()
            .push(json!({"containerPort": 81}));
        for start in [written.clone(), extra, longer, json!({}), json!([1])] {
            let (got, expected) = both(&pod, start);
            assert_eq!(got, expected);
        }
    }
}
