//! [`Runtime`]: what one kind of runtime answers, and [`RuntimeExecutor`]: the one
//! [`AgentExecutor`] over any kind.
//!
//! A kind says which session a message belongs to, what body and request an
//! invocation is, which headers identify a reply, how a non-2xx answer reads and how
//! to stop a session. The executor does the rest once for every kind: one invocation
//! per session at a time (in this process by [`SessionLocks`], across a cluster by the
//! session's lease, [`SessionLeases`]), authentication ([`Credentials`]), retries
//! before the first reply byte, the reply into task events ([`ReplySink`]), time
//! limits, the public failure reason with its correlation id, and metrics.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream;
use secrecy::{ExposeSecret, SecretString};
use tokio::time::Instant;
use tracing::Instrument;

use super::auth::Credentials;
use super::errors::{StatusError, TimeoutKind, UpstreamError};
use super::http::{RetryPolicy, SendTimeouts, client};
use super::meter;
use super::reply::sink::{ReplySink, SinkError, TaskStart};
use super::reply::{self, ReplyKind};
use super::turns::SessionLocks;
use crate::executor::{
    AgentExecutor, CallContext, EventQueue, ExecutorError, RequestContext, SessionLeases,
    TaskUpdater,
};

/// Largest error body read from a non-2xx answer.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// A kind's [`Runtime::stop`] (token included) must finish within this: inside the
/// request handler's 10 s budget for `AgentExecutor::cancel`.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(8);

/// The text of the WORKING status message of a task whose message waits for an
/// earlier message of the same session (one invocation per session, see
/// [`SessionLocks`]).
pub const QUEUED_STATUS_TEXT: &str = "queued behind an earlier message of the same conversation; it starts when that one is answered";

/// The time and size limits of an invocation, the same for every kind.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Per-phase limits of one attempt (connect, pool, write, read until headers).
    pub send: SendTimeouts,
    /// Retries before the first reply byte.
    pub retry: RetryPolicy,
    /// A whole (not event-stream) reply must be complete within this from its attempt's
    /// start.
    pub request_timeout: Duration,
    /// A streamed reply must be complete within this from its attempt's start.
    pub max_stream: Duration,
    /// Largest SSE event, in bytes.
    pub max_event_bytes: usize,
    /// Largest streamed reply in total, in bytes.
    pub max_stream_bytes: u64,
    /// Largest whole reply, in bytes.
    pub max_reply_bytes: u64,
}

/// One kind of runtime: what differs between kinds. [`RuntimeExecutor`] does the rest.
#[async_trait]
pub trait Runtime: Send + Sync + std::fmt::Debug + 'static {
    /// The response header carrying the runtime's request id, logged with each
    /// accepted invocation.
    const REQUEST_ID_HEADER: &'static str;
    /// The response header echoing the session, when the kind has one: a different
    /// session echoed back is logged.
    const SESSION_HEADER: Option<&'static str>;

    /// The limits of every invocation.
    fn limits(&self) -> &Limits;

    /// The session `ctx` belongs to: invocations of one session run one at a time.
    fn session(&self, ctx: &RequestContext) -> String;

    /// Why `ctx` cannot be sent to this runtime at all (the task is REJECTED with this
    /// text), or `None`.
    fn refusal(&self, ctx: &RequestContext) -> Option<&'static str> {
        let _ = ctx;
        None
    }

    /// The invocation's body, made once and sent by every attempt.
    fn payload(&self, ctx: &RequestContext) -> Bytes;

    /// One attempt's request for `session` on behalf of `caller`, without its body,
    /// `Authorization` and `traceparent` (the executor adds them).
    fn request(
        &self,
        http: &reqwest::Client,
        session: &str,
        caller: &CallContext,
    ) -> reqwest::RequestBuilder;

    /// How a non-2xx answer reads (`token`, when one was sent, is redacted from it).
    fn refused(
        &self,
        status: u16,
        headers: &http::HeaderMap,
        body: &[u8],
        token: Option<&str>,
    ) -> StatusError {
        StatusError::from_response(status, headers, body, token)
    }

    /// The invocation URL as logs show it (its query left out).
    fn log_url(&self) -> &str;

    /// Whether a cancel calls [`stop`](Self::stop).
    fn stops_on_cancel(&self) -> bool;

    /// Stops `session` after a cancel (within [`STOP_TIMEOUT`]), on behalf of `caller`.
    ///
    /// # Errors
    /// The runtime's refusal or a transport failure, readable.
    async fn stop(
        &self,
        http: &reqwest::Client,
        credentials: &dyn Credentials,
        session: &str,
        caller: &CallContext,
    ) -> Result<(), UpstreamError>;
}

struct Inner<R> {
    runtime: R,
    http: reqwest::Client,
    credentials: Arc<dyn Credentials>,
    sessions: SessionLocks,
    /// Set when the handler joined a cluster: each invocation also holds the session's
    /// lease there (one invocation per session across instances).
    leases: std::sync::OnceLock<Arc<dyn SessionLeases>>,
}

/// The executor over a runtime kind `R` (an [`AgentExecutor`]). Cheap to clone.
///
/// For each message: SUBMITTED (new task) → WORKING → the reply as artifact chunks →
/// COMPLETED, or FAILED with a readable reason, or the state a control object asks
/// for (INPUT_REQUIRED, AUTH_REQUIRED, REJECTED), or a direct Message reply without
/// a task (a `message` control object as the first output for a new task; the Task
/// of a new message is published only at the upstream's first output, see
/// [`TaskStart`]). Invocations of one session run one at a time: in this process by
/// [`SessionLocks`], and across the instances of a cluster by the session's lease
/// ([`SessionLeases`]). Cancel drops the in-flight request at once (the handler's
/// cancellation token), publishes CANCELED and, when the kind does, stops the session.
pub struct RuntimeExecutor<R> {
    inner: Arc<Inner<R>>,
}

impl<R> Clone for RuntimeExecutor<R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<R: Runtime> std::fmt::Debug for RuntimeExecutor<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeExecutor")
            .field("runtime", &self.inner.runtime)
            .finish_non_exhaustive()
    }
}

impl<R: Runtime> RuntimeExecutor<R> {
    /// The executor over `runtime`, sending with `http` and authenticating with
    /// `credentials`. Every retry reason of `a2a_upstream_retries_total` exists from
    /// the first scrape, at 0.
    pub fn new_over(runtime: R, http: reqwest::Client, credentials: Arc<dyn Credentials>) -> Self {
        for reason in ["connect", "timeout", "status"] {
            metrics::counter!("a2a_upstream_retries_total", "reason" => reason).increment(0);
        }
        Self {
            inner: Arc::new(Inner {
                runtime,
                http,
                credentials,
                sessions: SessionLocks::default(),
                leases: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The runtime kind.
    pub fn runtime(&self) -> &R {
        &self.inner.runtime
    }

    /// Readiness: whether a token is obtainable (the cached one, or one fetch through
    /// the shared single-flight cache). Always `Ok` without authentication.
    ///
    /// # Errors
    /// The token endpoint's failure as a readable reason (never the secret).
    pub async fn token_ready(&self) -> Result<(), String> {
        self.inner
            .credentials
            .ready()
            .await
            .map_err(|e| format!("no upstream credentials: {}", e.reason()))
    }

    /// Stops `session` now on behalf of `caller` ([`Runtime::stop`]).
    ///
    /// # Errors
    /// As [`Runtime::stop`].
    pub async fn stop_session(
        &self,
        session: &str,
        caller: &CallContext,
    ) -> Result<(), UpstreamError> {
        let i = &self.inner;
        i.runtime
            .stop(&i.http, i.credentials.as_ref(), session, caller)
            .await
    }
}

impl<R: Runtime> Inner<R> {
    /// One invocation with retries (only before any reply byte). Returns the 2xx
    /// response and when its attempt started. Each attempt's `traceparent` continues
    /// the inbound request's when given.
    async fn invoke(
        &self,
        session: &str,
        payload: Bytes,
        caller: &CallContext,
    ) -> Result<(reqwest::Response, Instant), UpstreamError> {
        let trace = caller.trace_parent.as_ref();
        let limits = self.runtime.limits();
        let policy = limits.retry;
        let mut retries = 0u32;
        let mut refetched = false;
        loop {
            let attempt = tracing::info_span!(
                "upstream.attempt",
                attempt = retries + 1,
                http.status_code = tracing::field::Empty
            );
            // With OTLP export the runtime's spans become children of this attempt's.
            let traceparent = crate::telemetry::otlp::traceparent_of(&attempt)
                .unwrap_or_else(|| crate::telemetry::trace::attempt_traceparent(trace));
            // Every header and the body are final before authorizing: a signature
            // covers them (and is made again for each attempt).
            let mut request = self
                .runtime
                .request(&self.http, session, caller)
                .header("traceparent", &traceparent)
                .body(payload.clone())
                .build()
                .map_err(|e| UpstreamError::from_send(&e, limits.send.connect))?;
            let token: Option<SecretString> = self
                .credentials
                .authorize(&mut request, caller)
                .instrument(attempt.clone())
                .await?;
            let started = Instant::now();
            let sent = client::send_request(&self.http, request, payload.clone(), limits.send)
                .instrument(attempt.clone())
                .await;
            if let Ok(resp) = &sent {
                attempt.record("http.status_code", resp.status().as_u16());
            }
            drop(attempt);
            let err = match sent {
                Ok(resp) if resp.status().is_success() => {
                    meter::attempt(resp.status().as_str(), started.elapsed(), &caller.agent);
                    tracing::info!(
                        upstream.status = resp.status().as_u16(),
                        upstream.request_id = header(&resp, R::REQUEST_ID_HEADER).unwrap_or("-"),
                        // The span carries the session sent; a different one echoed back is named apart.
                        upstream.session_returned = R::SESSION_HEADER.and_then(|h| header(&resp, h)).filter(|h| *h != session),
                        upstream.version = ?resp.version(),
                        traceparent = %traceparent,
                        duration_ms = crate::telemetry::millis(started.elapsed()),
                        "the runtime accepted the invocation"
                    );
                    return Ok((resp, started));
                }
                Ok(resp) => {
                    meter::attempt(resp.status().as_str(), started.elapsed(), &caller.agent);
                    let status = resp.status().as_u16();
                    let headers = resp.headers().clone();
                    let body = read_error_body(resp, limits.send.read).await;
                    let e = self.runtime.refused(
                        status,
                        &headers,
                        &body,
                        token.as_ref().map(|t| t.expose_secret()),
                    );
                    tracing::warn!(
                        upstream.status = status,
                        upstream.error_type = e.error_type.as_deref().unwrap_or("-"),
                        upstream.request_id = e.request_id.as_deref().unwrap_or("-"),
                        traceparent = %traceparent,
                        "the runtime refused the invocation"
                    );
                    if !refetched && self.refetch_cures(status, e.error_type.as_deref(), &token) {
                        refetched = true;
                        continue;
                    }
                    let retry_after = e.retry_after;
                    if e.is_retryable() {
                        (UpstreamError::status(e), retry_after)
                    } else {
                        return Err(UpstreamError::status(e));
                    }
                }
                // Nothing was sent: safe to retry.
                Err(
                    e @ (UpstreamError::Connect(_)
                    | UpstreamError::Timeout {
                        kind: TimeoutKind::Connect | TimeoutKind::Pool,
                        ..
                    }),
                ) => {
                    meter::attempt("error", started.elapsed(), &caller.agent);
                    (e, None)
                }
                Err(e) => {
                    meter::attempt("error", started.elapsed(), &caller.agent);
                    return Err(e);
                }
            };
            let (e, retry_after) = err;
            if retries >= policy.max_retries {
                return Err(e);
            }
            let Some(delay) = policy.delay(retries + 1, retry_after) else {
                return Err(e);
            };
            retries += 1;
            meter::retry(meter::retry_reason(&e), &caller.agent);
            tracing::warn!(retry = retries, delay_ms = delay.as_millis() as u64, reason = %e, "retrying the invocation");
            tokio::time::sleep(delay).await;
        }
    }

    /// Whether a refusal may be cured by one more attempt with fresh credentials (the
    /// credentials drop what they blame): a 401 to a cached bearer token, or what
    /// [`Credentials::on_rejected`] accepts (SigV4's expired or rotated keys).
    fn refetch_cures(
        &self,
        status: u16,
        error_type: Option<&str>,
        token: &Option<SecretString>,
    ) -> bool {
        if status == 401 {
            return token
                .as_ref()
                .is_some_and(|t| self.credentials.on_unauthorized(t));
        }
        self.credentials.on_rejected(status, error_type)
    }

    /// Says that this message waits for an earlier one of the same session (the task
    /// would otherwise show a bare WORKING while it waits).
    async fn queued(
        updater: &TaskUpdater,
        start: &TaskStart,
        behind: &str,
    ) -> Result<(), SinkError> {
        start.ensure().await?;
        metrics::counter!("a2a_context_queued_messages_total").increment(1);
        tracing::info!("queued behind an earlier message of the same context{behind}");
        updater
            .start_work(Some(updater.new_agent_text(QUEUED_STATUS_TEXT)))
            .await?;
        Ok(())
    }

    /// The reply's status, kind and body stream (timing its first chunk from
    /// `started`).
    ///
    /// # Errors
    /// [`UpstreamError::TooLarge`] for a whole (not event-stream) reply whose
    /// `Content-Length` is over `max_reply_bytes`.
    fn open_reply(
        &self,
        resp: reqwest::Response,
        started: Instant,
        agent: &str,
    ) -> Result<(u16, ReplyKind, BodyStream), UpstreamError> {
        let status = resp.status().as_u16();
        let kind = ReplyKind::of(header(&resp, "content-type"));
        let limits = self.runtime.limits();
        if kind != ReplyKind::EventStream
            && resp
                .content_length()
                .is_some_and(|n| n > limits.max_reply_bytes)
        {
            return Err(UpstreamError::TooLarge {
                limit: limits.max_reply_bytes,
            });
        }
        let body = meter::first_chunk(reply::body_stream(resp, limits.send.read), started, agent);
        Ok((status, kind, body))
    }

    /// Invokes and publishes the reply. Runs under the session lock and, in a
    /// cluster, the session's lease.
    async fn run(
        &self,
        ctx: &RequestContext,
        updater: &TaskUpdater,
        session: &str,
        start: &TaskStart,
    ) -> Result<(), SinkError> {
        let (_turn, _lease) = {
            let _waiting = meter::QueueWait::start();
            let mut queued = false;
            let turn = match self.sessions.try_lock(session) {
                Some(turn) => turn,
                None => {
                    Box::pin(Self::queued(updater, start, "")).await?;
                    queued = true;
                    self.sessions.lock(session).await
                }
            };
            let lease = match self.leases.get() {
                None => None,
                Some(leases) => Some(match leases.try_lease(session).await {
                    Ok(Some(lease)) => lease,
                    Ok(None) => {
                        if !queued {
                            Box::pin(Self::queued(updater, start, " on another gateway instance"))
                                .await?;
                            queued = true;
                        }
                        leases
                            .lease(session)
                            .await
                            .map_err(UpstreamError::session_lease)?
                    }
                    Err(e) => return Err(UpstreamError::session_lease(e).into()),
                }),
            };
            if queued {
                updater.start_work(None).await?;
            }
            (turn, lease)
        };
        // Boxed: the request's future (about 1.2 KB, the token refresh and retries) is
        // done once the reply's headers are in; inline it would size the state that
        // streams the reply for as long as the task runs.
        let (resp, started) =
            Box::pin(self.invoke(session, self.runtime.payload(ctx), &ctx.call_context)).await?;
        // The response goes into the body stream here, in a plain function: kept as a
        // local of this future, its slot (136 bytes) would stay reserved while the
        // reply streams.
        let (status, kind, body) = self.open_reply(resp, started, &ctx.call_context.agent)?;
        let limits = self.runtime.limits();
        let mut sink = ReplySink::new(updater, start);
        if kind == ReplyKind::EventStream {
            let deadline = started + limits.max_stream;
            let events = reply::sse_events(body, limits.max_event_bytes, limits.max_stream_bytes);
            match tokio::time::timeout_at(deadline, sink.consume(events)).await {
                Ok(r) => r?,
                Err(_) => {
                    return Err(UpstreamError::Timeout {
                        kind: TimeoutKind::Stream,
                        after: limits.max_stream,
                    }
                    .into());
                }
            }
        } else {
            let deadline = started + limits.request_timeout;
            let whole = match tokio::time::timeout_at(
                deadline,
                reply::read_whole_reply(status, &kind, body, limits.max_reply_bytes),
            )
            .await
            {
                Ok(r) => r?,
                Err(_) => {
                    return Err(UpstreamError::Timeout {
                        kind: TimeoutKind::Request,
                        after: limits.request_timeout,
                    }
                    .into());
                }
            };
            // Boxed: this path's future would otherwise size the streaming one.
            Box::pin(sink.consume(stream::iter(whole.map(Ok)))).await?;
        }
        tracing::info!(
            chunks = sink.chunks(),
            duration_ms = crate::telemetry::millis(started.elapsed()),
            "the reply is complete"
        );
        Ok(())
    }
}

/// A reply body as it is read: chunks of bytes, or the error that ended it.
type BodyStream = stream::BoxStream<'static, Result<Bytes, UpstreamError>>;

fn header<'a>(resp: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    resp.headers().get(name).and_then(|v| v.to_str().ok())
}

async fn read_error_body(resp: reqwest::Response, read_timeout: Duration) -> Vec<u8> {
    use futures::StreamExt;
    let mut body = reply::body_stream(resp, read_timeout);
    let mut buf = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        buf.extend_from_slice(&chunk);
        if buf.len() >= MAX_ERROR_BODY {
            buf.truncate(MAX_ERROR_BODY);
            break;
        }
    }
    buf
}

#[async_trait]
impl<R: Runtime> AgentExecutor for RuntimeExecutor<R> {
    // Written out instead of `async fn` (which `async_trait` would turn into a future
    // holding the 860-byte context three times, for as long as the task streams): the
    // context is boxed before the future is made, so an open task's executor future
    // holds it once, behind a pointer.
    fn execute<'life0, 'async_trait>(
        &'life0 self,
        context: RequestContext,
        queue: EventQueue,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), ExecutorError>> + Send + 'async_trait>,
    >
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let context = Box::new(context);
        let session = self.inner.runtime.session(&context);
        let span = tracing::info_span!(
            "upstream",
            task.id = %context.task_id,
            context.id = %context.context_id,
            upstream.session = %session,
        );
        crate::telemetry::otlp::adopt(&span, context.call_context.trace_parent.as_ref());
        let updater = TaskUpdater::from_context(&context, queue);
        let start = TaskStart::new(&context, &updater);
        let cancel = context.cancellation().clone();
        let inner = self.inner.clone();
        let fut = async move {
            let work = async {
                if let Some(why) = inner.runtime.refusal(&context) {
                    if context.current_task.is_none() {
                        updater.submit().await?;
                    }
                    updater.reject(Some(updater.new_agent_text(why))).await?;
                    return Ok(());
                }
                // The Task waits for the upstream's first output, unless it must exist
                // now (see `TaskStart`): a new task may still become a Message reply.
                if start.eager() {
                    start.ensure().await?;
                }
                inner.run(&context, &updater, &session, &start).await
            };
            let outcome = tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    tracing::info!("canceled; the upstream request is dropped");
                    return Ok(());
                }
                r = work => r,
            };
            if matches!(outcome, Err(SinkError::Upstream(_))) {
                // A failure before any output still shows the task's whole lifecycle.
                let _ = start.ensure().await;
            }
            match outcome {
                Ok(()) | Err(SinkError::Closed) => Ok(()),
                Err(SinkError::Upstream(e)) => {
                    // The caller gets the short reason and the id; the log line with
                    // the same id has the details (URLs, addresses, OS errors).
                    meter::failure(&e, &context.call_context.agent);
                    context.set_failure_reason(e.category());
                    let id = crate::telemetry::correlation_id();
                    let reason = crate::telemetry::with_correlation(&e.public_reason(), &id);
                    tracing::warn!(
                        correlation_id = %id,
                        %reason,
                        detail = %e,
                        upstream.url = %crate::log_url::LogUrl(inner.runtime.log_url()),
                        "the task failed"
                    );
                    // The queue may be closed already; the handler fails the task then.
                    let _ = updater.failed(Some(updater.new_agent_text(reason))).await;
                    Ok(())
                }
            }
        }
        .instrument(span);
        Box::pin(fut)
    }

    fn use_session_leases(&self, leases: Arc<dyn SessionLeases>) {
        if self.inner.leases.set(leases).is_err() {
            tracing::warn!(
                "the upstream executor is shared by two cluster instances; the first one's session leases are used"
            );
        }
    }

    async fn cancel(
        &self,
        context: RequestContext,
        queue: EventQueue,
    ) -> Result<(), ExecutorError> {
        let session = self.inner.runtime.session(&context);
        let updater = TaskUpdater::from_context(&context, queue);
        let _ = updater.cancel(None).await;
        if self.inner.runtime.stops_on_cancel() {
            let stopped = tokio::time::timeout(
                STOP_TIMEOUT,
                self.stop_session(&session, &context.call_context),
            )
            .await
            .unwrap_or_else(|_| {
                Err(UpstreamError::Send(format!(
                    "StopRuntimeSession did not finish within {} s",
                    STOP_TIMEOUT.as_secs()
                )))
            });
            match stopped {
                Ok(()) => {
                    tracing::info!(task.id = %context.task_id, upstream.session = %session, "stopped the runtime session")
                }
                Err(e) => {
                    tracing::warn!(task.id = %context.task_id, upstream.session = %session, reason = %e, "StopRuntimeSession failed");
                    return Err(Box::new(e));
                }
            }
        }
        Ok(())
    }
}
