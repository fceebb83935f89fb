//! The JSON-RPC 2.0 binding (spec §9): `POST /` with one request object.
//!
//! Parsing is ours: invalid JSON → -32700; not a request object (batches included)
//! → -32600; unknown method → -32601; params failing validation → -32602. The `id`
//! is echoed with its exact JSON type; a notification (no `id`) gets `204 No
//! Content` and no body. JSON-RPC errors travel with HTTP 200 as the SDKs do; only
//! a refused authentication (401), an unsupported `Content-Type` (415) and an oversized
//! body (413) change the status.
//!
//! Authentication comes first: with `[server.auth] kind = "api_key"`, a request without an
//! accepted `Authorization: Bearer <key>` gets HTTP 401 before its body is read (see
//! [`super::auth`]); the key's caller becomes the owner of every task the request touches.
//!
//! `A2A-Version` (header, or `?A2A-Version=` query parameter): `1.0` is served; any
//! other value → -32009. A request without it that uses a 1.0 method name is
//! served as 1.0 (the spec reads a missing version as 0.3; see README).

use std::net::SocketAddr;
use std::time::Instant;

use axum::Extension;
use axum::body::Body;
use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{AppState, sse};
use crate::error::A2aError;
use crate::executor::CallContext;
use crate::handler::EventStream;
use crate::protocol::jsonrpc::{self, EnvelopeError, JsonRpcRequest, RequestId};
use crate::protocol::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest, SubscribeToTaskRequest,
};

/// Longest time a client may take to send a request body, in seconds; slower
/// bodies get HTTP 408.
pub const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The protocol version this binding serves.
pub const PROTOCOL_VERSION: &str = "1.0";

/// JSON-RPC method names of A2A 1.0 (spec §9.3).
pub mod methods {
    /// SendMessage.
    pub const SEND_MESSAGE: &str = "SendMessage";
    /// SendStreamingMessage.
    pub const SEND_STREAMING_MESSAGE: &str = "SendStreamingMessage";
    /// GetTask.
    pub const GET_TASK: &str = "GetTask";
    /// ListTasks.
    pub const LIST_TASKS: &str = "ListTasks";
    /// CancelTask.
    pub const CANCEL_TASK: &str = "CancelTask";
    /// SubscribeToTask.
    pub const SUBSCRIBE_TO_TASK: &str = "SubscribeToTask";
    /// GetExtendedAgentCard.
    pub const GET_EXTENDED_AGENT_CARD: &str = "GetExtendedAgentCard";
    /// The four push-notification config methods.
    pub const PUSH_CONFIG: [&str; 4] = [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ];
}

fn json_text(status: StatusCode, body: String) -> Response {
    let mut resp = (status, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    json_text(status, body.to_string())
}

/// A JSON-RPC error response (HTTP `status`).
fn error_response(status: StatusCode, id: Option<&RequestId>, err: &A2aError) -> Response {
    json_response(status, &jsonrpc::failure(id, &err.to_error_object()))
}

fn content_type_ok(headers: &HeaderMap) -> Result<(), String> {
    let Some(ct) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
    let essence = ct.split(';').next().unwrap_or("").trim();
    if matches!(
        essence,
        "application/json" | "application/a2a+json" | "application/json-rpc" | "text/json"
    ) {
        Ok(())
    } else {
        Err(essence.to_owned())
    }
}

fn requested_version(headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    if let Some(v) = headers.get("a2a-version") {
        return Some(v.to_str().unwrap_or("<not text>").trim().to_owned());
    }
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        k.eq_ignore_ascii_case("a2a-version")
            .then(|| v.trim().to_owned())
    })
}

fn params<T: DeserializeOwned>(v: Value) -> Result<T, A2aError> {
    if !v.is_object() {
        return Err(A2aError::InvalidParams("params must be an object".into()));
    }
    serde_json::from_value(v).map_err(|e| A2aError::InvalidParams(e.to_string()))
}

fn call_context(headers: &HeaderMap, params: &Value, owner: Option<String>) -> CallContext {
    let mut ctx = CallContext::anonymous();
    if let Some(owner) = owner {
        ctx.owner = owner;
    }
    if let Some(t) = params.get("tenant").and_then(Value::as_str) {
        ctx.tenant = t.to_owned();
    }
    ctx.requested_extensions = headers
        .get_all("a2a-extensions")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    ctx
}

/// What a method call produced.
enum Reply {
    Value(Value),
    /// A stream whose first event decides between an SSE response and a plain
    /// JSON-RPC error (the handler may still fail before it).
    Stream(EventStream),
    /// A stream already validated (a resume with `Last-Event-ID`): its headers go
    /// out at once, even if the next event is far off.
    Resumed(EventStream),
}

/// `POST /`: one JSON-RPC request. `peer` (when the server records it) is only used to
/// log authentication failures.
pub async fn handle(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let owner = match state
        .config
        .auth
        .check(&headers, peer.map(|Extension(ConnectInfo(addr))| addr))
    {
        Ok(owner) => owner,
        Err(unauthorized) => return *unauthorized,
    };
    if let Err(ct) = content_type_ok(&headers) {
        let err = A2aError::InvalidRequest(format!(
            "unsupported Content-Type {ct:?}; send application/json"
        ));
        return error_response(StatusCode::UNSUPPORTED_MEDIA_TYPE, None, &err);
    }
    let limit = state.config.max_body_bytes;
    let too_large = || {
        let err =
            A2aError::InvalidRequest(format!("request body exceeds the limit of {limit} bytes"));
        error_response(StatusCode::PAYLOAD_TOO_LARGE, None, &err)
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large();
    }
    let read = tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::to_bytes(body, limit));
    let bytes = match read.await {
        Ok(Ok(b)) => b,
        Ok(Err(_)) => return too_large(),
        Err(_) => {
            let err = A2aError::InvalidRequest(format!(
                "the request body did not arrive within {} s",
                BODY_READ_TIMEOUT.as_secs()
            ));
            return error_response(StatusCode::REQUEST_TIMEOUT, None, &err);
        }
    };
    let req = match jsonrpc::parse_request(&bytes) {
        Ok(r) => r,
        Err(EnvelopeError::Parse(e)) => {
            return error_response(StatusCode::OK, None, &A2aError::ParseError(e));
        }
        Err(EnvelopeError::Invalid { id, reason }) => {
            return error_response(
                StatusCode::OK,
                id.as_ref(),
                &A2aError::InvalidRequest(reason),
            );
        }
    };
    if let Some(v) = requested_version(&headers, query.as_deref())
        && v != PROTOCOL_VERSION
    {
        if req.id.is_none() {
            // A notification gets no response body, not even an error; it is not run.
            return StatusCode::NO_CONTENT.into_response();
        }
        let err = A2aError::VersionNotSupported(format!(
            "A2A-Version {v:?} is not supported; this server speaks {PROTOCOL_VERSION}"
        ));
        return error_response(StatusCode::OK, req.id.as_ref(), &err);
    }
    let method = req.method.clone();
    let id = req.id.clone();
    let call = call_context(&headers, &req.params, owner);
    let last_event_id = headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap_or("<not text>").trim().to_owned());

    let Some(id) = id else {
        // A notification: no response body. Non-streaming calls still run.
        let state = state.clone();
        tokio::spawn(async move {
            let _ = dispatch(&state, &call, req, None).await;
        });
        return StatusCode::NO_CONTENT.into_response();
    };

    // The task this request is about, for the request log line.
    let str_at = |v: &Value, path: &[&str]| {
        path.iter()
            .try_fold(v, |v, k| v.get(k))
            .and_then(Value::as_str)
            .map(|s| s.chars().take(128).collect::<String>())
    };
    let mut task_id =
        str_at(&req.params, &["id"]).or_else(|| str_at(&req.params, &["message", "taskId"]));
    let outcome = dispatch(&state, &call, req, last_event_id).await;
    let elapsed = started.elapsed();
    let (resp, outcome_label) = match outcome {
        Ok(Reply::Value(v)) => {
            if task_id.is_none() {
                task_id = str_at(&v, &["task", "id"]);
            }
            (
                match jsonrpc::success_text(&id, &v) {
                    Ok(body) => json_text(StatusCode::OK, body),
                    Err(e) => error_response(StatusCode::OK, Some(&id), &A2aError::internal(e)),
                },
                "ok",
            )
        }
        Ok(Reply::Resumed(stream)) => (
            sse::render(
                id,
                None,
                stream,
                state.config.sse_keepalive,
                state.shutdown.clone(),
            ),
            "stream",
        ),
        Ok(Reply::Stream(mut stream)) => match stream.next().await {
            Some(Ok(first)) => {
                task_id = task_id.or_else(|| first.event.task_id().map(str::to_owned));
                (
                    sse::render(
                        id,
                        Some(first),
                        stream,
                        state.config.sse_keepalive,
                        state.shutdown.clone(),
                    ),
                    "stream",
                )
            }
            Some(Err(e)) => (error_response(StatusCode::OK, Some(&id), &e), e.reason()),
            None => (
                error_response(
                    StatusCode::OK,
                    Some(&id),
                    &A2aError::internal("empty event stream"),
                ),
                "INTERNAL_ERROR",
            ),
        },
        Err(e) => (error_response(StatusCode::OK, Some(&id), &e), e.reason()),
    };
    metrics::counter!("a2a_requests_total", "method" => metric_method(&method), "outcome" => outcome_label).increment(1);
    metrics::histogram!("a2a_request_duration_seconds", "method" => metric_method(&method))
        .record(elapsed.as_secs_f64());
    tracing::info!(
        rpc.method = %method,
        task.id = task_id.as_deref().unwrap_or("-"),
        outcome = outcome_label,
        duration_ms = elapsed.as_secs_f64() * 1000.0,
        "request"
    );
    resp
}

/// Bounded label values for metrics: unknown methods are grouped.
fn metric_method(m: &str) -> &'static str {
    use methods::*;
    match m {
        SEND_MESSAGE => SEND_MESSAGE,
        SEND_STREAMING_MESSAGE => SEND_STREAMING_MESSAGE,
        GET_TASK => GET_TASK,
        LIST_TASKS => LIST_TASKS,
        CANCEL_TASK => CANCEL_TASK,
        SUBSCRIBE_TO_TASK => SUBSCRIBE_TO_TASK,
        GET_EXTENDED_AGENT_CARD => GET_EXTENDED_AGENT_CARD,
        m if PUSH_CONFIG.contains(&m) => "PushNotificationConfig",
        _ => "unknown",
    }
}

fn to_value(v: impl serde::Serialize) -> Result<Value, A2aError> {
    serde_json::to_value(v).map_err(A2aError::internal)
}

async fn dispatch(
    state: &AppState,
    call: &CallContext,
    req: JsonRpcRequest,
    last_event_id: Option<String>,
) -> Result<Reply, A2aError> {
    use methods::*;
    let h = &state.handler;
    let JsonRpcRequest {
        method, params: p, ..
    } = req;
    match method.as_str() {
        SEND_MESSAGE => Ok(Reply::Value(to_value(
            h.send_message(call, params::<SendMessageRequest>(p)?)
                .await?,
        )?)),
        SEND_STREAMING_MESSAGE => Ok(Reply::Stream(
            h.send_streaming_message(call, params::<SendMessageRequest>(p)?)
                .await?,
        )),
        GET_TASK => Ok(Reply::Value(to_value(
            h.get_task(call, params::<GetTaskRequest>(p)?).await?,
        )?)),
        LIST_TASKS => {
            let p = if p.is_null() {
                Value::Object(Default::default())
            } else {
                p
            };
            Ok(Reply::Value(to_value(
                h.list_tasks(call, params::<ListTasksRequest>(p)?).await?,
            )?))
        }
        CANCEL_TASK => Ok(Reply::Value(to_value(
            h.cancel_task(call, params::<CancelTaskRequest>(p)?).await?,
        )?)),
        SUBSCRIBE_TO_TASK => {
            let last = match last_event_id.filter(|s| !s.is_empty()) {
                None => None,
                Some(s) => Some(
                    s.bytes()
                        .all(|b| b.is_ascii_digit())
                        .then(|| s.parse::<u64>().ok())
                        .flatten()
                        .ok_or_else(|| {
                            A2aError::InvalidParams(format!(
                                "Last-Event-ID {s:?} is not an event id this server issued"
                            ))
                        })?,
                ),
            };
            let stream = h
                .subscribe_to_task(call, params::<SubscribeToTaskRequest>(p)?, last)
                .await?;
            Ok(match last {
                Some(_) => Reply::Resumed(stream),
                None => Reply::Stream(stream),
            })
        }
        GET_EXTENDED_AGENT_CARD => Ok(Reply::Value(to_value(h.get_extended_agent_card(call)?)?)),
        m if PUSH_CONFIG.contains(&m) => {
            h.push_notification_config()?;
            Ok(Reply::Value(Value::Null))
        }
        m if m.contains('/') => Err(A2aError::MethodNotFound(format!(
            "{m} is an A2A 0.3 method name; this server speaks A2A 1.0 (e.g. SendMessage, GetTask)"
        ))),
        m => Err(A2aError::MethodNotFound(m.to_owned())),
    }
}
