//! What a [`DeltaFifo`](crate::DeltaFifo) queues: one change to one object.

use std::sync::Arc;

/// The last state of a deleted object whose deletion was not seen, only inferred.
///
/// A relist that no longer contains a key turns it into a deletion, but the watch event that
/// carried the deletion was missed, so the object here is the last state the cache knew
/// (`None` if even that was gone). client-go calls it the same.
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    /// The key of the deleted object.
    pub key: String,
    /// The last known state of the object, possibly stale.
    pub obj: Option<Arc<K>>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            obj: self.obj.clone(),
        }
    }
}

/// A deleted object as a delete handler receives it: the object, or a tombstone when the
/// deletion was inferred from a relist.
#[derive(Debug)]
pub enum ObjectOrTombstone<K> {
    /// The object's final state, as the deletion event carried it.
    Object(Arc<K>),
    /// The deletion was missed; see [`DeletedFinalStateUnknown`].
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for ObjectOrTombstone<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Object(obj) => Self::Object(Arc::clone(obj)),
            Self::Tombstone(tombstone) => Self::Tombstone(tombstone.clone()),
        }
    }
}

impl<K> ObjectOrTombstone<K> {
    /// The object, or the tombstone's last known state.
    pub fn object(&self) -> Option<&Arc<K>> {
        match self {
            Self::Object(obj) => Some(obj),
            Self::Tombstone(tombstone) => tombstone.obj.as_ref(),
        }
    }

    /// Whether this is a tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Self::Tombstone(_))
    }
}

/// The kind of a [`Delta`], as client-go names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// The object was created.
    Added,
    /// The object was changed.
    Updated,
    /// The object was deleted.
    Deleted,
    /// The object was listed by a relist (only when the FIFO emits `Replaced`).
    Replaced,
    /// A periodic resync, or a relist when the FIFO does not emit `Replaced`.
    Sync,
}

/// One change to one object. Only a deletion can carry a tombstone.
#[derive(Debug)]
pub enum Delta<K> {
    /// The object was created.
    Added(Arc<K>),
    /// The object was changed.
    Updated(Arc<K>),
    /// The object was deleted, or its deletion inferred.
    Deleted(ObjectOrTombstone<K>),
    /// The object was listed by a relist.
    Replaced(Arc<K>),
    /// A periodic resync (or a relist when `Replaced` is not emitted).
    Sync(Arc<K>),
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Added(obj) => Self::Added(Arc::clone(obj)),
            Self::Updated(obj) => Self::Updated(Arc::clone(obj)),
            Self::Deleted(obj) => Self::Deleted(obj.clone()),
            Self::Replaced(obj) => Self::Replaced(Arc::clone(obj)),
            Self::Sync(obj) => Self::Sync(Arc::clone(obj)),
        }
    }
}

impl<K> Delta<K> {
    /// This delta's kind.
    pub fn delta_type(&self) -> DeltaType {
        match self {
            Self::Added(_) => DeltaType::Added,
            Self::Updated(_) => DeltaType::Updated,
            Self::Deleted(_) => DeltaType::Deleted,
            Self::Replaced(_) => DeltaType::Replaced,
            Self::Sync(_) => DeltaType::Sync,
        }
    }

    /// The object the delta carries (a tombstone's last known state for an inferred deletion).
    pub fn object(&self) -> Option<&Arc<K>> {
        match self {
            Self::Added(obj) | Self::Updated(obj) | Self::Replaced(obj) | Self::Sync(obj) => {
                Some(obj)
            }
            Self::Deleted(deleted) => deleted.object(),
        }
    }

    pub(crate) fn of_type(delta_type: DeltaType, obj: Arc<K>) -> Self {
        match delta_type {
            DeltaType::Added => Self::Added(obj),
            DeltaType::Updated => Self::Updated(obj),
            DeltaType::Deleted => Self::Deleted(ObjectOrTombstone::Object(obj)),
            DeltaType::Replaced => Self::Replaced(obj),
            DeltaType::Sync => Self::Sync(obj),
        }
    }
}

/// Every delta queued for one key, oldest first. Never empty when handed out by a pop.
#[derive(Debug)]
pub struct Deltas<K>(pub(crate) Vec<Delta<K>>);

impl<K> Clone for Deltas<K> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<K> Deltas<K> {
    /// The oldest delta.
    pub fn oldest(&self) -> Option<&Delta<K>> {
        self.0.first()
    }

    /// The newest delta.
    pub fn newest(&self) -> Option<&Delta<K>> {
        self.0.last()
    }

    /// The deltas as a vector, oldest first.
    pub fn into_vec(self) -> Vec<Delta<K>> {
        self.0
    }
}

impl<K> std::ops::Deref for Deltas<K> {
    type Target = [Delta<K>];
    fn deref(&self) -> &[Delta<K>] {
        &self.0
    }
}

impl<K> IntoIterator for Deltas<K> {
    type Item = Delta<K>;
    type IntoIter = std::vec::IntoIter<Delta<K>>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}
