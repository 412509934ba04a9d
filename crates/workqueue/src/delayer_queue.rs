//! What the three queues built on a [`Delayer`](crate::delaying::Delayer) share, written once:
//! [`DelayingQueue`](crate::DelayingQueue), [`RateLimitingQueue`](crate::RateLimitingQueue) and
//! [`PriorityQueue`](crate::PriorityQueue) differ in how items are added, and in nothing else.
//!
//! A queue type that uses [`delayer_queue_methods!`] has a field `inner: Arc<Delayer<T, _>>`
//! and an inherent `add_after(&self, T, Duration)`; with `rate_limited`, also inherent
//! `add_rate_limited`, `forget` and `num_requeues`.

/// Implements the shared inherent methods (`len`, `is_empty`, `waiting_len`, `get`, `done`,
/// `shut_down`, `shut_down_with_drain`, `shutting_down`), `Debug`, and the handle traits a
/// [`WorkItem`](crate::WorkItem) ends its item through.
macro_rules! delayer_queue_methods {
    ($queue:ident) => {
        impl<T: Clone + ::std::hash::Hash + Eq + Send + 'static> $queue<T> {
            /// How many items are ready to be handed out (not counting those waiting for a
            /// delay).
            pub fn len(&self) -> usize {
                self.inner.core.len()
            }

            /// Whether no item is ready to be handed out.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// How many items wait for their delay to pass.
            pub fn waiting_len(&self) -> usize {
                self.inner.core.waiting_len()
            }

            /// Waits for the next item (in a priority queue, the ready item of highest
            /// priority); `None` only when shut down and empty. Cancel-safe.
            pub async fn get(&self) -> Option<$crate::WorkItem<T, &Self>> {
                $crate::delaying::Delayer::ensure_timer(&self.inner);
                let (item, ticket) = self.inner.core.get().await?;
                Some($crate::WorkItem::new(item, ticket, self))
            }

            /// Marks `item` as processed (dropping the [`WorkItem`](crate::WorkItem) does the
            /// same).
            pub fn done(&self, item: &T) {
                self.inner.core.done_item(item);
            }

            /// Drops further adds and the items waiting for a delay, stops the timer, and makes
            /// idle `get`s return `None`.
            pub fn shut_down(&self) {
                self.inner.shut_down();
            }

            /// Shuts down, then waits until every item handed out is done.
            pub async fn shut_down_with_drain(&self) {
                self.inner.shut_down_with_drain().await;
            }

            /// Whether the queue is shutting down.
            pub fn shutting_down(&self) -> bool {
                self.inner.core.shutting_down()
            }
        }

        impl<T: Clone + ::std::hash::Hash + Eq + Send + 'static> ::std::fmt::Debug for $queue<T> {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($queue))
                    .field("len", &self.len())
                    .field("waiting", &self.waiting_len())
                    .field("shutting_down", &self.shutting_down())
                    .finish()
            }
        }

        impl<T: Clone + ::std::hash::Hash + Eq + Send + 'static> $crate::item::sealed::Sealed
            for $queue<T>
        {
        }

        impl<T: Clone + ::std::hash::Hash + Eq + Send + 'static> $crate::QueueHandle<T>
            for $queue<T>
        {
            fn finish(&self, ticket: $crate::item::Ticket) {
                self.inner.core.done(ticket);
            }
        }

        impl<T: Clone + ::std::hash::Hash + Eq + Send + 'static> $crate::DelayingHandle<T>
            for $queue<T>
        {
            fn requeue_after(&self, item: T, delay: ::std::time::Duration) {
                self.add_after(item, delay);
            }
        }
    };
    ($queue:ident, rate_limited) => {
        $crate::delayer_queue::delayer_queue_methods!($queue);

        impl<T: Clone + ::std::hash::Hash + Eq + Send + 'static> $crate::RateLimitedHandle<T>
            for $queue<T>
        {
            fn requeue_rate_limited(&self, item: T) {
                self.add_rate_limited(item);
            }
            fn forget(&self, item: &T) {
                $queue::forget(self, item);
            }
            fn num_requeues(&self, item: &T) -> usize {
                $queue::num_requeues(self, item)
            }
        }
    };
}

pub(crate) use delayer_queue_methods;
