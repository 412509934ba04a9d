//! The guard `get` hands out: the item, marked done when the guard is dropped.

use std::fmt;
use std::ops::Deref;

#[doc(hidden)]
pub use crate::core::Ticket;

/// A queue that hands out [`WorkItem`]s. Sealed: implemented by this crate's queues only.
pub trait QueueHandle<T>: sealed::Sealed + Clone {
    /// Marks the item of `ticket` as processed (client-go's `Done`).
    #[doc(hidden)]
    fn finish(&self, ticket: Ticket);
}

pub(crate) mod sealed {
    /// Keeps [`QueueHandle`](super::QueueHandle) to this crate's queues.
    pub trait Sealed {}
}

/// An item handed out by a queue's `get`, being processed until this guard is dropped.
///
/// Dropping the guard marks the item done, whether the worker returns normally, returns early
/// with `?` or panics, so the item can never be stuck in the processing set by a forgotten `done`.
/// The guard dereferences to the item. On a rate-limiting queue it also ends processing in the
/// three ways a controller does: [`forget`](WorkItem::forget) on success,
/// [`requeue_rate_limited`](WorkItem::requeue_rate_limited) on error, and
/// [`requeue_after`](WorkItem::requeue_after) for a planned retry.
///
/// ```
/// use ctrlkit_workqueue::Queue;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let queue = Queue::new();
/// queue.add("default/foo");
/// {
///     let item = queue.get().await.unwrap();
///     assert_eq!(*item, "default/foo");
///     queue.add("default/foo"); // added while processing: handed out again after done
/// } // the guard drops here: done
/// assert_eq!(queue.len(), 1);
/// # }
/// ```
#[must_use = "dropping the item at once marks it done without processing it"]
pub struct WorkItem<T, Q: QueueHandle<T>> {
    item: T,
    ticket: Ticket,
    queue: Q,
}

impl<T, Q: QueueHandle<T>> WorkItem<T, Q> {
    pub(crate) fn new(item: T, ticket: Ticket, queue: Q) -> Self {
        Self {
            item,
            ticket,
            queue,
        }
    }

    /// The item.
    pub fn item(&self) -> &T {
        &self.item
    }

    /// The queue that handed the item out.
    pub fn queue(&self) -> &Q {
        &self.queue
    }

    /// Marks the item done now (the same as dropping the guard).
    pub fn done(self) {}
}

impl<T, Q: QueueHandle<T>> Drop for WorkItem<T, Q> {
    fn drop(&mut self) {
        self.queue.finish(self.ticket);
    }
}

impl<T, Q: QueueHandle<T>> Deref for WorkItem<T, Q> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.item
    }
}

impl<T: fmt::Debug, Q: QueueHandle<T>> fmt::Debug for WorkItem<T, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WorkItem").field(&self.item).finish()
    }
}
