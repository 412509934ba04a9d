//! The guard `get` hands out: the item, marked done when the guard is dropped.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

#[doc(hidden)]
pub use crate::core::Ticket;

/// A queue that hands out [`WorkItem`]s. Sealed: implemented by this crate's queues and by
/// references to them.
pub trait QueueHandle<T>: sealed::Sealed + Clone {
    /// Marks the item of `ticket` as processed (client-go's `Done`).
    #[doc(hidden)]
    fn finish(&self, ticket: Ticket);
}

/// A queue that can add an item after a delay. Sealed.
pub trait DelayingHandle<T>: QueueHandle<T> {
    /// Adds `item` after `delay`.
    #[doc(hidden)]
    fn requeue_after(&self, item: T, delay: Duration);
}

/// A queue with a rate limiter. Sealed.
pub trait RateLimitedHandle<T>: DelayingHandle<T> {
    /// Adds `item` after its rate limiter's wait.
    #[doc(hidden)]
    fn requeue_rate_limited(&self, item: T);
    /// The rate limiter stops tracking `item`.
    #[doc(hidden)]
    fn forget(&self, item: &T);
    /// The rate limiter's failure count of `item`.
    #[doc(hidden)]
    fn num_requeues(&self, item: &T) -> usize;
}

pub(crate) mod sealed {
    /// Keeps [`QueueHandle`](super::QueueHandle) to this crate's queues.
    pub trait Sealed {}

    impl<Q: Sealed> Sealed for &Q {}
}

/// A borrowed queue is a handle too: the guard `get` hands out borrows the queue it came from,
/// and costs no reference count.
impl<T, Q: QueueHandle<T>> QueueHandle<T> for &Q {
    fn finish(&self, ticket: Ticket) {
        (**self).finish(ticket);
    }
}

impl<T, Q: DelayingHandle<T>> DelayingHandle<T> for &Q {
    fn requeue_after(&self, item: T, delay: Duration) {
        (**self).requeue_after(item, delay);
    }
}

impl<T, Q: RateLimitedHandle<T>> RateLimitedHandle<T> for &Q {
    fn requeue_rate_limited(&self, item: T) {
        (**self).requeue_rate_limited(item);
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
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
/// `get` hands out a guard that borrows the queue (`Q` is `&Queue<T>`, `&RateLimitingQueue<T>`,
/// …), as a client-go worker loop holds its queue: no reference count is taken per item. To move
/// the item into a spawned task, [`into_owned`](WorkItem::into_owned) turns it into a guard that
/// owns a handle of the queue; a borrowed guard that would outlive its queue does not compile.
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

impl<T: Clone, Q: DelayingHandle<T>> WorkItem<T, Q> {
    /// The item comes back after `delay` (its failure count unchanged), and processing ends.
    pub fn requeue_after(self, delay: Duration) {
        self.queue.requeue_after(self.item.clone(), delay);
    }
}

impl<T: Clone, Q: RateLimitedHandle<T>> WorkItem<T, Q> {
    /// Success: the rate limiter forgets the item's failures, and processing ends.
    pub fn forget(self) {
        self.queue.forget(&self.item);
    }

    /// Failure: the item comes back after its rate limiter's wait, and processing ends.
    pub fn requeue_rate_limited(self) {
        self.queue.requeue_rate_limited(self.item.clone());
    }

    /// How many times the item has been rate-limited since it was last forgotten.
    pub fn num_requeues(&self) -> usize {
        self.queue.num_requeues(&self.item)
    }
}

impl<T: Clone, Q: QueueHandle<T>> WorkItem<T, &Q> {
    /// The same item under a guard that owns a handle of the queue (one more reference count),
    /// for moving it into a spawned task. Processing goes on; the new guard ends it.
    ///
    /// ```
    /// use ctrlkit_workqueue::Queue;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = Queue::new();
    /// queue.add("default/foo".to_string());
    /// let item = queue.get().await.unwrap().into_owned();
    /// let worker = tokio::spawn(async move {
    ///     assert_eq!(*item, "default/foo");
    /// }); // done when the task drops the guard
    /// worker.await.unwrap();
    /// assert_eq!(queue.len(), 0);
    /// # }
    /// ```
    pub fn into_owned(mut self) -> WorkItem<T, Q> {
        let ticket = std::mem::replace(&mut self.ticket, Ticket::HANDED_ON);
        WorkItem::new(self.item.clone(), ticket, Q::clone(self.queue))
    }
}

impl<T, Q: QueueHandle<T>> Drop for WorkItem<T, Q> {
    fn drop(&mut self) {
        if self.ticket != Ticket::HANDED_ON {
            self.queue.finish(self.ticket);
        }
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
