//! From a secondary object to the keys of the primaries it concerns.

use kube::Resource;

/// The key of the object that controls `child` (its owner reference with `controller: true`),
/// if that owner is of kind `P`; client-go's `metav1.GetControllerOf` followed by a kind check,
/// as the sample-controller's `handleObject` does.
pub fn controller_owner_key<P, C>(child: &C) -> Option<String>
where
    P: Resource<DynamicType = ()>,
    C: Resource,
{
    owner_key(&P::kind(&()), &P::api_version(&()), child)
}

/// The key of the object that controls `child` when that controller is of `kind` and
/// `api_version`.
pub(crate) fn owner_key<C: Resource>(kind: &str, api_version: &str, child: &C) -> Option<String> {
    let owner = child
        .meta()
        .owner_references
        .as_ref()?
        .iter()
        .find(|owner| owner.controller == Some(true))?;
    if owner.kind != kind || owner.api_version != api_version {
        return None;
    }
    Some(match child.meta().namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{}", owner.name),
        _ => owner.name.clone(),
    })
}
