//! The operations of structured-merge-diff on an object and its type: the set of fields it
//! holds, the merge of an applied configuration into it, the fields that differ between two of
//! its states, and the removal of a set of fields.
//!
//! The walkers keep no path as they go: an error names where it happened as it returns through
//! the levels above it, and the steps of a path are made only where a set needs them.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::path::PathElement;
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

impl TypeError {
    /// An error at the value being walked.
    pub(super) fn new(message: impl Into<String>) -> Self {
        Self {
            path: String::new(),
            message: message.into(),
        }
    }

    /// The error as seen from one level up: under `step`.
    pub(super) fn under(mut self, step: &PathElement) -> Self {
        self.path.insert_str(0, &step.to_string());
        self
    }

    /// The error as seen from one level up: under the field `name`.
    fn under_field(mut self, name: &str) -> Self {
        self.path.insert_str(0, name);
        self.path.insert(0, '.');
        self
    }
}

/// The step that names `item` in an associative list of `kind`.
pub(super) fn item_step(
    kind: &ListKind,
    item_type: &Type,
    item: &Value,
) -> Result<PathElement, TypeError> {
    match kind {
        ListKind::Map(keys) => {
            let Value::Object(fields) = item else {
                return Err(TypeError::new(
                    "associative list with keys may not have non-map elements",
                ));
            };
            let field = |name: &super::path::Name| {
                let value = fields
                    .get(&**name)
                    .cloned()
                    .or_else(|| item_type.key_default(name))?;
                Some((name.clone(), value))
            };
            let key: Arc<[_]> = match &**keys {
                // The usual case, one key field: one allocation.
                [only] => field(only).map_or_else(|| Arc::new([]) as _, |one| Arc::new([one]) as _),
                _ => {
                    let mut key: Vec<_> = keys.iter().filter_map(field).collect();
                    key.sort_by(|a, b| a.0.cmp(&b.0));
                    key.into()
                }
            };
            if key.is_empty() && !keys.is_empty() {
                return Err(TypeError::new(format!(
                    "associative list with keys has an element that omits all key fields {keys:?} (and doesn't have default values for any key fields)"
                )));
            }
            Ok(PathElement::Key(key))
        }
        _ => match item {
            Value::Object(_) => Err(TypeError::new(
                "associative list without keys has an element that's a map type",
            )),
            Value::Array(_) => Err(TypeError::new(
                "not supported: associative list with lists as elements",
            )),
            Value::Null => Err(TypeError::new(
                "associative list without keys has an element that's an explicit null",
            )),
            scalar => Ok(PathElement::Value(scalar.clone())),
        },
    }
}

/// Whether two items of an associative list of `kind` have the same key, without making their
/// steps (`false` when either has none: the slow path then says why).
fn same_key(kind: &ListKind, item_type: &Type, a: &Value, b: &Value) -> bool {
    match kind {
        ListKind::Map(keys) => {
            let (Value::Object(a), Value::Object(b)) = (a, b) else {
                return false;
            };
            let mut any = false;
            for name in keys.iter() {
                match (a.get(&**name), b.get(&**name)) {
                    (Some(x), Some(y)) if x == y => any = true,
                    (None, None) => {}
                    (x, y) => {
                        let default = item_type.key_default(name);
                        if x.or(default.as_ref()) != y.or(default.as_ref()) {
                            return false;
                        }
                        any |= default.is_some();
                    }
                }
            }
            any
        }
        _ => !a.is_object() && !a.is_array() && !a.is_null() && a == b,
    }
}

/// The fields `value` holds: its leaves, the items of its associative lists, its atomic parts,
/// and the fields of its maps that are not declared struct fields or that hold nothing.
pub fn to_field_set(value: &Value, ty: &Type) -> Result<Set, TypeError> {
    field_set_walk(value, ty)
}

/// Adds to `set` the field `step` of a map or struct, which holds `child` of `child_type` with
/// the fields `inner`: the field itself is owned when it is a leaf, holds nothing, or is not a
/// declared struct field (a map's key); a declared field that holds something is owned only
/// through what it holds.
pub(super) fn add_field(
    set: &mut Set,
    step: PathElement,
    declared: bool,
    child: &Value,
    child_type: &Type,
    inner: Set,
) {
    if owned_whole(child, child_type, declared) {
        set.insert_member(step.clone());
    }
    set.insert_child(step, inner);
}

/// Whether a field of a map or struct holding `child` of `child_type` is itself a member of
/// the field set (see [`add_field`]).
pub(super) fn owned_whole(child: &Value, child_type: &Type, declared: bool) -> bool {
    matches!(child_type.node(child), Node::Leaf)
        || child.is_null()
        || child.as_object().is_some_and(Map::is_empty)
        || !declared
}

/// The fields of what `value` holds, relative to it (built from the leaves up, so that no path
/// is walked twice).
fn field_set_walk(value: &Value, ty: &Type) -> Result<Set, TypeError> {
    let mut set = Set::new();
    match ty.node(value) {
        Node::Leaf => {}
        Node::Granular => {
            let Value::Object(fields) = value else {
                return Ok(set);
            };
            for (name, child) in fields {
                let (child_type, declared, step) = ty.field_step(name);
                let inner =
                    field_set_walk(child, &child_type).map_err(|error| error.under(&step))?;
                add_field(&mut set, step, declared, child, &child_type, inner);
            }
        }
        Node::Associative(kind) => {
            let Value::Array(items) = value else {
                return Ok(set);
            };
            let item_type = ty.item();
            let mut seen: BTreeMap<PathElement, usize> = BTreeMap::new();
            let mut steps = Vec::with_capacity(items.len());
            for item in items {
                let step = item_step(&kind, &item_type, item)?;
                *seen.entry(step.clone()).or_default() += 1;
                steps.push(step);
            }
            for (item, step) in items.iter().zip(steps) {
                // A duplicated item is owned whole.
                if seen[&step] == 1 {
                    let inner =
                        field_set_walk(item, &item_type).map_err(|error| error.under(&step))?;
                    set.insert_member(step.clone());
                    set.insert_child(step, inner);
                } else {
                    set.insert_member(step);
                }
            }
        }
    }
    Ok(set)
}

/// Whether `serde_json::Map` iterates in key order, as it does unless a crate in the build
/// enables serde_json's `preserve_order` feature (then it keeps insertion order). The merge
/// walks two objects' fields side by side in that order; [`crate::server::ApiServer::start`]
/// refuses to start without it.
pub fn json_maps_are_sorted() -> bool {
    let map: Map<String, Value> = [("b", Value::Null), ("a", Value::Null)]
        .into_iter()
        .map(|(key, value)| (key.to_string(), value))
        .collect();
    map.keys().next().is_some_and(|first| first == "a")
}

/// The keys of two JSON objects (each sorted), once each, in order.
fn union_keys<'a>(
    left: Option<&'a Map<String, Value>>,
    right: Option<&'a Map<String, Value>>,
) -> Vec<&'a String> {
    let mut left = left.into_iter().flat_map(Map::keys).peekable();
    let mut right = right.into_iter().flat_map(Map::keys).peekable();
    let mut out = Vec::new();
    loop {
        let next = match (left.peek(), right.peek()) {
            (Some(a), Some(b)) => match a.cmp(b) {
                std::cmp::Ordering::Less => left.next(),
                std::cmp::Ordering::Greater => right.next(),
                std::cmp::Ordering::Equal => {
                    right.next();
                    left.next()
                }
            },
            (Some(_), None) => left.next(),
            (None, _) => right.next(),
        };
        match next {
            Some(name) => out.push(name),
            None => return out,
        }
    }
}

/// Whether two lists hold items with the same keys in the same order.
fn same_keys_in_order(kind: &ListKind, item_type: &Type, a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(a, b)| same_key(kind, item_type, a, b))
}

/// `config` merged into `live`: what `config` holds wins; maps and structs merge field by
/// field and associative lists item by item, in an order that keeps `config`'s order for its
/// items and `live`'s for the others. `config` is expected to have been read strictly (no
/// duplicate items; see `validate`).
pub fn merge(
    live: Option<&Value>,
    config: Option<&Value>,
    ty: &Type,
) -> Result<Option<Value>, TypeError> {
    merge_walk(live, config, ty)
}

fn merge_walk(
    live: Option<&Value>,
    config: Option<&Value>,
    ty: &Type,
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
            for name in union_keys(Some(left), Some(right)) {
                let merged = match (left.get(name), right.get(name)) {
                    // Only one side: no type needed.
                    (one, None) | (None, one) => one.cloned(),
                    (Some(l), Some(r)) => {
                        let (child_type, _) = ty.field(name);
                        merge_walk(Some(l), Some(r), &child_type)
                            .map_err(|error| error.under_field(name))?
                    }
                };
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
            merge_list(left, right, &kind, ty).map(|items| Some(Value::Array(items)))
        }
    }
}

/// [`merge`] in place, in `config`: it takes what only `live` holds (copied), and keeps what it
/// brings itself (not copied), becoming `config` merged into `live`. Returns whether that
/// differs from `live` (a value, or the order of a list's items).
///
/// `left_out` is a path of fields `live` is read without (empty: none), for a field the caller
/// writes anew (an apply's `metadata.managedFields`): not copying it is the point.
pub fn merge_in_place(
    config: &mut Value,
    live: &Value,
    ty: &Type,
    left_out: &[&str],
) -> Result<bool, TypeError> {
    let node = ty.node(config);
    let same_shape = std::mem::discriminant(&node) == std::mem::discriminant(&ty.node(live));
    match (node, config, live) {
        (Node::Granular, Value::Object(right), Value::Object(left)) if same_shape => {
            // The field `left_out` names at this level, and the path below it.
            let (gone, below) = match left_out {
                [name] => (Some(*name), None),
                [name, rest @ ..] => (None, Some((*name, rest))),
                [] => (None, None),
            };
            // Both maps are sorted by name: they are walked side by side, each name compared
            // once, where looking each up in the other would compare it with several.
            let mut lefts = left.iter().peekable();
            let mut left_only = Vec::new();
            let mut changed = false;
            for (name, value) in right.iter_mut() {
                while let Some((field, existing)) =
                    lefts.next_if(|(field, _)| field.as_str() < name.as_str())
                {
                    left_only.push((field, existing));
                }
                let existing = lefts
                    .next_if(|(field, _)| *field == name)
                    .map(|(_, existing)| existing)
                    .filter(|_| gone != Some(name.as_str()));
                let Some(existing) = existing else {
                    changed = true;
                    continue;
                };
                let (child_type, _) = ty.field(name);
                let left_out = below
                    .filter(|(field, _)| field == name)
                    .map_or(&[][..], |(_, rest)| rest);
                changed |= merge_in_place(value, existing, &child_type, left_out)
                    .map_err(|error| error.under_field(name))?;
            }
            left_only.extend(lefts);
            for (name, value) in left_only {
                if gone == Some(name.as_str()) {
                    continue;
                }
                let copy = match below {
                    Some((field, rest)) if field == name => without(value, rest),
                    _ => value.clone(),
                };
                right.insert(name.clone(), copy);
            }
            Ok(changed)
        }
        (Node::Associative(kind), Value::Array(right), Value::Array(left)) if same_shape => {
            let item_type = ty.item();
            if !same_keys_in_order(&kind, &item_type, left, right) {
                return merge_list_in_place(right, left, &kind, &item_type);
            }
            let mut changed = false;
            for (config, live) in right.iter_mut().zip(left) {
                match merge_in_place(config, live, &item_type, &[]) {
                    Ok(item_changed) => changed |= item_changed,
                    // The merge keeps an item's keys, so they still name it.
                    Err(error) => return Err(error.under(&item_step(&kind, &item_type, config)?)),
                }
            }
            Ok(changed)
        }
        // A leaf, or a value whose shape the configuration changes: `config`'s, whole.
        (_, config, live) => Ok(*config != *live),
    }
}

/// A copy of `value` without the field at `path` (a copy of all of it for an empty path, or
/// where the path leads nowhere).
pub fn without(value: &Value, path: &[&str]) -> Value {
    match (value, path) {
        (Value::Object(fields), [name, rest @ ..]) => Value::Object(
            fields
                .iter()
                .filter(|(field, _)| !(rest.is_empty() && field.as_str() == *name))
                .map(|(field, child)| {
                    let copy = if field.as_str() == *name {
                        without(child, rest)
                    } else {
                        child.clone()
                    };
                    (field.clone(), copy)
                })
                .collect(),
        ),
        _ => value.clone(),
    }
}

/// Merges two associative lists as structured-merge-diff orders them (see [`merged_order`]).
fn merge_list(
    left: &[Value],
    right: &[Value],
    kind: &ListKind,
    ty: &Type,
) -> Result<Vec<Value>, TypeError> {
    let item_type = ty.item();
    // The usual case, a list applied again: the same items in the same order, merged pairwise.
    if same_keys_in_order(kind, &item_type, left, right) {
        let mut out = Vec::with_capacity(right.len());
        for (live, config) in left.iter().zip(right) {
            let merged = match merge_walk(Some(live), Some(config), &item_type) {
                Ok(merged) => merged,
                Err(error) => return Err(error.under(&item_step(kind, &item_type, config)?)),
            };
            out.extend(merged);
        }
        return Ok(out);
    }
    let mut out = Vec::new();
    for MergedItem { step, live, config } in merged_order(left, right, kind, &item_type)? {
        let config = config.and_then(|index| right.get(index));
        let merged = merge_walk(live, config, &item_type).map_err(|error| error.under(&step))?;
        out.extend(merged);
    }
    Ok(out)
}

/// [`merge_list`] in place, in `right`: its items are moved, and merged with theirs of `left`
/// in place; only the items `left` alone has are copied. Returns whether the merged list
/// differs from `left`.
fn merge_list_in_place(
    right: &mut Vec<Value>,
    left: &[Value],
    kind: &ListKind,
    item_type: &Type,
) -> Result<bool, TypeError> {
    let order = merged_order(left, right, kind, item_type)?;
    let mut config_items: Vec<Option<Value>> =
        std::mem::take(right).into_iter().map(Some).collect();
    let mut changed = order.len() != left.len();
    right.reserve(order.len());
    for (index, MergedItem { step, live, config }) in order.into_iter().enumerate() {
        let config = config.and_then(|index| config_items.get_mut(index)?.take());
        // Whether the item is the one `left` has at its place (the merge compares the item
        // with `live`, which is that one only if it is at this place).
        let at_place =
            live.is_some_and(|live| left.get(index).is_some_and(|l| std::ptr::eq(l, live)));
        let (item, same) = match (config, live) {
            (Some(mut item), Some(live)) => {
                let item_changed = merge_in_place(&mut item, live, item_type, &[])
                    .map_err(|error| error.under(&step))?;
                (item, at_place && !item_changed)
            }
            (Some(item), None) => (item, false),
            (None, Some(live)) => (live.clone(), at_place),
            // Each entry of the order has an item on one side at least.
            (None, None) => continue,
        };
        changed |= !same && left.get(index) != Some(&item);
        right.push(item);
    }
    Ok(changed)
}

/// One item of a merged associative list: its key, and the items it merges, `left`'s and
/// the index of `right`'s (one side at least).
struct MergedItem<'a> {
    step: PathElement,
    live: Option<&'a Value>,
    config: Option<usize>,
}

/// The items of two associative lists merged, in the order structured-merge-diff gives them:
/// items both have come in `right`'s order, each item only `left` has stays after the shared
/// item it followed, and each item only `right` has comes where `right` has it. Two items of
/// `right` with one key are an error; of two items of `left` with one key, the first is merged.
fn merged_order<'a>(
    left: &'a [Value],
    right: &[Value],
    kind: &ListKind,
    item_type: &Type,
) -> Result<Vec<MergedItem<'a>>, TypeError> {
    let mut right_steps = Vec::with_capacity(right.len());
    let mut right_items: BTreeMap<PathElement, usize> = BTreeMap::new();
    for (index, item) in right.iter().enumerate() {
        let step = item_step(kind, item_type, item)?;
        if right_items.insert(step.clone(), index).is_some() {
            return Err(TypeError::new(format!("duplicate entries for key {step}")));
        }
        right_steps.push(step);
    }
    let mut left_steps = Vec::with_capacity(left.len());
    let mut left_items: BTreeMap<PathElement, &Value> = BTreeMap::new();
    for item in left {
        let step = item_step(kind, item_type, item)?;
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
    let mut order = Vec::with_capacity(left.len().max(right.len()));
    let mut push = |step: &PathElement, with_config: bool| {
        order.push(MergedItem {
            step: step.clone(),
            live: left_items.get(step).copied(),
            config: right_items.get(step).copied().filter(|_| with_config),
        });
    };
    let (mut l, mut r) = (0, 0);
    while l < left_steps.len() || r < right_steps.len() {
        if l < left_steps.len() && r < right_steps.len() {
            let step = &left_steps[l];
            if *step == right_steps[r] {
                merged_right.insert(step.clone());
                push(step, true);
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
                push(step, false);
                l += 1;
                continue;
            } else if merged_right.contains(step) {
                l += 1;
            }
        }
        if r < right_steps.len() {
            let step = &right_steps[r];
            merged_right.insert(step.clone());
            push(step, true);
            r += 1;
            if next_shared.as_ref() == Some(step) {
                next_shared = shared.pop_front();
            }
        }
    }
    Ok(order)
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

impl Comparison {
    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// What changed from `old` to `new`.
pub fn compare(
    old: Option<&Value>,
    new: Option<&Value>,
    ty: &Type,
) -> Result<Comparison, TypeError> {
    if old.is_none() && new.is_none() {
        return Ok(Comparison::default());
    }
    compare_walk(old, new, ty).map(|(_, inner)| inner)
}

/// How a value itself changed, as a member of its parent's sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Added,
    Modified,
    Removed,
}

impl Comparison {
    fn member(&mut self, change: Option<Change>, step: &PathElement) {
        match change {
            Some(Change::Added) => self.added.insert_member(step.clone()),
            Some(Change::Modified) => self.modified.insert_member(step.clone()),
            Some(Change::Removed) => self.removed.insert_member(step.clone()),
            None => {}
        }
    }

    fn child(&mut self, step: &PathElement, inner: Comparison) {
        let Comparison {
            added,
            modified,
            removed,
        } = inner;
        for (set, inner) in [
            (&mut self.added, added),
            (&mut self.modified, modified),
            (&mut self.removed, removed),
        ] {
            if !inner.is_empty() {
                set.insert_child(step.clone(), inner);
            }
        }
    }

    /// Records how the value under `step` changed (the step made only if something did).
    fn record(
        &mut self,
        changes: &[Option<Change>],
        inner: Comparison,
        step: impl FnOnce() -> Result<PathElement, TypeError>,
    ) -> Result<(), TypeError> {
        if changes.iter().all(Option::is_none) && inner.is_empty() {
            return Ok(());
        }
        let step = step()?;
        for change in changes {
            self.member(*change, &step);
        }
        self.child(&step, inner);
        Ok(())
    }
}

/// How a value changed itself, and what changed of what it holds (relative to it).
fn compare_walk(
    old: Option<&Value>,
    new: Option<&Value>,
    ty: &Type,
) -> Result<(Option<Change>, Comparison), TypeError> {
    // Compared whole only where the value is a leaf (comparing every level would compare each
    // subtree once per level above it).
    let leaf = || match (old, new) {
        (None, _) => Some(Change::Added),
        (_, None) => Some(Change::Removed),
        (Some(old), Some(new)) if old != new => Some(Change::Modified),
        _ => None,
    };
    let mut inner = Comparison::default();
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
    // A map or list that appears or goes is added or removed itself, besides what it holds.
    let appeared = match (old, new) {
        (None, Some(_)) => Some(Change::Added),
        (Some(_), None) => Some(Change::Removed),
        _ => None,
    };
    match node {
        _ if !same_shape => Ok((leaf(), inner)),
        Node::Leaf => Ok((leaf(), inner)),
        _ if empty(old) && empty(new) => Ok((leaf(), inner)),
        Node::Granular => {
            let left = old.and_then(Value::as_object);
            let right = new.and_then(Value::as_object);
            for name in union_keys(left, right) {
                let (child_type, _) = ty.field(name);
                let (change, child) = compare_walk(
                    left.and_then(|fields| fields.get(name)),
                    right.and_then(|fields| fields.get(name)),
                    &child_type,
                )
                .map_err(|error| error.under_field(name))?;
                inner.record(&[change], child, || Ok(ty.field_step(name).2))?;
            }
            Ok((appeared, inner))
        }
        Node::Associative(kind) => {
            let item_type = ty.item();
            // The usual case: the same items in the same order, compared pairwise.
            if let (Some(Value::Array(left)), Some(Value::Array(right))) = (old, new)
                && same_keys_in_order(&kind, &item_type, left, right)
            {
                for (old_item, new_item) in left.iter().zip(right) {
                    let step = || item_step(&kind, &item_type, new_item);
                    let (change, child) =
                        match compare_walk(Some(old_item), Some(new_item), &item_type) {
                            Ok(compared) => compared,
                            Err(error) => return Err(error.under(&step()?)),
                        };
                    inner.record(&[change], child, step)?;
                }
                return Ok((appeared, inner));
            }
            let mut order: Vec<PathElement> = Vec::new();
            let mut left: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
            for item in old.and_then(Value::as_array).into_iter().flatten() {
                let step = item_step(&kind, &item_type, item)?;
                let entry = left.entry(step.clone()).or_default();
                if entry.is_empty() {
                    order.push(step);
                }
                entry.push(item);
            }
            let mut right: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
            for item in new.and_then(Value::as_array).into_iter().flatten() {
                let step = item_step(&kind, &item_type, item)?;
                let entry = right.entry(step.clone()).or_default();
                if entry.is_empty() && !left.contains_key(&step) {
                    order.push(step);
                }
                entry.push(item);
            }
            for step in order {
                let old_items = left.get(&step).map(Vec::as_slice).unwrap_or_default();
                let new_items = right.get(&step).map(Vec::as_slice).unwrap_or_default();
                let under = |error: TypeError| error.under(&step);
                // How the item changed: what its own comparison says and, for a duplicated
                // item on one side, that it was added or removed whole.
                let (changes, child) = match (old_items.len(), new_items.len()) {
                    (0..=1, 0..=1) => {
                        let (change, child) = compare_walk(
                            old_items.first().copied(),
                            new_items.first().copied(),
                            &item_type,
                        )
                        .map_err(under)?;
                        ([change, None], child)
                    }
                    // Duplicated items are compared whole.
                    (_, 2..) if old_items.len() >= 2 => (
                        [(old_items != new_items).then_some(Change::Modified), None],
                        Comparison::default(),
                    ),
                    (2.., _) => {
                        let (change, child) = match new_items.first() {
                            Some(first) => {
                                compare_walk(None, Some(first), &item_type).map_err(under)?
                            }
                            None => (None, Comparison::default()),
                        };
                        ([change, Some(Change::Removed)], child)
                    }
                    _ => {
                        let (change, child) = match old_items.first() {
                            Some(first) => {
                                compare_walk(Some(first), None, &item_type).map_err(under)?
                            }
                            None => (None, Comparison::default()),
                        };
                        ([change, Some(Change::Added)], child)
                    }
                };
                inner.record(&changes, child, || Ok(step.clone()))?;
            }
            Ok((appeared, inner))
        }
    }
}

/// `value` without the fields of `remove`; `None` when nothing is left of it.
pub fn remove(value: &Value, remove: &Set, ty: &Type) -> Result<Option<Value>, TypeError> {
    remove_walk(value, remove, ty)
}

fn remove_walk(value: &Value, remove: &Set, ty: &Type) -> Result<Option<Value>, TypeError> {
    match (ty.node(value), value) {
        (Node::Granular, Value::Object(fields)) if !fields.is_empty() => {
            let mut out = Map::new();
            for (name, child) in fields {
                let (child_type, _, step) = ty.field_step(name);
                if remove.has(std::slice::from_ref(&step)) {
                    continue;
                }
                let kept = match remove.with_prefix(&step) {
                    Some(under) => remove_walk(child, under, &child_type)
                        .map_err(|error| error.under(&step))?,
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
                let step = item_step(&kind, &item_type, item)?;
                if remove.has(std::slice::from_ref(&step)) {
                    continue;
                }
                let kept = match remove.with_prefix(&step) {
                    Some(under) => {
                        remove_walk(item, under, &item_type).map_err(|error| error.under(&step))?
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
    let (members, children) = set.levels();
    let mut out = Set::new();
    for member in members {
        out.insert_member(member.clone());
    }
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
        out.insert_child(step.clone(), with_named_fields(child, &child_type));
    }
    out
}
