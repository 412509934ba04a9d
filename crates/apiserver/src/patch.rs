//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902), as PATCH requests carry them.

use serde_json::{Map, Value};

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document is not of its type's shape.
    #[error("invalid patch: {0}")]
    Malformed(String),
    /// A JSON patch operation's path does not exist or cannot be written.
    #[error("the path {path:?} of a {op:?} operation does not exist")]
    MissingPath {
        /// The operation.
        op: String,
        /// Its path.
        path: String,
    },
    /// A JSON patch `test` operation failed.
    #[error("testing value {path:?} failed")]
    TestFailed {
        /// The tested path.
        path: String,
    },
}

/// Applies an RFC 7386 merge patch: objects merge key by key, `null` removes, anything else
/// replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(fields) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            fields.remove(key);
        } else {
            merge_patch(fields.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// Splits a JSON pointer (`/a/b~1c`) into its unescaped tokens.
fn tokens(pointer: &str) -> Result<Vec<String>, PatchError> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(PatchError::Malformed(format!(
            "path {pointer:?} must start with '/'"
        )));
    };
    Ok(rest
        .split('/')
        .map(|token| token.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn missing(op: &str, path: &str) -> PatchError {
    PatchError::MissingPath {
        op: op.to_string(),
        path: path.to_string(),
    }
}

/// The parent container of `path` and the last token.
fn parent_mut<'a>(
    target: &'a mut Value,
    path: &str,
    op: &str,
) -> Result<(&'a mut Value, String), PatchError> {
    let mut tokens = tokens(path)?;
    let last = tokens.pop().ok_or_else(|| missing(op, path))?;
    let mut current = target;
    for token in tokens {
        current = match current {
            Value::Object(map) => map.get_mut(&token),
            Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| missing(op, path))?;
    }
    Ok((current, last))
}

fn add(target: &mut Value, path: &str, value: Value, op: &str) -> Result<(), PatchError> {
    if path.is_empty() {
        *target = value;
        return Ok(());
    }
    let (parent, last) = parent_mut(target, path, op)?;
    match parent {
        Value::Object(map) => {
            map.insert(last, value);
            Ok(())
        }
        Value::Array(items) => {
            let index = if last == "-" {
                items.len()
            } else {
                last.parse::<usize>().map_err(|_| missing(op, path))?
            };
            if index > items.len() {
                return Err(missing(op, path));
            }
            items.insert(index, value);
            Ok(())
        }
        _ => Err(missing(op, path)),
    }
}

fn remove(target: &mut Value, path: &str, op: &str) -> Result<Value, PatchError> {
    let (parent, last) = parent_mut(target, path, op)?;
    match parent {
        Value::Object(map) => map.remove(&last).ok_or_else(|| missing(op, path)),
        Value::Array(items) => {
            let index = last.parse::<usize>().map_err(|_| missing(op, path))?;
            if index >= items.len() {
                return Err(missing(op, path));
            }
            Ok(items.remove(index))
        }
        _ => Err(missing(op, path)),
    }
}

fn get<'a>(target: &'a Value, path: &str, op: &str) -> Result<&'a Value, PatchError> {
    target.pointer(path).ok_or_else(|| missing(op, path))
}

/// Applies an RFC 6902 JSON patch (a list of operations), all or nothing.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Array(operations) = patch else {
        return Err(PatchError::Malformed(
            "a JSON patch must be a list of operations".into(),
        ));
    };
    let mut working = target.clone();
    for operation in operations {
        let op = operation["op"].as_str().unwrap_or("");
        let path = operation["path"]
            .as_str()
            .ok_or_else(|| PatchError::Malformed("every operation needs a path".into()))?;
        let value = || {
            operation
                .get("value")
                .cloned()
                .ok_or_else(|| PatchError::Malformed(format!("{op} needs a value")))
        };
        let from = || {
            operation["from"]
                .as_str()
                .ok_or_else(|| PatchError::Malformed(format!("{op} needs a from")))
        };
        match op {
            "add" => add(&mut working, path, value()?, op)?,
            "remove" => {
                remove(&mut working, path, op)?;
            }
            "replace" => {
                remove(&mut working, path, op)?;
                add(&mut working, path, value()?, op)?;
            }
            "move" => {
                let moved = remove(&mut working, from()?, op)?;
                add(&mut working, path, moved, op)?;
            }
            "copy" => {
                let copied = get(&working, from()?, op)?.clone();
                add(&mut working, path, copied, op)?;
            }
            "test" => {
                if *get(&working, path, op)? != value()? {
                    return Err(PatchError::TestFailed {
                        path: path.to_string(),
                    });
                }
            }
            other => {
                return Err(PatchError::Malformed(format!(
                    "unknown operation {other:?}"
                )));
            }
        }
    }
    *target = working;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        // The examples of RFC 7386's appendix.
        for (original, patch, result) in [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ] {
            let mut target = original.clone();
            merge_patch(&mut target, &patch);
            assert_eq!(target, result, "{original} + {patch}");
        }
    }

    #[test]
    fn json_patch_operations() {
        let mut doc = json!({"metadata": {"labels": {"a": "1"}}, "items": [1, 2]});
        json_patch(
            &mut doc,
            &json!([
                {"op": "test", "path": "/metadata/labels/a", "value": "1"},
                {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
                {"op": "replace", "path": "/items/0", "value": 9},
                {"op": "add", "path": "/items/-", "value": 3},
                {"op": "copy", "from": "/items/2", "path": "/copied"},
                {"op": "move", "from": "/copied", "path": "/moved"},
                {"op": "remove", "path": "/items/1"},
            ]),
        )
        .unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"labels": {"a": "1", "b/c": "2"}}, "items": [9, 3], "moved": 3})
        );
    }

    #[test]
    fn a_failed_json_patch_changes_nothing() {
        let original = json!({"a": 1});
        let mut doc = original.clone();
        let failed = json_patch(
            &mut doc,
            &json!([{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 5}]),
        );
        assert_eq!(failed, Err(PatchError::TestFailed { path: "/a".into() }));
        assert_eq!(doc, original);
        assert!(json_patch(&mut doc, &json!({"op": "add"})).is_err());
        assert!(json_patch(&mut doc, &json!([{"op": "remove", "path": "/zzz"}])).is_err());
        assert!(json_patch(&mut doc, &json!([{"op": "bogus", "path": "/a"}])).is_err());
    }
}
