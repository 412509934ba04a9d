//! Object keys: `namespace/name`, or `name` for cluster-scoped objects.
//!
//! Every store in this crate files an object under the key [`meta_namespace_key`] gives it, as
//! client-go's `MetaNamespaceKeyFunc` does, so keys read the same in logs, work queues and tools.

use kube::Resource;

/// Why an object has no key, or a key does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The object has no `metadata.name` (an empty name counts as none).
    #[error("object has no name")]
    MissingName,
    /// A key with more than one `/`.
    #[error("unexpected key format: {0:?}")]
    Malformed(String),
}

/// A function that gives an object its store key.
pub type KeyFunc<K> = fn(&K) -> Result<String, KeyError>;

/// The key of `obj`: `namespace/name` when it has a namespace, `name` otherwise.
///
/// ```
/// use ctrlkit_cache::meta_namespace_key;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::ObjectMeta;
///
/// let cm = ConfigMap {
///     metadata: ObjectMeta {
///         name: Some("settings".into()),
///         namespace: Some("default".into()),
///         ..Default::default()
///     },
///     ..Default::default()
/// };
/// assert_eq!(meta_namespace_key(&cm).unwrap(), "default/settings");
/// ```
pub fn meta_namespace_key<K: Resource>(obj: &K) -> Result<String, KeyError> {
    let meta = obj.meta();
    let name = match meta.name.as_deref() {
        Some(name) if !name.is_empty() => name,
        _ => return Err(KeyError::MissingName),
    };
    Ok(match meta.namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => {
            let mut key = String::with_capacity(namespace.len() + 1 + name.len());
            key.push_str(namespace);
            key.push('/');
            key.push_str(name);
            key
        }
        _ => name.to_owned(),
    })
}

/// The key of a deleted object as a delete handler receives it: a tombstone's own key, or the
/// object's [`meta_namespace_key`]; client-go's `DeletionHandlingMetaNamespaceKeyFunc`.
///
/// ```
/// use std::sync::Arc;
/// use ctrlkit_cache::{DeletedFinalStateUnknown, ObjectOrTombstone, deletion_handling_meta_namespace_key};
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// let tombstone = ObjectOrTombstone::<ConfigMap>::Tombstone(DeletedFinalStateUnknown {
///     key: "default/gone".into(),
///     obj: None,
/// });
/// assert_eq!(deletion_handling_meta_namespace_key(&tombstone).unwrap(), "default/gone");
/// ```
pub fn deletion_handling_meta_namespace_key<K: Resource>(
    obj: &crate::ObjectOrTombstone<K>,
) -> Result<String, KeyError> {
    match obj {
        crate::ObjectOrTombstone::Object(obj) => meta_namespace_key(&**obj),
        crate::ObjectOrTombstone::Tombstone(tombstone) => Ok(tombstone.key.clone()),
    }
}

/// Splits a key made by [`meta_namespace_key`] into its namespace (`None` when cluster scoped)
/// and name. A key with more than one `/` is an error.
///
/// ```
/// use ctrlkit_cache::split_meta_namespace_key;
///
/// assert_eq!(split_meta_namespace_key("default/settings").unwrap(), (Some("default"), "settings"));
/// assert_eq!(split_meta_namespace_key("node-1").unwrap(), (None, "node-1"));
/// assert!(split_meta_namespace_key("a/b/c").is_err());
/// ```
pub fn split_meta_namespace_key(key: &str) -> Result<(Option<&str>, &str), KeyError> {
    let mut parts = key.split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, None) => Ok((None, name)),
        (Some(namespace), Some(name), None) => Ok((Some(namespace), name)),
        _ => Err(KeyError::Malformed(key.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::api::ObjectMeta;

    fn meta(namespace: Option<&str>, name: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: name.map(str::to_owned),
            namespace: namespace.map(str::to_owned),
            ..Default::default()
        }
    }

    #[test]
    fn keys_follow_client_go() {
        let cm = ConfigMap {
            metadata: meta(Some("ns"), Some("a")),
            ..Default::default()
        };
        assert_eq!(meta_namespace_key(&cm), Ok("ns/a".to_owned()));
        let ns = Namespace {
            metadata: meta(None, Some("ns")),
            ..Default::default()
        };
        assert_eq!(meta_namespace_key(&ns), Ok("ns".to_owned()));
        let empty_ns = ConfigMap {
            metadata: meta(Some(""), Some("a")),
            ..Default::default()
        };
        assert_eq!(meta_namespace_key(&empty_ns), Ok("a".to_owned()));
        let nameless = ConfigMap {
            metadata: meta(Some("ns"), None),
            ..Default::default()
        };
        assert_eq!(meta_namespace_key(&nameless), Err(KeyError::MissingName));
    }

    #[test]
    fn split_rejects_more_than_one_slash() {
        assert_eq!(split_meta_namespace_key("a"), Ok((None, "a")));
        assert_eq!(split_meta_namespace_key("ns/a"), Ok((Some("ns"), "a")));
        assert_eq!(split_meta_namespace_key("/a"), Ok((Some(""), "a")));
        assert_eq!(
            split_meta_namespace_key("ns/a/b"),
            Err(KeyError::Malformed("ns/a/b".to_owned()))
        );
    }
}
