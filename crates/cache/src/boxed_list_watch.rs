//! A type-erased [`ListerWatcher`], so informers need no type parameter for their source.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use kube::api::{ListParams, ObjectList, WatchParams};

use crate::list_watch::{ListerWatcher, PageStream, WatchStream};

trait DynListerWatcher<K: Clone>: Send + Sync {
    fn list<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ObjectList<K>, kube::Error>>;
    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchStream<K>, kube::Error>>;
    fn list_pages(&self, params: ListParams) -> PageStream<'_, K>;
}

impl<K: Clone + Send + Sync + 'static, L: ListerWatcher<K>> DynListerWatcher<K> for L {
    fn list<'a>(
        &'a self,
        params: &'a ListParams,
    ) -> BoxFuture<'a, Result<ObjectList<K>, kube::Error>> {
        Box::pin(ListerWatcher::list(self, params))
    }
    fn watch<'a>(
        &'a self,
        params: &'a WatchParams,
        resource_version: &'a str,
    ) -> BoxFuture<'a, Result<WatchStream<K>, kube::Error>> {
        Box::pin(ListerWatcher::watch(self, params, resource_version))
    }
    fn list_pages(&self, params: ListParams) -> PageStream<'_, K> {
        ListerWatcher::list_pages(self, params)
    }
}

/// Any [`ListerWatcher`] behind one type; cheap to clone.
pub struct BoxListerWatcher<K: Clone>(Arc<dyn DynListerWatcher<K>>);

impl<K: Clone> Clone for BoxListerWatcher<K> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<K: Clone> std::fmt::Debug for BoxListerWatcher<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BoxListerWatcher")
    }
}

impl<K: Clone + Send + Sync + 'static> BoxListerWatcher<K> {
    /// Boxes `lister_watcher`.
    pub fn new(lister_watcher: impl ListerWatcher<K>) -> Self {
        Self(Arc::new(lister_watcher))
    }
}

impl<K: Clone + Send + Sync + 'static> ListerWatcher<K> for BoxListerWatcher<K> {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        self.0.list(params).await
    }
    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, kube::Error> {
        self.0.watch(params, resource_version).await
    }
    fn list_pages(&self, params: ListParams) -> PageStream<'_, K> {
        self.0.list_pages(params)
    }
}
