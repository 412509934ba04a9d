//! Lists and watches through kube-client, decoded by ctrlkit.
//!
//! Requests are built by `kube::core::Request` and sent by `kube::Client` (its authentication,
//! TLS and middleware as configured); only the bodies are decoded here, with
//! [`decode`](crate::decode):
//!
//! - a list is read by a task of its own, one page ahead of the consumer: each page's items are
//!   decoded on the decoding threads (one per core, see [`decode_pool`](crate::decode_pool)),
//!   several at once, so a relist uses every core instead of the one that reads the response;
//!   the next page's items are decoded while the consumer stores this one's, and the page
//!   after is requested meanwhile;
//! - a watch body is read by a task of its own, which decodes a lone event itself and splits a
//!   burst over the decoding threads, handing the events on in order through a bounded channel:
//!   decoding the next events overlaps with storing the last ones.
//!
//! Objects come out with exactly sized vectors, so informers over these sources skip their
//! compacting copy ([`ListerWatcher::delivers_compact_objects`]).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use futures_util::FutureExt;
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

use crate::body_maps::BodyMaps;
use crate::decode;
use crate::decode_pool::{self, DecodeHandle};
use crate::decoding_page::DecodingPage;
use crate::list_watch::{PageStream, WatchStream, next_page};
use crate::response_body;

/// Batches of watch events read ahead of the consumer, at most: enough to keep every decoding
/// thread busy while the consumer stores a burst, little enough not to hold a second copy of a
/// large backlog.
const BATCHES_AHEAD: usize = 8;

/// Lines that arrive together in fewer than this are decoded by the reading task itself.
const PARALLEL_LINES: usize = 4;

/// How much of a watch body is gathered, at most, from frames that have already arrived before
/// its lines are decoded.
const GATHER: usize = 1 << 20;

/// The most lines in one batch.
const MAX_BATCH: usize = 64;

/// The longest watch line read: far beyond any object an API server stores (etcd's limit is
/// 1.5 MiB), short of letting a peer that never sends a newline fill the memory.
const MAX_LINE: usize = 64 << 20;

/// List pages whose items are decoded ahead of the consumer, beside the one it waits for: the
/// decoding threads go on with the next page while the consumer stores this one.
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
    let body = fetch(client, request, None).await?;
    let split = decode::split_list(&body)?;
    Ok(DecodingPage::start(body, split, std::convert::identity)
        .finish()
        .await?)
}

async fn fetch(
    client: &Client,
    request: http::Request<Vec<u8>>,
    maps: Option<&BodyMaps>,
) -> Result<Bytes, kube::Error> {
    response_body::read_whole(send(client, request).await?, maps).await
}

/// How a list request is made from its parameters (`Request::list`, `Request::list_metadata`).
pub(crate) type BuildList =
    fn(&kube::core::Request, &ListParams) -> Result<http::Request<Vec<u8>>, RequestError>;

/// A list page by page, read ahead by a task of its own: each page is requested as soon as the
/// one before has been read (its continue token is in the envelope), and its items go to the
/// decoding threads as soon as it is read, so that the server sends the next page and the
/// decoding threads decode this one while the consumer stores the one before.
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
    // The list's pages take turns in a few mappings, unmapped once the list is read and decoded.
    let maps = BodyMaps::new();
    let mut fetching = Some((start_fetch(&source, &params, &maps), params));
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
            .map(|params| (start_fetch(&source, &params, &maps), params));
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
fn start_fetch(source: &Arc<ListSource>, params: &ListParams, maps: &BodyMaps) -> Fetch {
    let source = Arc::clone(source);
    let params = params.clone();
    let maps = maps.clone();
    Fetch(tokio::spawn(async move {
        let (client, request, build) = &*source;
        let request = build(request, &params).map_err(kube::Error::BuildRequest)?;
        fetch(client, request, Some(&maps)).await
    }))
}

/// One watch request: the stream of its events, read by a task of its own and decoded on the
/// decoding threads when they come in bursts.
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
    let (sender, receiver) = mpsc::channel(BATCHES_AHEAD);
    tokio::spawn(read_watch(body, sender));
    let events = (receiver, VecDeque::new());
    Ok(
        futures_util::stream::unfold(events, |(mut receiver, mut ready)| async move {
            loop {
                if let Some(event) = ready.pop_front() {
                    return Some((event, (receiver, ready)));
                }
                ready = match receiver.recv().await? {
                    Batch::Ready(events) => events.into(),
                    Batch::Decoding(decoding) => match decoding.await {
                        Ok(events) => events.into(),
                        // A panic inside a `Deserialize` impl: the watch ends with an error
                        // and the reflector resumes it.
                        Err(err) => {
                            let io = std::io::Error::other(err);
                            VecDeque::from([Err(kube::Error::ReadEvents(io))])
                        }
                    },
                };
            }
        })
        .boxed(),
    )
}

type EventResult<T> = Result<WatchEvent<T>, kube::Error>;

/// Consecutive events of a watch: decoded, or being decoded on a decoding thread.
enum Batch<T> {
    Ready(Vec<EventResult<T>>),
    Decoding(DecodeHandle<Vec<EventResult<T>>>),
}

/// Reads a watch body (kube-client's [`Body`]) line by line and sends its events in order, in
/// batches, until the body ends, fails or nobody listens any more.
async fn read_watch<T, B>(mut body: B, sender: mpsc::Sender<Batch<T>>)
where
    T: DeserializeOwned + Clone + Send + 'static,
    B: http_body::Body<Data = Bytes, Error = kube::Error> + Unpin,
{
    let mut pending = BytesMut::new();
    // How much of `pending` is known to hold no newline.
    let mut scanned = 0;
    // How the body went on (a frame, its end or an error) when it was last polled ahead.
    let mut deferred = None;
    loop {
        let frame = match deferred.take() {
            Some(frame) => frame,
            None => tokio::select! {
                frame = body.frame() => frame,
                // The stream was dropped: close the connection now, not at the next event.
                () = sender.closed() => return,
            },
        };
        let data = match frame {
            None => break,
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue, // trailers
            },
            Some(Err(err)) => {
                if !is_cut(&err) {
                    let io = std::io::Error::other(err);
                    let _ = sender
                        .send(Batch::Ready(vec![Err(kube::Error::ReadEvents(io))]))
                        .await;
                }
                // A connection cut mid-stream ends the watch like a close: the reflector resumes
                // from the last version it saw. A partial line is dropped with it.
                return;
            }
        };
        pending.extend_from_slice(data.chunk());
        // A burst comes in many small frames (kube-apiserver writes each event in a chunk of
        // its own): take what has already arrived, so that it is decoded in batches big enough
        // to share out, not one event at a time. hyper hands a body's frames over one at a
        // time, each once the connection's task has run again, so when none is ready the task
        // yields once to let it; it stops at the first yield that brings nothing. The end of
        // the body or an error is kept for the next turn, after these lines.
        let mut yielded = false;
        while pending.len() < GATHER {
            match body.frame().now_or_never() {
                Some(Some(Ok(frame))) => {
                    yielded = false;
                    if let Ok(data) = frame.into_data() {
                        pending.extend_from_slice(data.chunk());
                    }
                }
                Some(outcome) => {
                    deferred = Some(outcome);
                    break;
                }
                None if yielded => break,
                None => {
                    yielded = true;
                    tokio::task::yield_now().await;
                }
            }
        }
        let mut lines = Vec::new();
        while let Some(end) = memchr::memchr(b'\n', &pending[scanned..]) {
            let line = pending.split_to(scanned + end + 1).freeze();
            scanned = 0;
            if !line.trim_ascii().is_empty() {
                lines.push(line);
            }
        }
        scanned = pending.len();
        for batch in batches(lines) {
            if sender.send(batch).await.is_err() {
                return;
            }
        }
        if pending.len() > MAX_LINE {
            let io = std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a watch event longer than {MAX_LINE} bytes"),
            );
            let _ = sender
                .send(Batch::Ready(vec![Err(kube::Error::ReadEvents(io))]))
                .await;
            return;
        }
    }
    // The body ended. A last line without its newline is decoded if it is whole; if it is cut
    // short, the connection was closed mid-event and the watch resumes as after any close.
    if !pending.trim_ascii().is_empty() {
        let whole = serde_json::from_slice::<serde::de::IgnoredAny>(&pending)
            .map_or_else(|err| !err.is_eof(), |_| true);
        if whole {
            let event = decode::decode_watch_event(pending.trim_ascii());
            let _ = sender.send(Batch::Ready(vec![event])).await;
        }
    }
}

/// Groups lines that arrived together into batches: a few are decoded here; a burst is split
/// into batches for the decoding threads, which take them in order.
fn batches<T>(lines: Vec<Bytes>) -> Vec<Batch<T>>
where
    T: DeserializeOwned + Clone + Send + 'static,
{
    if lines.len() < PARALLEL_LINES {
        if lines.is_empty() {
            return Vec::new();
        }
        return vec![Batch::Ready(decode_lines(&lines))];
    }
    let per_batch = lines.len().div_ceil(decode_pool::threads()).min(MAX_BATCH);
    lines
        .chunks(per_batch)
        .map(|chunk| {
            let chunk = chunk.to_vec();
            Batch::Decoding(decode_pool::spawn(move || decode_lines(&chunk)))
        })
        .collect()
}

fn decode_lines<T: DeserializeOwned + Clone>(lines: &[Bytes]) -> Vec<EventResult<T>> {
    lines
        .iter()
        .map(|line| decode::decode_watch_event(line.trim_ascii()))
        .collect()
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

    /// hyper hands a body's frames over one at a time, each once the connection's task has run
    /// again; a kube-apiserver writes each event in a chunk of its own. The reader must still
    /// gather a burst into a few batches, or every event is decoded alone on the runtime's
    /// thread and the decoding threads stand idle.
    #[tokio::test(flavor = "current_thread")]
    async fn frames_handed_over_one_at_a_time_are_gathered_into_a_few_batches() {
        let (frames, receiver) = mpsc::channel::<Result<http_body::Frame<Bytes>, kube::Error>>(1);
        let body = http_body_util::StreamBody::new(
            futures_util::stream::unfold(receiver, |mut receiver| async move {
                receiver.recv().await.map(|frame| (frame, receiver))
            })
            .boxed(),
        );
        let (sender, mut batches) = mpsc::channel(BATCHES_AHEAD);
        tokio::spawn(read_watch::<k8s_openapi::api::core::v1::ConfigMap, _>(
            body, sender,
        ));
        tokio::spawn(async move {
            for i in 0..200 {
                let line = serde_json::json!({"type": "MODIFIED",
                    "object": {"metadata": {"name": format!("cm-{i:03}")}}});
                let frame = http_body::Frame::data(Bytes::from(format!("{line}\n")));
                if frames.send(Ok(frame)).await.is_err() {
                    return;
                }
            }
        });
        let mut received = 0;
        let mut events = Vec::new();
        while events.len() < 200 {
            received += 1;
            match batches.recv().await.unwrap() {
                Batch::Ready(ready) => events.extend(ready),
                Batch::Decoding(decoding) => events.extend(decoding.await.unwrap()),
            }
        }
        for (i, event) in events.into_iter().enumerate() {
            match event {
                Ok(WatchEvent::Modified(cm)) => {
                    assert_eq!(cm.metadata.name, Some(format!("cm-{i:03}")));
                }
                other => panic!("{i}: {other:?}"),
            }
        }
        // A gathering's worth of batches (each at most `MAX_BATCH` lines, shared out among the
        // decoding threads), not one per event.
        let most = 200usize.div_ceil(MAX_BATCH) + decode_pool::threads();
        assert!(
            received <= most,
            "{received} batches, at most {most} expected"
        );
    }

    #[tokio::test]
    async fn a_burst_of_lines_comes_out_in_order_with_its_errors_in_place() {
        let mut lines: Vec<Bytes> = (0..300)
            .map(|i| {
                let line = serde_json::json!({"type": "MODIFIED",
                    "object": {"metadata": {"name": format!("cm-{i:03}")}}});
                Bytes::from(format!("{line}\n"))
            })
            .collect();
        lines[150] = Bytes::from_static(b"{not json\n");
        let batches = batches::<k8s_openapi::api::core::v1::ConfigMap>(lines);
        assert!(batches.len() >= 5, "{} batches", batches.len());
        let mut events = Vec::new();
        for batch in batches {
            match batch {
                Batch::Ready(ready) => events.extend(ready),
                Batch::Decoding(decoding) => events.extend(decoding.await.unwrap()),
            }
        }
        assert_eq!(events.len(), 300);
        for (i, event) in events.into_iter().enumerate() {
            match event {
                Ok(WatchEvent::Modified(cm)) => {
                    assert_eq!(cm.metadata.name, Some(format!("cm-{i:03}")));
                }
                Err(kube::Error::SerdeError(_)) => assert_eq!(i, 150),
                other => panic!("{i}: {other:?}"),
            }
        }
    }
}
