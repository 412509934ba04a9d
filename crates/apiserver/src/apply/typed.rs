//! The operations of structured-merge-diff on an object and its type: the set of fields it
//! holds, the merge of an applied configuration into it, the fields that differ between two of
//! its states, and the removal of a set of fields.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::path::{Path, PathElement};
use super::schema::{ListKind, Node, Type};
use super::set::Set;

/// An object that does not fit its type: where (as conflict messages write paths; empty for
/// the object itself) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeError {
    /// Where, as conflict messages write paths.
    pub path: String,
    /// What.
    pub message: String,
}

impl std::fmt::Display for TypeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for TypeError {}

fn error(path: &[PathElement], message: impl Into<String>) -> TypeError {
    TypeError {
        path: super::path::path_text(path),
        message: message.into(),
    }
}

/// The step that names `item` in an associative list of `kind`.
pub(super) fn item_step(
    kind: &ListKind,
    item_type: &Type,
    item: &Value,
    path: &[PathElement],
) -> Result<PathElement, TypeError> {
    match kind {
        ListKind::Map(keys) => {
            let Value::Object(fields) = item else {
                return Err(error(
                    path,
                    "associative list with keys may not have non-map elements",
                ));
            };
            let mut key: Vec<(String, Value)> = keys
                .iter()
                .filter_map(|name| {
                    let value = fields
                        .get(name)
                        .cloned()
                        .or_else(|| item_type.key_default(name))?;
                    Some((name.clone(), value))
                })
                .collect();
            if key.is_empty() && !keys.is_empty() {
                return Err(error(
                    path,
                    format!(
                        "associative list with keys has an element that omits all key fields {keys:?} (and doesn't have default values for any key fields)"
                    ),
                ));
            }
            key.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(key))
        }
        _ => match item {
            Value::Object(_) => Err(error(
                path,
                "associative list without keys has an element that's a map type",
            )),
            Value::Array(_) => Err(error(
                path,
                "not supported: associative list with lists as elements",
            )),
            Value::Null => Err(error(
                path,
                "associative list without keys has an element that's an explicit null",
            )),
            scalar => Ok(PathElement::Value(scalar.clone())),
        },
    }
}

/// The fields `value` holds: its leaves, the items of its associative lists, its atomic parts,
/// and the fields of its maps that are not declared struct fields or that hold nothing.
pub fn to_field_set(value: &Value, ty: &Type) -> Result<Set, TypeError> {
    let mut set = Set::new();
    let mut path = Vec::new();
    field_set_walk(value, ty, &mut path, &mut set)?;
    Ok(set)
}

fn field_set_walk(
    value: &Value,
    ty: &Type,
    path: &mut Path,
    set: &mut Set,
) -> Result<(), TypeError> {
    match ty.node(value) {
        Node::Leaf => set.insert(path),
        Node::Granular => {
            let Value::Object(fields) = value else {
                set.insert(path);
                return Ok(());
            };
            for (name, child) in fields {
                let (child_type, declared) = ty.field(name);
                path.push(PathElement::Field(name.clone()));
                field_set_walk(child, &child_type, path, set)?;
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if empty || !declared {
                    set.insert(path);
                }
                path.pop();
            }
        }
        Node::Associative(kind) => {
            let Value::Array(items) = value else {
                set.insert(path);
                return Ok(());
            };
            let item_type = ty.item();
            let mut seen: BTreeMap<PathElement, usize> = BTreeMap::new();
            let mut steps = Vec::with_capacity(items.len());
            for item in items {
                let step = item_step(&kind, &item_type, item, path)?;
                *seen.entry(step.clone()).or_default() += 1;
                steps.push(step);
            }
            for (item, step) in items.iter().zip(steps) {
                path.push(step.clone());
                if seen[&step] > 1 {
                    // A duplicated item is owned whole.
                    set.insert(path);
                } else {
                    field_set_walk(item, &item_type, path, set)?;
                    set.insert(path);
                }
                path.pop();
            }
        }
    }
    Ok(())
}

/// `config` merged into `live`: what `config` holds wins; maps and structs merge field by
/// field and associative lists item by item, in an order that keeps `config`'s order for its
/// items and `live`'s for the others.
pub fn merge(
    live: Option<&Value>,
    config: Option<&Value>,
    ty: &Type,
) -> Result<Option<Value>, TypeError> {
    let mut path = Vec::new();
    merge_walk(live, config, ty, &mut path)
}

fn merge_walk(
    live: Option<&Value>,
    config: Option<&Value>,
    ty: &Type,
    path: &mut Path,
) -> Result<Option<Value>, TypeError> {
    let (Some(live_value), Some(config_value)) = (live, config) else {
        return Ok(config.or(live).cloned());
    };
    let node = ty.node(config_value);
    let live_node = ty.node(live_value);
    let same_shape = std::mem::discriminant(&node) == std::mem::discriminant(&live_node);
    match node {
        _ if !same_shape => Ok(Some(config_value.clone())),
        Node::Leaf => Ok(Some(config_value.clone())),
        Node::Granular => {
            let (Value::Object(left), Value::Object(right)) = (live_value, config_value) else {
                return Ok(Some(config_value.clone()));
            };
            if left.is_empty() && right.is_empty() {
                return Ok(Some(config_value.clone()));
            }
            let mut out = Map::new();
            let mut names: Vec<&String> = left.keys().chain(right.keys()).collect();
            names.sort();
            names.dedup();
            for name in names {
                let (child_type, _) = ty.field(name);
                path.push(PathElement::Field(name.clone()));
                let merged = merge_walk(left.get(name), right.get(name), &child_type, path)?;
                path.pop();
                if let Some(merged) = merged {
                    out.insert(name.clone(), merged);
                }
            }
            Ok(Some(Value::Object(out)))
        }
        Node::Associative(kind) => {
            let (Value::Array(left), Value::Array(right)) = (live_value, config_value) else {
                return Ok(Some(config_value.clone()));
            };
            if left.is_empty() && right.is_empty() {
                return Ok(Some(config_value.clone()));
            }
            merge_list(left, right, &kind, ty, path).map(|items| Some(Value::Array(items)))
        }
    }
}

/// Merges two associative lists as structured-merge-diff orders them: items both have come in
/// `right`'s order, each item only `left` has stays after the shared item it followed, and
/// each item only `right` has comes where `right` has it.
fn merge_list(
    left: &[Value],
    right: &[Value],
    kind: &ListKind,
    ty: &Type,
    path: &mut Path,
) -> Result<Vec<Value>, TypeError> {
    let item_type = ty.item();
    let mut right_steps = Vec::with_capacity(right.len());
    let mut right_items: BTreeMap<PathElement, &Value> = BTreeMap::new();
    for item in right {
        let step = item_step(kind, &item_type, item, path)?;
        if right_items.insert(step.clone(), item).is_some() {
            return Err(error(path, format!("duplicate entries for key {step}")));
        }
        right_steps.push(step);
    }
    let mut left_steps = Vec::with_capacity(left.len());
    let mut left_items: BTreeMap<PathElement, &Value> = BTreeMap::new();
    for item in left {
        let step = item_step(kind, &item_type, item, path)?;
        left_items.entry(step.clone()).or_insert(item);
        left_steps.push(step);
    }
    let mut shared = right_steps
        .iter()
        .filter(|step| left_items.contains_key(step))
        .cloned()
        .collect::<std::collections::VecDeque<_>>();
    let mut next_shared = shared.pop_front();
    let mut merged_right: std::collections::BTreeSet<PathElement> = Default::default();
    let mut out = Vec::with_capacity(left.len().max(right.len()));
    let (mut l, mut r) = (0, 0);
    let mut push =
        |step: &PathElement, lhs: Option<&Value>, rhs: Option<&Value>, path: &mut Path| {
            path.push(step.clone());
            let merged = merge_walk(lhs, rhs, &item_type, path);
            path.pop();
            merged.map(|merged| {
                if let Some(merged) = merged {
                    out.push(merged);
                }
            })
        };
    while l < left_steps.len() || r < right_steps.len() {
        if l < left_steps.len() && r < right_steps.len() {
            let step = &left_steps[l];
            if *step == right_steps[r] {
                merged_right.insert(step.clone());
                push(
                    step,
                    left_items.get(step).copied(),
                    right_items.get(step).copied(),
                    path,
                )?;
                l += 1;
                r += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if right_items.contains_key(step)
                && next_shared.as_ref().is_some_and(|next| next != step)
            {
                l += 1;
                continue;
            }
        }
        if l < left_steps.len() {
            let step = &left_steps[l];
            if !right_items.contains_key(step) {
                push(step, left_items.get(step).copied(), None, path)?;
                l += 1;
                continue;
            } else if merged_right.contains(step) {
                l += 1;
            }
        }
        if r < right_steps.len() {
            let step = right_steps[r].clone();
            merged_right.insert(step.clone());
            push(
                &step,
                left_items.get(&step).copied(),
                right_items.get(&step).copied(),
                path,
            )?;
            r += 1;
            if next_shared.as_ref() == Some(&step) {
                next_shared = shared.pop_front();
            }
        }
    }
    Ok(out)
}

/// The fields that differ between two states of an object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Fields only the new state has.
    pub added: Set,
    /// Fields both have, with other values.
    pub modified: Set,
    /// Fields only the old state has.
    pub removed: Set,
}

/// What changed from `old` to `new`.
pub fn compare(
    old: Option<&Value>,
    new: Option<&Value>,
    ty: &Type,
) -> Result<Comparison, TypeError> {
    let mut comparison = Comparison::default();
    let mut path = Vec::new();
    if old.is_some() || new.is_some() {
        compare_walk(old, new, ty, &mut path, &mut comparison)?;
    }
    Ok(comparison)
}

fn compare_walk(
    old: Option<&Value>,
    new: Option<&Value>,
    ty: &Type,
    path: &mut Path,
    comparison: &mut Comparison,
) -> Result<(), TypeError> {
    let leaf = |comparison: &mut Comparison, path: &Path| match (old, new) {
        (None, _) => comparison.added.insert(path),
        (_, None) => comparison.removed.insert(path),
        (Some(old), Some(new)) if old != new => comparison.modified.insert(path),
        _ => {}
    };
    let probe = new.or(old).unwrap_or(&Value::Null);
    let node = ty.node(probe);
    let same_shape = match (old, new) {
        (Some(old), Some(new)) => {
            std::mem::discriminant(&ty.node(old)) == std::mem::discriminant(&ty.node(new))
        }
        _ => true,
    };
    let empty = |value: Option<&Value>| match value {
        None => true,
        Some(Value::Object(fields)) => fields.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        Some(_) => false,
    };
    match node {
        _ if !same_shape => leaf(comparison, path),
        Node::Leaf => leaf(comparison, path),
        _ if empty(old) && empty(new) => leaf(comparison, path),
        Node::Granular => {
            let left = old.and_then(Value::as_object);
            let right = new.and_then(Value::as_object);
            let mut names: Vec<&String> = left
                .into_iter()
                .flat_map(|fields| fields.keys())
                .chain(right.into_iter().flat_map(|fields| fields.keys()))
                .collect();
            names.sort();
            names.dedup();
            for name in names {
                let (child_type, _) = ty.field(name);
                path.push(PathElement::Field(name.clone()));
                compare_walk(
                    left.and_then(|fields| fields.get(name)),
                    right.and_then(|fields| fields.get(name)),
                    &child_type,
                    path,
                    comparison,
                )?;
                path.pop();
            }
            node_change(old, new, path, comparison);
        }
        Node::Associative(kind) => {
            let item_type = ty.item();
            let mut order: Vec<PathElement> = Vec::new();
            let mut left: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
            for item in old.and_then(Value::as_array).into_iter().flatten() {
                let step = item_step(&kind, &item_type, item, path)?;
                let entry = left.entry(step.clone()).or_default();
                if entry.is_empty() {
                    order.push(step);
                }
                entry.push(item);
            }
            let mut right: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
            for item in new.and_then(Value::as_array).into_iter().flatten() {
                let step = item_step(&kind, &item_type, item, path)?;
                let entry = right.entry(step.clone()).or_default();
                if entry.is_empty() && !left.contains_key(&step) {
                    order.push(step);
                }
                entry.push(item);
            }
            for step in order {
                let old_items = left.get(&step).cloned().unwrap_or_default();
                let new_items = right.get(&step).cloned().unwrap_or_default();
                path.push(step);
                match (old_items.len(), new_items.len()) {
                    (0..=1, 0..=1) => compare_walk(
                        old_items.first().copied(),
                        new_items.first().copied(),
                        &item_type,
                        path,
                        comparison,
                    )?,
                    (_, 2..) if old_items.len() >= 2 => {
                        if old_items != new_items {
                            comparison.modified.insert(path);
                        }
                    }
                    (2.., _) => {
                        if let Some(first) = new_items.first() {
                            compare_walk(None, Some(first), &item_type, path, comparison)?;
                        }
                        comparison.removed.insert(path);
                    }
                    _ => {
                        if let Some(first) = old_items.first() {
                            compare_walk(Some(first), None, &item_type, path, comparison)?;
                        }
                        comparison.added.insert(path);
                    }
                }
                path.pop();
            }
            node_change(old, new, path, comparison);
        }
    }
    Ok(())
}

/// A map or list that appears or goes is added or removed itself, besides what it holds.
fn node_change(old: Option<&Value>, new: Option<&Value>, path: &Path, comparison: &mut Comparison) {
    match (old, new) {
        (None, Some(_)) => comparison.added.insert(path),
        (Some(_), None) => comparison.removed.insert(path),
        _ => {}
    }
}

/// `value` without the fields of `remove`; `None` when nothing is left of it.
pub fn remove(value: &Value, remove: &Set, ty: &Type) -> Result<Option<Value>, TypeError> {
    let mut path = Vec::new();
    remove_walk(value, remove, ty, &mut path)
}

fn remove_walk(
    value: &Value,
    remove: &Set,
    ty: &Type,
    path: &mut Path,
) -> Result<Option<Value>, TypeError> {
    match (ty.node(value), value) {
        (Node::Granular, Value::Object(fields)) if !fields.is_empty() => {
            let mut out = Map::new();
            for (name, child) in fields {
                let step = PathElement::Field(name.clone());
                if remove.has(std::slice::from_ref(&step)) {
                    continue;
                }
                let kept = match remove.with_prefix(&step) {
                    Some(under) => {
                        let (child_type, _) = ty.field(name);
                        path.push(step);
                        let kept = remove_walk(child, under, &child_type, path)?;
                        path.pop();
                        kept
                    }
                    None => Some(child.clone()),
                };
                if let Some(kept) = kept {
                    out.insert(name.clone(), kept);
                }
            }
            Ok((!out.is_empty()).then_some(Value::Object(out)))
        }
        (Node::Associative(kind), Value::Array(items)) if !items.is_empty() => {
            let item_type = ty.item();
            let mut out = Vec::new();
            for item in items {
                let step = item_step(&kind, &item_type, item, path)?;
                if remove.has(std::slice::from_ref(&step)) {
                    continue;
                }
                let kept = match remove.with_prefix(&step) {
                    Some(under) => {
                        path.push(step);
                        let kept = remove_walk(item, under, &item_type, path)?;
                        path.pop();
                        kept
                    }
                    None => Some(item.clone()),
                };
                if let Some(kept) = kept {
                    out.push(kept);
                }
            }
            Ok((!out.is_empty()).then_some(Value::Array(out)))
        }
        _ => Ok(Some(value.clone())),
    }
}

/// `set` with every declared struct field under which it has paths made a member too (what
/// structured-merge-diff's pruning compares, so that a struct emptied by a removal goes with
/// the fields it held).
pub fn with_named_fields(set: &Set, ty: &Type) -> Set {
    let mut out = set.clone();
    let (_, children) = set.levels();
    for (step, child) in children {
        let child_type = match step {
            PathElement::Field(name) => {
                let (child_type, declared) = ty.field(name);
                if declared {
                    out.insert_member(step.clone());
                }
                child_type
            }
            _ => ty.item(),
        };
        *out.child_mut(step.clone()) = with_named_fields(child, &child_type);
    }
    out
}
