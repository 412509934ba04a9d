//! Where a reflector gets its objects: a list, then a watch.
//!
//! Any kube-client [`Api<K>`] is a [`ListerWatcher`] (typed resources and `DynamicObject`
//! alike: requests go through kube-client, bodies are decoded by ctrlkit, see
//! [`decode_object`](crate::decode_object)); [`ScriptedListerWatcher`] plays back scripted
//! answers for unit tests.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use futures_util::stream::{BoxStream, StreamExt};
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::{Api, Client};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, mpsc};

use crate::kube_source;

/// A stream of watch events.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, kube::Error>>;

/// The pages of a paginated list, each object in the `Arc` a reflector's store keeps it in.
pub type PageStream<'a, K> = BoxStream<'a, Result<ObjectList<Arc<K>>, kube::Error>>;

/// The continuation of `params` after a page that says `continue_token`, if it says one.
pub(crate) fn next_page(
    mut params: ListParams,
    continue_token: Option<&str>,
) -> Option<ListParams> {
    let token = continue_token.filter(|token| !token.is_empty())?;
    params.continue_token = Some(token.to_owned());
    params.resource_version = None;
    params.version_match = None;
    Some(params)
}

/// Pages asked for one after the other through [`ListerWatcher::list`].
fn pages_one_by_one<K, L>(lister_watcher: &L, params: ListParams) -> PageStream<'_, K>
where
    K: Clone + Send + Sync + 'static,
    L: ListerWatcher<K> + ?Sized,
{
    futures_util::stream::unfold(Some(params), move |params| async move {
        let params = params?;
        let page = lister_watcher.list(&params).await;
        let next = match &page {
            Ok(list) => next_page(params, list.metadata.continue_.as_deref()),
            Err(_) => None,
        };
        Some((page.map(shared_items), next))
    })
    .boxed()
}

/// `list` with each item in an `Arc`.
pub(crate) fn shared_items<K: Clone>(list: ObjectList<K>) -> ObjectList<Arc<K>> {
    ObjectList {
        types: list.types,
        metadata: list.metadata,
        items: list.items.into_iter().map(Arc::new).collect(),
    }
}

/// Lists and watches one kind of object; client-go's `ListerWatcher`.
pub trait ListerWatcher<K: Clone>: Send + Sync + 'static {
    /// One list request (one page when `params.limit` is set).
    fn list(
        &self,
        params: &ListParams,
    ) -> impl Future<Output = Result<ObjectList<K>, kube::Error>> + Send;

    /// Starts a watch from `resource_version` ("" or "0" for the current state).
    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> impl Future<Output = Result<WatchStream<K>, kube::Error>> + Send;

    /// Lists from `params` page by page, following each page's continue token: the pages in
    /// order, ending after the last one or with the first error. A continuation carries its
    /// version in the token, so it is asked for without `resourceVersion`. The default asks
    /// [`list`](Self::list) for one page after the other; a source may fetch the next page
    /// while it decodes the current one (the kube-client implementation does). Items come in
    /// the `Arc`s the store keeps them in, so that a source decoding on other threads makes
    /// each one there (the kube-client implementation does).
    fn list_pages(&self, params: ListParams) -> PageStream<'_, K>
    where
        K: Send + Sync + 'static,
    {
        pages_one_by_one(self, params)
    }
}

impl<K> ListerWatcher<K> for Api<K>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        let request = kube::core::Request::new(self.resource_url())
            .list(params)
            .map_err(kube::Error::BuildRequest)?;
        kube_source::list(&Client::from(self.clone()), request).await
    }

    fn list_pages(&self, params: ListParams) -> PageStream<'_, K> {
        let request = kube::core::Request::new(self.resource_url());
        kube_source::list_pages(
            Client::from(self.clone()),
            request,
            params,
            |request, params| request.list(params),
        )
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, kube::Error> {
        let request = kube::core::Request::new(self.resource_url())
            .watch(params, resource_version)
            .map_err(kube::Error::BuildRequest)?;
        kube_source::watch(&Client::from(self.clone()), request).await
    }
}

/// A request a [`ScriptedListerWatcher`] received.
#[derive(Debug, Clone)]
pub enum Request {
    /// A list with these parameters.
    List(ListParams),
    /// A watch with these parameters, from this resource version.
    Watch(WatchParams, String),
}

type WatchResult<K> = Result<WatchStream<K>, kube::Error>;

struct Script<K: Clone> {
    lists: VecDeque<Result<ObjectList<K>, kube::Error>>,
    watches: VecDeque<WatchResult<K>>,
    requests: Vec<Request>,
}

/// A [`ListerWatcher`] that answers from a script, for tests: each list takes the next scripted
/// list answer, each watch the next scripted watch; with nothing scripted a request waits until
/// something is. Every request is recorded.
///
/// ```
/// use ctrlkit_cache::{ListerWatcher, ScriptedListerWatcher};
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::api::{ListParams, ObjectList, TypeMeta, ListMeta};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let lw = ScriptedListerWatcher::<Pod>::new();
/// lw.push_list(Ok(ObjectList {
///     types: TypeMeta::list::<Pod>(),
///     metadata: ListMeta { resource_version: Some("7".into()), ..Default::default() },
///     items: vec![],
/// }));
/// let list = lw.list(&ListParams::default().at("0")).await.unwrap();
/// assert_eq!(list.metadata.resource_version.as_deref(), Some("7"));
/// assert_eq!(lw.requests().len(), 1);
/// # }
/// ```
pub struct ScriptedListerWatcher<K: Clone> {
    script: Arc<Mutex<Script<K>>>,
    scripted: Arc<Notify>,
}

impl<K: Clone> Clone for ScriptedListerWatcher<K> {
    fn clone(&self) -> Self {
        Self {
            script: Arc::clone(&self.script),
            scripted: Arc::clone(&self.scripted),
        }
    }
}

impl<K: Clone + Send + 'static> Default for ScriptedListerWatcher<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// The sending end of a scripted watch: events sent here come out of the watch stream; dropping
/// it ends the stream.
pub struct WatchFeed<K> {
    sender: mpsc::UnboundedSender<Result<WatchEvent<K>, kube::Error>>,
}

impl<K> WatchFeed<K> {
    /// Sends an event; `false` if the watcher has stopped.
    pub fn send(&self, event: WatchEvent<K>) -> bool {
        self.sender.send(Ok(event)).is_ok()
    }

    /// Sends an error item (a decode failure, a broken connection, …); `false` if the watcher
    /// has stopped.
    pub fn send_error(&self, error: kube::Error) -> bool {
        self.sender.send(Err(error)).is_ok()
    }

    /// Whether the watcher has stopped reading.
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

impl<K: Clone + Send + 'static> ScriptedListerWatcher<K> {
    /// Nothing scripted yet.
    pub fn new() -> Self {
        Self {
            script: Arc::new(Mutex::new(Script {
                lists: VecDeque::new(),
                watches: VecDeque::new(),
                requests: Vec::new(),
            })),
            scripted: Arc::new(Notify::new()),
        }
    }

    /// Scripts the answer to the next unanswered list.
    pub fn push_list(&self, answer: Result<ObjectList<K>, kube::Error>) {
        self.script.lock().lists.push_back(answer);
        self.scripted.notify_waiters();
    }

    /// Scripts the next unanswered watch to succeed; events come from the returned feed.
    pub fn push_watch(&self) -> WatchFeed<K> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|item| (item, receiver))
        })
        .boxed();
        self.script.lock().watches.push_back(Ok(stream));
        self.scripted.notify_waiters();
        WatchFeed { sender }
    }

    /// Scripts the next unanswered watch to succeed with these events, then end.
    pub fn push_watch_events(&self, events: Vec<Result<WatchEvent<K>, kube::Error>>) {
        let stream = futures_util::stream::iter(events).boxed();
        self.script.lock().watches.push_back(Ok(stream));
        self.scripted.notify_waiters();
    }

    /// Scripts the next unanswered watch to fail.
    pub fn push_watch_error(&self, error: kube::Error) {
        self.script.lock().watches.push_back(Err(error));
        self.scripted.notify_waiters();
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.script.lock().requests.clone()
    }

    /// The resource versions of every list request so far (`""` when unset).
    pub fn list_resource_versions(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter_map(|request| match request {
                Request::List(params) => Some(params.resource_version.unwrap_or_default()),
                Request::Watch(..) => None,
            })
            .collect()
    }

    /// The resource versions of every watch request so far.
    pub fn watch_resource_versions(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter_map(|request| match request {
                Request::Watch(_, resource_version) => Some(resource_version),
                Request::List(_) => None,
            })
            .collect()
    }

    async fn next<T>(&self, request: Request, take: impl Fn(&mut Script<K>) -> Option<T>) -> T {
        self.script.lock().requests.push(request);
        loop {
            let scripted = self.scripted.notified();
            tokio::pin!(scripted);
            scripted.as_mut().enable();
            if let Some(answer) = take(&mut self.script.lock()) {
                return answer;
            }
            scripted.await;
        }
    }
}

impl<K: Clone + Send + Sync + 'static> ListerWatcher<K> for ScriptedListerWatcher<K> {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>, kube::Error> {
        self.next(Request::List(params.clone()), |script| {
            script.lists.pop_front()
        })
        .await
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>, kube::Error> {
        self.next(
            Request::Watch(params.clone(), resource_version.to_owned()),
            |script| script.watches.pop_front(),
        )
        .await
    }
}
