//! Objects an informer is done with, freed in batches on the decoding threads.
//!
//! An update's old state and a deleted object are freed once every handler has seen them: for a
//! k8s-openapi object, dozens of strings, maps and `serde_json` trees. Freed by the task that
//! runs the handler, that is a third of the work a watch burst leaves on the runtime's threads,
//! and under glibc each block goes back across threads to the heap of the decoding thread that
//! made it. Handed to the decoding threads in batches instead, the freeing runs beside the
//! decoding, and the freed blocks are at hand for the next objects decoded there.

use std::sync::Arc;

use crate::decode_pool;

/// How many objects are freed as one job.
const BATCH: usize = 64;

/// Objects waiting to be freed on a decoding thread.
pub(crate) struct RetiredObjects<K: Send + Sync + 'static> {
    batch: Vec<Arc<K>>,
}

impl<K: Send + Sync + 'static> RetiredObjects<K> {
    pub(crate) fn new() -> Self {
        Self { batch: Vec::new() }
    }

    /// Lets go of `obj`: at once if something else still holds it, else with the next batch.
    pub(crate) fn retire(&mut self, obj: Arc<K>) {
        if Arc::strong_count(&obj) > 1 {
            return;
        }
        if self.batch.capacity() == 0 {
            self.batch.reserve_exact(BATCH);
        }
        self.batch.push(obj);
        if self.batch.len() >= BATCH {
            self.flush();
        }
    }

    /// Hands the objects retired so far to a decoding thread.
    pub(crate) fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        // Nobody waits for the job; dropping its handle leaves it to run.
        drop(decode_pool::spawn(move || drop(batch)));
    }
}

impl<K: Send + Sync + 'static> Drop for RetiredObjects<K> {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Weak;
    use std::time::Duration;

    use super::*;

    /// Waits until every one of `objects` is freed.
    async fn freed(objects: &[Weak<String>]) -> bool {
        for _ in 0..500 {
            if objects.iter().all(|obj| obj.strong_count() == 0) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        false
    }

    #[tokio::test]
    async fn objects_are_freed_on_a_decoding_thread_in_batches() {
        let mut retired = RetiredObjects::new();
        let objects: Vec<Arc<String>> = (0..BATCH).map(|n| Arc::new(n.to_string())).collect();
        let watched: Vec<Weak<String>> = objects.iter().map(Arc::downgrade).collect();
        let mut objects = objects.into_iter();
        for obj in objects.by_ref().take(BATCH - 1) {
            retired.retire(obj);
        }
        // Short of a batch, nothing is freed yet.
        assert!(watched.iter().all(|obj| obj.strong_count() == 1));
        retired.retire(objects.next().unwrap());
        assert!(freed(&watched).await);
    }

    #[tokio::test]
    async fn a_flush_or_a_drop_frees_a_partial_batch_and_shared_objects_are_not_held() {
        let mut retired = RetiredObjects::new();
        let alone = Arc::new("alone".to_owned());
        let watched = [Arc::downgrade(&alone)];
        retired.retire(alone);
        retired.flush();
        assert!(freed(&watched).await);

        let shared = Arc::new("shared".to_owned());
        retired.retire(Arc::clone(&shared));
        // Only the reference given was let go; the batch holds nothing.
        assert_eq!(Arc::strong_count(&shared), 1);
        let last = Arc::new("last".to_owned());
        let watched = [Arc::downgrade(&last)];
        retired.retire(last);
        drop(retired);
        assert!(freed(&watched).await);
    }
}
