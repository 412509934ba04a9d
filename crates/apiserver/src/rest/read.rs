//! Reads: get, list (with selectors and pages) and watch (a stream of events).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use base64::Engine;
use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::status::ApiError;
use super::{App, Query, is_true};
use crate::custom::conversion;
use crate::request::encode::Encoding;
use crate::request::negotiate::{IncludeObject, Negotiated};
use crate::request::options::int_param;
use crate::resource::ResourceKind;
use crate::selector::{FieldSelector, LabelSelector};
use crate::storage::{
    Cause, EventType, StoreError, StoredObject, Watch, WatchEvent, WatchStart, watch_line,
};

/// The longest watch `timeoutSeconds` is taken to ask for (ten years).
const MAX_WATCH_SECONDS: u64 = 10 * 365 * 24 * 60 * 60;

pub(super) async fn get(
    app: &App,
    encoding: &Encoding<'_>,
    namespace: &str,
    name: &str,
) -> Result<Response, ApiError> {
    let kind = encoding.kind;
    let object = app
        .store
        .get(kind, namespace, name)
        .map_err(|error| ApiError::from_store(&error, Some(kind)))?;
    encoding.object(200, &*conversion::shown_one(kind, &object).await?)
}

/// A query parameter, empty when absent.
fn param<'a>(query: &'a Query, name: &str) -> &'a str {
    query.get(name).map_or("", String::as_str)
}

pub(super) fn selectors(
    kind: &ResourceKind,
    query: &Query,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(param(query, "labelSelector"))
        .map_err(|error| ApiError::bad_request(error.to_string()))?;
    let fields = FieldSelector::parse_for(param(query, "fieldSelector"), &kind.selectable_fields)
        .map_err(|error| ApiError::bad_request(error.to_string()))?;
    Ok((labels, fields))
}

fn parse_version(text: &str) -> Result<u64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {text:?}")))
}

/// The resourceVersion `text` asks for; 504 if the store has not reached it.
fn not_newer_than(text: &str, current: u64, kind: &ResourceKind) -> Result<u64, ApiError> {
    let requested = parse_version(text)?;
    if requested > current {
        return Err(ApiError::from_store(
            &StoreError::TooLargeResourceVersion { requested, current },
            Some(kind),
        ));
    }
    Ok(requested)
}

/// A continue token: the list's resourceVersion and the key the next page starts after.
fn encode_continue(resource_version: u64, namespace: &str, name: &str) -> String {
    let token = json!({"rv": resource_version, "start": format!("{namespace}/{name}")});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, String), ApiError> {
    let bad = || ApiError::bad_request("continue key is not valid");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let version = value["rv"].as_u64().ok_or_else(bad)?;
    let start = value["start"].as_str().ok_or_else(bad)?.to_string();
    Ok((version, start))
}

pub(super) async fn list(
    app: &App,
    encoding: &Encoding<'_>,
    namespace: Option<&str>,
    query: &Query,
) -> Result<Response, ApiError> {
    let kind = encoding.kind;
    let version = param(query, "resourceVersion");
    let version_match = query.get("resourceVersionMatch").map(String::as_str);
    let token = query.get("continue").filter(|token| !token.is_empty());
    if is_true(query, "sendInitialEvents") {
        return Err(ApiError::invalid_options(
            "sendInitialEvents",
            "Forbidden: sendInitialEvents is forbidden for list",
        ));
    }
    // kube-apiserver's `ValidateListOptions`: every problem, one cause each.
    if let Some(version_match) = version_match.filter(|m| !m.is_empty()) {
        let mut causes = Vec::new();
        let forbidden = |message: &str| Cause {
            reason: "FieldValueForbidden",
            field: "resourceVersionMatch".to_string(),
            message: format!("Forbidden: {message}"),
        };
        if version.is_empty() {
            causes.push(forbidden(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if token.is_some() {
            causes.push(forbidden(
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if !matches!(version_match, "Exact" | "NotOlderThan") {
            causes.push(Cause {
                reason: "FieldValueNotSupported",
                field: "resourceVersionMatch".to_string(),
                message: format!(
                    "Unsupported value: {version_match:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
                ),
            });
        }
        if version_match == "Exact" && version == "0" {
            causes.push(forbidden(
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", causes));
        }
    }
    let (labels, fields) = selectors(kind, query)?;
    // A negative limit is no limit, as in kube-apiserver; `timeoutSeconds` must parse too,
    // though a list answers at once.
    let limit = int_param(query, "limit")?.map_or(0, |limit| usize::try_from(limit).unwrap_or(0));
    int_param(query, "timeoutSeconds")?;
    let continued = match token {
        Some(token) => Some(decode_continue(token)?),
        None => None,
    };
    let after = continued
        .as_ref()
        .map(|(_, start)| start.split_once('/').unwrap_or(("", start.as_str())));
    let unselective = labels.is_empty() && fields.is_empty();
    let select = |item: &Value| labels.matches(item) && fields.matches(item);
    // As of which resourceVersion the list is read: a continued list at its first page's, so the
    // pages are one consistent snapshot; `Exact` (and, as kube-apiserver keeps for older clients,
    // a paged list with a resourceVersion and no match) at the one asked for; otherwise the
    // newest.
    let current = app.store.resource_version();
    let requested = match version {
        "" | "0" => None,
        version => Some(not_newer_than(version, current, kind)?),
    };
    let exact = match version_match {
        Some("Exact") => requested,
        None | Some("") if limit > 0 => requested,
        _ => None,
    };
    let page = match (&continued, exact) {
        (Some((at, _)), _) => app
            .store
            .list_page_at(kind, namespace, after, limit, unselective, *at, select)
            .map_err(|error| match error {
                StoreError::Expired { .. } => ApiError {
                    code: 410,
                    reason: "Expired",
                    message: "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.".to_string(),
                    details: None,
                    retry_after: None,
                },
                other => ApiError::from_store(&other, Some(kind)),
            })?,
        (None, Some(at)) => app
            .store
            .list_page_at(kind, namespace, after, limit, unselective, at, select)
            .map_err(|error| ApiError::from_store(&error, Some(kind)))?,
        (None, None) => app
            .store
            .list_page(kind, namespace, after, limit, unselective, select),
    };
    let list_version = page.resource_version;
    let (more, remaining) = (page.more, page.remaining);
    let page = page.items;
    let mut metadata = json!({"resourceVersion": list_version.to_string()});
    if let (Some(last), true) = (page.last(), more) {
        metadata["continue"] = Value::String(encode_continue(
            list_version,
            last["metadata"]["namespace"].as_str().unwrap_or(""),
            last["metadata"]["name"].as_str().unwrap_or(""),
        ));
        if unselective {
            metadata["remainingItemCount"] = json!(remaining);
        }
    }
    shown_list(encoding, metadata, &page).await
}

/// The list answer of `items` (its `metadata` as given), each in the kind's version.
pub(super) async fn shown_list(
    encoding: &Encoding<'_>,
    metadata: Value,
    items: &[Arc<StoredObject>],
) -> Result<Response, ApiError> {
    if encoding.kind.custom.is_none() {
        return encoding.list(metadata, items.iter().map(|item| &**item));
    }
    let items: Vec<&StoredObject> = items.iter().map(|item| &**item).collect();
    let converted = conversion::shown(encoding.kind, &items, true).await?;
    let shown = items
        .iter()
        .zip(&converted)
        .map(|(item, converted)| converted.as_ref().unwrap_or(item));
    encoding.list(metadata, shown)
}

/// A line of a watch stream for an event of a type other than the stored one.
fn event_line(event_type: &str, object: &Value) -> Bytes {
    let json = serde_json::to_vec(object).unwrap_or_else(|_| b"null".to_vec());
    watch_line(event_type, &json)
}

/// What a watcher with these selectors is sent for `event`, if anything: a change that moves an
/// object into or out of the selection becomes an `ADDED` or a `DELETED`.
fn filtered(
    event: Arc<WatchEvent>,
    labels: &LabelSelector,
    fields: &FieldSelector,
) -> Option<Outgoing> {
    if labels.is_empty() && fields.is_empty() {
        return Some(Outgoing::Event(event));
    }
    let selected = |object: &Value| labels.matches(object) && fields.matches(object);
    let now = selected(&event.object);
    match (event.event_type, &event.previous) {
        (EventType::Modified, Some(previous)) => match (selected(previous), now) {
            (true, true) => Some(Outgoing::Event(event)),
            (true, false) => Some(Outgoing::Retyped(EventType::Deleted, event)),
            (false, true) => Some(Outgoing::Retyped(EventType::Added, event)),
            (false, false) => None,
        },
        _ => now.then_some(Outgoing::Event(event)),
    }
}

/// One line a watch stream sends.
enum Outgoing {
    /// A stored event, sent as it is.
    Event(Arc<WatchEvent>),
    /// A stored event's object under another type (it entered or left the selection).
    Retyped(EventType, Arc<WatchEvent>),
    /// A line made for this stream.
    Line(Bytes),
}

impl Outgoing {
    /// The line, to be sent alone.
    fn into_line(self) -> Bytes {
        match self {
            Self::Event(event) => event.line(),
            Self::Retyped(event_type, event) => {
                watch_line(event_type.as_str(), &event.object.json())
            }
            Self::Line(line) => line,
        }
    }

    /// Appends the line to a batch.
    fn write_into(&self, batch: &mut BytesMut) {
        match self {
            Self::Event(event) => event.write_line(batch),
            Self::Retyped(event_type, event) => {
                batch.extend_from_slice(&watch_line(event_type.as_str(), &event.object.json()));
            }
            Self::Line(line) => batch.extend_from_slice(line),
        }
    }
}

/// Renders a stream's events in the form the watcher negotiated: as stored (the shared
/// serialization), or as Tables (column definitions in the first only) or
/// `PartialObjectMetadata`.
struct Renderer {
    negotiated: Negotiated,
    include: IncludeObject,
    headers_sent: bool,
}

impl Renderer {
    fn render(&mut self, kind: &ResourceKind, outgoing: Outgoing) -> Outgoing {
        let (event_type, event) = match outgoing {
            Outgoing::Event(event) => (event.event_type, event),
            Outgoing::Retyped(event_type, event) => (event_type, event),
            line @ Outgoing::Line(_) => return line,
        };
        let encoding = Encoding {
            negotiated: self.negotiated,
            kind,
            include: self.include,
        };
        if let Some(converted) = conversion::converted(kind, &event.object) {
            // Stored in another version of the CRD: shown in this one.
            return self.render_shown(kind, event_type, &converted);
        }
        match encoding.event_object(&event.object, !self.headers_sent) {
            None if event_type == event.event_type => Outgoing::Event(event),
            None => Outgoing::Retyped(event_type, event),
            Some(object) => {
                self.headers_sent = true;
                Outgoing::Line(event_line(event_type.as_str(), &object))
            }
        }
    }
}

impl Renderer {
    /// An event of `event_type` for `object`, already in the watched version.
    fn render_shown(
        &mut self,
        kind: &ResourceKind,
        event_type: EventType,
        object: &StoredObject,
    ) -> Outgoing {
        let encoding = Encoding {
            negotiated: self.negotiated,
            kind,
            include: self.include,
        };
        let object = encoding
            .event_object(object, !self.headers_sent)
            .unwrap_or_else(|| object.value().clone());
        self.headers_sent = true;
        Outgoing::Line(event_line(event_type.as_str(), &object))
    }
}

fn bookmark(kind: &ResourceKind, version: u64, initial_events_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": version.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    event_line(
        "BOOKMARK",
        &json!({"kind": kind.kind, "apiVersion": kind.api_version(), "metadata": metadata}),
    )
}

struct Stream {
    watch: Watch,
    kind: ResourceKind,
    labels: LabelSelector,
    fields: FieldSelector,
    deadline: Instant,
    bookmarks: Option<Duration>,
    next_bookmark: Instant,
    initial_events_end: bool,
    ended: bool,
    /// Changes when the fault hooks cut every watch.
    cuts: tokio::sync::watch::Receiver<u64>,
    /// The form the watcher asked its events in.
    renderer: Renderer,
    /// How many bytes of ready events go in one chunk (see [`RestConfig::watch_batch_bytes`]).
    ///
    /// [`RestConfig::watch_batch_bytes`]: super::RestConfig::watch_batch_bytes
    batch_bytes: usize,
}

impl Stream {
    /// `first` followed by the events that are ready now (up to the batch size), in one chunk;
    /// `first` alone, uncopied, when none is ready or batches are off.
    fn with_ready_events(&mut self, first: Outgoing) -> Bytes {
        if self.initial_events_end || self.batch_bytes == 0 {
            // The initial-events-end bookmark must follow the initial events at once; and with
            // batches off, every event goes alone.
            return first.into_line();
        }
        let Some(mut next) = ready(
            &mut self.watch,
            &self.labels,
            &self.fields,
            &mut self.renderer,
            &self.kind,
        ) else {
            return first.into_line();
        };
        let (watch, labels, fields) = (&mut self.watch, &self.labels, &self.fields);
        let (renderer, kind) = (&mut self.renderer, &self.kind);
        let batch_bytes = self.batch_bytes;
        // Room for the batch and its last event; an absurd setting asks for no more than
        // 16 MiB up front (a longer batch grows as it is written).
        let room = batch_bytes.saturating_mul(2).min(16 << 20);
        let mut batch = BytesMut::with_capacity(room);
        first.write_into(&mut batch);
        loop {
            next.write_into(&mut batch);
            if batch.len() >= batch_bytes {
                break;
            }
            match ready(watch, labels, fields, renderer, kind) {
                Some(after) => next = after,
                None => break,
            }
        }
        batch.freeze()
    }

    /// `outgoing` rendered; its object converted by the CRD's webhook first when the watched
    /// version is not the stored one (such streams send their events one at a time).
    async fn shown_by_webhook(&mut self, outgoing: Outgoing) -> Result<Outgoing, ApiError> {
        let (event_type, event) = match &outgoing {
            Outgoing::Event(event) => (event.event_type, event),
            Outgoing::Retyped(event_type, event) => (*event_type, event),
            Outgoing::Line(_) => return Ok(outgoing),
        };
        if !(conversion::uses_webhook(&self.kind)
            && conversion::needs_conversion(&self.kind, &event.object))
        {
            return Ok(self.renderer.render(&self.kind, outgoing));
        }
        let shown = conversion::shown_one(&self.kind, &event.object).await?;
        Ok(self.renderer.render_shown(&self.kind, event_type, &shown))
    }

    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if self.ended {
                return None;
            }
            if self.initial_events_end && self.watch.owed_len() == 0 {
                self.initial_events_end = false;
                return Some(bookmark(&self.kind, self.watch.start(), true));
            }
            let bookmark_at = self.bookmarks.map(|_| self.next_bookmark);
            tokio::select! {
                next = self.watch.next() => match next {
                    Ok(Some(event)) => {
                        if let Some(first) = filtered(event, &self.labels, &self.fields) {
                            let first = match self.shown_by_webhook(first).await {
                                Ok(first) => first,
                                Err(error) => {
                                    // As kube-apiserver, whose watch ends when an event cannot
                                    // be encoded; the client watches again and hears why.
                                    tracing::debug!(message = %error.message, "watch event not converted");
                                    self.ended = true;
                                    return None;
                                }
                            };
                            return Some(self.with_ready_events(first));
                        }
                    }
                    // The store is gone, or this watcher fell behind: end the stream; the
                    // client resumes from its last resourceVersion.
                    Ok(None) | Err(_) => {
                        self.ended = true;
                        return None;
                    }
                },
                () = tokio::time::sleep_until(self.deadline) => {
                    self.ended = true;
                    // A last bookmark lets the client resume exactly where this stream ends.
                    return self.bookmarks.map(|_| bookmark(&self.kind, self.watch.progress(), false));
                }
                _ = self.cuts.changed() => {
                    self.ended = true;
                    return None;
                }
                () = sleep_until_optional(bookmark_at) => {
                    if let Some(interval) = self.bookmarks {
                        self.next_bookmark = Instant::now() + interval;
                    }
                    return Some(bookmark(&self.kind, self.watch.progress(), false));
                }
            }
        }
    }
}

/// What `watch` sends next of the events that are ready now, after the selectors; `None` when
/// none is ready, or when the watcher fell behind (the next read ends its stream).
fn ready(
    watch: &mut Watch,
    labels: &LabelSelector,
    fields: &FieldSelector,
    renderer: &mut Renderer,
    kind: &ResourceKind,
) -> Option<Outgoing> {
    loop {
        match watch.try_next() {
            Ok(Some(event)) => {
                if let Some(outgoing) = filtered(event, labels, fields) {
                    return Some(renderer.render(kind, outgoing));
                }
            }
            Ok(None) | Err(_) => return None,
        }
    }
}

async fn sleep_until_optional(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn streaming(chunks: impl futures_util::Stream<Item = Bytes> + Send + 'static) -> Response {
    use futures_util::StreamExt;
    let body = Body::from_stream(chunks.map(Ok::<Bytes, Infallible>));
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

pub(super) fn watch(
    app: &App,
    encoding: &Encoding<'_>,
    namespace: Option<&str>,
    query: &Query,
) -> Result<Response, ApiError> {
    let kind = encoding.kind;
    let version = param(query, "resourceVersion");
    let version_match = query
        .get("resourceVersionMatch")
        .map(String::as_str)
        .filter(|m| !m.is_empty());
    let send_initial = is_true(query, "sendInitialEvents");
    if send_initial && version_match != Some("NotOlderThan") {
        return Err(ApiError::invalid_options(
            "resourceVersionMatch",
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !send_initial && version_match.is_some() {
        return Err(ApiError::invalid_options(
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    let (labels, fields) = selectors(kind, query)?;
    let start = if send_initial || version.is_empty() || version == "0" {
        if send_initial && !version.is_empty() && version != "0" {
            not_newer_than(version, app.store.resource_version(), kind)?;
        }
        WatchStart::Current
    } else {
        WatchStart::After(parse_version(version)?)
    };
    let timeout = match int_param(query, "timeoutSeconds")?.filter(|seconds| *seconds != 0) {
        // Less than zero ends the watch at once (zero is the default, as in kube-apiserver);
        // beyond a decade is as good as forever, and keeps the deadline within what a clock
        // can hold.
        Some(seconds) => {
            Duration::from_secs(u64::try_from(seconds).unwrap_or(0).min(MAX_WATCH_SECONDS))
        }
        None => {
            let min = app.config.min_request_timeout;
            let spread = u64::from(uuid::Uuid::new_v4().as_bytes()[0]) as f64 / 256.0;
            min + min.mul_f64(spread)
        }
    };
    let watch = match app.store.watch(kind, namespace, start) {
        Ok(watch) => watch,
        Err(expired @ StoreError::Expired { .. }) => {
            // As kube-apiserver: a 200 stream with one ERROR event, then the end.
            let status = ApiError::from_store(&expired, Some(kind)).status();
            let line = event_line("ERROR", &status);
            return Ok(streaming(futures_util::stream::iter([line])));
        }
        Err(error) => return Err(ApiError::from_store(&error, Some(kind))),
    };
    let bookmarks = is_true(query, "allowWatchBookmarks").then_some(app.config.bookmark_interval);
    let now = Instant::now();
    let stream = Stream {
        watch,
        kind: kind.clone(),
        labels,
        fields,
        deadline: now + timeout,
        bookmarks,
        next_bookmark: now + app.config.bookmark_interval,
        initial_events_end: send_initial,
        ended: false,
        cuts: app.faults.watch_cuts(),
        renderer: Renderer {
            negotiated: encoding.negotiated,
            include: encoding.include,
            headers_sent: false,
        },
        // Events converted by a webhook are sent as each is converted.
        batch_bytes: if conversion::uses_webhook(kind) {
            0
        } else {
            app.config.watch_batch_bytes
        },
    };
    let chunks = futures_util::stream::unfold(stream, |mut stream| async move {
        stream.next_chunk().await.map(|chunk| (chunk, stream))
    });
    Ok(streaming(chunks))
}
