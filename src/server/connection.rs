//! One accepted connection under [`ConnectionLimits`]: the deadlines it must meet whatever
//! protocol it speaks, the requests in flight on it, and the one-answer refusal lane.
//!
//! A supervisor runs beside hyper's connection future and closes it:
//! - with no complete request head [`ConnectionLimits::header_timeout`] after accept (silent
//!   sockets, a partial HTTP/2 preface, a stalled TLS handshake, a partial HTTP/1.1 head);
//! - with a later HTTP/1.1 head started but unfinished `header_timeout` after its first byte;
//! - gracefully (HTTP/2 GOAWAY), with no request in flight for
//!   [`ConnectionLimits::idle_timeout`] after the last response ended;
//! - gracefully at shutdown, then at once if it is still idle a second later.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, Version, header};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::limits::ConnectionLimits;
use crate::error::A2aError;
use crate::telemetry::metrics::CONNECTIONS_TIMED_OUT;

/// Seconds a refused caller is asked to wait (`Retry-After`), as every binding's 503.
pub(crate) const RETRY_AFTER_SECS: u64 = crate::transport::rest::response::RETRY_AFTER_SECS;

/// How long a connection asked to close (at shutdown, or when idle) may stay open: 5 s.
/// One that is done closes by itself as soon as its last response is written out; this
/// bounds one whose peer reads too slowly or not at all (or never finishes a request
/// head), so that a shutdown ends in bounded time. Until then a slow reader gets the
/// rest of its responses, a stream's final event included.
const CLOSE_LIMIT: Duration = Duration::from_secs(5);

/// How a connection is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Within `max_connections`: served as usual.
    Normal,
    /// Beyond `max_connections`, within the refusal lane: one answer, then closed.
    Refusal,
}

/// What the supervisor knows about a connection, shared with its service and byte stream.
pub(crate) struct Tracker {
    state: Mutex<Track>,
    /// Set while idle on HTTP/1.1: the next byte read starts a request head.
    armed: AtomicBool,
    changed: Notify,
}

struct Track {
    in_flight: usize,
    requests: u64,
    http2: bool,
    /// When the last request in flight ended.
    idle_since: Instant,
    /// When the first byte of the next HTTP/1.1 head arrived, while idle.
    head_started: Option<Instant>,
}

impl Tracker {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(Track {
                in_flight: 0,
                requests: 0,
                http2: false,
                idle_since: Instant::now(),
                head_started: None,
            }),
            armed: AtomicBool::new(false),
            changed: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Track> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request head is complete: the request is in flight until the guard (kept with its
    /// response body) drops.
    pub(crate) fn start(self: &Arc<Self>, version: Version) -> RequestGuard {
        self.armed.store(false, Ordering::Relaxed);
        {
            let mut t = self.lock();
            t.in_flight += 1;
            t.requests += 1;
            t.head_started = None;
            t.http2 |= version == Version::HTTP_2;
        }
        self.changed.notify_one();
        RequestGuard(self.clone())
    }

    fn bytes_arrived(&self) {
        if self.armed.load(Ordering::Relaxed) && self.armed.swap(false, Ordering::Relaxed) {
            {
                let mut t = self.lock();
                if t.in_flight == 0 && t.head_started.is_none() {
                    t.head_started = Some(Instant::now());
                }
            }
            self.changed.notify_one();
        }
    }

    /// The next thing to do when nothing happens before it, and when.
    fn next(&self, limits: &ConnectionLimits, accepted: Instant, lane: Lane) -> Option<Step> {
        let t = self.lock();
        if t.in_flight > 0 {
            return None;
        }
        if t.requests == 0 {
            return Some(Step::Close(accepted + limits.header_timeout, "header"));
        }
        if lane == Lane::Refusal {
            return Some(Step::Graceful(t.idle_since));
        }
        if let Some(started) = t.head_started {
            return Some(Step::Close(started + limits.header_timeout, "header"));
        }
        Some(Step::Graceful(t.idle_since + limits.idle_timeout))
    }
}

enum Step {
    /// Drop the connection at this instant (timeout `reason`).
    Close(Instant, &'static str),
    /// Ask it to close gracefully at this instant (idle).
    Graceful(Instant),
}

/// One request in flight; ends it when dropped.
pub(crate) struct RequestGuard(Arc<Tracker>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let idle = {
            let mut t = self.0.lock();
            t.in_flight -= 1;
            if t.in_flight == 0 {
                t.idle_since = Instant::now();
                t.head_started = None;
            }
            t.in_flight == 0 && !t.http2
        };
        if idle {
            self.0.armed.store(true, Ordering::Relaxed);
        }
        self.0.changed.notify_one();
    }
}

/// A response body that keeps its request in flight until hyper is done with it.
pub(crate) struct GuardedBody {
    inner: Body,
    _guard: RequestGuard,
}

impl GuardedBody {
    pub(crate) fn new(inner: Body, guard: RequestGuard) -> Self {
        Self {
            inner,
            _guard: guard,
        }
    }
}

impl http_body::Body for GuardedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The connection's byte stream, telling the tracker when an idle HTTP/1.1 connection starts
/// sending its next head.
pub(crate) struct TrackedIo<Io> {
    io: Io,
    tracker: Arc<Tracker>,
}

impl<Io> TrackedIo<Io> {
    pub(crate) fn new(io: Io, tracker: Arc<Tracker>) -> Self {
        Self { io, tracker }
    }
}

impl<Io: AsyncRead + Unpin> AsyncRead for TrackedIo<Io> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.tracker.bytes_arrived();
        }
        polled
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for TrackedIo<Io> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Why a request is answered `503` without reaching the router.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The connection is in the refusal lane (over `max_connections`).
    ConnectionLimit,
    /// The server has stopped accepting and is closing connections.
    ShuttingDown,
}

/// Whether `req` must be refused on a connection in `lane` (`draining`: shutting down).
/// `/healthz` is always served, and `/readyz` too except while draining (it answers 503).
pub(crate) fn refusal<B>(req: &Request<B>, lane: Lane, draining: bool) -> Option<Refusal> {
    let path = req.uri().path();
    if draining {
        return (path != "/healthz").then_some(Refusal::ShuttingDown);
    }
    match lane {
        Lane::Refusal if path != "/healthz" && path != "/readyz" => Some(Refusal::ConnectionLimit),
        _ => None,
    }
}

/// The refusal answer for `req`, in its binding's form: on the HTTP+JSON binding (paths
/// under [`REST_PATH`](crate::transport::rest::REST_PATH)) its `503` error body; a gRPC
/// request (`content-type: application/grpc…`) gets `grpc-status: 14` (UNAVAILABLE); a
/// POST elsewhere gets a JSON-RPC error (`-32000`, `id` null) with `503`; anything else
/// `503` in plain text. Every `503` has `Retry-After`; HTTP/1.x answers add
/// `Connection: close`.
pub(crate) fn refusal_response<B>(refusal: Refusal, req: &Request<B>) -> Response<Body> {
    let text = match refusal {
        Refusal::ConnectionLimit => "the gateway is at its connection limit; retry later",
        Refusal::ShuttingDown => "the gateway is shutting down; retry later",
    };
    let error = A2aError::Unavailable(text.into());
    let grpc = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/grpc"));
    let path = req.uri().path();
    let mut resp = if grpc {
        // Trailers-only: the status travels in the headers of an HTTP 200.
        let mut resp = Response::new(Body::empty());
        let headers = resp.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert("grpc-status", HeaderValue::from_static("14"));
        headers.insert(
            "grpc-message",
            HeaderValue::from_static("gateway%20unavailable%3B%20retry%20later"),
        );
        resp
    } else if path == crate::transport::rest::REST_PATH
        || path.starts_with(&format!("{}/", crate::transport::rest::REST_PATH))
    {
        let media = crate::transport::rest::response::media_type(req.headers());
        crate::transport::rest::response::error(media, &error)
    } else {
        let (content_type, body) = if req.method() == Method::POST {
            let body = crate::protocol::jsonrpc::failure(None, &error.to_error_object());
            ("application/json", body.to_string())
        } else {
            ("text/plain; charset=utf-8", format!("{text}\n"))
        };
        let mut resp = Response::new(Body::from(body));
        *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        resp
    };
    let headers = resp.headers_mut();
    if !grpc {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    }
    if req.version() < Version::HTTP_2 {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// Drives `conn` to its end under `limits`: dropped when a deadline passes, asked to close
/// gracefully when idle or at `shutdown`.
pub(crate) async fn supervise<C, E>(
    conn: C,
    tracker: &Tracker,
    limits: &ConnectionLimits,
    accepted: Instant,
    lane: Lane,
    shutdown: &CancellationToken,
    peer: std::net::SocketAddr,
) where
    C: hyper_util::server::graceful::GracefulConnection<Error = E>,
    E: std::fmt::Display,
{
    tokio::pin!(conn);
    // Polled each time the connection wakes (every request, every streamed event): a
    // child token of its own, not the lock of the server's token that every
    // connection and task shares.
    let shutdown = shutdown.child_token();
    let mut closing: Option<Instant> = None;
    loop {
        let mut step = tracker.next(limits, accepted, lane);
        if let Some(since) = closing {
            // Asked to close: whatever is in flight, the connection is dropped
            // CLOSE_LIMIT later unless it ended by itself. Not sooner once its requests
            // ended: a response hyper has taken whole (a large JSON body, the end of an
            // SSE stream) may still be in its buffers, waiting for a slow reader.
            let drop_at = since + CLOSE_LIMIT;
            step = match step {
                Some(Step::Close(at, reason)) if at < drop_at => Some(Step::Close(at, reason)),
                _ => Some(Step::Close(drop_at, "")),
            };
        }
        let at = match &step {
            Some(Step::Close(at, _) | Step::Graceful(at)) => Some(*at),
            None => None,
        };
        let wait = async {
            match at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => futures::future::pending().await,
            }
        };
        tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            () = tracker.changed.notified() => {}
            () = shutdown.cancelled(), if closing.is_none() => {
                conn.as_mut().graceful_shutdown();
                closing = Some(Instant::now());
            }
            () = wait => match step {
                Some(Step::Close(_, reason)) => {
                    if !reason.is_empty() {
                        metrics::counter!(CONNECTIONS_TIMED_OUT, "reason" => reason).increment(1);
                        tracing::debug!(%peer, reason, "connection timed out; closed");
                    }
                    return;
                }
                Some(Step::Graceful(_)) => {
                    if lane == Lane::Normal {
                        metrics::counter!(CONNECTIONS_TIMED_OUT, "reason" => "idle").increment(1);
                        tracing::debug!(%peer, "idle connection; closing");
                    }
                    conn.as_mut().graceful_shutdown();
                    closing = Some(Instant::now());
                }
                None => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method, path: &str, content_type: Option<&str>) -> Request<()> {
        let mut b = Request::builder().method(method).uri(path);
        if let Some(ct) = content_type {
            b = b.header(header::CONTENT_TYPE, ct);
        }
        b.body(()).unwrap()
    }

    async fn body(resp: Response<Body>) -> String {
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn each_binding_gets_its_own_refusal() {
        let r = refusal_response(Refusal::ShuttingDown, &req(Method::POST, "/", None));
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        assert_eq!(r.headers()[header::CONNECTION], "close");
        let v: serde_json::Value = serde_json::from_str(&body(r).await).unwrap();
        assert_eq!(v["error"]["code"], -32000);
        assert_eq!(v["id"], serde_json::Value::Null);

        let path = format!("{}/tasks/x", crate::transport::rest::REST_PATH);
        let r = refusal_response(Refusal::ConnectionLimit, &req(Method::GET, &path, None));
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let v: serde_json::Value = serde_json::from_str(&body(r).await).unwrap();
        assert_eq!(v["error"]["code"], 503, "{v}");

        let grpc = req(
            Method::POST,
            "/a2a.v1.A2AService/GetTask",
            Some("application/grpc+proto"),
        );
        let r = refusal_response(Refusal::ConnectionLimit, &grpc);
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["grpc-status"], "14");

        let r = refusal_response(Refusal::ConnectionLimit, &req(Method::GET, "/x", None));
        assert_eq!(r.status(), 503);
        assert!(body(r).await.contains("connection limit"));
    }

    #[test]
    fn probes_pass_the_refusal_lane_and_healthz_the_drain() {
        let get = |p: &str| req(Method::GET, p, None);
        assert_eq!(refusal(&get("/healthz"), Lane::Refusal, false), None);
        assert_eq!(refusal(&get("/readyz"), Lane::Refusal, false), None);
        assert_eq!(
            refusal(&get("/"), Lane::Refusal, false),
            Some(Refusal::ConnectionLimit)
        );
        assert_eq!(refusal(&get("/"), Lane::Normal, false), None);
        assert_eq!(refusal(&get("/healthz"), Lane::Normal, true), None);
        assert_eq!(
            refusal(&get("/readyz"), Lane::Normal, true),
            Some(Refusal::ShuttingDown)
        );
    }
}
