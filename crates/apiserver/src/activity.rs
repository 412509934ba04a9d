//! What a connection is doing, as its server task needs to know it to apply kube-apiserver's
//! connection timeouts: when bytes last moved (`IdleTimeout`: a connection quiet for too long
//! is closed, not one whose request or response is flowing), and since when a request's head
//! has been arriving (`ReadHeaderTimeout`: counted from its first byte, not while the
//! connection waits for a next request, which is the idle timeout's business).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::{Duration, Instant};

/// No request head is arriving.
const NO_HEAD: u64 = u64::MAX;

/// A connection's activity: shared by its stream, its requests' responses and its server task.
#[derive(Debug, Clone)]
pub(crate) struct Activity {
    since: Instant,
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    /// Milliseconds after `since` of the last read or write.
    last: AtomicU64,
    /// Milliseconds after `since` of the first byte of the request head now arriving, or
    /// [`NO_HEAD`].
    head: AtomicU64,
    /// Requests whose responses are not yet done.
    in_flight: AtomicUsize,
    /// Woken when a request's head starts arriving.
    head_started: Notify,
}

impl Activity {
    /// Activity starting now.
    pub(crate) fn new() -> Self {
        Self {
            since: Instant::now(),
            state: Arc::new(State {
                last: AtomicU64::new(0),
                head: AtomicU64::new(NO_HEAD),
                in_flight: AtomicUsize::new(0),
                head_started: Notify::new(),
            }),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis()).unwrap_or(NO_HEAD - 1)
    }

    fn at(&self, millis: u64) -> Instant {
        self.since + Duration::from_millis(millis)
    }

    /// Bytes were read: between requests, they start a request's head.
    fn read(&self) {
        let now = self.now();
        self.state.last.store(now, Ordering::Relaxed);
        if self.state.in_flight.load(Ordering::Acquire) == 0
            && self
                .state
                .head
                .compare_exchange(NO_HEAD, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.state.head_started.notify_one();
        }
    }

    fn wrote(&self) {
        self.state.last.store(self.now(), Ordering::Relaxed);
    }

    /// A request's head has arrived: its handler starts.
    pub(crate) fn request_started(&self) {
        self.state.in_flight.fetch_add(1, Ordering::AcqRel);
        self.state.head.store(NO_HEAD, Ordering::Release);
    }

    /// A response has been sent (or abandoned).
    pub(crate) fn response_done(&self) {
        let _ = self
            .state
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |count| {
                count.checked_sub(1)
            });
    }

    /// Whether a request is being answered.
    pub(crate) fn busy(&self) -> bool {
        self.state.in_flight.load(Ordering::Acquire) > 0
    }

    /// When bytes last moved.
    pub(crate) fn last(&self) -> Instant {
        self.at(self.state.last.load(Ordering::Relaxed))
    }

    /// Completes when a request's head starts arriving (at once if one did since the last
    /// call).
    pub(crate) async fn head_started(&self) {
        self.state.head_started.notified().await;
    }

    /// When the request head now arriving began to, if one is.
    pub(crate) fn head_since(&self) -> Option<Instant> {
        let head = self.state.head.load(Ordering::Acquire);
        (head != NO_HEAD).then(|| self.at(head))
    }

    /// `stream`, noting its reads and writes here.
    pub(crate) fn watch<S>(&self, stream: S) -> Watched<S> {
        Watched {
            stream,
            activity: self.clone(),
        }
    }
}

/// A stream whose reads and writes are noted in its [`Activity`].
#[derive(Debug)]
pub(crate) struct Watched<S> {
    stream: S,
    activity: Activity,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, data);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A response body that tells its connection's [`Activity`] when it is done with.
#[derive(Debug)]
pub(crate) struct Tracked<B> {
    body: B,
    activity: Activity,
}

impl<B> Tracked<B> {
    /// `body`, reporting to `activity`.
    pub(crate) fn new(body: B, activity: Activity) -> Self {
        Self { body, activity }
    }
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        self.activity.response_done();
    }
}

impl<B: http_body::Body + Unpin> http_body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
