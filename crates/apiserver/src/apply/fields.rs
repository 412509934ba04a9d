//! What one manager owns, kept as the `FieldsV1` JSON it was read from until an operation needs
//! more than lookups. A write usually changes a few fields of an object that several managers
//! own: the entries of managers it does not touch are checked against the few changed paths
//! where they are, in the JSON, and written back as they were, rather than read whole into a
//! set and written out again.
//!
//! The JSON is this server's own writing (entries a client sends are read into sets first:
//! see [`ManagedFields::read_into_sets`](super::managed_fields::ManagedFields::read_into_sets)),
//! so a path's key in it is the one [`PathElement::to_fields_v1`] gives.

use std::borrow::Cow;

use serde_json::map::Entry;
use serde_json::{Map, Value};

use super::path::PathElement;
use super::set::Set;

/// A manager's fields.
#[derive(Debug, Clone)]
pub enum Fields {
    /// As stored: `FieldsV1` JSON.
    Encoded(Value),
    /// Read into a set (or made as one).
    Decoded(Set),
}

impl Default for Fields {
    fn default() -> Self {
        Self::Decoded(Set::new())
    }
}

impl PartialEq for Fields {
    fn eq(&self, other: &Self) -> bool {
        self.to_set() == other.to_set()
    }
}

impl Eq for Fields {}

impl From<Set> for Fields {
    fn from(set: Set) -> Self {
        Self::Decoded(set)
    }
}

impl Fields {
    /// Whether no path is owned.
    pub fn is_empty(&self) -> bool {
        match self {
            Self::Encoded(json) => json.as_object().is_none_or(Map::is_empty),
            Self::Decoded(set) => set.is_empty(),
        }
    }

    /// The set (read from the JSON if need be).
    pub fn to_set(&self) -> Cow<'_, Set> {
        match self {
            Self::Encoded(json) => Cow::Owned(Set::from_fields_v1(json).unwrap_or_default()),
            Self::Decoded(set) => Cow::Borrowed(set),
        }
    }

    /// The set, taken.
    pub fn into_set(self) -> Set {
        match self {
            Self::Encoded(json) => Set::from_fields_v1(&json).unwrap_or_default(),
            Self::Decoded(set) => set,
        }
    }

    /// The owned paths that are also in `other`.
    pub fn intersection(&self, other: &Set) -> Set {
        match self {
            Self::Encoded(Value::Object(json)) => json_intersection(json, other),
            Self::Encoded(_) => Set::new(),
            Self::Decoded(set) => set.intersection(other),
        }
    }

    /// Stops owning the paths of `other`.
    pub fn subtract(&mut self, other: &Set) {
        match self {
            Self::Encoded(Value::Object(json)) => json_subtract(json, other),
            Self::Encoded(_) => {}
            Self::Decoded(set) => set.subtract(other),
        }
    }

    /// Owns the paths of `other` too. A manager that writes again mostly adds a few paths to
    /// many: they are written into the JSON where they go, rather than the JSON read whole
    /// into a set and written out again.
    pub fn absorb(&mut self, other: Set) {
        match self {
            Self::Encoded(Value::Object(json)) => json_absorb(json, &other),
            Self::Encoded(_) => *self = Self::Decoded(other),
            Self::Decoded(set) => set.absorb(other),
        }
    }

    /// As `FieldsV1` JSON, taken.
    pub fn into_fields_v1(self) -> Value {
        match self {
            Self::Encoded(json) => json,
            Self::Decoded(set) => set.to_fields_v1(),
        }
    }

    /// As `FieldsV1` JSON.
    pub fn to_fields_v1(&self) -> Value {
        match self {
            Self::Encoded(json) => json.clone(),
            Self::Decoded(set) => set.to_fields_v1(),
        }
    }
}

/// Whether a node of `FieldsV1` marks its step as a member (`{}`, or `"."` among children).
fn is_member(node: &Map<String, Value>) -> bool {
    node.is_empty() || node.contains_key(".")
}

fn json_intersection(json: &Map<String, Value>, other: &Set) -> Set {
    let mut out = Set::new();
    let (members, children) = other.levels();
    for member in members {
        if let Some(Value::Object(node)) = json.get(&member.to_fields_v1())
            && is_member(node)
        {
            out.insert_member(member.clone());
        }
    }
    for (step, child) in children {
        if let Some(Value::Object(node)) = json.get(&step.to_fields_v1()) {
            out.insert_child(step.clone(), json_intersection(node, child));
        }
    }
    out
}

/// Adds the paths of `other` to `json`. A member's node is `{}`, or holds `"."` beside the
/// nodes under it; a node without `"."` and with nodes under it is only their parent.
fn json_absorb(json: &mut Map<String, Value>, other: &Set) {
    let (members, children) = other.levels();
    for member in members {
        match json.entry(member.to_fields_v1()) {
            Entry::Vacant(vacant) => {
                vacant.insert(Value::Object(Map::new()));
            }
            Entry::Occupied(mut occupied) => match occupied.get_mut() {
                Value::Object(node) if !is_member(node) => {
                    node.insert(".".into(), Value::Object(Map::new()));
                }
                Value::Object(_) => {}
                // Not this server's writing: the member replaces it.
                other => *other = Value::Object(Map::new()),
            },
        }
    }
    for (step, child) in children {
        if child.is_empty() {
            continue;
        }
        let node = match json.entry(step.to_fields_v1()) {
            Entry::Vacant(vacant) => vacant.insert(Value::Object(Map::new())),
            Entry::Occupied(occupied) => {
                let node = occupied.into_mut();
                match &mut *node {
                    // A member without children keeps its membership as `"."` once it has some.
                    Value::Object(existing) if existing.is_empty() => {
                        existing.insert(".".into(), Value::Object(Map::new()));
                    }
                    Value::Object(_) => {}
                    // Not this server's writing: the children replace it.
                    other => *other = Value::Object(Map::new()),
                }
                node
            }
        };
        if let Value::Object(node) = node {
            json_absorb(node, child);
        }
    }
}

fn json_subtract(json: &mut Map<String, Value>, other: &Set) {
    let (members, children) = other.levels();
    for member in members {
        let key = member.to_fields_v1();
        let Some(Value::Object(node)) = json.get_mut(&key) else {
            continue;
        };
        if node.is_empty() {
            json.remove(&key);
        } else {
            node.remove(".");
            if node.is_empty() {
                json.remove(&key);
            }
        }
    }
    for (step, child) in children {
        subtract_under(json, step, child);
    }
}

fn subtract_under(json: &mut Map<String, Value>, step: &PathElement, other: &Set) {
    let key = step.to_fields_v1();
    let Some(Value::Object(node)) = json.get_mut(&key) else {
        return;
    };
    let member = is_member(node);
    if node.is_empty() {
        // A member without children: nothing under it to remove.
        return;
    }
    json_subtract(node, other);
    match (node.len(), node.contains_key(".")) {
        // Only the member mark is left: a member without children.
        (1, true) => {
            node.clear();
        }
        (0, _) if !member => {
            json.remove(&key);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(steps: &[&str]) -> Vec<PathElement> {
        steps
            .iter()
            .map(|step| PathElement::from_fields_v1(step).unwrap())
            .collect()
    }

    fn fields() -> Value {
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:team": {}}},
            "f:spec": {
                "f:containers": {
                    "k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}},
                },
                "f:replicas": {},
            },
        })
    }

    #[test]
    fn lookups_in_the_json_agree_with_the_set() {
        let encoded = Fields::Encoded(fields());
        let decoded = Fields::Decoded(Set::from_fields_v1(&fields()).unwrap());
        let mut probe = Set::new();
        for steps in [
            &["f:spec", "f:replicas"][..],
            &["f:spec", "f:containers", r#"k:{"name":"web"}"#],
            &["f:spec", "f:containers", r#"k:{"name":"web"}"#, "f:image"],
            &["f:spec", "f:containers", r#"k:{"name":"api"}"#],
            &["f:metadata", "f:labels"],
            &["f:metadata", "f:labels", "f:team"],
            &["f:spec", "f:paused"],
        ] {
            probe.insert(&path(steps));
        }
        assert_eq!(encoded.intersection(&probe), decoded.intersection(&probe));
        let mut encoded_less = encoded.clone();
        let mut decoded_less = decoded.clone();
        encoded_less.subtract(&probe);
        decoded_less.subtract(&probe);
        assert_eq!(encoded_less.to_set(), decoded_less.to_set());
        assert_eq!(encoded_less.to_fields_v1(), decoded_less.to_fields_v1());
        assert_eq!(
            encoded_less.to_fields_v1(),
            json!({
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {"f:name": {}}}},
            })
        );
        let mut everything = encoded.clone();
        everything.subtract(&decoded.to_set());
        assert!(everything.is_empty());
    }

    /// Paths of fields, list items by key and set items, a few of each, so that two sets
    /// share some paths and prefixes.
    fn arbitrary_paths() -> impl proptest::strategy::Strategy<Value = Vec<Vec<PathElement>>> {
        use proptest::prelude::*;
        let step = prop_oneof![
            prop::sample::select(vec!["a", "b", "c"]).prop_map(PathElement::field),
            prop::sample::select(vec!["x", "y"]).prop_map(|name| {
                PathElement::from_fields_v1(&format!(r#"k:{{"name":"{name}"}}"#)).unwrap()
            }),
            (0u8..3).prop_map(|value| PathElement::Value(json!(value))),
        ];
        prop::collection::vec(prop::collection::vec(step, 1..4), 0..8)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn absorbing_into_the_json_writes_the_union(
            first in arbitrary_paths(),
            second in arbitrary_paths(),
        ) {
            let set_of = |paths: &[Vec<PathElement>]| {
                let mut set = Set::new();
                for path in paths {
                    set.insert(path);
                }
                set
            };
            let (first, second) = (set_of(&first), set_of(&second));
            let mut encoded = Fields::Encoded(first.to_fields_v1());
            encoded.absorb(second.clone());
            proptest::prop_assert!(matches!(encoded, Fields::Encoded(_)));
            proptest::prop_assert_eq!(
                encoded.to_fields_v1(),
                first.union(&second).to_fields_v1()
            );
        }
    }
}
