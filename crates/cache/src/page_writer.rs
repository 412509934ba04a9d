//! Writing list pages into a reflector's store on a blocking thread.

use std::sync::Arc;

use crate::delta_fifo::ListedKeys;
use crate::key::KeyError;
use crate::reflector_store::ReflectorStore;

/// Writes list pages into the store one at a time, each on a blocking thread.
pub(crate) struct PageWriter<K> {
    store: Arc<dyn ReflectorStore<K>>,
    /// The keys listed so far; away while a page is being written.
    pub(crate) listed: Option<ListedKeys>,
    writing: Option<tokio::task::JoinHandle<(ListedKeys, Option<KeyError>)>>,
}

impl<K: Send + Sync + 'static> PageWriter<K> {
    pub(crate) fn new(store: Arc<dyn ReflectorStore<K>>) -> Self {
        Self {
            store,
            listed: Some(ListedKeys::new()),
            writing: None,
        }
    }

    /// Waits for the page being written; the first object without a key it met.
    pub(crate) async fn wait(&mut self) -> Option<KeyError> {
        let writing = self.writing.take()?;
        match writing.await {
            Ok((listed, error)) => {
                self.listed = Some(listed);
                error
            }
            Err(err) => {
                // The store panicked on this page (or the runtime shutting down cancelled
                // it, which is no error); its keys are lost, so the relist finishes with what
                // it has and the next one repairs the rest.
                if err.is_cancelled() {
                    tracing::debug!(%err, "storing a list page was cancelled");
                } else {
                    tracing::error!(%err, "storing a list page failed");
                }
                self.listed = Some(ListedKeys::new());
                None
            }
        }
    }

    /// Starts writing `items`; call [`wait`](Self::wait) first.
    pub(crate) fn write(&mut self, items: Vec<Arc<K>>) {
        let mut listed = self.listed.take().unwrap_or_default();
        let store = Arc::clone(&self.store);
        self.writing = Some(tokio::task::spawn_blocking(move || {
            let error = store.replace_page(items, &mut listed).err();
            (listed, error)
        }));
    }
}
