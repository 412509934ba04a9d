//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902), as PATCH requests carry them.

use serde_json::Value;

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document is not of its type's shape.
    #[error("invalid patch: {0}")]
    Malformed(String),
    /// A JSON patch operation could not be applied (its path does not exist, an array index
    /// is out of range or not a number).
    #[error("{0}")]
    Failed(String),
    /// A JSON patch has more operations than kube-apiserver takes
    /// ([`MAX_JSON_PATCH_OPERATIONS`]).
    #[error(
        "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {0}"
    )]
    TooManyOperations(usize),
    /// A JSON patch `test` operation failed.
    #[error("testing value {path:?} failed")]
    TestFailed {
        /// The tested path.
        path: String,
    },
}

/// The most operations a JSON patch may have, as kube-apiserver's patch handler allows.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Applies an RFC 7386 merge patch: objects merge key by key, `null` removes, anything else
/// replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// Applies an RFC 6902 JSON patch (a list of operations), all or nothing: the `json-patch`
/// crate applies it to a copy, which replaces `target` only when every operation succeeded
/// (its undo path, which panics if an undo fails, is not used).
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    if !patch.is_array() {
        return Err(PatchError::Malformed(
            "a JSON patch must be a list of operations".into(),
        ));
    }
    let operations = <json_patch::Patch as serde::Deserialize>::deserialize(patch)
        .map_err(|error| PatchError::Malformed(error.to_string()))?;
    if operations.0.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations(operations.0.len()));
    }
    let mut working = target.clone();
    json_patch::patch_unsafe(&mut working, &operations).map_err(|error| match error.kind {
        json_patch::PatchErrorKind::TestFailed => PatchError::TestFailed {
            path: error.path.to_string(),
        },
        _ => PatchError::Failed(error.to_string()),
    })?;
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

    #[test]
    fn array_indexes_with_leading_zeros_are_refused() {
        // RFC 6901: "01" is not an array index.
        let mut doc = json!({"items": [1, 2, 3]});
        let refused = json_patch(&mut doc, &json!([{"op": "remove", "path": "/items/01"}]));
        assert!(matches!(refused, Err(PatchError::Failed(_))), "{refused:?}");
        assert_eq!(doc, json!({"items": [1, 2, 3]}));
    }
}
