//! Ready transforms that shrink what an informer caches.

use kube::Resource;

/// Drops `metadata.managedFields`, which few controllers read and which is often the largest
/// part of an object (in a typical Pod about a third of its memory). Pass it to
/// [`SharedIndexInformer::set_transform`](crate::SharedIndexInformer::set_transform) as
/// `Arc::new(drop_managed_fields)`.
///
/// ```
/// use ctrlkit_cache::drop_managed_fields;
/// use k8s_openapi::api::core::v1::Pod;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
///
/// let mut pod = Pod::default();
/// pod.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
/// assert!(drop_managed_fields(pod).metadata.managed_fields.is_none());
/// ```
pub fn drop_managed_fields<K: Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = None;
    obj
}
