//! client-go's informer machinery for Rust: a local cache that is always eventually equal to
//! the API server, with indexes, and event handlers that (unless registered inline) never block
//! each other.
//!
//! A [`Reflector`] lists and watches through a [`ListerWatcher`] (any kube-client `Api<K>`) and
//! feeds a [`DeltaFifo`]; the [`SharedIndexInformer`] pops it, keeps an [`Indexer`] current and
//! hands every change to each registered handler through that handler's own buffer (or, for a
//! handler registered with [`Delivery::Inline`], calls it on the informer's task). Listers read
//! the indexer.

mod backoff;
mod boxed_list_watch;
mod decode;
mod decoding_page;
mod delta;
mod delta_fifo;
mod factory;
mod handler;
mod heap_room;
mod index;
mod informer_fifo;
mod informer_metrics;
mod key;
mod kube_source;
mod list_watch;
mod lister;
mod metadata;
mod page_writer;
mod processor;
mod real_fifo;
mod reflector;
mod reflector_error;
mod reflector_store;
mod shared_informer;
mod thread_safe_store;
mod transform;

pub use backoff::Backoff;
pub use boxed_list_watch::BoxListerWatcher;
pub use decode::{DecodeError, decode_list, decode_object, decode_watch_event};
pub use delta::{DeletedFinalStateUnknown, Delta, DeltaType, Deltas, ObjectOrTombstone};
pub use delta_fifo::{
    DeltaFifo, DeltaFifoOptions, FifoClosed, KnownObjects, ListedKeys, TransformFunc,
};
pub use factory::SharedInformerFactory;
pub use handler::{
    Delivery, FilteringResourceEventHandler, HandlerOptions, ResourceEventHandler,
    ResourceEventHandlerFuncs,
};
pub use index::{Indexer, NAMESPACE_INDEX, meta_namespace_index_func, namespace_indexers};
pub use informer_metrics::{InformerId, InformerMetrics};
pub use key::{
    KeyError, KeyFunc, deletion_handling_meta_namespace_key, meta_namespace_key,
    split_meta_namespace_key,
};
pub use list_watch::{
    ListerWatcher, PageStream, Request, ScriptedListerWatcher, WatchFeed, WatchStream,
};
pub use lister::{Lister, NamespaceLister};
pub use metadata::MetadataListerWatcher;
pub use real_fifo::RealFifo;
pub use reflector::{
    DEFAULT_PAGE_SIZE, INITIAL_EVENTS_END_ANNOTATION, MIN_WATCH_TIMEOUT_FLOOR, Reflector,
    ReflectorOptions,
};
pub use reflector_error::{ReflectorError, WatchErrorHandler};
pub use reflector_store::ReflectorStore;
pub use shared_informer::{
    InformerError, MINIMUM_RESYNC_PERIOD, ResourceEventHandlerRegistration, SharedIndexInformer,
};
pub use thread_safe_store::{IndexError, IndexFunc, Indexers, ThreadSafeStore};
pub use transform::drop_managed_fields;
