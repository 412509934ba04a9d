//! Whether an applied configuration holds the fields its manager's entry already records,
//! answered without building its field set: a manager that applies again (the usual apply)
//! states the same fields with some values changed, and its entry is then kept as it was.
//!
//! The walk follows [`checked_field_set`]'s check and collection step for step, and the
//! updater's adjustments of the set (the fields the endpoint resets go with everything
//! under them; the identity fields are not the applier's), and compares each step with the
//! entry's `FieldsV1` JSON as it goes: a step's key looked up at its level, and the keys of
//! each level counted, as [`Set::matches_fields_v1`] compares a set.
//!
//! A level's keys are looked up in the order the walk makes them, which is the JSON's own
//! order for the fields of a struct or map (`f:` and the name, as both sort by name) and often
//! for the items of a list: each lookup first tries the entry after the last one found (see
//! [`Entries`]), and searches the level only when that is not it.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::iter::Peekable;

use serde_json::map::Iter;
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
    /// Whether any adjustment applies at this level or below (mostly not: they are near the
    /// root).
    fn any(self) -> bool {
        self.ignored.is_some() || self.stripped.is_some()
    }

    fn below(self, step: &PathElement) -> Adjustments<'a> {
        Adjustments {
            ignored: self.ignored.and_then(|set| set.with_prefix(step)),
            stripped: self.stripped.and_then(|set| set.with_prefix(step)),
        }
    }
}

/// A step of the walk: a field by its name, whose [`PathElement`] is made only where an
/// adjustment needs one (a field's is a shared name, and counting references to it on every
/// step would make both cores write to its count), or a list item's.
enum Step<'a> {
    Field(&'a str),
    Element(PathElement),
}

impl Step<'_> {
    fn element(&self) -> Cow<'_, PathElement> {
        match self {
            Self::Field(name) => Cow::Owned(PathElement::field(name)),
            Self::Element(element) => Cow::Borrowed(element),
        }
    }

    /// Writes the step's `FieldsV1` key.
    fn write_fields_v1(&self, out: &mut Vec<u8>) {
        match self {
            Self::Field(name) => PathElement::write_field_fields_v1(name, out),
            Self::Element(element) => element.write_fields_v1(out),
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
    let mut entries = Entries::new(json);
    let mut level = Tally {
        keys: usize::from(include_self),
        matches: !include_self || is_empty_object(entries.get(b".")),
        not_empty: false,
    };
    if !value.is_null() {
        match (ty.expected(), ty.node(value), value) {
            (Expected::Map, Node::Granular, Value::Object(fields)) => {
                for (name, child) in fields {
                    let (child_type, shared) = ty.allowed_field(name)?;
                    let member = owned_whole(child, &child_type, shared.is_some());
                    level.step(
                        &Step::Field(name),
                        member,
                        child,
                        &child_type,
                        adjustments,
                        &mut entries,
                        key,
                    )?;
                }
            }
            (Expected::List, Node::Associative(kind), Value::Array(items)) => {
                let item_type = ty.item();
                // Two items with one key fail the check, and counting keys would not tell them
                // from a missing one: two items found at one entry have one key. (An item not
                // found makes the answer `false` already; an item the adjustments name, which
                // may not be counted, needs the set.)
                let mut found = Vec::with_capacity(items.len());
                for item in items {
                    let step = item_step(&kind, &item_type, item).ok()?;
                    if has_member(adjustments.ignored, &step)
                        || has_member(adjustments.stripped, &step)
                    {
                        return None;
                    }
                    let entry = level.step(
                        &Step::Element(step),
                        true,
                        item,
                        &item_type,
                        adjustments,
                        &mut entries,
                        key,
                    )?;
                    found.extend(entry.map(|entry| std::ptr::from_ref(entry).addr()));
                }
                found.sort_unstable();
                if found.windows(2).any(|pair| pair[0] == pair[1]) {
                    return None;
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
    /// collected when `member`; returns its entry in `entries` if it has one and is counted.
    #[allow(clippy::too_many_arguments)]
    fn step<'j>(
        &mut self,
        step: &Step<'_>,
        member: bool,
        child: &Value,
        child_type: &Type,
        adjustments: Adjustments<'_>,
        entries: &mut Entries<'j>,
        key: &mut Vec<u8>,
    ) -> Option<Option<&'j Value>> {
        let (member, below) = if adjustments.any() {
            let element = step.element();
            if has_member(adjustments.ignored, &element) {
                // Not recorded, but checked all the same (and rarely there: a resource's
                // status).
                return checked_field_set(child, child_type).is_ok().then_some(None);
            }
            (
                member && !has_member(adjustments.stripped, &element),
                adjustments.below(&element),
            )
        } else {
            (member, adjustments)
        };
        key.clear();
        step.write_fields_v1(key);
        let found = entries.get(key);
        let entry = found.and_then(Value::as_object);
        let nothing = Map::new();
        let inner = compare_level(
            child,
            child_type,
            below,
            entry.unwrap_or(&nothing),
            member,
            key,
        )?;
        if !member && !inner.not_empty {
            return Some(None);
        }
        self.keys += 1;
        self.not_empty = true;
        self.matches &= match entry {
            None => false,
            // A member without fields under it is written `{}`.
            Some(entry) if !inner.not_empty => entry.is_empty(),
            Some(_) => inner.matches,
        };
        Some(found)
    }
}

/// The entries of one level of `FieldsV1`, looked up by key: the entry after the last one found
/// first, as the walk mostly asks for keys in the JSON's order; else a search of the level.
struct Entries<'j> {
    json: &'j Map<String, Value>,
    next: Peekable<Iter<'j>>,
}

impl<'j> Entries<'j> {
    fn new(json: &'j Map<String, Value>) -> Self {
        Self {
            json,
            next: json.iter().peekable(),
        }
    }

    /// The entry of `key` (a step's text, so UTF-8). Entries passed over on the way are still
    /// found by the search.
    fn get(&mut self, key: &[u8]) -> Option<&'j Value> {
        while let Some((text, entry)) = self.next.peek() {
            match text.as_bytes().cmp(key) {
                Ordering::Less => {
                    self.next.next();
                }
                Ordering::Equal => {
                    let entry = *entry;
                    self.next.next();
                    return Some(entry);
                }
                Ordering::Greater => break,
            }
        }
        std::str::from_utf8(key)
            .ok()
            .and_then(|text| self.json.get(text))
    }
}

fn is_empty_object(value: Option<&Value>) -> bool {
    value.and_then(Value::as_object).is_some_and(Map::is_empty)
}
