//! [`A2aExecutor`]: the `a2a` kind, an [`AgentExecutor`] of its own rather than a
//! [`Runtime`](crate::upstream::Runtime): an A2A agent has a task model of its own
//! (its task ids, follow-ups to the same task, resubscription and GetTask polling
//! after a broken stream, cancel = its CancelTask, which may refuse), which the
//! one-invocation-per-message shape of `Runtime` does not hold. It reuses what every
//! kind shares: the HTTP client and retry policy, the bounded SSE decoder,
//! [`Credentials`](crate::upstream::Credentials), readable failure reasons with a
//! correlation id, and the failure metrics.
//!
//! Per message: the agent's card (kept fresh; see [`A2aExecutor::card`]) says where,
//! in which version and whether to stream. The message goes to the agent's task and
//! context of this gateway task or context when there is one ([`Links`]); the agent's
//! events become the gateway task's ([`Relay`]). A stream that ends before the task
//! settles (terminal, interrupted) is resubscribed once, then GetTask is polled with
//! backoff, for at most `resume_for`; only then the task fails, saying so. A blocking
//! call answered with a task that has not settled is polled the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use futures::StreamExt;
use tokio::time::Instant;
use tracing::Instrument;

use super::card::UpstreamCard;
use super::card_cache::CardCache;
use super::client::{Reply, Rpc, RpcFailure, Target};
use super::links::Links;
pub use super::reasons::{detail, public_reason};
use super::relay::{Relay, Step};
use super::settings::A2aSettings;
use super::wire::{
    Method, TASK_NOT_CANCELABLE, UNSUPPORTED_OPERATION, VERSION_NOT_SUPPORTED, WireVersion,
};
use crate::error::A2aError;
use crate::executor::{
    AgentExecutor, CallContext, EventQueue, ExecutorError, QueueClosed, RequestContext, TaskUpdater,
};
use crate::protocol::TaskState;
use crate::upstream::auth;
use crate::upstream::errors::UpstreamError;
use crate::upstream::http::{HttpVersion, client};

/// The executor of the `a2a` kind. Cheap to clone.
#[derive(Clone, Debug)]
pub struct A2aExecutor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: Arc<A2aSettings>,
    rpc: Rpc,
    /// The agent's card, read at the first need and again when it is stale.
    card: CardCache,
    /// A 1.0 call was answered -32009: 0.3 from then on.
    fell_back: AtomicBool,
    links: Links,
}

/// Why a run ended without a settled task.
enum Ended {
    /// The stream ended or broke (the error, if any) before the task settled.
    Unsettled(Option<UpstreamError>),
    /// Done: settled.
    Settled,
}

impl A2aExecutor {
    /// Builds the executor: the HTTP client and the credentials `settings.auth`
    /// describes. Does no network I/O (the card is read at the first need, or by
    /// [`card`](Self::card)).
    ///
    /// # Errors
    /// [`UpstreamError::Settings`] for an invalid URL or an unreadable `ca_file`.
    pub fn new(settings: A2aSettings) -> Result<Self, UpstreamError> {
        let credentials = auth::from_settings(&settings.connection.auth, || {
            client::build_client(
                HttpVersion::Auto,
                settings.connection.ca_file.as_deref(),
                settings.connection.connect_timeout,
            )
        })?;
        Self::build(settings, credentials)
    }

    /// Like [`new`](Self::new), but authenticating with `credentials` whatever
    /// `settings.auth` says (the ones a gateway shares between agents with the same
    /// credential, [`CredentialPool`](crate::upstream::auth::CredentialPool)).
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_credentials(
        settings: A2aSettings,
        credentials: Arc<dyn crate::upstream::Credentials>,
    ) -> Result<Self, UpstreamError> {
        Self::build(settings, credentials)
    }

    /// Like [`new`](Self::new), but bearer tokens come from `source` (cached with
    /// `refresh_before`, refetched once on a 401) whatever `settings.auth` says.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_token_source(
        settings: A2aSettings,
        source: Arc<dyn crate::upstream::TokenSource>,
        refresh_before: std::time::Duration,
    ) -> Result<Self, UpstreamError> {
        let credentials = Arc::new(auth::CachedToken::new(source, refresh_before));
        Self::build(settings, credentials)
    }

    fn build(
        settings: A2aSettings,
        credentials: Arc<dyn crate::upstream::Credentials>,
    ) -> Result<Self, UpstreamError> {
        for url in [&settings.base_url, &settings.card_url] {
            reqwest::Url::parse(url).map_err(|e| {
                UpstreamError::Settings(format!("upstream.url `{url}` is not a valid URL: {e}"))
            })?;
        }
        let http = client::build_client(
            settings.connection.http_version,
            settings.connection.ca_file.as_deref(),
            settings.connection.connect_timeout,
        )?;
        let settings = Arc::new(settings);
        Ok(Self {
            inner: Arc::new(Inner {
                rpc: Rpc::new(http, credentials, settings.clone()),
                settings,
                card: CardCache::default(),
                fell_back: AtomicBool::new(false),
                links: Links::default(),
            }),
        })
    }

    /// The settings in use.
    pub fn settings(&self) -> &A2aSettings {
        &self.inner.settings
    }

    /// The agent's card: read from `settings.card_url` at the first need (on behalf of
    /// an anonymous caller), then kept while fresh and read again after (see
    /// [`CardCache`]).
    ///
    /// # Errors
    /// Why it could not be read (unreachable, not a card, no usable interface) when no
    /// card was read before.
    pub async fn card(&self) -> Result<Arc<UpstreamCard>, UpstreamError> {
        self.inner
            .card
            .get(&self.inner.rpc, &self.inner.settings)
            .await
    }

    /// When the card held goes stale (the next [`card`](Self::card) reads it again);
    /// `None` while none was read.
    pub fn card_stale_at(&self) -> Option<Instant> {
        self.inner.card.stale_at()
    }

    /// Resolves once a card that differs from the one held before (or the first one)
    /// was read, by whichever call read it, since it last resolved. For one waiter.
    pub async fn card_changed(&self) {
        self.inner.card.changed().await;
    }

    /// The shortest time between two reads of the agent's card
    /// (`upstream.card_min_refresh_secs`).
    pub fn card_min_refresh(&self) -> std::time::Duration {
        self.inner.settings.card_min_refresh
    }

    /// Readiness: the agent's card is read, and a token is obtainable.
    ///
    /// # Errors
    /// The reason, readable (never a secret).
    pub async fn ready(&self) -> Result<(), String> {
        self.card().await.map_err(|e| {
            format!(
                "no usable card from the upstream A2A agent: {}",
                public_reason(&e)
            )
        })?;
        self.inner
            .rpc
            .credentials()
            .ready()
            .await
            .map_err(|e| format!("no upstream token: {}", e.reason()))
    }

    fn version(&self, card: &UpstreamCard) -> WireVersion {
        if self.inner.fell_back.load(Ordering::Relaxed) {
            WireVersion::V0_3
        } else {
            card.wire
        }
    }

    /// `f` with the version spoken; a 1.0 call answered -32009 is made again in 0.3
    /// once, and 0.3 is spoken from then on.
    async fn with_version<T, F, Fut>(
        &self,
        card: &UpstreamCard,
        f: F,
    ) -> Result<(T, WireVersion), RpcFailure>
    where
        F: Fn(WireVersion) -> Fut,
        Fut: Future<Output = Result<T, RpcFailure>>,
    {
        let v = self.version(card);
        match f(v).await {
            Err(RpcFailure::Rpc { code, .. })
                if code == VERSION_NOT_SUPPORTED
                    && v == WireVersion::V1_0
                    && card.binding == super::wire::Binding::JsonRpc =>
            {
                tracing::warn!(
                    "the A2A agent refused A2A 1.0 (-32009); speaking 0.3 to it from now on"
                );
                self.inner.fell_back.store(true, Ordering::Relaxed);
                f(WireVersion::V0_3).await.map(|t| (t, WireVersion::V0_3))
            }
            r => r.map(|t| (t, v)),
        }
    }

    /// The run of one message; errors fail the task.
    async fn run(&self, ctx: &RequestContext, relay: &mut Relay<'_>) -> Result<(), RunError> {
        let i = &self.inner;
        let card = self.card().await?;
        let caller = &ctx.call_context;
        let scope = caller.scope();
        let session = crate::upstream::agentcore::session::session_id(
            &caller.tenant,
            &caller.owner,
            &ctx.context_id,
        );
        let mut message = ctx.message.clone();
        message.task_id = relay.upstream().map(|u| u.task_id.clone());
        message.context_id = relay
            .upstream()
            .map(|u| u.context_id.clone())
            .or_else(|| i.links.context(&scope, &ctx.context_id));
        let mut references = Vec::new();
        for t in &message.reference_task_ids {
            if let Some(u) = i.links.task(&scope, t).await {
                references.push(u.task_id);
            }
        }
        message.reference_task_ids = references;
        // Extensions (and their metadata) only where the agent declares them.
        message.extensions.retain(|e| card.extensions.contains(e));
        let extensions: Vec<String> = caller
            .requested_extensions
            .iter()
            .filter(|e| card.extensions.contains(e))
            .cloned()
            .collect();
        if message.extensions.is_empty() {
            message.metadata = None;
        }
        let target = |v| Target {
            endpoint: &card.endpoint,
            binding: card.binding,
            version: v,
            session: &session,
            extensions: &extensions,
            caller,
        };
        let link = Recorder {
            links: &i.links,
            scope: &scope,
            task_id: &ctx.task_id,
            context_id: &ctx.context_id,
            session: &session,
            recorded: std::sync::Mutex::new(None),
        };
        // A streaming agent is sent SendStreamingMessage. One that answers it
        // UnsupportedOperation no longer streams (its card changed since it was read):
        // the card is read again and this message goes blocking.
        let streamed = if card.streaming {
            let sent = self
                .with_version(&card, |v| {
                    let params = v.send_params(&message);
                    async move { i.rpc.stream(target(v), Method::Stream, &params).await }
                })
                .await;
            match sent {
                Err(RpcFailure::Rpc { code, .. }) if code == UNSUPPORTED_OPERATION => {
                    tracing::warn!(
                        "the A2A agent refused SendStreamingMessage (-32004) though its card says it streams; reading its card again, sending this message blocking"
                    );
                    i.card.expire();
                    // Read now, not at the end of its refresh period: a card that differs
                    // is published at once (the follower is woken by the change).
                    if let Err(e) = self.card().await {
                        tracing::warn!(reason = %super::reasons::detail(&e), "the A2A agent's card could not be read again");
                    }
                    None
                }
                sent => Some(sent?),
            }
        } else {
            None
        };
        let streaming = streamed.is_some();
        let ended = if let Some((reply, v)) = streamed {
            let deadline = Instant::now() + i.settings.connection.max_stream;
            self.consume(reply, v, relay, &link, deadline).await?
        } else {
            let (result, v) = self
                .with_version(&card, |v| {
                    let params = v.send_params(&message);
                    async move { i.rpc.call(target(v), Method::Send, &params).await }
                })
                .await?;
            let event = v.event(result).map_err(UpstreamError::A2a)?;
            let step = relay.apply(event).await?;
            link.record(relay).await;
            if step == Step::Settled {
                Ended::Settled
            } else {
                Ended::Unsettled(None)
            }
        };
        if let Ended::Unsettled(why) = ended {
            self.resume(&card, &session, caller, relay, why, streaming, &link)
                .await?;
        }
        if relay.state().is_some_and(TaskState::is_terminal) {
            i.links.forget(&scope, &ctx.task_id, &ctx.context_id);
        }
        Ok(())
    }

    /// Relays a streaming answer until the task settles, the stream ends, or
    /// `deadline` passes (then [`Ended::Unsettled`] with a stream timeout).
    async fn consume(
        &self,
        reply: Reply,
        v: WireVersion,
        relay: &mut Relay<'_>,
        link: &Recorder<'_>,
        deadline: Instant,
    ) -> Result<Ended, RunError> {
        let started = Instant::now();
        let mut events = match reply {
            Reply::Whole(result) => {
                let step = relay
                    .apply(v.event(result).map_err(UpstreamError::A2a)?)
                    .await?;
                link.record(relay).await;
                return Ok(if step == Step::Settled {
                    Ended::Settled
                } else {
                    Ended::Unsettled(None)
                });
            }
            Reply::Events(events) => events,
        };
        loop {
            let next = match tokio::time::timeout_at(deadline, events.next()).await {
                Ok(n) => n,
                Err(_) => {
                    return Ok(Ended::Unsettled(Some(UpstreamError::Timeout {
                        kind: crate::upstream::TimeoutKind::Stream,
                        after: started.elapsed(),
                    })));
                }
            };
            match next {
                None => return Ok(Ended::Unsettled(None)),
                Some(Err(e)) => return Ok(Ended::Unsettled(Some(e))),
                Some(Ok(result)) => {
                    let step = relay
                        .apply(v.event(result).map_err(UpstreamError::A2a)?)
                        .await?;
                    link.record(relay).await;
                    if step == Step::Settled {
                        return Ok(Ended::Settled);
                    }
                }
            }
        }
    }

    /// The stream ended (or the blocking answer came) before the task settled:
    /// resubscribe once (when the agent streams), then poll GetTask with backoff, for
    /// at most `resume_for`.
    #[expect(clippy::too_many_arguments)]
    async fn resume(
        &self,
        card: &UpstreamCard,
        session: &str,
        caller: &CallContext,
        relay: &mut Relay<'_>,
        why: Option<UpstreamError>,
        streaming: bool,
        link: &Recorder<'_>,
    ) -> Result<(), RunError> {
        let i = &self.inner;
        let s = &i.settings;
        let Some(up) = relay.upstream().cloned() else {
            return Err(why
                .unwrap_or_else(|| {
                    UpstreamError::A2a("ended its answer before it named a task".into())
                })
                .into());
        };
        let why_text = why
            .as_ref()
            .map(public_reason)
            .unwrap_or_else(|| "it ended without a final state".into());
        relay.hint(why_text.clone());
        tracing::warn!(upstream.task_id = %up.task_id, reason = %why_text, detail = %why.as_ref().map(detail).unwrap_or_default(), "the A2A agent's answer ended before the task settled; getting the task back");
        let broke_at = Instant::now();
        let deadline = broke_at + s.resume_for;
        // A stream that broke off (not a clean end) while the task was SUBMITTED: the
        // agent may have crashed; then the task stays SUBMITTED for good (a2a-sdk 0.3),
        // and its resubscription stays silent. Bounded by `stall_for`.
        let mut stalled_at = (why.is_some() && relay.state() == Some(TaskState::Submitted))
            .then(|| (broke_at + s.stall_for).min(deadline));
        let v = self.version(card);
        let target = Target {
            endpoint: &card.endpoint,
            binding: card.binding,
            version: v,
            session,
            extensions: &[],
            caller,
        };
        let params = v.task_params(&up.task_id);
        // Told the client once, when the agent does not answer (it may be restarting).
        let notice = format!(
            "the A2A agent's answer broke off ({why_text}) and the agent does not answer now; the gateway keeps trying to get the task back for up to {} s",
            s.resume_for.as_secs()
        );
        if streaming {
            let until = stalled_at.unwrap_or(deadline);
            let resubscribed =
                tokio::time::timeout_at(until, i.rpc.stream(target, Method::Subscribe, &params))
                    .await;
            match resubscribed {
                Ok(Ok(reply)) => {
                    metrics::counter!(
                        crate::telemetry::metrics::UPSTREAM_RESUMES,
                        crate::upstream::meter::labels(&caller.agent, &[("how", "resubscribe")])
                    )
                    .increment(1);
                    let until = stalled_at.unwrap_or(deadline);
                    if let Ended::Settled = self.consume(reply, v, relay, link, until).await? {
                        return Ok(());
                    }
                    if relay.state() != Some(TaskState::Submitted) {
                        stalled_at = None;
                    }
                }
                Ok(Err(e)) => {
                    let unreachable = !matches!(e, RpcFailure::Rpc { .. });
                    tracing::warn!(reason = %detail(&UpstreamError::from(e)), "resubscribing to the A2A agent's task failed; polling it");
                    if unreachable {
                        relay.notice(notice.clone()).await?;
                    }
                }
                Err(_) => {}
            }
        }
        let mut interval = s.poll_initial;
        loop {
            if Instant::now() >= deadline {
                return Err(UpstreamError::A2a(format!(
                    "did not settle its task within {} s after its answer ended ({why_text})",
                    s.resume_for.as_secs()
                ))
                .into());
            }
            metrics::counter!(
                crate::telemetry::metrics::UPSTREAM_RESUMES,
                crate::upstream::meter::labels(&caller.agent, &[("how", "poll")])
            )
            .increment(1);
            let got =
                tokio::time::timeout_at(deadline, i.rpc.call(target, Method::GetTask, &params))
                    .await;
            match got {
                Ok(Ok(result)) => {
                    let task = v.task(result).map_err(UpstreamError::A2a)?;
                    let submitted = task.status.state == TaskState::Submitted;
                    if relay.snapshot(task).await? == Step::Settled {
                        return Ok(());
                    }
                    if !submitted {
                        stalled_at = None;
                    } else if let Some(at) = stalled_at
                        && Instant::now() >= at
                    {
                        return Err(UpstreamError::A2a(format!(
                            "left its task SUBMITTED for {} s after its answer broke off, so its executor probably crashed ({why_text})",
                            s.stall_for.as_secs()
                        ))
                        .into());
                    }
                }
                Ok(Err(e @ RpcFailure::Rpc { .. })) => {
                    return Err(UpstreamError::A2a(format!(
                        "lost its task after its answer ended ({why_text}): GetTask {}",
                        public_reason(&UpstreamError::from(e)).trim_start_matches("the A2A agent ")
                    ))
                    .into());
                }
                Ok(Err(e)) => {
                    tracing::warn!(reason = %detail(&UpstreamError::from(e)), "GetTask on the A2A agent failed; trying again");
                    relay.notice(notice.clone()).await?;
                }
                Err(_) => continue,
            }
            tokio::time::sleep(interval.min(deadline.saturating_duration_since(Instant::now())))
                .await;
            interval = (interval * 2).min(s.poll_max);
        }
    }
}

/// Records a run's link to the agent's task once the agent names it ([`Links::link`]),
/// and again only if it names another (not per relayed event).
struct Recorder<'a> {
    links: &'a Links,
    scope: &'a crate::scope::Scope,
    task_id: &'a str,
    context_id: &'a str,
    session: &'a str,
    recorded: std::sync::Mutex<Option<super::links::UpstreamTask>>,
}

impl Recorder<'_> {
    async fn record(&self, relay: &Relay<'_>) {
        let Some(u) = relay.upstream() else {
            return;
        };
        {
            let mut recorded = self.recorded.lock().expect("recorder");
            if recorded.as_ref() == Some(u) {
                return;
            }
            *recorded = Some(u.clone());
        }
        self.links
            .link(self.scope, self.task_id, self.context_id, u, self.session)
            .await;
    }
}

/// A run's failure: the queue closed (the task ended elsewhere), or the agent failed.
enum RunError {
    Closed,
    Upstream(UpstreamError),
}

impl From<QueueClosed> for RunError {
    fn from(_: QueueClosed) -> Self {
        Self::Closed
    }
}

impl From<UpstreamError> for RunError {
    fn from(e: UpstreamError) -> Self {
        Self::Upstream(e)
    }
}

impl From<RpcFailure> for RunError {
    fn from(e: RpcFailure) -> Self {
        Self::Upstream(e.into())
    }
}

#[async_trait]
impl AgentExecutor for A2aExecutor {
    async fn execute(
        &self,
        context: RequestContext,
        queue: EventQueue,
    ) -> Result<(), ExecutorError> {
        let span = tracing::info_span!(
            "upstream",
            task.id = %context.task_id,
            context.id = %context.context_id,
        );
        crate::telemetry::otlp::adopt(&span, context.call_context.trace_parent.as_ref());
        async {
            let updater = TaskUpdater::from_context(&context, queue);
            let scope = context.call_context.scope();
            let upstream = if context.current_task.is_some() {
                self.inner.links.task(&scope, &context.task_id).await
            } else {
                None
            };
            let mut relay = Relay::new(&context, &updater, upstream);
            let started = Instant::now();
            match self.run(&context, &mut relay).await {
                Ok(()) => {
                    tracing::info!(
                        chunks = relay.chunks(),
                        duration_ms = crate::telemetry::millis(started.elapsed()),
                        "the A2A agent's answer is complete"
                    );
                    Ok(())
                }
                Err(RunError::Closed) => Ok(()),
                Err(RunError::Upstream(e)) => {
                    let _ = relay.start().await;
                    crate::upstream::meter::failure(&e, &context.call_context.agent);
                    context.set_failure_reason(e.category());
                    let id = crate::telemetry::correlation_id();
                    let reason = crate::telemetry::with_correlation(&public_reason(&e), &id);
                    tracing::warn!(
                        correlation_id = %id,
                        %reason,
                        detail = %detail(&e),
                        upstream.url = %crate::log_url::LogUrl(&self.inner.settings.base_url),
                        "the task failed"
                    );
                    let _ = updater.failed(Some(updater.new_agent_text(reason))).await;
                    self.inner
                        .links
                        .forget(&scope, &context.task_id, &context.context_id);
                    Ok(())
                }
            }
        }
        .instrument(span)
        .await
    }

    fn use_upstream_links(&self, links: Arc<dyn crate::executor::UpstreamLinks>) {
        self.inner.links.use_durable(links);
    }

    /// CancelTask on the agent's task (on the same runtime session). The agent's
    /// refusal (-32002) is the caller's: the gateway task stays as it is. A task the
    /// agent never named has nothing to cancel there. For an AgentCore runtime, once the
    /// agent canceled, StopRuntimeSession too when the session (the context's) holds no
    /// other task this process knows of.
    async fn cancel(
        &self,
        context: RequestContext,
        queue: EventQueue,
    ) -> Result<(), ExecutorError> {
        let _ = queue;
        let scope = context.call_context.scope();
        let Some(up) = self.inner.links.task(&scope, &context.task_id).await else {
            return Ok(());
        };
        let card = self.card().await.map_err(Box::new)?;
        let caller = &context.call_context;
        let session = crate::upstream::agentcore::session::session_id(
            &caller.tenant,
            &caller.owner,
            &context.context_id,
        );
        let i = &self.inner;
        let answer = self
            .with_version(&card, |v| {
                let params = v.task_params(&up.task_id);
                let target = Target {
                    endpoint: &card.endpoint,
                    binding: card.binding,
                    version: v,
                    session: &session,
                    extensions: &[],
                    caller,
                };
                async move { i.rpc.call(target, Method::Cancel, &params).await }
            })
            .await;
        match answer {
            Ok(_) => {
                tracing::info!(task.id = %context.task_id, upstream.task_id = %up.task_id, "the A2A agent canceled its task");
                let alone = i
                    .links
                    .alone_in_context(&scope, &context.task_id, &context.context_id);
                i.links
                    .forget(&scope, &context.task_id, &context.context_id);
                if alone && let Some(url) = &i.settings.stop_session_url {
                    match tokio::time::timeout(
                        crate::upstream::runtime::STOP_TIMEOUT,
                        i.rpc.stop_session(url, &session, caller),
                    )
                    .await
                    {
                        Ok(Ok(())) => {
                            tracing::info!(task.id = %context.task_id, upstream.session = %session, "stopped the runtime session")
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(task.id = %context.task_id, reason = %e, "StopRuntimeSession failed")
                        }
                        Err(_) => {
                            tracing::warn!(task.id = %context.task_id, "StopRuntimeSession did not finish in time")
                        }
                    }
                }
                Ok(())
            }
            Err(RpcFailure::Rpc { code, message }) if code == TASK_NOT_CANCELABLE => {
                tracing::info!(task.id = %context.task_id, upstream.task_id = %up.task_id, %message, "the A2A agent refused to cancel its task");
                Err(Box::new(A2aError::TaskNotCancelable {
                    task_id: context.task_id.clone(),
                    state: context
                        .current_task
                        .as_ref()
                        .map_or(TaskState::Working, |t| t.status.state),
                }))
            }
            Err(e) => {
                let e = UpstreamError::from(e);
                tracing::warn!(task.id = %context.task_id, reason = %detail(&e), "CancelTask on the A2A agent failed");
                Err(Box::new(e))
            }
        }
    }
}
