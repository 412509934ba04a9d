//! List, then watch, and keep a store equal to the API server: client-go's `Reflector`.
//!
//! The reflector lists (in pages of 500) and replaces the store's content, then watches from
//! the list's resourceVersion. Every event and bookmark advances
//! [`last_sync_resource_version`](Reflector::last_sync_resource_version); a watch that ends or
//! breaks is resumed from it, so nothing is missed and nothing repeated. When the server has
//! compacted that version away (410 Gone / Expired) the reflector relists. Errors back off
//! exponentially (800 ms doubling to 30 s, jittered, reset after 2 quiet minutes).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use kube::Resource;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::core::watch::Bookmark;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::delta_fifo::ListedKeys;
use crate::key::{KeyError, meta_namespace_key};
use crate::list_watch::{ListerWatcher, WatchStream};
use crate::page_writer::PageWriter;
use crate::reflector_error::{
    ReflectorError, WatchErrorHandler, is_expired, is_too_large_resource_version,
    is_transport_error, is_watch_error_retriable,
};
use crate::reflector_store::ReflectorStore;

/// The annotation on the bookmark that ends a streaming initial list.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// Objects per list page when [`ReflectorOptions::page_size`] is not set (client-go's pager
/// default).
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// The least [`ReflectorOptions::min_watch_timeout`] a reflector honors (client-go's
/// `defaultMinWatchTimeout`): shorter watches would only multiply reconnects.
pub const MIN_WATCH_TIMEOUT_FLOOR: Duration = Duration::from_secs(300);

/// How a [`Reflector`] lists and watches.
///
/// ```
/// use std::time::Duration;
/// use ctrlkit_cache::ReflectorOptions;
///
/// let options = ReflectorOptions {
///     name: "pods".into(),
///     // Every list in pages of 200, relists at a known resourceVersion too.
///     page_size: 200,
///     // Watches of 10 to 20 minutes each (below 5 minutes, 5 minutes is used).
///     min_watch_timeout: Duration::from_secs(600),
///     ..ReflectorOptions::default()
/// };
/// # drop(options);
/// ```
#[derive(Debug, Clone)]
pub struct ReflectorOptions {
    /// A name for logs and errors.
    pub name: String,
    /// Objects per list page, client-go's `WatchListPageSize`. `0` (the default) leaves it to
    /// the reflector: lists from the beginning are paged by the pager's default of
    /// [`DEFAULT_PAGE_SIZE`], and relists at a known resourceVersion are not paged (they are
    /// served whole from the server's watch cache) unless the server paged the first list. A
    /// size set here pages every list, relists included.
    pub page_size: u32,
    /// Watches time out after a random duration in `[min_watch_timeout, 2·min_watch_timeout)`,
    /// spreading reconnects over time. As in client-go, values below 5 minutes (the default)
    /// are not honored: the minimum is never less than [`MIN_WATCH_TIMEOUT_FLOOR`].
    pub min_watch_timeout: Duration,
    /// Start with a streaming list (`sendInitialEvents=true`), falling back to list + watch on
    /// any error.
    pub use_watch_list: bool,
    /// Only objects matching this label selector.
    pub label_selector: Option<String>,
    /// Only objects matching this field selector.
    pub field_selector: Option<String>,
    /// The retry backoff.
    pub backoff: Backoff,
}

impl Default for ReflectorOptions {
    fn default() -> Self {
        Self {
            name: "reflector".to_owned(),
            page_size: 0,
            min_watch_timeout: MIN_WATCH_TIMEOUT_FLOOR,
            use_watch_list: false,
            label_selector: None,
            field_selector: None,
            backoff: Backoff::default(),
        }
    }
}

#[derive(Debug, Default)]
struct VersionState {
    last_sync_resource_version: String,
    /// The last list or watch at `last_sync_resource_version` got 410: relist at "".
    is_last_sync_resource_version_unavailable: bool,
    /// The first list at "0" came back in pages: keep paginating relists.
    paginated_result: bool,
}

/// Whether a bookmark ends a streaming initial list.
fn ends_initial_events(bookmark: &Bookmark) -> bool {
    bookmark
        .metadata
        .annotations
        .get(INITIAL_EVENTS_END_ANNOTATION)
        .is_some_and(|value| value == "true")
}

/// How a watch ended.
enum WatchEnd {
    /// Ended normally (timeout, closed connection): watch again from the last version.
    Closed,
    /// The initial-events-end bookmark arrived (streaming list only).
    InitialEventsEnd,
    /// Cancelled.
    Stopped,
}

/// client-go's `Reflector`; see the module docs.
pub struct Reflector<K: Clone, L> {
    lister_watcher: L,
    store: Arc<dyn ReflectorStore<K>>,
    options: ReflectorOptions,
    state: Mutex<VersionState>,
    backoff: Mutex<Backoff>,
    watch_error_handler: Option<WatchErrorHandler>,
}

impl<K: Clone, L> std::fmt::Debug for Reflector<K, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflector")
            .field("name", &self.options.name)
            .field(
                "last_sync_resource_version",
                &self.state.lock().last_sync_resource_version,
            )
            .finish()
    }
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// A reflector that keeps `store` equal to what `lister_watcher` serves.
    pub fn new(
        lister_watcher: L,
        store: Arc<dyn ReflectorStore<K>>,
        options: ReflectorOptions,
    ) -> Self {
        let backoff = Mutex::new(options.backoff.clone());
        Self {
            lister_watcher,
            store,
            options,
            state: Mutex::new(VersionState::default()),
            backoff,
            watch_error_handler: None,
        }
    }

    /// Calls `handler` with every error the reflector recovers from (by default they are logged).
    #[must_use]
    pub fn with_watch_error_handler(mut self, handler: WatchErrorHandler) -> Self {
        self.watch_error_handler = Some(handler);
        self
    }

    /// The reflector's name.
    pub fn name(&self) -> &str {
        &self.options.name
    }

    /// The resourceVersion of the last list, event or bookmark seen ("" before the first list).
    pub fn last_sync_resource_version(&self) -> String {
        self.state.lock().last_sync_resource_version.clone()
    }

    /// Lists and watches until `cancel` fires, backing off between attempts.
    pub async fn run(&self, cancel: CancellationToken) {
        tracing::debug!(reflector = %self.options.name, "starting reflector");
        while !cancel.is_cancelled() {
            if let Err(err) = self.list_and_watch(&cancel).await {
                self.report(&err);
            }
            if !self.sleep_backoff(&cancel).await {
                break;
            }
        }
        tracing::debug!(reflector = %self.options.name, "stopping reflector");
    }

    /// One round: list (or stream the initial list), then watch until the watch can no longer
    /// be resumed. `Ok` means a relist is due (or `cancel` fired).
    pub async fn list_and_watch(&self, cancel: &CancellationToken) -> Result<(), ReflectorError> {
        let mut initial_watch = None;
        if self.options.use_watch_list {
            match self.watch_list(cancel).await {
                Ok(Some(stream)) => initial_watch = Some(stream),
                Ok(None) => return Ok(()),
                Err(err) => {
                    tracing::debug!(reflector = %self.options.name, %err, "streaming list failed; falling back to list");
                }
            }
        }
        if initial_watch.is_none() {
            if cancel.is_cancelled() {
                return Ok(());
            }
            self.list(cancel).await?;
        }
        self.watch(initial_watch, cancel).await
    }

    fn relist_resource_version(&self) -> String {
        let state = self.state.lock();
        if state.is_last_sync_resource_version_unavailable {
            String::new()
        } else if state.last_sync_resource_version.is_empty() {
            "0".to_owned()
        } else {
            state.last_sync_resource_version.clone()
        }
    }

    fn rewatch_resource_version(&self) -> String {
        let state = self.state.lock();
        if state.is_last_sync_resource_version_unavailable {
            String::new()
        } else {
            state.last_sync_resource_version.clone()
        }
    }

    fn set_last_sync_resource_version(&self, resource_version: &str) {
        let mut state = self.state.lock();
        if state.last_sync_resource_version != resource_version {
            state.last_sync_resource_version = resource_version.to_owned();
        }
    }

    fn set_unavailable(&self, unavailable: bool) {
        self.state.lock().is_last_sync_resource_version_unavailable = unavailable;
    }

    async fn list(&self, cancel: &CancellationToken) -> Result<(), ReflectorError> {
        let resource_version = self.relist_resource_version();
        // As client-go's reflector: a configured page size pages every list. Otherwise lists at
        // a specific version are served whole from the watch cache, so they are only paged
        // when the server paged the first list at "0".
        let page_size = if self.options.page_size > 0 {
            Some(self.options.page_size)
        } else {
            let paginate = self.state.lock().paginated_result
                || resource_version.is_empty()
                || resource_version == "0";
            paginate.then_some(DEFAULT_PAGE_SIZE)
        };
        let first = tokio::select! {
            result = self.list_pages(&resource_version, page_size) => result,
            () = cancel.cancelled() => return Ok(()),
        };
        let (listed, list_resource_version, page_count) = match first {
            Ok(done) => done,
            Err(err) if is_expired(&err) || is_too_large_resource_version(&err) => {
                self.set_unavailable(true);
                let resource_version = self.relist_resource_version();
                let result = tokio::select! {
                    result = self.list_pages(&resource_version, page_size) => result,
                    () = cancel.cancelled() => return Ok(()),
                };
                result.map_err(|source| self.list_error(source))?
            }
            Err(err) => return Err(self.list_error(err)),
        };
        if resource_version == "0" && page_count > 1 {
            self.state.lock().paginated_result = true;
        }
        self.set_unavailable(false);
        let Some(list_resource_version) = list_resource_version else {
            return Err(ReflectorError::MissingResourceVersion {
                name: self.options.name.clone(),
            });
        };
        self.store.replace_finish(listed, &list_resource_version);
        self.set_last_sync_resource_version(&list_resource_version);
        Ok(())
    }

    fn list_error(&self, source: kube::Error) -> ReflectorError {
        ReflectorError::List {
            name: self.options.name.clone(),
            source,
        }
    }

    /// Lists page by page into the store, returning the keys listed, the list's version and how
    /// many requests it took.
    ///
    /// Each page goes to the store (which transforms it) on a blocking thread
    /// while the next page is fetched and decoded, so both cores work and the whole list never
    /// sits in memory twice. Only [`ReflectorStore::replace_finish`] turns a relist into
    /// deletions, so pages of a list that fails halfway are harmless: they hold states at least
    /// as new as the cache's, and the next complete list decides what is gone. A continuation
    /// that fails because its token expired falls back to one unpaginated list at the same
    /// version, as client-go's pager does, with a fresh set of listed keys.
    async fn list_pages(
        &self,
        resource_version: &str,
        page_size: Option<u32>,
    ) -> Result<(ListedKeys, Option<String>, usize), kube::Error> {
        let mut storing = PageWriter::new(Arc::clone(&self.store));
        let mut params = self.list_params(resource_version);
        params.limit = page_size;
        let mut pages = self.lister_watcher.list_pages(params);
        let mut requests = 0;
        let mut list_resource_version = None;
        while let Some(page) = pages.next().await {
            requests += 1;
            let list = match page {
                Ok(list) => list,
                Err(err) if requests > 1 && is_expired(&err) => {
                    drop(pages);
                    tracing::debug!(reflector = %self.options.name, "continue token expired; listing in full");
                    self.finish_pages(storing).await;
                    let mut full = self.list_params(resource_version);
                    full.limit = None;
                    let list =
                        crate::list_watch::shared_items(self.lister_watcher.list(&full).await?);
                    let mut storing = PageWriter::new(Arc::clone(&self.store));
                    storing.write(list.items);
                    let listed = self.finish_pages(storing).await;
                    return Ok((listed, list.metadata.resource_version, requests));
                }
                Err(err) => {
                    self.finish_pages(storing).await;
                    return Err(err);
                }
            };
            list_resource_version = list.metadata.resource_version;
            self.wait_for_page(&mut storing).await;
            storing.write(list.items);
        }
        let listed = self.finish_pages(storing).await;
        Ok((listed, list_resource_version, requests))
    }

    /// Waits for the last page to be stored; the keys listed.
    async fn finish_pages(&self, mut storing: PageWriter<K>) -> ListedKeys {
        self.wait_for_page(&mut storing).await;
        storing.listed.take().unwrap_or_default()
    }

    /// Waits for the page being stored, reporting an object it skipped.
    async fn wait_for_page(&self, storing: &mut PageWriter<K>) {
        if let Some(source) = storing.wait().await {
            self.report_key_error(source);
        }
    }

    fn list_params(&self, resource_version: &str) -> ListParams {
        ListParams {
            label_selector: self.options.label_selector.clone(),
            field_selector: self.options.field_selector.clone(),
            resource_version: (!resource_version.is_empty()).then(|| resource_version.to_owned()),
            ..ListParams::default()
        }
    }

    fn watch_params(&self) -> WatchParams {
        let min = self
            .options
            .min_watch_timeout
            .max(MIN_WATCH_TIMEOUT_FLOOR)
            .as_secs();
        let timeout = min + (fastrand::f64() * min as f64) as u64;
        WatchParams {
            label_selector: self.options.label_selector.clone(),
            field_selector: self.options.field_selector.clone(),
            timeout: Some(u32::try_from(timeout).unwrap_or(u32::MAX)),
            bookmarks: true,
            send_initial_events: false,
        }
    }

    /// Watches from the last synced version, resuming after every clean end. Returns `Ok` when a
    /// relist is due (410) or on cancel, and `Err` for errors a relist should follow.
    async fn watch(
        &self,
        mut initial: Option<WatchStream<K>>,
        cancel: &CancellationToken,
    ) -> Result<(), ReflectorError> {
        loop {
            if cancel.is_cancelled() {
                return Ok(());
            }
            let start = Instant::now();
            let (stream, propagate_from_start) = match initial.take() {
                Some(stream) => (stream, true),
                None => {
                    let resource_version = self.last_sync_resource_version();
                    let propagate = !(resource_version.is_empty() || resource_version == "0");
                    let params = self.watch_params();
                    let started = tokio::select! {
                        result = self.lister_watcher.watch(&params, &resource_version) => result,
                        () = cancel.cancelled() => return Ok(()),
                    };
                    match started {
                        Ok(stream) => (stream, propagate),
                        Err(err) if is_watch_error_retriable(&err) => {
                            tracing::debug!(reflector = %self.options.name, %err, "watch failed; backing off");
                            if !self.sleep_backoff(cancel).await {
                                return Ok(());
                            }
                            continue;
                        }
                        Err(source) => {
                            if is_expired(&source) {
                                return Ok(());
                            }
                            return Err(ReflectorError::Watch {
                                name: self.options.name.clone(),
                                source,
                            });
                        }
                    }
                }
            };
            match self
                .handle_watch(stream, start, propagate_from_start, false, cancel)
                .await
            {
                Ok(WatchEnd::Closed | WatchEnd::InitialEventsEnd) => continue,
                Ok(WatchEnd::Stopped) => return Ok(()),
                Err(err) if err.is_expired() => {
                    tracing::debug!(reflector = %self.options.name, %err, "watch closed");
                    return Ok(());
                }
                Err(err) if err.status().is_some_and(|status| status.code == 429) => {
                    tracing::debug!(reflector = %self.options.name, "watch returned 429; backing off");
                    if !self.sleep_backoff(cancel).await {
                        return Ok(());
                    }
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Applies a watch's events to the store until it ends.
    async fn handle_watch(
        &self,
        mut stream: WatchStream<K>,
        start: Instant,
        propagate_from_start: bool,
        exit_on_initial_events_end: bool,
        cancel: &CancellationToken,
    ) -> Result<WatchEnd, ReflectorError> {
        let mut event_received_besides_added = false;
        let mut event_count = 0usize;
        loop {
            // The stream first: during a burst it is ready at once and the token's waiter is
            // never registered (under the token's lock) and removed again per event.
            if cancel.is_cancelled() {
                return Ok(WatchEnd::Stopped);
            }
            let item = tokio::select! {
                biased;
                item = stream.next() => item,
                () = cancel.cancelled() => return Ok(WatchEnd::Stopped),
            };
            let Some(item) = item else { break };
            let event = match item {
                Ok(event) => event,
                // A broken connection ends the watch like a close does: it resumes from the
                // last version, nothing missed (client-go treats probable EOFs the same).
                Err(source) if is_transport_error(&source) => {
                    self.report(&ReflectorError::Watch {
                        name: self.options.name.clone(),
                        source,
                    });
                    break;
                }
                Err(source) => {
                    return Err(ReflectorError::Watch {
                        name: self.options.name.clone(),
                        source,
                    });
                }
            };
            let (resource_version, stored) = match event {
                WatchEvent::Added(obj) => {
                    let resource_version = obj.meta().resource_version.clone();
                    (resource_version, self.store.add(Arc::new(obj)))
                }
                WatchEvent::Modified(obj) => {
                    event_received_besides_added = true;
                    let resource_version = obj.meta().resource_version.clone();
                    (resource_version, self.store.update(Arc::new(obj)))
                }
                WatchEvent::Deleted(obj) => {
                    event_received_besides_added = true;
                    let resource_version = obj.meta().resource_version.clone();
                    (resource_version, self.store.delete(Arc::new(obj)))
                }
                WatchEvent::Bookmark(bookmark) => {
                    event_received_besides_added = true;
                    let end = ends_initial_events(&bookmark);
                    self.set_last_sync_resource_version(&bookmark.metadata.resource_version);
                    event_count += 1;
                    if end && exit_on_initial_events_end {
                        return Ok(WatchEnd::InitialEventsEnd);
                    }
                    continue;
                }
                WatchEvent::Error(status) => {
                    return Err(ReflectorError::WatchStatus {
                        name: self.options.name.clone(),
                        status,
                    });
                }
            };
            event_count += 1;
            if let Err(source) = stored {
                self.report_key_error(source);
            }
            if let Some(resource_version) = resource_version
                && (propagate_from_start || event_received_besides_added)
            {
                self.set_last_sync_resource_version(&resource_version);
            }
        }
        if event_count == 0 && start.elapsed() < Duration::from_secs(1) {
            return Err(ReflectorError::VeryShortWatch {
                name: self.options.name.clone(),
            });
        }
        Ok(WatchEnd::Closed)
    }

    /// The streaming initial list: a watch with `sendInitialEvents=true` whose events up to the
    /// initial-events-end bookmark are the list. Returns the watch to go on with.
    async fn watch_list(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Option<WatchStream<K>>, ReflectorError> {
        loop {
            if cancel.is_cancelled() {
                return Ok(None);
            }
            let resource_version = self.rewatch_resource_version();
            let mut params = self.watch_params();
            params.send_initial_events = true;
            let start = Instant::now();
            let started = tokio::select! {
                result = self.lister_watcher.watch(&params, &resource_version) => result,
                () = cancel.cancelled() => return Ok(None),
            };
            let mut stream = match started {
                Ok(stream) => stream,
                Err(err) if is_watch_error_retriable(&err) => {
                    if !self.sleep_backoff(cancel).await {
                        return Ok(None);
                    }
                    continue;
                }
                Err(err) if is_expired(&err) || is_too_large_resource_version(&err) => {
                    self.set_unavailable(true);
                    continue;
                }
                Err(source) => {
                    return Err(ReflectorError::Watch {
                        name: self.options.name.clone(),
                        source,
                    });
                }
            };
            let temporary =
                crate::Indexer::<K>::with_key_func(meta_namespace_key::<K>, Default::default());
            let mut end_resource_version = None;
            let ended = loop {
                if cancel.is_cancelled() {
                    return Ok(None);
                }
                let item = tokio::select! {
                    biased;
                    item = stream.next() => item,
                    () = cancel.cancelled() => return Ok(None),
                };
                let Some(item) = item else {
                    break if start.elapsed() < Duration::from_secs(1) {
                        Err(ReflectorError::VeryShortWatch {
                            name: self.options.name.clone(),
                        })
                    } else {
                        Ok(false)
                    };
                };
                match item {
                    Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => {
                        if let Err(source) = temporary.add(obj) {
                            self.report_key_error(source);
                        }
                    }
                    Ok(WatchEvent::Deleted(obj)) => {
                        let _ = temporary.delete(&obj);
                    }
                    Ok(WatchEvent::Bookmark(bookmark)) => {
                        if ends_initial_events(&bookmark) {
                            end_resource_version = Some(bookmark.metadata.resource_version);
                            break Ok(true);
                        }
                    }
                    Ok(WatchEvent::Error(status)) => {
                        break Err(ReflectorError::WatchStatus {
                            name: self.options.name.clone(),
                            status,
                        });
                    }
                    Err(source) => {
                        break Err(ReflectorError::Watch {
                            name: self.options.name.clone(),
                            source,
                        });
                    }
                }
            };
            match ended {
                Ok(true) => {}
                Ok(false) => continue,
                Err(err) => {
                    let retriable = err.status().is_some_and(|status| status.code == 429);
                    if err.is_expired() {
                        self.set_unavailable(true);
                        continue;
                    }
                    if retriable {
                        if !self.sleep_backoff(cancel).await {
                            return Ok(None);
                        }
                        continue;
                    }
                    return Err(err);
                }
            }
            let Some(resource_version) = end_resource_version else {
                continue;
            };
            self.set_unavailable(false);
            let mut listed = ListedKeys::new();
            if let Err(source) = self.store.replace_page(temporary.list(), &mut listed) {
                self.report_key_error(source);
            }
            drop(temporary);
            self.store.replace_finish(listed, &resource_version);
            self.set_last_sync_resource_version(&resource_version);
            return Ok(Some(stream));
        }
    }

    /// Waits out the next backoff delay; `false` if cancelled first.
    async fn sleep_backoff(&self, cancel: &CancellationToken) -> bool {
        let delay = self.backoff.lock().next_delay();
        tokio::select! {
            () = tokio::time::sleep(delay) => true,
            () = cancel.cancelled() => false,
        }
    }

    fn report_key_error(&self, source: KeyError) {
        self.report(&ReflectorError::Key {
            name: self.options.name.clone(),
            source,
        });
    }

    fn report(&self, err: &ReflectorError) {
        match &self.watch_error_handler {
            Some(handler) => handler(err),
            None => tracing::warn!(reflector = %self.options.name, %err, "list/watch error"),
        }
    }
}
