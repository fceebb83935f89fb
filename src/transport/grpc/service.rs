//! `lf.a2a.v1.A2AService` over the shared [operation table](crate::transport::operations):
//! every method authenticates the call, checks `a2a-version`, turns the request
//! message into ProtoJSON, [`invoke`]s the operation and turns the answer back into
//! the response message or a server stream of `StreamResponse`. Nothing else happens
//! here: validation, lifecycle rules and the store belong to the handler.
//!
//! Metadata: `authorization: Bearer <key>` (with `[server.auth] kind = "api_key"`;
//! otherwise `UNAUTHENTICATED`), `a2a-version` (`1.0`, or absent; any other version is
//! `FAILED_PRECONDITION` with reason `VERSION_NOT_SUPPORTED`; 0.3 is a JSON-RPC-only
//! dialect), `a2a-extensions` (comma-separated URIs). A stream whose operation fails
//! before its first event answers with that error alone; an error after it ends the
//! stream with the error's status. Open streams end [`SHUTDOWN_DRAIN`] after shutdown
//! began, as SSE streams do.

use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Instant;

use axum::extract::ConnectInfo;
use futures::{Stream, StreamExt};
use prost::{Message, Name};
use serde_json::Value;
use tonic::{Request, Response, Status};

use super::convert::{Reply, from_reply_generic};
use super::json::to_json;
use super::proto;
use super::proto::a2a_service_server::A2aService;
use super::status;
use crate::error::A2aError;
use crate::executor::CallContext;
use crate::handler::{EventStream, SequencedEvent};
use crate::telemetry::metrics::{REQUEST_DURATION, REQUESTS};
use crate::telemetry::streams::{StreamEnd, StreamOutcome};
use crate::transport::AppState;
use crate::transport::operations::{self, Operation, Outcome, ProtocolVersion};
use crate::transport::sse::SHUTDOWN_DRAIN;

/// A server stream of `StreamResponse` messages.
pub type ResponseStream = Pin<Box<dyn Stream<Item = Result<proto::StreamResponse, Status>> + Send>>;

/// The service: the shared state, nothing else.
#[derive(Clone, Debug)]
pub struct A2aGrpc {
    state: AppState,
}

impl A2aGrpc {
    /// The service over `state`'s handler, authenticator and limits.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }

    /// Authentication, version check and the request message as ProtoJSON.
    async fn prepare<M: Message + Name>(
        &self,
        op: Operation,
        req: &Request<M>,
    ) -> Result<(CallContext, Value), A2aCallError> {
        let headers = req.metadata().clone().into_headers();
        let peer = peer_of(req);
        let identity = self
            .state
            .config
            .auth
            .verify(&headers, peer)
            .await
            .map_err(A2aCallError::Unauthenticated)?;
        let requested = operations::requested_version(&headers, None);
        match operations::negotiate_version(requested.as_deref())? {
            None | Some(ProtocolVersion::V1_0) => {}
            Some(ProtocolVersion::V0_3) => {
                return Err(A2aError::VersionNotSupported(format!(
                    "A2A 0.3 is served on JSON-RPC only; {} of lf.a2a.v1.A2AService is A2A {}",
                    op.name(),
                    operations::PROTOCOL_VERSION
                ))
                .into());
            }
        }
        let params = to_json(req.get_ref())
            .map_err(|e| A2aError::InvalidParams(format!("request message: {e}")))?;
        let call = operations::call_context(
            &self.state.config.agent,
            identity.as_ref(),
            &headers,
            &params,
        )
        .map_err(A2aCallError::Unauthenticated)?;
        Ok((call, params))
    }

    /// A unary method: request → operation → response message (built by `reply`).
    async fn unary<Req, Resp>(
        &self,
        op: Operation,
        req: Request<Req>,
        reply: fn(Value) -> Result<Resp, super::json::ConversionError>,
    ) -> Result<Response<Resp>, Status>
    where
        Req: Message + Name,
    {
        let started = Instant::now();
        let mut task_id = None;
        let mut caller = None;
        let peer = peer_of(&req);
        let result = async {
            let (call, params) = self.prepare(op, &req).await?;
            task_id = task_of(&params);
            caller = Some(call.owner.clone());
            match operations::invoke(&self.state, &call, op, params, Ok(None)).await? {
                Outcome::Message(m) => {
                    task_id = task_id
                        .take()
                        .or_else(|| m.task_id().map(|t| t.chars().take(128).collect()));
                    reply(m.into_value()?).map_err(|e| A2aError::internal(e).into())
                }
                Outcome::Stream(_) | Outcome::Resumed(_) => Err(A2aError::internal(format!(
                    "{} answered with a stream on a unary method",
                    op.name()
                ))
                .into()),
            }
        }
        .await;
        let who = (caller.as_deref(), peer);
        log_request(
            op,
            started,
            task_id.as_deref(),
            who,
            &self.state.config.agent.id,
            result.as_ref().err(),
        );
        result.map(Response::new).map_err(A2aCallError::into_status)
    }

    /// A server-streaming method: request → operation → first event (or the error that
    /// came instead of it) → the stream.
    async fn streaming<Req: Message + Name>(
        &self,
        op: Operation,
        req: Request<Req>,
    ) -> Result<Response<ResponseStream>, Status> {
        let started = Instant::now();
        let mut task_id = None;
        let mut caller = None;
        let peer = peer_of(&req);
        let result = async {
            let (call, params) = self.prepare(op, &req).await?;
            task_id = task_of(&params);
            caller = Some(call.owner.clone());
            let (first, rest) =
                match operations::invoke(&self.state, &call, op, params, Ok(None)).await? {
                    Outcome::Stream(mut stream) => match stream.next().await {
                        Some(Ok(first)) => {
                            if task_id.is_none() {
                                task_id = first.event().task_id().map(str::to_owned);
                            }
                            (Some(first), stream)
                        }
                        Some(Err(e)) => return Err(e.into()),
                        None => return Err(A2aError::internal("empty event stream").into()),
                    },
                    Outcome::Resumed(stream) => (None, stream),
                    Outcome::Message(_) => {
                        return Err(A2aError::internal(format!(
                            "{} answered with one message on a streaming method",
                            op.name()
                        ))
                        .into());
                    }
                };
            Ok(render(first, rest, self.state.shutdown.clone()))
        }
        .await;
        let who = (caller.as_deref(), peer);
        log_request(
            op,
            started,
            task_id.as_deref(),
            who,
            &self.state.config.agent.id,
            result.as_ref().err(),
        );
        result.map(Response::new).map_err(A2aCallError::into_status)
    }
}

/// Why a call failed before its answer.
#[derive(Debug)]
enum A2aCallError {
    /// No accepted credentials (`UNAUTHENTICATED`), or not allowed (`PERMISSION_DENIED`).
    Unauthenticated(crate::identity::AuthFailure),
    /// An A2A error.
    A2a(A2aError),
}

impl From<A2aError> for A2aCallError {
    fn from(e: A2aError) -> Self {
        Self::A2a(e)
    }
}

impl A2aCallError {
    fn into_status(self) -> Status {
        match self {
            Self::Unauthenticated(f) => status::refused(f),
            Self::A2a(e) => status::from_error(&e),
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Self::Unauthenticated(f) => f.status_name(),
            Self::A2a(e) => e.reason(),
        }
    }
}

/// `first` and then `rest` as `StreamResponse` messages. An error item ends the
/// stream; so does shutdown, after [`SHUTDOWN_DRAIN`].
fn render(
    first: Option<SequencedEvent>,
    rest: EventStream,
    shutdown: tokio_util::sync::CancellationToken,
) -> ResponseStream {
    // Lives as long as the stream: counts it in `a2a_open_streams` and writes its
    // `stream ended` line (see `crate::telemetry::streams`).
    let end = StreamEnd::new("grpc");
    let (on_item, on_done, on_shutdown) = (end.clone(), end.clone(), end);
    let done = futures::stream::once(async move {
        on_done.end(StreamOutcome::Completed);
    })
    .filter_map(|()| async { None });
    let events = futures::stream::iter(first.map(Ok))
        .chain(rest)
        .chain(done)
        .map(move |item| {
            match &item {
                Ok(ev) => on_item.event(ev.event().task_id()),
                Err(_) => {
                    on_item.event(None);
                    on_item.end(StreamOutcome::Error);
                }
            }
            item.map(|ev: SequencedEvent| proto::StreamResponse::from(ev.into_event()))
                .map_err(|e| status::from_error(&e))
        })
        .scan(false, |failed, item| {
            // Nothing after an error: it is the stream's last item.
            if *failed {
                return futures::future::ready(None);
            }
            *failed = item.is_err();
            futures::future::ready(Some(item))
        })
        .take_until(async move {
            shutdown.cancelled_owned().await;
            tokio::time::sleep(SHUTDOWN_DRAIN).await;
            on_shutdown.end(StreamOutcome::Shutdown);
        });
    Box::pin(events)
}

fn str_at(v: &Value, path: &[&str]) -> Option<String> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_str)
        .map(|s| s.chars().take(128).collect())
}

/// The task a request is about, for the request log line.
fn task_of(params: &Value) -> Option<String> {
    str_at(params, &["id"])
        .or_else(|| str_at(params, &["taskId"]))
        .or_else(|| str_at(params, &["message", "taskId"]))
}

/// The peer address the server recorded for `req`.
fn peer_of<M>(req: &Request<M>) -> Option<SocketAddr> {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr)
}

/// One log line and the request metrics, as the JSON-RPC binding records them. `who`:
/// the authenticated caller (unknown when the request was refused before) and the peer.
fn log_request(
    op: Operation,
    started: Instant,
    task_id: Option<&str>,
    who: (Option<&str>, Option<SocketAddr>),
    agent: &str,
    err: Option<&A2aCallError>,
) {
    let elapsed = started.elapsed();
    let outcome = match err {
        None if op.is_streaming() => "stream",
        None => "ok",
        Some(e) => e.label(),
    };
    metrics::counter!(
        REQUESTS,
        crate::telemetry::metrics::request_labels("grpc", op.metric_label(), Some(outcome), agent)
    )
    .increment(1);
    metrics::histogram!(
        REQUEST_DURATION,
        crate::telemetry::metrics::request_labels("grpc", op.metric_label(), None, agent)
    )
    .record(elapsed.as_secs_f64());
    tracing::info!(
        rpc.system = "grpc",
        rpc.method = op.name(),
        task.id = task_id.unwrap_or("-"),
        caller = who.0.unwrap_or("-"),
        agent = crate::telemetry::metrics::agent_field(agent),
        peer = %crate::telemetry::LogPeer(who.1),
        outcome,
        duration_ms = crate::telemetry::millis(elapsed),
        "request"
    );
}

#[tonic::async_trait]
impl A2aService for A2aGrpc {
    async fn send_message(
        &self,
        request: Request<proto::SendMessageRequest>,
    ) -> Result<Response<proto::SendMessageResponse>, Status> {
        self.unary(Operation::SendMessage, request, Reply::from_reply)
            .await
    }

    type SendStreamingMessageStream = ResponseStream;

    async fn send_streaming_message(
        &self,
        request: Request<proto::SendMessageRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.streaming(Operation::SendStreamingMessage, request)
            .await
    }

    async fn get_task(
        &self,
        request: Request<proto::GetTaskRequest>,
    ) -> Result<Response<proto::Task>, Status> {
        self.unary(Operation::GetTask, request, Reply::from_reply)
            .await
    }

    async fn list_tasks(
        &self,
        request: Request<proto::ListTasksRequest>,
    ) -> Result<Response<proto::ListTasksResponse>, Status> {
        // The page bound applies to this binding's own encoding too (see `page`).
        let limit = self.state.handler.max_list_page_bytes();
        let mut page = self
            .unary(Operation::ListTasks, request, Reply::from_reply)
            .await?;
        super::page::fit_list_page(page.get_mut(), limit);
        Ok(page)
    }

    async fn cancel_task(
        &self,
        request: Request<proto::CancelTaskRequest>,
    ) -> Result<Response<proto::Task>, Status> {
        self.unary(Operation::CancelTask, request, Reply::from_reply)
            .await
    }

    type SubscribeToTaskStream = ResponseStream;

    async fn subscribe_to_task(
        &self,
        request: Request<proto::SubscribeToTaskRequest>,
    ) -> Result<Response<ResponseStream>, Status> {
        self.streaming(Operation::SubscribeToTask, request).await
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<proto::TaskPushNotificationConfig>,
    ) -> Result<Response<proto::TaskPushNotificationConfig>, Status> {
        self.unary(
            Operation::CreateTaskPushNotificationConfig,
            request,
            Reply::from_reply,
        )
        .await
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<proto::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<proto::TaskPushNotificationConfig>, Status> {
        self.unary(
            Operation::GetTaskPushNotificationConfig,
            request,
            Reply::from_reply,
        )
        .await
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<proto::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<proto::ListTaskPushNotificationConfigsResponse>, Status> {
        self.unary(
            Operation::ListTaskPushNotificationConfigs,
            request,
            Reply::from_reply,
        )
        .await
    }

    async fn get_extended_agent_card(
        &self,
        request: Request<proto::GetExtendedAgentCardRequest>,
    ) -> Result<Response<proto::AgentCard>, Status> {
        self.unary(Operation::GetExtendedAgentCard, request, Reply::from_reply)
            .await
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<proto::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<()>, Status> {
        // google.protobuf.Empty is `()` in prost; its ProtoJSON is `{}`.
        self.unary::<_, Empty>(
            Operation::DeleteTaskPushNotificationConfig,
            request,
            from_reply_generic,
        )
        .await
        .map(|r| r.map(|Empty {}| ()))
    }
}

/// `google.protobuf.Empty` as a message with a [`Name`], for the generic path.
#[derive(Clone, PartialEq, prost::Message)]
struct Empty {}

impl Name for Empty {
    const NAME: &'static str = "Empty";
    const PACKAGE: &'static str = "google.protobuf";
}
