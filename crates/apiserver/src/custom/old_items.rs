//! The old counterpart of each item of a `map` list on an update: the old item with the same
//! key fields, as kube-apiserver correlates them for ratcheting and `oldSelf`. Items of other
//! lists have none.

use std::collections::HashMap;

use serde_json::Value;

use crate::structural::{ListType, Node};

/// The old items of one list, by their keys.
pub struct OldItems<'a> {
    keys: Option<&'a [std::sync::Arc<str>]>,
    by_key: HashMap<String, &'a Value>,
}

impl<'a> OldItems<'a> {
    /// The old items of the list `node` describes (`old`: the list it replaces, if any).
    pub fn new(node: &'a Node, old: Option<&'a Value>) -> Self {
        let (ListType::Map(keys), Some(Value::Array(items))) = (&node.list_type, old) else {
            return Self {
                keys: None,
                by_key: HashMap::new(),
            };
        };
        let mut by_key = HashMap::with_capacity(items.len());
        for item in items {
            // The first of items with the same keys, as a search from the start finds.
            by_key.entry(key_of(keys, item)).or_insert(item);
        }
        Self {
            keys: Some(keys),
            by_key,
        }
    }

    /// The old item with the keys of `item`.
    pub fn of(&self, item: &Value) -> Option<&'a Value> {
        let keys = self.keys?;
        self.by_key.get(&key_of(keys, item)).copied()
    }
}

/// The JSON of an item's key fields (absent ones as `null`), in the keys' order.
fn key_of(keys: &[std::sync::Arc<str>], item: &Value) -> String {
    let values: Vec<&Value> = keys
        .iter()
        .map(|key| item.get(key.as_ref()).unwrap_or(&Value::Null))
        .collect();
    serde_json::to_string(&values).unwrap_or_default()
}
