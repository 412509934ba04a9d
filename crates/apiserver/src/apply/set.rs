//! Sets of field paths, as structured-merge-diff keeps what a manager owns: the paths that are
//! members, and under each step the set of paths that continue from it. A path can be a member
//! and have children (an associative list item the manager owns, with fields of it).
//!
//! Each level is two sorted vectors (members; steps with their non-empty sets), so that set
//! operations are merges of sorted runs and a set costs one allocation per level, as
//! structured-merge-diff keeps them.
//!
//! In `managedFields` a set is `FieldsV1` JSON: one key per step, `{}` for a member without
//! children, its children's object otherwise, with `".": {}` when it is a member too.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::path::{Path, PathElement};

/// A set of paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    /// Sorted, without duplicates.
    members: Vec<PathElement>,
    /// Sorted by step, without duplicates; no set is empty.
    children: Vec<(PathElement, Set)>,
}

/// An element of one or both of two sorted runs being merged.
enum Merged<A, B> {
    Left(A),
    Right(B),
    Both(A, B),
}

/// Merges two sorted runs by their keys, handing each element (or pair of equal ones) to `on`.
fn merge_runs<A, B>(
    left: impl IntoIterator<Item = A>,
    right: impl IntoIterator<Item = B>,
    key_left: impl Fn(&A) -> &PathElement,
    key_right: impl Fn(&B) -> &PathElement,
    mut on: impl FnMut(Merged<A, B>),
) {
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let order = match (left.peek(), right.peek()) {
            (Some(a), Some(b)) => key_left(a).cmp(key_right(b)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => return,
        };
        let merged = match order {
            Ordering::Less => left.next().map(Merged::Left),
            Ordering::Greater => right.next().map(Merged::Right),
            Ordering::Equal => left
                .next()
                .zip(right.next())
                .map(|(a, b)| Merged::Both(a, b)),
        };
        if let Some(merged) = merged {
            on(merged);
        }
    }
}

impl Set {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether it holds no path.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    fn child_index(&self, step: &PathElement) -> Result<usize, usize> {
        self.children.binary_search_by(|(mine, _)| mine.cmp(step))
    }

    /// Adds `path` (the empty path is not a member of any set).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => self.insert_member(last.clone()),
            [first, rest @ ..] => {
                let mut child = Set::new();
                child.insert(rest);
                self.insert_child(first.clone(), child);
            }
        }
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.binary_search(last).is_ok(),
            [first, rest @ ..] => self.with_prefix(first).is_some_and(|child| child.has(rest)),
        }
    }

    /// The paths under `step`, without it.
    pub fn with_prefix(&self, step: &PathElement) -> Option<&Set> {
        self.child_index(step)
            .ok()
            .map(|index| &self.children[index].1)
    }

    /// Adds `step` as a member of this level.
    pub fn insert_member(&mut self, step: PathElement) {
        self.insert_new_member(step);
    }

    /// Adds `step` as a member of this level; `false` if it was one already.
    pub fn insert_new_member(&mut self, step: PathElement) -> bool {
        // Walkers mostly add in order: the end first.
        if self.members.last().is_none_or(|last| *last < step) {
            self.members.push(step);
            return true;
        }
        match self.members.binary_search(&step) {
            Ok(_) => false,
            Err(index) => {
                self.members.insert(index, step);
                true
            }
        }
    }

    /// Adds the paths of `child` under `step`.
    pub fn insert_child(&mut self, step: PathElement, child: Set) {
        if child.is_empty() {
            return;
        }
        if self.children.last().is_none_or(|(last, _)| *last < step) {
            self.children.push((step, child));
            return;
        }
        match self.child_index(&step) {
            Ok(index) => self.children[index].1.absorb(child),
            Err(index) => self.children.insert(index, (step, child)),
        }
    }

    /// Every path of either.
    #[must_use]
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.absorb(other.clone());
        out
    }

    /// Adds every path of `other`, taking it (what building a set from its parts does).
    pub fn absorb(&mut self, other: Set) {
        if self.is_empty() {
            *self = other;
            return;
        }
        if other.is_empty() {
            return;
        }
        let mut members = Vec::with_capacity(self.members.len() + other.members.len());
        merge_runs(
            std::mem::take(&mut self.members),
            other.members,
            |a| a,
            |b| b,
            |merged| match merged {
                Merged::Left(a) | Merged::Right(a) | Merged::Both(a, _) => members.push(a),
            },
        );
        self.members = members;
        let mut children = Vec::with_capacity(self.children.len() + other.children.len());
        merge_runs(
            std::mem::take(&mut self.children),
            other.children,
            |a| &a.0,
            |b| &b.0,
            |merged| match merged {
                Merged::Left(child) | Merged::Right(child) => children.push(child),
                Merged::Both((step, mut mine), (_, theirs)) => {
                    mine.absorb(theirs);
                    children.push((step, mine));
                }
            },
        );
        self.children = children;
    }

    /// Removes the members of `other`, level by level, in place (see
    /// [`difference`](Set::difference)).
    pub fn subtract(&mut self, other: &Set) {
        self.subtract_by(other, false);
    }

    /// Removes the members of `other` and everything under them, in place (see
    /// [`recursive_difference`](Set::recursive_difference)).
    pub fn subtract_recursive(&mut self, other: &Set) {
        self.subtract_by(other, true);
    }

    fn subtract_by(&mut self, other: &Set, recursive: bool) {
        if other.is_empty() || self.is_empty() {
            return;
        }
        if !other.members.is_empty() {
            self.members
                .retain(|member| other.members.binary_search(member).is_err());
        }
        if !recursive && other.children.is_empty() {
            return;
        }
        self.children.retain_mut(|(step, child)| {
            if recursive && other.members.binary_search(step).is_ok() {
                return false;
            }
            if let Some(theirs) = other.with_prefix(step) {
                child.subtract_by(theirs, recursive);
            }
            !child.is_empty()
        });
    }

    /// The paths of both.
    #[must_use]
    pub fn intersection(&self, other: &Set) -> Set {
        let mut out = Set::new();
        merge_runs(
            &self.members,
            &other.members,
            |a| a,
            |b| b,
            |merged| {
                if let Merged::Both(a, _) = merged {
                    out.members.push(a.clone());
                }
            },
        );
        merge_runs(
            &self.children,
            &other.children,
            |a| &a.0,
            |b| &b.0,
            |merged| {
                if let Merged::Both((step, mine), (_, theirs)) = merged {
                    let common = mine.intersection(theirs);
                    if !common.is_empty() {
                        out.children.push((step.clone(), common));
                    }
                }
            },
        );
        out
    }

    /// The paths of this set that are not members of `other` (the children of a step are
    /// compared with `other`'s children of the same step, whether or not the step itself is a
    /// member of `other`).
    #[must_use]
    pub fn difference(&self, other: &Set) -> Set {
        self.difference_by(other, false)
    }

    /// The paths of this set that neither are members of `other` nor continue from one: a
    /// member of `other` removes its whole subtree (how endpoints ignore reset fields).
    #[must_use]
    pub fn recursive_difference(&self, other: &Set) -> Set {
        self.difference_by(other, true)
    }

    fn difference_by(&self, other: &Set, recursive: bool) -> Set {
        if other.is_empty() {
            return self.clone();
        }
        let mut out = Set::new();
        merge_runs(
            &self.members,
            &other.members,
            |a| a,
            |b| b,
            |merged| {
                if let Merged::Left(a) = merged {
                    out.members.push(a.clone());
                }
            },
        );
        for (step, child) in &self.children {
            if recursive && other.members.binary_search(step).is_ok() {
                continue;
            }
            let rest = match other.with_prefix(step) {
                Some(theirs) => child.difference_by(theirs, recursive),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.push((step.clone(), rest));
            }
        }
        out
    }

    /// Every member path, in structured-merge-diff's order (the one conflicts are reported
    /// in): this level's members, then each child's paths, steps in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for step in &self.members {
            prefix.push(step.clone());
            out.push(prefix.clone());
            prefix.pop();
        }
        for (step, child) in &self.children {
            prefix.push(step.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The members and children of this level (for walkers that follow a schema).
    pub(crate) fn levels(&self) -> (&[PathElement], &[(PathElement, Set)]) {
        (&self.members, &self.children)
    }

    /// The set as `FieldsV1` JSON.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1_contents(false))
    }

    fn fields_v1_contents(&self, include_self: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if include_self {
            out.insert(".".into(), Value::Object(Map::new()));
        }
        let mut children = self.children.iter().peekable();
        for member in &self.members {
            while let Some((step, child)) = children.next_if(|(step, _)| step < member) {
                out.insert(
                    step.to_fields_v1(),
                    Value::Object(child.fields_v1_contents(false)),
                );
            }
            match children.next_if(|(step, _)| step == member) {
                Some((step, child)) => out.insert(
                    step.to_fields_v1(),
                    Value::Object(child.fields_v1_contents(true)),
                ),
                None => out.insert(member.to_fields_v1(), Value::Object(Map::new())),
            };
        }
        for (step, child) in children {
            out.insert(
                step.to_fields_v1(),
                Value::Object(child.fields_v1_contents(false)),
            );
        }
        out
    }

    /// Whether `json` is what [`to_fields_v1`](Self::to_fields_v1) writes for this set, found
    /// without writing it: a manager that applies the same fields again (the usual apply)
    /// keeps its entry as it was.
    ///
    /// Never `true` for JSON that differs. Two steps whose texts coincide would be written as
    /// one key; the answer for such a set is `false`, and its caller then writes and compares.
    pub fn matches_fields_v1(&self, json: &Value) -> bool {
        let mut key = Vec::new();
        json.as_object()
            .is_some_and(|level| self.level_matches(level, false, &mut key))
    }

    /// Whether `level` is this set's level as `fields_v1_contents(include_self)` writes it.
    fn level_matches(
        &self,
        level: &Map<String, Value>,
        include_self: bool,
        key: &mut Vec<u8>,
    ) -> bool {
        let is_empty_object =
            |value: Option<&Value>| value.and_then(Value::as_object).is_some_and(Map::is_empty);
        if include_self && !is_empty_object(level.get(".")) {
            return false;
        }
        let mut keys = usize::from(include_self);
        let mut matches = true;
        merge_runs(
            &self.members,
            &self.children,
            |member| *member,
            |(step, _)| step,
            |merged| {
                keys += 1;
                if !matches {
                    return;
                }
                let (step, child, include_self) = match merged {
                    Merged::Left(member) => (member, None, false),
                    Merged::Right((step, child)) => (step, Some(child), false),
                    Merged::Both(_, (step, child)) => (step, Some(child), true),
                };
                key.clear();
                step.write_fields_v1(key);
                let entry = std::str::from_utf8(key).ok().and_then(|key| level.get(key));
                matches = match child {
                    None => is_empty_object(entry),
                    Some(child) => entry
                        .and_then(Value::as_object)
                        .is_some_and(|inner| child.level_matches(inner, include_self, key)),
                };
            },
        );
        matches && keys == level.len()
    }

    /// Reads `FieldsV1` JSON; `None` if it is not an object of objects.
    pub fn from_fields_v1(fields: &Value) -> Option<Set> {
        let (set, _) = Self::read_level(fields)?;
        Some(set)
    }

    /// A level: its set, and whether it holds `"."` (or nothing at all: a member).
    fn read_level(fields: &Value) -> Option<(Set, bool)> {
        let object = fields.as_object()?;
        let mut set = Set::new();
        let mut is_member = object.is_empty();
        for (key, value) in object {
            if key == "." {
                is_member = true;
                continue;
            }
            let Some(step) = PathElement::from_fields_v1(key) else {
                continue;
            };
            let (grandchildren, child_is_member) = Self::read_level(value)?;
            if child_is_member {
                set.insert_member(step.clone());
            }
            set.insert_child(step, grandchildren);
        }
        Some((set, is_member))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(steps: &[&str]) -> Path {
        steps
            .iter()
            .map(|step| PathElement::from_fields_v1(step).unwrap())
            .collect()
    }

    /// A Deployment's fields as FieldsV1: a label, a container by its key with two of its
    /// fields, and the replicas.
    fn deployment_fields() -> Value {
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:containers": {
                    "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}},
                },
                "f:replicas": {},
            },
        })
    }

    #[test]
    fn fields_v1_round_trips_and_marks_members_with_children() {
        let fields = deployment_fields();
        let set = Set::from_fields_v1(&fields).unwrap();
        assert!(set.has(&path(&["f:spec", "f:replicas"])));
        assert!(set.has(&path(&["f:spec", "f:containers", r#"k:{"name":"nginx"}"#])));
        assert!(set.has(&path(&[
            "f:spec",
            "f:containers",
            r#"k:{"name":"nginx"}"#,
            "f:image"
        ])));
        assert!(!set.has(&path(&["f:spec"])));
        assert_eq!(set.to_fields_v1(), fields);
        assert_eq!(set.paths().len(), 5);
    }

    #[test]
    fn matching_fields_v1_is_equality_with_what_would_be_written() {
        let fields = deployment_fields();
        let set = Set::from_fields_v1(&fields).unwrap();
        assert!(set.matches_fields_v1(&fields));
        let mut other = fields.clone();
        other["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
            .as_object_mut()
            .unwrap()
            .remove(".");
        assert!(
            !set.matches_fields_v1(&other),
            "a member with children lost its mark"
        );
        let mut other = fields.clone();
        other["f:spec"]["f:paused"] = json!({});
        assert!(!set.matches_fields_v1(&other), "an extra field");
        let mut other = fields.clone();
        other["f:spec"]["f:replicas"] = json!({"f:x": {}});
        assert!(
            !set.matches_fields_v1(&other),
            "a member turned into a parent"
        );
        assert!(!set.matches_fields_v1(&json!({})));
        assert!(!set.matches_fields_v1(&json!(null)));
        assert!(Set::new().matches_fields_v1(&json!({})));
    }

    /// Random sets of paths of up to three steps of every kind, drawn from a few names so
    /// that sets overlap.
    fn arbitrary_set() -> impl proptest::strategy::Strategy<Value = Set> {
        use proptest::prelude::*;
        let step = prop_oneof![
            prop::sample::select(vec!["a", "b", "c"]).prop_map(PathElement::field),
            (0..3usize).prop_map(PathElement::Index),
            prop::sample::select(vec!["x", "y"]).prop_map(|value| PathElement::Value(json!(value))),
            prop::sample::select(vec!["x", "y"]).prop_map(|value| {
                PathElement::Key(
                    vec![(super::super::path::Name::from("name"), json!(value))].into(),
                )
            }),
        ];
        prop::collection::vec(prop::collection::vec(step, 1..4), 0..8).prop_map(|paths| {
            let mut set = Set::new();
            for path in paths {
                set.insert(&path);
            }
            set
        })
    }

    proptest::proptest! {
        #[test]
        fn matches_fields_v1_agrees_with_writing_the_set(a in arbitrary_set(), b in arbitrary_set()) {
            proptest::prop_assert!(a.matches_fields_v1(&a.to_fields_v1()));
            proptest::prop_assert_eq!(a.matches_fields_v1(&b.to_fields_v1()), a.to_fields_v1() == b.to_fields_v1());
        }

        #[test]
        fn subtracting_in_place_agrees_with_the_differences(a in arbitrary_set(), b in arbitrary_set()) {
            let mut level = a.clone();
            level.subtract(&b);
            proptest::prop_assert_eq!(&level, &a.difference(&b));
            let mut recursive = a.clone();
            recursive.subtract_recursive(&b);
            proptest::prop_assert_eq!(&recursive, &a.recursive_difference(&b));
        }
    }

    #[test]
    fn union_intersection_difference() {
        let mut a = Set::new();
        a.insert(&path(&["f:spec", "f:a"]));
        a.insert(&path(&["f:spec", "f:b"]));
        let mut b = Set::new();
        b.insert(&path(&["f:spec", "f:b"]));
        b.insert(&path(&["f:spec", "f:c"]));
        assert_eq!(a.union(&b).paths().len(), 3);
        assert_eq!(a.intersection(&b).paths(), vec![path(&["f:spec", "f:b"])]);
        assert_eq!(a.difference(&b).paths(), vec![path(&["f:spec", "f:a"])]);
        assert!(a.difference(&a).is_empty());
    }
}
