//! The queue between an informer's reflector and its cache: client-go's DeltaFIFO (the default)
//! or its RealFIFO, one interface for the informer to drive, drained by whoever queues.

use std::sync::Arc;

use crate::delta::Deltas;
use crate::delta_fifo::{DeltaFifo, DeltaFifoOptions, ListedKeys};
use crate::informer_metrics::InformerSeries;
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

    /// Pops the next key (DeltaFIFO) or change (RealFIFO) into `process`, under the FIFO's
    /// lock; `None` when nothing is queued.
    pub(crate) fn try_pop<R>(&self, process: impl FnOnce(&str, Deltas<K>, bool) -> R) -> Option<R> {
        match self {
            Self::Delta(fifo) => fifo.try_pop(process),
            Self::Real(fifo) => fifo.try_pop(process),
        }
    }
}

/// What a popped key's deltas are handed to: the key, its deltas, and whether they belong to
/// the initial list.
pub(crate) type Process<K> = Box<dyn Fn(&str, Deltas<K>, bool) + Send + Sync>;

/// The reflector's store in an informer: each change is queued in the FIFO and at once popped
/// into the informer's processing (its cache, then its handlers) by the task that queued
/// it, so that no task sits between the reflector and the cache and a watch event is decoded,
/// queued and applied without waking another thread. The FIFO keeps its client-go semantics (a
/// relist's tombstones, collapsed deletions, `has_synced`), and each pop still runs under its
/// lock, so pops from the reflector's task and from the resync ticker are applied one at a time
/// and in order.
pub(crate) struct DrainedFifo<K> {
    fifo: Arc<InformerFifo<K>>,
    process: Process<K>,
    metrics: Option<InformerSeries>,
}

impl<K: Clone + Send + Sync> DrainedFifo<K> {
    pub(crate) fn new(
        fifo: Arc<InformerFifo<K>>,
        process: Process<K>,
        metrics: Option<InformerSeries>,
    ) -> Self {
        Self {
            fifo,
            process,
            metrics,
        }
    }

    /// Queues a resync (see [`InformerFifo::resync`]) and applies it.
    pub(crate) fn resync(&self) {
        self.fifo.resync();
        self.drain();
    }

    /// Pops everything queued into the processing.
    fn drain(&self) {
        while self.fifo.try_pop(&self.process).is_some() {
            if let Some(metrics) = &self.metrics {
                metrics.queued(self.fifo.len());
            }
        }
    }

    /// Runs `queue`, then applies what it queued (also when it failed for some objects: the
    /// rest were queued).
    fn queued<T>(&self, queue: impl FnOnce(&InformerFifo<K>) -> T) -> T {
        let result = queue(&self.fifo);
        self.drain();
        result
    }
}

impl<K: Clone + Send + Sync> ReflectorStore<K> for DrainedFifo<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.queued(|fifo| match fifo {
            InformerFifo::Delta(fifo) => fifo.add(obj),
            InformerFifo::Real(fifo) => fifo.add(obj),
        })
    }
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.queued(|fifo| match fifo {
            InformerFifo::Delta(fifo) => fifo.update(obj),
            InformerFifo::Real(fifo) => fifo.update(obj),
        })
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.queued(|fifo| match fifo {
            InformerFifo::Delta(fifo) => fifo.delete(obj),
            InformerFifo::Real(fifo) => fifo.delete(obj),
        })
    }
    fn replace_page(&self, page: Vec<Arc<K>>, listed: &mut ListedKeys) -> Result<(), KeyError> {
        self.queued(|fifo| match fifo {
            InformerFifo::Delta(fifo) => fifo.replace_page(page, listed),
            InformerFifo::Real(fifo) => fifo.replace_page(page, listed),
        })
    }
    fn replace_finish(&self, listed: ListedKeys, _resource_version: &str) {
        self.queued(|fifo| match fifo {
            InformerFifo::Delta(fifo) => fifo.replace_finish(listed),
            InformerFifo::Real(fifo) => fifo.replace_finish(listed),
        });
    }
}
