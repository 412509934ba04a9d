//! The queue between an informer's reflector and its handlers: client-go's DeltaFIFO (the
//! default) or its RealFIFO, one interface for the informer to drive.

use std::sync::Arc;

use crate::delta::Deltas;
use crate::delta_fifo::{DeltaFifo, DeltaFifoOptions, FifoClosed, ListedKeys};
use crate::key::KeyError;
use crate::real_fifo::RealFifo;
use crate::reflector_store::ReflectorStore;

/// One of the two FIFOs.
pub(crate) enum InformerFifo<K> {
    /// Changes gathered per key until popped.
    Delta(DeltaFifo<K>),
    /// Every change on its own, in arrival order.
    Real(RealFifo<K>),
}

impl<K: Clone + Send + Sync> InformerFifo<K> {
    pub(crate) fn new(real: bool, options: DeltaFifoOptions<K>) -> Self {
        if real {
            Self::Real(RealFifo::new(options))
        } else {
            Self::Delta(DeltaFifo::new(options))
        }
    }

    /// Keys queued (DeltaFIFO) or changes queued (RealFIFO), as client-go counts them.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Delta(fifo) => fifo.len(),
            Self::Real(fifo) => fifo.len(),
        }
    }

    pub(crate) fn has_synced(&self) -> bool {
        match self {
            Self::Delta(fifo) => fifo.has_synced(),
            Self::Real(fifo) => fifo.has_synced(),
        }
    }

    pub(crate) async fn wait_for_sync(&self) {
        match self {
            Self::Delta(fifo) => fifo.wait_for_sync().await,
            Self::Real(fifo) => fifo.wait_for_sync().await,
        }
    }

    pub(crate) fn resync(&self) {
        match self {
            Self::Delta(fifo) => fifo.resync(),
            Self::Real(fifo) => fifo.resync(),
        }
    }

    pub(crate) fn close(&self) {
        match self {
            Self::Delta(fifo) => fifo.close(),
            Self::Real(fifo) => fifo.close(),
        }
    }

    pub(crate) async fn pop<R>(
        &self,
        process: impl FnOnce(&str, Deltas<K>, bool) -> R,
    ) -> Result<R, FifoClosed> {
        match self {
            Self::Delta(fifo) => fifo.pop(process).await,
            Self::Real(fifo) => fifo.pop(process).await,
        }
    }
}

impl<K: Clone + Send + Sync> ReflectorStore<K> for InformerFifo<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        match self {
            Self::Delta(fifo) => fifo.add(obj),
            Self::Real(fifo) => fifo.add(obj),
        }
    }
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        match self {
            Self::Delta(fifo) => fifo.update(obj),
            Self::Real(fifo) => fifo.update(obj),
        }
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError> {
        match self {
            Self::Delta(fifo) => fifo.delete(obj),
            Self::Real(fifo) => fifo.delete(obj),
        }
    }
    fn replace_page(&self, page: Vec<Arc<K>>, listed: &mut ListedKeys) -> Result<(), KeyError> {
        match self {
            Self::Delta(fifo) => fifo.replace_page(page, listed),
            Self::Real(fifo) => fifo.replace_page(page, listed),
        }
    }
    fn replace_finish(&self, listed: ListedKeys, _resource_version: &str) {
        match self {
            Self::Delta(fifo) => fifo.replace_finish(listed),
            Self::Real(fifo) => fifo.replace_finish(listed),
        }
    }
}
