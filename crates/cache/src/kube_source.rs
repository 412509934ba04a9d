//! Lists and watches through kube-client, decoded by ctrlkit.
//!
//! Requests are built by `kube::core::Request` and sent by `kube::Client` (its authentication,
//! TLS and middleware as configured); only the bodies are decoded here, with
//! [`decode`](crate::decode):
//!
//! - a list is read by a task of its own, one page ahead of the consumer: each page's items are
//!   decoded a share per core (the reading task's own, and tokio's blocking threads'), so a
//!   relist uses every core instead of the one that reads the response; the next page's items
//!   are decoded while the consumer stores this one's, and the page after is requested meanwhile;
//! - a watch body is read by the task that consumes its events, each decoded as soon as its
//!   line is whole: no thread hop between receiving an event and storing it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use futures_util::stream::StreamExt;
use http_body_util::BodyExt;
use kube::Client;
use kube::api::{ListParams, ObjectList, WatchEvent};
use kube::client::Body;
use kube::core::Status;
use kube::core::request::Error as RequestError;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::decode;
use crate::decoding_page::DecodingPage;
use crate::list_watch::{PageStream, WatchStream, next_page};

/// The longest watch line read: far beyond any object an API server stores (etcd's limit is
/// 1.5 MiB), short of letting a peer that never sends a newline fill the memory.
const MAX_LINE: usize = 64 << 20;

/// List pages whose items are decoded ahead of the consumer, beside the one it waits for: the
/// next page is decoded while the consumer stores this one.
const PAGES_AHEAD: usize = 1;

/// Sends `request` and returns the response, or the API's error as kube-client reports it.
async fn send(client: &Client, request: http::Request<Vec<u8>>) -> Result<Body, kube::Error> {
    let response = client.send(request.map(Body::from)).await?;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return Ok(response.into_body());
    }
    let body = response.into_body().collect().await?.to_bytes();
    let status = match serde_json::from_slice::<Status>(&body) {
        Ok(status) => status,
        // Not every error body is a Status (a proxy's page, a path nobody serves).
        Err(_) => Status::failure(
            String::from_utf8_lossy(&body).trim(),
            "Failed to parse error data",
        )
        .with_code(status.as_u16()),
    };
    Err(kube::Error::Api(status.boxed()))
}

/// One list request: its page fetched whole, then its items decoded on all cores.
pub(crate) async fn list<T>(
    client: &Client,
    request: http::Request<Vec<u8>>,
) -> Result<ObjectList<T>, kube::Error>
where
    T: DeserializeOwned + Clone + Send + 'static,
{
    let body = fetch(client, request).await?;
    let split = decode::split_list(&body)?;
    Ok(DecodingPage::start(body, split, std::convert::identity)
        .finish()
        .await?)
}

/// Sends `request` and reads its response's body whole.
async fn fetch(client: &Client, request: http::Request<Vec<u8>>) -> Result<Bytes, kube::Error> {
    Ok(send(client, request).await?.collect().await?.to_bytes())
}

/// How a list request is made from its parameters (`Request::list`, `Request::list_metadata`).
pub(crate) type BuildList =
    fn(&kube::core::Request, &ListParams) -> Result<http::Request<Vec<u8>>, RequestError>;

/// A list page by page, read ahead by a task of its own: each page is requested as soon as the
/// one before has been read (its continue token is in the envelope), and its items are decoded
/// as soon as it is read, so that the server sends the next page and this one is decoded while
/// the consumer stores the one before.
pub(crate) fn list_pages<T>(
    client: Client,
    request: kube::core::Request,
    params: ListParams,
    build: BuildList,
) -> PageStream<'static, T>
where
    T: DeserializeOwned + Clone + Send + Sync + 'static,
{
    let (sender, receiver) = mpsc::channel(PAGES_AHEAD);
    let reader = AbortOnDrop(tokio::spawn(read_pages(
        Arc::new((client, request, build)),
        params,
        sender,
    )));
    futures_util::stream::unfold(Some((receiver, reader)), |state| async move {
        let (mut receiver, reader) = state?;
        let page = match receiver.recv().await? {
            Ok(page) => page.finish().await.map_err(kube::Error::from),
            Err(err) => Err(err),
        };
        // A page that failed ends the list, and the reader with it: the pages read ahead of it
        // are not handed on.
        let next = page.is_ok().then_some((receiver, reader));
        Some((page, next))
    })
    .boxed()
}

type ListSource = (Client, kube::core::Request, BuildList);

/// Reads the pages of a list and starts decoding each, handing them on in order, until the last
/// page, the first error, or until nobody listens any more.
async fn read_pages<T>(
    source: Arc<ListSource>,
    params: ListParams,
    sender: mpsc::Sender<Result<DecodingPage<Arc<T>>, kube::Error>>,
) where
    T: DeserializeOwned + Clone + Send + Sync + 'static,
{
    let mut fetching = Some((start_fetch(&source, &params), params));
    while let Some((fetch, params)) = fetching.take() {
        let page = match fetch.await {
            Ok(Ok(body)) => decode::split_list(&body)
                .map(|split| (body, split))
                .map_err(kube::Error::from),
            Ok(Err(err)) => Err(err),
            Err(err) => Err(kube::Error::ReadEvents(std::io::Error::other(err))),
        };
        let (body, split) = match page {
            Ok(page) => page,
            // The list ends here: the next page is not asked for.
            Err(err) => {
                let _ = sender.send(Err(err)).await;
                return;
            }
        };
        // The next page is asked for, and this one decoded, once there is room for this one:
        // no more than `PAGES_AHEAD` pages are decoded ahead of the consumer, and no more
        // bodies than those and the one on its way are held.
        let Ok(room) = sender.reserve().await else {
            return;
        };
        fetching = next_page(params, split.metadata.continue_.as_deref())
            .map(|params| (start_fetch(&source, &params), params));
        room.send(Ok(DecodingPage::start(body, split, Arc::new)));
    }
}

/// A task aborted when this is dropped: the reader of a list whose stream was dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A page being fetched by a task of its own; dropped before it is awaited (the list stream was
/// dropped, or the page before failed), the task is aborted and its request with it.
struct Fetch(JoinHandle<Result<Bytes, kube::Error>>);

impl Future for Fetch {
    type Output = Result<Result<Bytes, kube::Error>, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl Drop for Fetch {
    fn drop(&mut self) {
        // A no-op once the task has finished.
        self.0.abort();
    }
}

/// Starts fetching the page `params` asks for.
fn start_fetch(source: &Arc<ListSource>, params: &ListParams) -> Fetch {
    let source = Arc::clone(source);
    let params = params.clone();
    Fetch(tokio::spawn(async move {
        let (client, request, build) = &*source;
        let request = build(request, &params).map_err(kube::Error::BuildRequest)?;
        fetch(client, request).await
    }))
}

/// One watch request: the stream of its events, each decoded by the task that polls the stream
/// as soon as its line is whole.
pub(crate) async fn watch<T>(
    client: &Client,
    mut request: http::Request<Vec<u8>>,
) -> Result<WatchStream<T>, kube::Error>
where
    T: DeserializeOwned + Clone + Send + 'static,
{
    // One event per line, uncompressed: a gzip member per event (kube-apiserver 1.37) would
    // need a decompressor that handles many members.
    request
        .headers_mut()
        .entry(http::header::ACCEPT_ENCODING)
        .or_insert(http::HeaderValue::from_static("identity"));
    let body = send(client, request).await?;
    Ok(watch_events(body).boxed())
}

type EventResult<T> = Result<WatchEvent<T>, kube::Error>;

/// Where a watch body's reading stands: the bytes of the line being received.
struct WatchReader<B> {
    body: B,
    pending: BytesMut,
    /// How much of `pending` is known to hold no newline.
    scanned: usize,
}

/// The events of a watch body (kube-client's [`Body`]), one per line, until the body ends or
/// fails. Dropping the stream drops the body, which closes the connection.
///
/// Events are decoded where they are received: a watch event is small, and handing its bytes to
/// another thread to decode costs more than decoding it.
fn watch_events<T, B>(body: B) -> impl futures_util::Stream<Item = EventResult<T>> + Send
where
    T: DeserializeOwned + Clone + Send + 'static,
    B: http_body::Body<Data = Bytes, Error = kube::Error> + Unpin + Send,
{
    let reader = WatchReader {
        body,
        pending: BytesMut::new(),
        scanned: 0,
    };
    futures_util::stream::unfold(Some(reader), |reader| async move {
        let mut reader = reader?;
        loop {
            if let Some(end) = memchr::memchr(b'\n', &reader.pending[reader.scanned..]) {
                let line = reader.pending.split_to(reader.scanned + end + 1);
                reader.scanned = 0;
                if line.trim_ascii().is_empty() {
                    continue;
                }
                return Some((decode_event(line.trim_ascii()), Some(reader)));
            }
            reader.scanned = reader.pending.len();
            if reader.pending.len() > MAX_LINE {
                let io = std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("a watch event longer than {MAX_LINE} bytes"),
                );
                return Some((Err(kube::Error::ReadEvents(io)), None));
            }
            match reader.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        reader.pending.extend_from_slice(data.chunk());
                    }
                }
                // A connection cut mid-stream ends the watch like a close: the reflector
                // resumes from the last version it saw. A partial line is dropped with it.
                Some(Err(err)) if is_cut(&err) => return None,
                Some(Err(err)) => {
                    let io = std::io::Error::other(err);
                    return Some((Err(kube::Error::ReadEvents(io)), None));
                }
                None => return last_line(&reader.pending).map(|event| (event, None)),
            }
        }
    })
}

/// The event of a last line sent without its newline, if it is whole; one cut short means the
/// connection was closed mid-event, and the watch resumes as after any close.
fn last_line<T: DeserializeOwned + Clone>(rest: &[u8]) -> Option<EventResult<T>> {
    let rest = rest.trim_ascii();
    if rest.is_empty() {
        return None;
    }
    let whole = serde_json::from_slice::<serde::de::IgnoredAny>(rest)
        .map_or_else(|err| !err.is_eof(), |_| true);
    whole.then(|| decode_event(rest))
}

/// One watch line decoded. A `Deserialize` impl that panics (a user's type) fails the watch with
/// an error, which the reflector answers by resuming it, instead of taking the consumer's task
/// down.
fn decode_event<T: DeserializeOwned + Clone>(line: &[u8]) -> EventResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decode::decode_watch_event(line)
    }))
    .unwrap_or_else(|_| {
        let io = std::io::Error::other("decoding a watch event panicked");
        Err(kube::Error::ReadEvents(io))
    })
}

/// Whether a body error is the connection ending early (a probable EOF), which ends a watch
/// the way a close does, as in kube-client and client-go.
fn is_cut(err: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = source {
        if current
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::UnexpectedEof)
        {
            return true;
        }
        source = current.source();
    }
    err.to_string().contains("unexpected EOF during chunk")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_page_fetch_dropped_before_it_is_awaited_is_aborted() {
        struct Flag(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Flag(Arc::clone(&dropped));
        let fetch = Fetch(tokio::spawn(async move {
            let _flag = flag;
            std::future::pending::<Result<Bytes, kube::Error>>().await
        }));
        tokio::task::yield_now().await;
        assert!(!dropped.load(std::sync::atomic::Ordering::SeqCst));
        drop(fetch);
        // The aborted task's future (and what it holds, here the flag) is dropped by the runtime.
        for _ in 0..10 {
            if dropped.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));

        // Awaited to the end, the fetch hands its body over.
        let done = Fetch(tokio::spawn(async { Ok(Bytes::from_static(b"{}")) }));
        assert_eq!(&done.await.unwrap().unwrap()[..], b"{}");
    }

    fn body_of(
        frames: Vec<Result<&'static [u8], kube::Error>>,
    ) -> impl http_body::Body<Data = Bytes, Error = kube::Error> + Unpin + Send {
        http_body_util::StreamBody::new(futures_util::stream::iter(
            frames
                .into_iter()
                .map(|frame| frame.map(|bytes| http_body::Frame::data(Bytes::from_static(bytes)))),
        ))
    }

    async fn names(
        body: impl http_body::Body<Data = Bytes, Error = kube::Error> + Unpin + Send,
    ) -> Vec<Result<String, String>> {
        watch_events::<k8s_openapi::api::core::v1::ConfigMap, _>(body)
            .map(|event| match event {
                Ok(WatchEvent::Added(cm) | WatchEvent::Modified(cm)) => {
                    Ok(cm.metadata.name.unwrap_or_default())
                }
                Ok(other) => Err(format!("{other:?}")),
                Err(err) => Err(err.to_string()),
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn lines_split_across_frames_and_frames_holding_several_lines_come_out_in_order() {
        let body = body_of(vec![
            Ok(br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#),
            Ok(b"\n\n"),
            Ok(br#"{"type":"MODIFIED","object":{"metadata":{"name":"b"}}}"#),
            Ok(b"\n{\"type\":\"ADDED\",\"object\":{\"meta"),
            Ok(br#"data":{"name":"c"}}}"#),
        ]);
        // The last line has no newline but is whole: it is decoded.
        assert_eq!(
            names(body).await,
            vec![Ok("a".to_owned()), Ok("b".to_owned()), Ok("c".to_owned())]
        );
    }

    #[tokio::test]
    async fn a_bad_line_is_an_error_in_place_and_the_watch_goes_on() {
        let body = body_of(vec![
            Ok(b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n{not json\n"),
            Ok(b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n"),
        ]);
        let events = names(body).await;
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(events[0], Ok("a".to_owned()));
        assert!(events[1].is_err(), "{events:?}");
        assert_eq!(events[2], Ok("b".to_owned()));
    }

    #[tokio::test]
    async fn a_last_line_cut_short_ends_the_watch_without_an_error() {
        let body = body_of(vec![
            Ok(b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"),
            Ok(b"{\"type\":\"ADDED\",\"object\":{\"meta"),
        ]);
        assert_eq!(names(body).await, vec![Ok("a".to_owned())]);
    }

    #[tokio::test]
    async fn a_line_with_no_end_is_refused_once_it_passes_the_limit() {
        static LONG: std::sync::LazyLock<Vec<u8>> =
            std::sync::LazyLock::new(|| vec![b' '; MAX_LINE]);
        let body = body_of(vec![Ok(b"{\"type\""), Ok(&LONG[..]), Ok(b":")]);
        let events = names(body).await;
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(
            events[0]
                .as_ref()
                .is_err_and(|err| err.contains("longer than")),
            "{events:?}"
        );
    }
}
