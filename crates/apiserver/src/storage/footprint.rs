//! The memory an object takes, estimated from its tree's shape in one walk, without asking the
//! allocator and without serializing it: it bounds how much history a store keeps and how far
//! a watcher may fall behind.
//!
//! A `serde_json::Value` weighs far more than its JSON: every map, however small, is a B-tree
//! leaf made for eleven entries, and every key, string and list is a heap block of its own. A
//! stored Pod of 11 KB of JSON takes about 160 KB as a tree; a 400-byte ConfigMap about 3.5 KB.

use std::mem::size_of;

use serde_json::Value;

/// What [`estimate`] counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Footprint {
    /// The heap blocks of the tree (the root's own 32 bytes are where the tree is kept).
    pub(super) tree: usize,
    /// The length of the object as compact JSON, give or take the escapes and the digits of
    /// floats: what its serialization takes once made.
    pub(super) json: usize,
    /// At least the length of the object as compact JSON: each byte of a string counted as
    /// the longest escape (`\u00XX`), each float as its longest form.
    pub(super) json_bound: usize,
}

/// The heap block an allocation of `bytes` takes: a header word, rounded up to 16 bytes, and
/// at least 32 (glibc's malloc; other allocators differ by a few bytes a block).
fn block(bytes: usize) -> usize {
    (bytes.saturating_add(8 + 15) & !15).max(32)
}

/// The entries a `BTreeMap` node holds at most, and the size of a leaf of `String` keys and
/// `Value`s: its parent pointer, two `u16`s, the keys and the values, rounded to 8.
const NODE_ENTRIES: usize = 11;
const LEAF: usize =
    (8 + 2 + 2 + NODE_ENTRIES * (size_of::<String>() + size_of::<Value>())).next_multiple_of(8);
/// An inner node: a leaf and a pointer per child.
const INNER: usize = LEAF + (NODE_ENTRIES + 1) * size_of::<usize>();

/// The nodes of a map of `entries`: one leaf up to eleven; beyond, leaves that splits leave
/// about two-thirds full (seven entries), under inner nodes of about seven children.
fn map_nodes(entries: usize) -> usize {
    if entries == 0 {
        return 0;
    }
    if entries <= NODE_ENTRIES {
        return block(LEAF);
    }
    let leaves = entries.div_ceil(7);
    let inner = (leaves - 1).div_ceil(6);
    leaves
        .saturating_mul(block(LEAF))
        .saturating_add(inner.saturating_mul(block(INNER)))
}

/// A string's heap block (none when empty), and its JSON (quoted).
fn string(text: &String) -> Footprint {
    Footprint {
        tree: if text.capacity() == 0 {
            0
        } else {
            block(text.capacity())
        },
        json: text.len().saturating_add(2),
        json_bound: text.len().saturating_mul(6).saturating_add(2),
    }
}

/// JSON of `length` that is never longer: no escapes, no floats.
fn punctuation(length: usize) -> Footprint {
    Footprint {
        tree: 0,
        json: length,
        json_bound: length,
    }
}

/// The digits of a number as serde_json writes it: exact for integers, a float's longest form
/// otherwise.
fn number_length(number: &serde_json::Number) -> usize {
    let digits = |n: u64| n.checked_ilog10().unwrap_or(0) as usize + 1;
    if let Some(n) = number.as_u64() {
        digits(n)
    } else if let Some(n) = number.as_i64() {
        digits(n.unsigned_abs()) + 1
    } else {
        24
    }
}

impl std::ops::AddAssign for Footprint {
    fn add_assign(&mut self, part: Footprint) {
        self.tree = self.tree.saturating_add(part.tree);
        self.json = self.json.saturating_add(part.json);
        self.json_bound = self.json_bound.saturating_add(part.json_bound);
    }
}

impl Footprint {
    /// The estimate of an object after one entry of one of its maps, estimated `old` (`None`:
    /// there was none), became one estimated `new` (see [`entry`]).
    pub(super) fn replacing(self, old: Option<Footprint>, new: Footprint) -> Footprint {
        let old = old.unwrap_or_default();
        let change =
            |total: usize, old: usize, new: usize| total.saturating_sub(old).saturating_add(new);
        Footprint {
            tree: change(self.tree, old.tree, new.tree),
            json: change(self.json, old.json, new.json),
            json_bound: change(self.json_bound, old.json_bound, new.json_bound),
        }
    }
}

/// The estimate of one entry of a map: its key, its value, a colon and a comma.
pub(super) fn entry(key: &String, value: &Value) -> Footprint {
    let mut total = string(key);
    total += punctuation(2);
    add(value, &mut total);
    total
}

/// Estimates `value`'s memory and JSON length; the sums saturate, so no tree overflows them.
pub(super) fn estimate(value: &Value) -> Footprint {
    let mut total = Footprint::default();
    add(value, &mut total);
    total
}

fn add(value: &Value, total: &mut Footprint) {
    match value {
        Value::Null => *total += punctuation(4),
        Value::Bool(true) => *total += punctuation(4),
        Value::Bool(false) => *total += punctuation(5),
        Value::Number(number) => *total += punctuation(number_length(number)),
        Value::String(text) => *total += string(text),
        Value::Array(items) => {
            let slots = items.capacity().saturating_mul(size_of::<Value>());
            // Brackets, and a comma between items.
            *total += punctuation(items.len().max(1).saturating_add(1));
            total.tree = total
                .tree
                .saturating_add(if slots == 0 { 0 } else { block(slots) });
            for item in items {
                add(item, total);
            }
        }
        Value::Object(entries) => {
            // Braces, a colon per entry and a comma between entries.
            *total += punctuation(entries.len().saturating_mul(2).max(1).saturating_add(1));
            total.tree = total.tree.saturating_add(map_nodes(entries.len()));
            for (key, item) in entries {
                *total += string(key);
                add(item, total);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_json_length_is_the_serialization_length_without_floats_or_escapes() {
        let objects = [
            json!(null),
            json!({}),
            json!([]),
            json!({"a": [1, -20, 300, true, false, null, "x"], "b": {"c": {}}, "": ""}),
            json!({"metadata": {"name": "a", "labels": {"k": "v"}}, "data": {"blob": "x".repeat(300)}}),
            json!([[], [[]], {"n": 18446744073709551615u64, "m": -9223372036854775808i64, "z": 0}]),
        ];
        for object in objects {
            let length = serde_json::to_vec(&object).unwrap().len();
            assert_eq!(estimate(&object).json, length, "{object}");
        }
    }

    #[test]
    fn the_tree_is_counted_in_heap_blocks() {
        // Scalars live in their parent's slot.
        assert_eq!(estimate(&json!(1)).tree, 0);
        assert_eq!(estimate(&json!("")).tree, 0);
        assert_eq!(estimate(&json!({})).tree, 0);
        // One leaf, however few entries, and a block per key and per string.
        let one = estimate(&json!({"key": "value"})).tree;
        assert_eq!(one, block(LEAF) + 2 * block(5));
        assert_eq!(block(5), 32);
        // Eleven fit in a leaf; a twelfth splits it under an inner node.
        let map =
            |n: usize| Value::Object((0..n).map(|i| (format!("k{i:03}"), Value::Null)).collect());
        let keys = |n: usize| n * block(4);
        assert_eq!(estimate(&map(11)).tree, block(LEAF) + keys(11));
        assert_eq!(
            estimate(&map(12)).tree,
            2 * block(LEAF) + block(INNER) + keys(12)
        );
        // A list is one block of 32-byte slots.
        assert_eq!(estimate(&json!([null, null, null])).tree, block(3 * 32));
    }

    #[test]
    fn huge_sizes_saturate() {
        assert_eq!(block(usize::MAX), usize::MAX & !15);
        assert_eq!(map_nodes(usize::MAX), usize::MAX);
    }
}
