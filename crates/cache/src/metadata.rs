//! Metadata-only lists and watches, for informers that need names, labels and owners only.

use std::fmt::Debug;

use kube::api::{ListParams, ObjectList, WatchParams};
use kube::core::PartialObjectMeta;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::kube_source;
use crate::list_watch::{ListerWatcher, PageStream, WatchStream};

/// Lists and watches only the metadata of `K` (kube-apiserver answers with
/// `PartialObjectMetadata`), so an informer over it caches a few hundred bytes per object
/// instead of the whole object.
///
/// ```no_run
/// use std::time::Duration;
/// use ctrlkit_cache::{MetadataListerWatcher, SharedIndexInformer};
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::core::PartialObjectMeta;
/// use kube::{Api, Client};
///
/// # async fn doc() -> Result<(), kube::Error> {
/// let pods = Api::<Pod>::all(Client::try_default().await?);
/// let informer: SharedIndexInformer<PartialObjectMeta<Pod>> =
///     SharedIndexInformer::new(MetadataListerWatcher::new(pods), Duration::ZERO, Default::default());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MetadataListerWatcher<K> {
    api: Api<K>,
}

impl<K> Debug for MetadataListerWatcher<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataListerWatcher")
            .finish_non_exhaustive()
    }
}

impl<K> MetadataListerWatcher<K> {
    /// Lists and watches the metadata of what `api` addresses.
    pub fn new(api: Api<K>) -> Self {
        Self { api }
    }
}

impl<K> ListerWatcher<PartialObjectMeta<K>> for MetadataListerWatcher<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    async fn list(
        &self,
        params: &ListParams,
    ) -> Result<ObjectList<PartialObjectMeta<K>>, kube::Error> {
        let request = kube::core::Request::new(self.api.resource_url())
            .list_metadata(params)
            .map_err(kube::Error::BuildRequest)?;
        kube_source::list(&Client::from(self.api.clone()), request).await
    }

    fn list_pages(&self, params: ListParams) -> PageStream<'_, PartialObjectMeta<K>> {
        let request = kube::core::Request::new(self.api.resource_url());
        kube_source::list_pages(
            Client::from(self.api.clone()),
            request,
            params,
            |request, params| request.list_metadata(params),
        )
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<PartialObjectMeta<K>>, kube::Error> {
        let request = kube::core::Request::new(self.api.resource_url())
            .watch_metadata(params, resource_version)
            .map_err(kube::Error::BuildRequest)?;
        kube_source::watch(&Client::from(self.api.clone()), request).await
    }
}
