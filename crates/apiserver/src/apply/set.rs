//! Sets of field paths, as structured-merge-diff keeps what a manager owns: the paths that are
//! members, and under each step the set of paths that continue from it. A path can be a member
//! and have children (an associative list item the manager owns, with fields of it).
//!
//! In `managedFields` a set is `FieldsV1` JSON: one key per step, `{}` for a member without
//! children, its children's object otherwise, with `".": {}` when it is a member too.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::path::{Path, PathElement};

/// A set of paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether it holds no path.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// Adds `path` (the empty path is not a member of any set).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self
                .children
                .get(first)
                .is_some_and(|child| child.has(rest)),
        }
    }

    /// The paths under `step`, without it.
    pub fn with_prefix(&self, step: &PathElement) -> Option<&Set> {
        self.children.get(step).filter(|child| !child.is_empty())
    }

    /// Every path of either.
    #[must_use]
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (step, child) in &other.children {
            let merged = match out.children.get(step) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(step.clone(), merged);
        }
        out
    }

    /// The paths of both.
    #[must_use]
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(step, child)| {
                let common = child.intersection(other.children.get(step)?);
                (!common.is_empty()).then(|| (step.clone(), common))
            })
            .collect();
        Set { members, children }
    }

    /// The paths of this set that are not members of `other` (the children of a step are
    /// compared with `other`'s children of the same step, whether or not the step itself is a
    /// member of `other`).
    #[must_use]
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(step, child)| {
                let rest = match other.children.get(step) {
                    Some(theirs) => child.difference(theirs),
                    None => child.clone(),
                };
                (!rest.is_empty()).then(|| (step.clone(), rest))
            })
            .collect();
        Set { members, children }
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

    /// The paths of this set that neither are members of `other` nor continue from one: a
    /// member of `other` removes its whole subtree (how endpoints ignore reset fields).
    #[must_use]
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(step, _)| !other.members.contains(step))
            .filter_map(|(step, child)| {
                let rest = match other.children.get(step) {
                    Some(theirs) => child.recursive_difference(theirs),
                    None => child.clone(),
                };
                (!rest.is_empty()).then(|| (step.clone(), rest))
            })
            .collect();
        Set { members, children }
    }

    /// The members and children of this level (for walkers that follow a schema).
    pub(crate) fn levels(&self) -> (&BTreeSet<PathElement>, &BTreeMap<PathElement, Set>) {
        (&self.members, &self.children)
    }

    /// Adds `step` as a member of this level.
    pub(crate) fn insert_member(&mut self, step: PathElement) {
        self.members.insert(step);
    }

    /// The set of paths under `step`, made if absent.
    pub(crate) fn child_mut(&mut self, step: PathElement) -> &mut Set {
        self.children.entry(step).or_default()
    }

    /// The set as `FieldsV1` JSON.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1_contents(false))
    }

    fn fields_v1_contents(&self, include_self: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if include_self && !(self.members.is_empty() && self.children.is_empty()) {
            out.insert(".".into(), Value::Object(Map::new()));
        }
        let mut steps: BTreeSet<&PathElement> = self.members.iter().collect();
        steps.extend(self.children.keys());
        for step in steps {
            let member = self.members.contains(step);
            let value = match self.children.get(step).filter(|child| !child.is_empty()) {
                Some(child) => Value::Object(child.fields_v1_contents(member)),
                None if member => Value::Object(Map::new()),
                // An emptied level: nothing under this step.
                None => continue,
            };
            out.insert(step.to_fields_v1(), value);
        }
        out
    }

    /// Reads `FieldsV1` JSON; `None` if it is not an object of objects.
    pub fn from_fields_v1(fields: &Value) -> Option<Set> {
        let (set, _) = Self::read_level(fields)?;
        Some(set.unwrap_or_default())
    }

    /// A level: its set (`None` when it has no steps) and whether it holds `"."`.
    fn read_level(fields: &Value) -> Option<(Option<Set>, bool)> {
        let object = fields.as_object()?;
        let mut set: Option<Set> = None;
        let mut is_member = false;
        for (key, value) in object {
            if key == "." {
                is_member = true;
                continue;
            }
            let Some(step) = PathElement::from_fields_v1(key) else {
                continue;
            };
            let (grandchildren, child_is_member) = Self::read_level(value)?;
            let level = set.get_or_insert_with(Set::default);
            if child_is_member {
                level.members.insert(step.clone());
            }
            if let Some(grandchildren) = grandchildren {
                level.children.insert(step, grandchildren);
            }
        }
        if set.is_none() {
            is_member = true;
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

    #[test]
    fn fields_v1_round_trips_and_marks_members_with_children() {
        let fields = json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:containers": {
                    "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}},
                },
                "f:replicas": {},
            },
        });
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
