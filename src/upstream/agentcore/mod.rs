//! The AgentCore proxy executor: forwards each A2A message to an Amazon Bedrock
//! AgentCore Runtime invocation URL and turns the reply into A2A task events.
//!
//! The wire contract it follows is `shared/docs/agentcore-runtime.md` ("the runtime
//! contract", sections cited as §n); what upstream agents can rely on is
//! `docs/upstream-contract.md`.
//!
//! - [`settings`]: [`AgentCoreSettings`], plain values.
//! - [`session`]: runtime session ids and the per-session lock.
//!
//! What it shares with any HTTP runtime is in [`crate::upstream`]: `http` (client,
//! retries, SSE decoding), `auth` (token cache, OAuth), `reply` (reply → task events),
//! `errors`.

pub mod session;
pub mod settings;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream;
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use tokio::time::Instant;
use tracing::Instrument;

use crate::executor::{
    AgentExecutor, CallContext, ExecutorError, RequestContext, SessionLeases, TaskUpdater,
};

pub use settings::AgentCoreSettings;

use crate::upstream::auth::{self, AuthSettings, CachedToken, Credentials, TokenSource};
use crate::upstream::errors::{StatusError, TimeoutKind, UpstreamError};
use crate::upstream::http::{HttpVersion, RetryPolicy, SendTimeouts, client};
use crate::upstream::meter;
use crate::upstream::reply;
use crate::upstream::reply::sink::{ReplySink, SinkError, TaskStart};
use session::SessionLocks;

/// The request and response header carrying the runtime session id (contract §1.1).
pub const SESSION_HEADER: &str = "x-amzn-bedrock-agentcore-runtime-session-id";
/// Largest error body read from a non-2xx answer.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// StopRuntimeSession (token included) must finish within this: inside the request
/// handler's 10 s budget for `AgentExecutor::cancel`.
const STOP_SESSION_TIMEOUT: Duration = Duration::from_secs(8);

struct Inner {
    settings: AgentCoreSettings,
    http: reqwest::Client,
    credentials: Arc<dyn Credentials>,
    sessions: SessionLocks,
    /// Set when the handler joined a cluster: each invocation also holds the runtime
    /// session's lease there (one invocation per session across instances).
    leases: std::sync::OnceLock<Arc<dyn SessionLeases>>,
}

/// The AgentCore proxy executor (an [`AgentExecutor`]). Cheap to clone.
///
/// For each message: SUBMITTED (new task) → WORKING → the reply as artifact chunks →
/// COMPLETED, or FAILED with a readable reason, or the state a control object asks
/// for (INPUT_REQUIRED, AUTH_REQUIRED, REJECTED), or a direct Message reply without
/// a task (a `message` control object as the first output for a new task; the Task
/// of a new message is published only at the upstream's first output, see
/// [`TaskStart`]). Invocations of one runtime session
/// run one at a time: in this process by [`session::SessionLocks`], and across the
/// instances of a cluster by the session's lease ([`SessionLeases`]).
/// Cancel drops the in-flight request at once (the handler's
/// cancellation token), publishes CANCELED and, when configured, calls
/// StopRuntimeSession.
#[derive(Clone)]
pub struct AgentCoreExecutor {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AgentCoreExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentCoreExecutor")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl AgentCoreExecutor {
    /// Builds the executor: the HTTP client (HTTP version, CA file, connect timeout),
    /// and for OAuth a token cache over a client-credentials source that uses a
    /// client with the same CA roots. Does no network I/O.
    ///
    /// # Errors
    /// [`UpstreamError::Settings`] for an unreadable `ca_file` or an invalid URL.
    pub fn new(settings: AgentCoreSettings) -> Result<Self, UpstreamError> {
        reqwest::Url::parse(&settings.invocation_url).map_err(|e| {
            UpstreamError::Settings(format!(
                "upstream.url `{}` is not a valid URL: {e}",
                settings.invocation_url
            ))
        })?;
        let http = client::build_client(
            settings.http_version,
            settings.ca_file.as_deref(),
            settings.connect_timeout,
        )?;
        // Every retry reason exists from the first scrape, at 0.
        for reason in ["connect", "timeout", "status"] {
            metrics::counter!("a2a_upstream_retries_total", "reason" => reason).increment(0);
        }
        let credentials = auth::from_settings(&settings.auth, || {
            client::build_client(
                HttpVersion::Auto,
                settings.ca_file.as_deref(),
                settings.connect_timeout,
            )
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                settings,
                http,
                credentials,
                sessions: SessionLocks::default(),
                leases: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Like [`new`](Self::new), but tokens come from `source` (cached with
    /// `refresh_before`, refetched once on a 401) whatever `settings.auth` says.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_token_source(
        settings: AgentCoreSettings,
        source: Arc<dyn TokenSource>,
        refresh_before: Duration,
    ) -> Result<Self, UpstreamError> {
        let mut me = Self::new(AgentCoreSettings {
            auth: AuthSettings::None,
            ..settings.clone()
        })?;
        let inner = Arc::get_mut(&mut me.inner).expect("fresh executor");
        inner.settings.auth = settings.auth;
        inner.credentials = Arc::new(CachedToken::new(source, refresh_before));
        Ok(me)
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
            .map_err(|e| format!("no upstream token: {}", e.reason()))
    }

    /// The settings in use.
    pub fn settings(&self) -> &AgentCoreSettings {
        &self.inner.settings
    }

    /// The runtime session id used for `context` (contract §1.1; see [`session`]).
    pub fn session_for(context: &RequestContext) -> String {
        session::session_id(
            &context.call_context.tenant,
            &context.call_context.owner,
            &context.context_id,
        )
    }

    /// Calls StopRuntimeSession for `session` (contract §1.5). A 404 ("not found or
    /// already terminated") counts as done; a 401 refetches the token once. With
    /// `upstream.auth.kind = "forward"` the token is `caller`'s (the canceling caller).
    ///
    /// # Errors
    /// Any other failure, readable.
    pub async fn stop_session(
        &self,
        session: &str,
        caller: &CallContext,
    ) -> Result<(), UpstreamError> {
        let Some(url) = self.inner.settings.stop_session_url.clone() else {
            return Ok(());
        };
        let mut refetched = false;
        loop {
            let token = self.inner.token(caller).await?;
            let mut rb = self
                .inner
                .http
                .post(&url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(SESSION_HEADER, session)
                .timeout(STOP_SESSION_TIMEOUT);
            rb = self.inner.identity_headers(rb, caller);
            if let Some(t) = &token {
                rb = rb.bearer_auth(t.expose_secret());
            }
            let resp =
                rb.body("{}").send().await.map_err(|e| {
                    UpstreamError::from_send(&e, self.inner.settings.connect_timeout)
                })?;
            let status = resp.status().as_u16();
            if resp.status().is_success() || status == 404 {
                return Ok(());
            }
            if status == 401
                && !refetched
                && let Some(t) = &token
                && self.inner.credentials.on_unauthorized(t)
            {
                refetched = true;
                continue;
            }
            let headers = resp.headers().clone();
            let body = resp.bytes().await.unwrap_or_default();
            let tok = token.as_ref().map(|t| t.expose_secret());
            return Err(UpstreamError::status(StatusError::from_response(
                status, &headers, &body, tok,
            )));
        }
    }
}

impl Inner {
    /// The bearer token of a request for `caller` ([`Credentials::token`]).
    async fn token(&self, caller: &CallContext) -> Result<Option<SecretString>, UpstreamError> {
        Ok(self.credentials.token(caller).await?)
    }

    /// Adds the caller and tenant headers (`upstream.caller_header` /
    /// `tenant_header`), values percent-encoded ([`identity_header_value`]); the
    /// tenant header is left out for the default tenant `""`.
    fn identity_headers(
        &self,
        mut rb: reqwest::RequestBuilder,
        caller: &CallContext,
    ) -> reqwest::RequestBuilder {
        if let Some(name) = &self.settings.caller_header {
            rb = rb.header(name.clone(), identity_header_value(&caller.owner));
        }
        if let Some(name) = &self.settings.tenant_header
            && !caller.tenant.is_empty()
        {
            rb = rb.header(name.clone(), identity_header_value(&caller.tenant));
        }
        rb
    }

    fn payload(&self, ctx: &RequestContext) -> Bytes {
        let mut p = json!({
            "prompt": ctx.user_input(),
            "actor_id": format!("user-{}", ctx.context_id),
        });
        if self.settings.include_message {
            p["message"] = serde_json::to_value(&ctx.message).unwrap_or_default();
            p["taskId"] = json!(ctx.task_id);
            p["contextId"] = json!(ctx.context_id);
        }
        Bytes::from(serde_json::to_vec(&p).expect("JSON payload"))
    }

    /// One invocation with retries (only before any reply byte). Returns the 2xx
    /// response and when its attempt started. Each attempt's `traceparent` continues
    /// `trace` (the inbound request's) when given.
    async fn invoke(
        &self,
        session: &str,
        payload: Bytes,
        caller: &CallContext,
    ) -> Result<(reqwest::Response, Instant), UpstreamError> {
        let trace = caller.trace_parent.as_ref();
        let s = &self.settings;
        let policy = RetryPolicy {
            max_retries: s.max_retries,
            base_delay: s.retry_base_delay,
            max_delay: s.retry_max_delay,
        };
        let timeouts = SendTimeouts {
            connect: s.connect_timeout,
            pool: s.pool_timeout,
            write: s.write_timeout,
            read: s.read_timeout,
        };
        let mut retries = 0u32;
        let mut refetched = false;
        loop {
            let attempt = tracing::info_span!(
                "upstream.attempt",
                attempt = retries + 1,
                http.status_code = tracing::field::Empty
            );
            let token = self.token(caller).instrument(attempt.clone()).await?;
            // With OTLP export the runtime's spans become children of this attempt's.
            let traceparent = crate::telemetry::otlp::traceparent_of(&attempt)
                .unwrap_or_else(|| crate::telemetry::trace::attempt_traceparent(trace));
            let mut rb = self
                .http
                .post(&s.invocation_url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(http::header::ACCEPT, "text/event-stream, application/json")
                .header(SESSION_HEADER, session)
                .header("traceparent", &traceparent);
            rb = self.identity_headers(rb, caller);
            if let Some(t) = &token {
                rb = rb.bearer_auth(t.expose_secret());
            }
            let started = Instant::now();
            let sent = client::send(rb, payload.clone(), timeouts)
                .instrument(attempt.clone())
                .await;
            if let Ok(resp) = &sent {
                attempt.record("http.status_code", resp.status().as_u16());
            }
            drop(attempt);
            let err = match sent {
                Ok(resp) if resp.status().is_success() => {
                    record_upstream(resp.status().as_str(), started.elapsed());
                    tracing::info!(
                        upstream.status = resp.status().as_u16(),
                        upstream.request_id = header(&resp, "x-amzn-requestid").unwrap_or("-"),
                        // The span carries the session sent; a different one echoed back is named apart.
                        upstream.session_returned = header(&resp, SESSION_HEADER).filter(|h| *h != session),
                        upstream.version = ?resp.version(),
                        traceparent = %traceparent,
                        duration_ms = crate::telemetry::millis(started.elapsed()),
                        "the runtime accepted the invocation"
                    );
                    return Ok((resp, started));
                }
                Ok(resp) => {
                    record_upstream(resp.status().as_str(), started.elapsed());
                    let status = resp.status().as_u16();
                    let headers = resp.headers().clone();
                    let body = read_error_body(resp, s.read_timeout).await;
                    let e = StatusError::from_response(
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
                    if status == 401
                        && !refetched
                        && let Some(t) = &token
                        && self.credentials.on_unauthorized(t)
                    {
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
                    record_upstream("error", started.elapsed());
                    (e, None)
                }
                Err(e) => {
                    record_upstream("error", started.elapsed());
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
            metrics::counter!("a2a_upstream_retries_total", "reason" => retry_reason(&e))
                .increment(1);
            tracing::warn!(retry = retries, delay_ms = delay.as_millis() as u64, reason = %e, "retrying the invocation");
            tokio::time::sleep(delay).await;
        }
    }

    /// Says that this message waits for an earlier one of the same context (the task
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
    ) -> Result<(u16, reply::ReplyKind, BodyStream), UpstreamError> {
        let status = resp.status().as_u16();
        let kind = reply::ReplyKind::of(header(&resp, "content-type"));
        let s = &self.settings;
        if kind != reply::ReplyKind::EventStream
            && resp.content_length().is_some_and(|n| n > s.max_reply_bytes)
        {
            return Err(UpstreamError::TooLarge {
                limit: s.max_reply_bytes,
            });
        }
        let body = meter::first_chunk(reply::body_stream(resp, s.read_timeout), started);
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
            Box::pin(self.invoke(session, self.payload(ctx), &ctx.call_context)).await?;
        // The response goes into the body stream here, in a plain function: kept as a
        // local of this future, its slot (136 bytes) would stay reserved while the
        // reply streams.
        let (status, kind, body) = self.open_reply(resp, started)?;
        let s = &self.settings;
        let mut sink = ReplySink::new(updater, start);
        if kind == reply::ReplyKind::EventStream {
            let deadline = started + s.max_stream;
            let events = reply::sse_events(body, s.max_event_bytes, s.max_stream_bytes);
            match tokio::time::timeout_at(deadline, sink.consume(events)).await {
                Ok(r) => r?,
                Err(_) => {
                    return Err(UpstreamError::Timeout {
                        kind: TimeoutKind::Stream,
                        after: s.max_stream,
                    }
                    .into());
                }
            }
        } else {
            let deadline = started + s.request_timeout;
            let whole = match tokio::time::timeout_at(
                deadline,
                reply::read_whole_reply(status, &kind, body, s.max_reply_bytes),
            )
            .await
            {
                Ok(r) => r?,
                Err(_) => {
                    return Err(UpstreamError::Timeout {
                        kind: TimeoutKind::Request,
                        after: s.request_timeout,
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

/// Bytes percent-encoded in the caller and tenant header values: controls, space, `%`
/// and (always, by `percent-encoding`) every non-ASCII byte. What remains is visible
/// ASCII, a valid header value everywhere; decoding is plain percent-decoding to UTF-8.
const HEADER_VALUE_ESCAPES: &percent_encoding::AsciiSet =
    &percent_encoding::CONTROLS.add(b' ').add(b'%');

/// A caller or tenant as a header value: its UTF-8 bytes, percent-encoded (RFC 3986
/// `%XX`) outside visible ASCII and for `%` itself. `alice@example.com` is sent as is;
/// `Zoë Q` as `Zo%C3%AB%20Q`.
pub fn identity_header_value(value: &str) -> http::HeaderValue {
    let encoded = percent_encoding::utf8_percent_encode(value, HEADER_VALUE_ESCAPES).to_string();
    http::HeaderValue::from_str(&encoded).expect("visible ASCII is a valid header value")
}

/// The text of the WORKING status message of a task whose message waits for an
/// earlier message of the same context (one invocation per runtime session, see
/// [`session::SessionLocks`]).
pub const QUEUED_STATUS_TEXT: &str = "queued behind an earlier message of the same conversation; it starts when that one is answered";

#[async_trait]
impl AgentExecutor for AgentCoreExecutor {
    // Written out instead of `async fn` (which `async_trait` would turn into a future
    // holding the 860-byte context three times, for as long as the task streams): the
    // context is boxed before the future is made, so an open task's executor future
    // holds it once, behind a pointer.
    fn execute<'life0, 'async_trait>(
        &'life0 self,
        context: RequestContext,
        queue: crate::executor::EventQueue,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), ExecutorError>> + Send + 'async_trait>,
    >
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let context = Box::new(context);
        let session = Self::session_for(&context);
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
                if !inner.settings.include_message && context.user_input().trim().is_empty() {
                    // Only text reaches the runtime without `include_message`: a message
                    // of files or data alone would arrive as an empty prompt.
                    let why = "this agent takes text: the message has no text part (files \
                               and data parts reach the runtime only with \
                               upstream.include_message = true)";
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
                    meter::failure(&e);
                    context.set_failure_reason(e.category());
                    let id = crate::telemetry::correlation_id();
                    let reason = crate::telemetry::with_correlation(&e.public_reason(), &id);
                    tracing::warn!(
                        correlation_id = %id,
                        %reason,
                        detail = %e,
                        upstream.url = %crate::telemetry::log_url::LogUrl(&inner.settings.invocation_url),
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
                "the AgentCore executor is shared by two cluster instances; the first one's session leases are used"
            );
        }
    }

    async fn cancel(
        &self,
        context: RequestContext,
        queue: crate::executor::EventQueue,
    ) -> Result<(), ExecutorError> {
        let session = Self::session_for(&context);
        let updater = TaskUpdater::from_context(&context, queue);
        let _ = updater.cancel(None).await;
        if self.inner.settings.stop_session_on_cancel {
            let stopped = tokio::time::timeout(
                STOP_SESSION_TIMEOUT,
                self.stop_session(&session, &context.call_context),
            )
            .await
            .unwrap_or_else(|_| {
                Err(UpstreamError::Send(format!(
                    "StopRuntimeSession did not finish within {} s",
                    STOP_SESSION_TIMEOUT.as_secs()
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

/// Records one invocation attempt: `a2a_upstream_responses_total{status}` and
/// `a2a_upstream_request_duration_seconds{status}` (time to the reply headers;
/// `status` is the HTTP code, or `error` when no reply came).
fn record_upstream(status: &str, elapsed: std::time::Duration) {
    let status = status.to_owned();
    metrics::counter!("a2a_upstream_responses_total", "status" => status.clone()).increment(1);
    metrics::histogram!("a2a_upstream_request_duration_seconds", "status" => status)
        .record(elapsed.as_secs_f64());
}

/// The bounded `reason` label of `a2a_upstream_retries_total`.
fn retry_reason(e: &UpstreamError) -> &'static str {
    match e {
        UpstreamError::Connect(_) => "connect",
        UpstreamError::Timeout { .. } => "timeout",
        _ => "status",
    }
}

#[cfg(test)]
mod tests {
    use super::identity_header_value;

    #[test]
    fn identity_values_are_percent_encoded_outside_visible_ascii() {
        for (raw, sent) in [
            ("alice@example.com", "alice@example.com"),
            ("Zoë Q", "Zo%C3%AB%20Q"),
            ("a%b", "a%25b"),
            ("line\r\nX-Evil: 1", "line%0D%0AX-Evil:%201"),
            ("", ""),
        ] {
            assert_eq!(
                identity_header_value(raw).to_str().unwrap(),
                sent,
                "{raw:?}"
            );
        }
    }
}
