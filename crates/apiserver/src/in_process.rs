//! The in-process transport: the server's router called as a `tower` service, without sockets.
//!
//! Over TCP a request waits on socket I/O, and a Tokio runtime whose clock is paused jumps to the
//! next timer whenever every task waits, so a test's clock moves during plain requests. Called in
//! process, a request is only futures and channels between tasks that are ready to run, and the
//! paused clock stays where the test put it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::Router;
use axum::http::{Request, Response};
use bytes::Bytes;
use futures_util::future::BoxFuture;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::watch;

use crate::link::{self, Link};

/// The error of a call and of a response body: a boxed [`std::io::Error`] as a dropped or
/// refused connection gives.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The server as a [`tower_service::Service`]: the same router, handlers, fault hooks and watch
/// streams as over TCP, called in process. Made by [`ApiServer::service`](crate::ApiServer::service).
///
/// Partitions, listener restarts and shutdown reach it as they reach TCP clients: while the server
/// is partitioned or stopped a call fails at once with an [`std::io::Error`] of kind
/// [`ConnectionRefused`](std::io::ErrorKind::ConnectionRefused); a call in flight, or a response
/// body still open (a watch stream), when a partition or restart begins fails with kind
/// [`ConnectionReset`](std::io::ErrorKind::ConnectionReset), as a dropped connection does.
///
/// ```
/// use axum::body::Body;
/// use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
/// use tower_service::Service;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
/// let mut service = server.service();
/// let request = axum::http::Request::get("/version").body(Body::empty()).unwrap();
/// let response = service.call(request).await.unwrap();
/// assert_eq!(response.status(), 200);
/// let body = axum::body::to_bytes(Body::new(response.into_body()), 1 << 20).await.unwrap();
/// assert!(body.starts_with(b"{"));
/// # }
/// ```
#[derive(Clone)]
pub struct InProcessService {
    router: Router,
    link: watch::Receiver<Link>,
}

impl InProcessService {
    pub(crate) fn new(router: Router, link: watch::Receiver<Link>) -> Self {
        Self { router, link }
    }
}

impl<B> tower_service::Service<Request<B>> for InProcessService
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<InProcessBody>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Refusals are per call, as a client finds out when it connects.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let state = *self.link.borrow();
        if state.is_down() {
            let refused = std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "connection refused: the API server is partitioned or stopped",
            );
            return ResponseFuture(Box::pin(std::future::ready(Err(refused.into()))));
        }
        let epoch = state.epoch;
        let link = self.link.clone();
        let response =
            <Router as tower_service::Service<Request<B>>>::call(&mut self.router, request);
        ResponseFuture(Box::pin(async move {
            tokio::select! {
                biased;
                () = link::cut(link.clone(), epoch) => Err(reset().into()),
                response = response => match response {
                    Ok(response) => Ok(response.map(|body| InProcessBody {
                        inner: body,
                        cut: Box::pin(link::cut(link, epoch)),
                        broken: false,
                    })),
                    Err(infallible) => match infallible {},
                },
            }
        }))
    }
}

impl fmt::Debug for InProcessService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InProcessService")
            .field("link", &*self.link.borrow())
            .finish_non_exhaustive()
    }
}

/// What a dropped connection gives the calls and bodies that were using it.
fn reset() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "connection reset: the API server was partitioned, restarted or stopped",
    )
}

/// The response of an [`InProcessService`] call.
pub struct ResponseFuture(BoxFuture<'static, Result<Response<InProcessBody>, BoxError>>);

impl Future for ResponseFuture {
    type Output = Result<Response<InProcessBody>, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

/// The body of an [`InProcessService`] response: the server's body, which ends with a
/// connection-reset [`std::io::Error`] if a partition, restart or shutdown comes before it is
/// read to its end.
pub struct InProcessBody {
    inner: axum::body::Body,
    /// Resolves when the connection this body came over is dropped.
    cut: BoxFuture<'static, ()>,
    /// The cut was reported: the body is over.
    broken: bool,
}

impl Body for InProcessBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if this.broken {
            return Poll::Ready(None);
        }
        if this.cut.as_mut().poll(cx).is_ready() {
            this.broken = true;
            return Poll::Ready(Some(Err(reset().into())));
        }
        Pin::new(&mut this.inner).poll_frame(cx).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.broken || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.broken {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        }
    }
}

impl fmt::Debug for InProcessBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InProcessBody")
            .field("broken", &self.broken)
            .finish_non_exhaustive()
    }
}
