//! What an informer calls when objects change: client-go's `ResourceEventHandler`.

use std::sync::Arc;

use crate::delta::ObjectOrTombstone;

/// Receives an informer's notifications. Every method has an empty default, so a handler
/// implements only what it needs.
///
/// Each handler registered on an informer has its own unbounded buffer and its own task: a slow
/// handler delays only itself, never another handler or the informer. Calls to one handler are
/// sequential and in order. Keep them short (typically: put a key on a work queue). A handler
/// registered with [`Delivery::Inline`] is called on the informer's own task instead.
pub trait ResourceEventHandler<K>: Send + Sync + 'static {
    /// An object was added; `is_in_initial_list` is true for objects of the informer's first
    /// list (and for the synthetic adds a handler registered late receives).
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        let _ = (obj, is_in_initial_list);
    }

    /// An object changed, or a periodic resync re-delivered it (then `old` and `new` have the
    /// same resourceVersion).
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let _ = (old, new);
    }

    /// An object was deleted. A tombstone means the deletion was inferred from a relist; it
    /// carries the last state the cache knew.
    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        let _ = obj;
    }
}

/// Where a registered handler runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Delivery {
    /// client-go's way: the handler has its own unbounded buffer and its own task, so a handler
    /// that is slow, or blocks, delays only itself.
    #[default]
    Buffered,
    /// The informer's own task calls the handler right after it applies each change to the
    /// cache, as kube-runtime's reflector hands each event to the stream that polls it: no
    /// buffer, and no wake of another task or thread per change. For handlers that return at
    /// once, as one that puts a key on a work queue does. While the handler runs the watch waits,
    /// and so do the informer's other handlers' notifications. It may read the informer's cache
    /// and ask whether it has synced, but must not add or remove handlers of the same informer
    /// (the informer holds its handler list while it calls).
    Inline,
}

/// How a handler is registered: client-go's `HandlerOptions`, and where the handler runs.
///
/// ```
/// use ctrlkit_cache::{Delivery, HandlerOptions};
///
/// let options = HandlerOptions { delivery: Delivery::Inline, ..Default::default() };
/// assert_eq!(options.resync_period, None); // the informer's default
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandlerOptions {
    /// How often the handler gets every cached object again (zero: never); `None`: the
    /// informer's default resync period.
    pub resync_period: Option<std::time::Duration>,
    /// Where the handler runs.
    pub delivery: Delivery,
}

type AddFunc<K> = Box<dyn Fn(&Arc<K>, bool) + Send + Sync>;
type UpdateFunc<K> = Box<dyn Fn(&Arc<K>, &Arc<K>) + Send + Sync>;
type DeleteFunc<K> = Box<dyn Fn(&ObjectOrTombstone<K>) + Send + Sync>;

/// A handler made of closures; client-go's `ResourceEventHandlerFuncs`. Missing closures are
/// no-ops.
///
/// ```
/// use ctrlkit_cache::ResourceEventHandlerFuncs;
/// use k8s_openapi::api::core::v1::Pod;
///
/// let handler = ResourceEventHandlerFuncs::<Pod>::new()
///     .on_add(|pod, _initial| println!("added {:?}", pod.metadata.name))
///     .on_delete(|pod| println!("deleted {:?}", pod.object().map(|p| &p.metadata.name)));
/// # drop(handler);
/// ```
pub struct ResourceEventHandlerFuncs<K> {
    add: Option<AddFunc<K>>,
    update: Option<UpdateFunc<K>>,
    delete: Option<DeleteFunc<K>>,
}

impl<K> Default for ResourceEventHandlerFuncs<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> ResourceEventHandlerFuncs<K> {
    /// A handler that does nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls `f` for additions.
    #[must_use]
    pub fn on_add(mut self, f: impl Fn(&Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Calls `f` for updates and resyncs.
    #[must_use]
    pub fn on_update(mut self, f: impl Fn(&Arc<K>, &Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Calls `f` for deletions.
    #[must_use]
    pub fn on_delete(mut self, f: impl Fn(&ObjectOrTombstone<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: 'static> ResourceEventHandler<K> for ResourceEventHandlerFuncs<K> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if let Some(add) = &self.add {
            add(obj, is_in_initial_list);
        }
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(update) = &self.update {
            update(old, new);
        }
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        if let Some(delete) = &self.delete {
            delete(obj);
        }
    }
}

/// Passes on only the notifications about objects `filter` accepts; client-go's
/// `FilteringResourceEventHandler`.
///
/// An update whose new state passes and old state does not becomes an add; the reverse becomes
/// a delete (of the old state), so the inner handler sees the filtered set as if it were the
/// whole world. A tombstone without a last known state is passed on.
pub struct FilteringResourceEventHandler<K, H> {
    filter: Box<dyn Fn(&K) -> bool + Send + Sync>,
    handler: H,
}

impl<K, H> FilteringResourceEventHandler<K, H> {
    /// Wraps `handler` behind `filter`.
    pub fn new(filter: impl Fn(&K) -> bool + Send + Sync + 'static, handler: H) -> Self {
        Self {
            filter: Box::new(filter),
            handler,
        }
    }
}

impl<K: 'static, H: ResourceEventHandler<K>> ResourceEventHandler<K>
    for FilteringResourceEventHandler<K, H>
{
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if (self.filter)(obj) {
            self.handler.on_add(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        match ((self.filter)(old), (self.filter)(new)) {
            (true, true) => self.handler.on_update(old, new),
            (false, true) => self.handler.on_add(new, false),
            (true, false) => self
                .handler
                .on_delete(&ObjectOrTombstone::Object(Arc::clone(old))),
            (false, false) => {}
        }
    }

    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        if obj.object().is_none_or(|obj| (self.filter)(obj)) {
            self.handler.on_delete(obj);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl ResourceEventHandler<i32> for Arc<Recorder> {
        fn on_add(&self, obj: &Arc<i32>, _: bool) {
            self.0.lock().unwrap().push(format!("add {obj}"));
        }
        fn on_update(&self, old: &Arc<i32>, new: &Arc<i32>) {
            self.0.lock().unwrap().push(format!("update {old}->{new}"));
        }
        fn on_delete(&self, obj: &ObjectOrTombstone<i32>) {
            let obj = obj.object().map(|o| o.to_string()).unwrap_or_default();
            self.0.lock().unwrap().push(format!("delete {obj}"));
        }
    }

    #[test]
    fn filtering_turns_updates_across_the_filter_into_adds_and_deletes() {
        let recorder = Arc::new(Recorder::default());
        let even = FilteringResourceEventHandler::new(|n: &i32| n % 2 == 0, Arc::clone(&recorder));
        even.on_add(&Arc::new(1), false);
        even.on_add(&Arc::new(2), false);
        even.on_update(&Arc::new(2), &Arc::new(4));
        even.on_update(&Arc::new(4), &Arc::new(5));
        even.on_update(&Arc::new(5), &Arc::new(6));
        even.on_update(&Arc::new(7), &Arc::new(9));
        even.on_delete(&ObjectOrTombstone::Object(Arc::new(3)));
        even.on_delete(&ObjectOrTombstone::Object(Arc::new(6)));
        assert_eq!(
            *recorder.0.lock().unwrap(),
            ["add 2", "update 2->4", "delete 4", "add 6", "delete 6"]
        );
    }
}
