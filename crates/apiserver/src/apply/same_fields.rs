//! Whether an applied configuration holds the fields its manager's entry already records,
//! answered without building its field set: a manager that applies again (the usual apply)
//! states the same fields with some values changed, and its entry is then kept as it was.
//!
//! The walk follows [`checked_field_set`]'s check and collection step for step, and the
//! updater's adjustments of the set (the fields the endpoint resets go with everything
//! under them; the identity fields are not the applier's), and compares each step with the
//! entry's `FieldsV1` JSON as it goes: a step's key looked up at its level, and the keys of
//! each level counted, as [`Set::matches_fields_v1`] compares a set.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::path::PathElement;
use super::schema::{Expected, Node, Type};
use super::set::Set;
use super::typed::{item_step, owned_whole};
use super::validate::{checked_field_set, passes_check};

/// `Some(true)` when `config` passes the check of [`super::validate::checked_field_set`] and
/// holds, less what is under the members of `ignored` and less the members of `stripped`,
/// exactly the set `fields_v1` writes. Otherwise the caller builds the set, which also says
/// what is wrong: `None` where the answer needs the set (a part of a type that takes
/// anything, a field the type does not declare, a value the check refuses, an item without
/// its key, two items with one key), `Some(false)` where the sets differ.
pub fn same_fields(
    config: &Value,
    ty: &Type,
    fields_v1: &Value,
    ignored: &Set,
    stripped: &Set,
) -> Option<bool> {
    let json = fields_v1.as_object()?;
    let mut key = Vec::new();
    let level = compare_level(
        config,
        ty,
        Adjustments {
            ignored: Some(ignored),
            stripped: Some(stripped),
        },
        json,
        false,
        &mut key,
    )?;
    Some(level.matches)
}

/// The parts of the updater's adjustments that apply at one level of the walk.
#[derive(Clone, Copy)]
struct Adjustments<'a> {
    /// Its members go with everything under them.
    ignored: Option<&'a Set>,
    /// Its members are no members (what is under them stays).
    stripped: Option<&'a Set>,
}

impl<'a> Adjustments<'a> {
    fn below(self, step: &PathElement) -> Adjustments<'a> {
        Adjustments {
            ignored: self.ignored.and_then(|set| set.with_prefix(step)),
            stripped: self.stripped.and_then(|set| set.with_prefix(step)),
        }
    }
}

fn has_member(set: Option<&Set>, step: &PathElement) -> bool {
    set.is_some_and(|set| set.levels().0.binary_search(step).is_ok())
}

/// One level of the walk: whether the adjusted set there is not empty, and whether it is the
/// level `json` (which holds `"."` too when `include_self`).
struct Level {
    not_empty: bool,
    matches: bool,
}

/// What the collection makes of `value` at this level, compared with `json`.
fn compare_level(
    value: &Value,
    ty: &Type,
    adjustments: Adjustments<'_>,
    json: &Map<String, Value>,
    include_self: bool,
    key: &mut Vec<u8>,
) -> Option<Level> {
    let mut level = Tally {
        keys: usize::from(include_self),
        matches: !include_self || is_empty_object(json.get(".")),
        not_empty: false,
    };
    if !value.is_null() {
        match (ty.expected(), ty.node(value), value) {
            (Expected::Map, Node::Granular, Value::Object(fields)) => {
                for (name, child) in fields {
                    let (child_type, shared) = ty.allowed_field(name)?;
                    let member = owned_whole(child, &child_type, shared.is_some());
                    let step = match shared {
                        Some(shared) => PathElement::Field(shared),
                        None => PathElement::field(name),
                    };
                    level.step(&step, member, child, &child_type, adjustments, json, key)?;
                }
            }
            (Expected::List, Node::Associative(kind), Value::Array(items)) => {
                let item_type = ty.item();
                // Two items with one key fail the check (counting keys would not tell them
                // from a missing one).
                let mut seen = BTreeSet::new();
                for item in items {
                    let step = item_step(&kind, &item_type, item).ok()?;
                    level.step(&step, true, item, &item_type, adjustments, json, key)?;
                    if !seen.insert(step) {
                        return None;
                    }
                }
            }
            // Collected without the check: the set is needed.
            (Expected::Any, Node::Granular | Node::Associative(_), _) => return None,
            // A leaf (its parent owns it whole), or a value the check looks into alone.
            _ if !passes_check(value, ty) => return None,
            _ => {}
        }
    }
    Some(Level {
        not_empty: level.not_empty,
        matches: level.matches && level.keys == json.len(),
    })
}

/// The keys a level writes so far, whether each is as `json` has it, and whether any was.
struct Tally {
    keys: usize,
    matches: bool,
    not_empty: bool,
}

impl Tally {
    /// Counts `step`, which holds `child` of `child_type` and is a member of the set as
    /// collected when `member`.
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        step: &PathElement,
        member: bool,
        child: &Value,
        child_type: &Type,
        adjustments: Adjustments<'_>,
        json: &Map<String, Value>,
        key: &mut Vec<u8>,
    ) -> Option<()> {
        if has_member(adjustments.ignored, step) {
            // Not recorded, but checked all the same (and rarely there: a resource's status).
            return checked_field_set(child, child_type).is_ok().then_some(());
        }
        let member = member && !has_member(adjustments.stripped, step);
        key.clear();
        step.write_fields_v1(key);
        let entry = std::str::from_utf8(key)
            .ok()
            .and_then(|text| json.get(text))
            .and_then(Value::as_object);
        let nothing = Map::new();
        let inner = compare_level(
            child,
            child_type,
            adjustments.below(step),
            entry.unwrap_or(&nothing),
            member,
            key,
        )?;
        if !member && !inner.not_empty {
            return Some(());
        }
        self.keys += 1;
        self.not_empty = true;
        self.matches &= match entry {
            None => false,
            // A member without fields under it is written `{}`.
            Some(entry) if !inner.not_empty => entry.is_empty(),
            Some(_) => inner.matches,
        };
        Some(())
    }
}

fn is_empty_object(value: Option<&Value>) -> bool {
    value.and_then(Value::as_object).is_some_and(Map::is_empty)
}
