//! The HTTP client: building it (HTTP version, extra CA roots, connect timeout,
//! HTTP/2 keep-alive), sending one request with the pool / write / read-until-headers
//! time limits (the retry policy is [`super::retry`]).

use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::upstream::errors::{TimeoutKind, UpstreamError};

/// Which HTTP version to speak to the runtime and the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpVersion {
    /// HTTP/2 when the TLS server offers it by ALPN, else HTTP/1.1; HTTP/1.1 on
    /// plain `http://`.
    #[default]
    Auto,
    /// HTTP/2 only: ALPN `h2` over TLS, prior knowledge (h2c) on plain `http://`.
    Http2,
    /// HTTP/1.1 only.
    Http1,
}

/// `User-Agent` sent to the runtime and the token endpoint.
pub const USER_AGENT: &str = concat!("a2a-gateway/", env!("CARGO_PKG_VERSION"));

/// HTTP/2 PING interval on open connections: detects a dead connection during the
/// long silences of an agent that thinks for minutes.
const H2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a PING may stay unanswered before the connection is considered dead.
const H2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// TCP keep-alive on upstream sockets.
const TCP_KEEP_ALIVE: Duration = Duration::from_secs(60);
/// Idle pooled connections are closed after this.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Request bodies are handed to the connection in pieces of this size, so the write
/// time limit follows the actual progress of a large body.
const WRITE_CHUNK: usize = 64 * 1024;

/// Builds a rustls-only reqwest client for `version`, trusting the built-in web PKI
/// roots plus the certificates in `ca_file` (PEM, one or more). No redirects are
/// followed (a redirected POST would be a new, unplanned invocation).
///
/// # Errors
/// [`UpstreamError::Settings`] when `ca_file` cannot be read or holds no certificate.
pub fn build_client(
    version: HttpVersion,
    ca_file: Option<&Path>,
    connect_timeout: Duration,
) -> Result<reqwest::Client, UpstreamError> {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .user_agent(USER_AGENT)
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .tcp_keepalive(TCP_KEEP_ALIVE)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .http2_keep_alive_interval(H2_KEEP_ALIVE_INTERVAL)
        .http2_keep_alive_timeout(H2_KEEP_ALIVE_TIMEOUT)
        .http2_keep_alive_while_idle(true);
    b = match version {
        HttpVersion::Auto => b,
        HttpVersion::Http2 => b.http2_prior_knowledge(),
        HttpVersion::Http1 => b.http1_only(),
    };
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|e| {
            UpstreamError::Settings(format!(
                "upstream.ca_file `{}` cannot be read: {e}",
                path.display()
            ))
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            UpstreamError::Settings(format!(
                "upstream.ca_file `{}` is not PEM: {e}",
                path.display()
            ))
        })?;
        if certs.is_empty() {
            return Err(UpstreamError::Settings(format!(
                "upstream.ca_file `{}` holds no certificate",
                path.display()
            )));
        }
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    b.build().map_err(|e| {
        UpstreamError::Settings(format!(
            "cannot build the HTTP client: {}",
            crate::upstream::errors::describe(&e)
        ))
    })
}

/// The time limits of one attempt up to the reply headers.
#[derive(Debug, Clone, Copy)]
pub struct SendTimeouts {
    /// Connecting (also enforced inside reqwest); named when a connect times out.
    pub connect: Duration,
    /// Waiting for a usable connection, beyond `connect`.
    pub pool: Duration,
    /// Sending the request once the connection is ready.
    pub write: Duration,
    /// Waiting for the reply headers after the request was sent.
    pub read: Duration,
}

/// Sends `request` (whose body is `body`, JSON) and waits for the reply headers, as
/// [`send_request`] does.
///
/// # Errors
/// As [`send_request`]; also [`UpstreamError::Send`] when the request cannot be built.
pub async fn send(
    request: reqwest::RequestBuilder,
    body: Bytes,
    timeouts: SendTimeouts,
) -> Result<reqwest::Response, UpstreamError> {
    let (client, request) = request.build_split();
    let request = request.map_err(|e| UpstreamError::from_send(&e, timeouts.connect))?;
    send_request(&client, request, body, timeouts).await
}

/// Sends the built `request` with `client`, its body being `body` (JSON; any body the
/// request holds, such as the same bytes it was signed over, is replaced by a stream of
/// `body` that reports progress), and waits for the reply headers, enforcing each
/// phase's limit:
/// 1. until the connection starts taking the body: `connect + pool`;
/// 2. until the whole body was handed to the connection: `write`;
/// 3. until the reply headers arrive: `read`.
///
/// Dropping the returned future (or the response) drops the connection or resets
/// the HTTP/2 stream.
///
/// # Errors
/// [`UpstreamError::Timeout`] naming the phase, or the classified transport error.
pub async fn send_request(
    client: &reqwest::Client,
    mut request: reqwest::Request,
    body: Bytes,
    timeouts: SendTimeouts,
) -> Result<reqwest::Response, UpstreamError> {
    let (started_tx, mut started_rx) = oneshot::channel();
    let (written_tx, mut written_rx) = oneshot::channel();
    let probe = WriteProbe {
        body,
        started: Some(started_tx),
        written: Some(written_tx),
    };
    request.headers_mut().insert(
        http::header::CONTENT_LENGTH,
        http::HeaderValue::from(probe.body.len()),
    );
    *request.body_mut() = Some(reqwest::Body::wrap_stream(probe));
    let fut = client.execute(request);
    tokio::pin!(fut);
    let mut phase = TimeoutKind::Pool;
    let mut deadline = Instant::now() + timeouts.connect + timeouts.pool;
    loop {
        tokio::select! {
            biased;
            r = &mut fut => return r.map_err(|e| UpstreamError::from_send(&e, timeouts.connect)),
            _ = &mut started_rx, if phase == TimeoutKind::Pool => {
                phase = TimeoutKind::Write;
                deadline = Instant::now() + timeouts.write;
            }
            _ = &mut written_rx, if phase == TimeoutKind::Write => {
                phase = TimeoutKind::Read;
                deadline = Instant::now() + timeouts.read;
            }
            () = tokio::time::sleep_until(deadline) => {
                let after = match phase {
                    TimeoutKind::Pool => timeouts.pool,
                    TimeoutKind::Write => timeouts.write,
                    _ => timeouts.read,
                };
                return Err(UpstreamError::Timeout { kind: phase, after });
            }
        }
    }
}

/// A request body that reports when the connection starts pulling it and when the
/// last piece was handed over.
struct WriteProbe {
    body: Bytes,
    started: Option<oneshot::Sender<()>>,
    written: Option<oneshot::Sender<()>>,
}

impl Stream for WriteProbe {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(tx) = self.started.take() {
            let _ = tx.send(());
        }
        if self.body.is_empty() {
            if let Some(tx) = self.written.take() {
                let _ = tx.send(());
            }
            return Poll::Ready(None);
        }
        let n = self.body.len().min(WRITE_CHUNK);
        let piece = self.body.split_to(n);
        if self.body.is_empty() {
            // The connection may not poll again once it has Content-Length bytes.
            if let Some(tx) = self.written.take() {
                let _ = tx.send(());
            }
        }
        Poll::Ready(Some(Ok(piece)))
    }
}
