//! The JSON-RPC 2.0 binding (spec §9): `POST /` with one request object.
//!
//! Parsing is ours: invalid JSON → -32700; not a request object (batches included)
//! → -32600; unknown method → -32601; params failing validation → -32602, as does a
//! body of more than [`MAX_REQUEST_VALUES`] JSON values, counted before anything is
//! parsed ([`value_count`]; the error echoes the `id` when one can be read). The `id`
//! is echoed with its exact JSON type; a notification (no `id`) gets `204 No
//! Content` and no body. JSON-RPC errors travel with HTTP 200 as the SDKs do; only
//! a refused authentication (401), an unsupported `Content-Type` (415, -32005), an
//! oversized body (413), a body that is too slow (408) and a refusal for capacity or
//! during shutdown (503 with `Retry-After`) change the status.
//!
//! Methods are looked up in the shared [operation table](super::operations), which
//! decodes the params and calls the handler; this file only frames.
//!
//! Authentication comes first: with `[server.auth] kind = "api_key"`, a request without an
//! accepted `Authorization: Bearer <key>` gets HTTP 401 before its body is read (see
//! [`super::auth`]); the key's caller becomes the owner of every task the request touches.
//!
//! `A2A-Version` (header, or `?A2A-Version=` query parameter), read as Major.Minor
//! (a patch component is ignored, spec §3.6): `1.0` and `0.3` are served; any other
//! version → -32009. The method name decides the shapes ([`compat03::dialect`]): a
//! 1.0 name (`SendMessage`) is served as 1.0 with or without a version; a 0.3 name
//! (`message/send`) without a version or with `0.3` is served as 0.3, translated at
//! this edge by [`compat03`] (the spec reads a missing version as 0.3; see `docs/a2a-0.3.md`).

use std::net::SocketAddr;
use std::time::Instant;

use axum::Extension;
use axum::body::Body;
use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;

use super::compat03::{self, Dialect};
use super::operations::{self, Operation, Outcome, ProtocolVersion};
use super::{AppState, http_body, sse};
use crate::error::A2aError;
use crate::protocol::jsonrpc::{self, EnvelopeError, JsonRpcRequest, RequestId};
use crate::protocol::value_count::{self, MAX_REQUEST_VALUES};
use crate::telemetry::metrics::{REQUEST_DURATION, REQUESTS};

pub use super::http_body::BODY_READ_TIMEOUT;

/// The protocol version this binding serves.
pub const PROTOCOL_VERSION: &str = operations::PROTOCOL_VERSION;

/// Seconds a client is asked to wait (`Retry-After`) before retrying a request refused
/// for capacity or during shutdown (HTTP 503).
pub const RETRY_AFTER_SECS: u64 = 1;

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

/// A JSON-RPC error response. JSON-RPC errors travel with HTTP 200 as the SDKs
/// expect, except a refusal for capacity or during shutdown ([`A2aError::Unavailable`]):
/// HTTP 503 with `Retry-After` so load balancers and clients back off (the JSON-RPC
/// error body is kept).
fn error_response(id: Option<&RequestId>, err: &A2aError) -> Response {
    let status = if matches!(err, A2aError::Unavailable(_)) {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    error_response_with(status, id, err)
}

/// A JSON-RPC error response with HTTP `status` (plus `Retry-After` on 503).
fn error_response_with(status: StatusCode, id: Option<&RequestId>, err: &A2aError) -> Response {
    let mut resp = json_response(status, &jsonrpc::failure(id, &err.to_error_object()));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    }
    resp
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
    let peer = peer.map(|Extension(ConnectInfo(addr))| addr);
    let identity = match state.config.auth.check(&headers, peer).await {
        Ok(identity) => identity,
        Err(unauthorized) => return *unauthorized,
    };
    let bytes = match http_body::read(&headers, body, state.config.max_body_bytes).await {
        Ok(b) => b,
        Err((status, err)) => return error_response_with(status, None, &err),
    };
    if let Err(err) = operations::check_content_type(&headers, &bytes) {
        return error_response_with(StatusCode::UNSUPPORTED_MEDIA_TYPE, None, &err);
    }
    if let Err(too_many) = value_count::check_json(&bytes, MAX_REQUEST_VALUES) {
        let err = A2aError::InvalidParams(too_many.to_string());
        return error_response(jsonrpc::request_id(&bytes).as_ref(), &err);
    }
    let req = match jsonrpc::parse_request(&bytes) {
        Ok(r) => r,
        Err(EnvelopeError::Parse(e)) => {
            return error_response(None, &A2aError::ParseError(e));
        }
        Err(EnvelopeError::Invalid { id, reason }) => {
            return error_response(id.as_ref(), &A2aError::InvalidRequest(reason));
        }
    };
    let requested = operations::requested_version(&headers, query.as_deref());
    let version = match operations::negotiate_version(requested.as_deref()) {
        Ok(v) => v,
        Err(err) => {
            if req.id.is_none() {
                // A notification gets no response body, not even an error; it is not run.
                return StatusCode::NO_CONTENT.into_response();
            }
            return error_response(req.id.as_ref(), &err);
        }
    };
    let JsonRpcRequest { id, method, params } = req;
    let dialect = compat03::dialect(&method, version);
    let (op, params) = match dialect {
        Dialect::V1_0(op) => (Some(op), Ok(params)),
        Dialect::V0_3(op) => (Some(op), compat03::request::to_v1(op, params)),
        Dialect::Unknown => (None, Ok(params)),
    };
    let v03 = matches!(dialect, Dialect::V0_3(_));
    let params = match params {
        Ok(p) => p,
        Err(err) => {
            return match &id {
                None => StatusCode::NO_CONTENT.into_response(),
                Some(id) => error_response(Some(id), &err),
            };
        }
    };
    let call =
        match operations::call_context(&state.config.agent, identity.as_ref(), &headers, &params) {
            Ok(call) => call,
            Err(refused) => return refused.jsonrpc_response(id.as_ref()),
        };
    let cursor = operations::last_event_id_header(&headers);

    let Some(id) = id else {
        // A notification: no response body. Non-streaming calls still run.
        if let Some(op) = op.filter(|op| !op.is_streaming()) {
            let state = state.clone();
            tokio::spawn(async move {
                let _ = operations::invoke(&state, &call, op, params, Ok(None)).await;
            });
        }
        return StatusCode::NO_CONTENT.into_response();
    };

    // The task this request is about, for the request log line.
    let str_at = |v: &Value, path: &[&str]| {
        path.iter()
            .try_fold(v, |v, k| v.get(k))
            .and_then(Value::as_str)
            .map(|s| s.chars().take(128).collect::<String>())
    };
    let mut task_id = str_at(&params, &["id"]).or_else(|| str_at(&params, &["message", "taskId"]));
    let framing = |id: RequestId| match op {
        Some(op) if v03 => sse::Framing::JsonRpcV03(id, op),
        _ => sse::Framing::JsonRpc(id),
    };
    let outcome = match op {
        Some(op) => operations::invoke(&state, &call, op, params, cursor).await,
        None if compat03::operation(&method).is_some() => {
            let v1 = compat03::operation(&method).map_or("", Operation::name);
            Err(A2aError::MethodNotFound(format!(
                "{method} is an A2A 0.3 method name, but the request says A2A-Version {}; use {v1}, or send A2A-Version: 0.3",
                version.map_or("-", |v| match v {
                    ProtocolVersion::V1_0 => PROTOCOL_VERSION,
                    ProtocolVersion::V0_3 => "0.3",
                })
            )))
        }
        None => Err(A2aError::MethodNotFound(method.chars().take(128).collect())),
    };
    let elapsed = started.elapsed();
    let (resp, outcome_label) = match outcome {
        Ok(Outcome::Message(m)) => {
            if task_id.is_none() {
                task_id = m.task_id().map(|t| t.chars().take(128).collect());
            }
            // A 1.0 answer is serialized straight from the typed message; a 0.3 one is
            // translated on its ProtoJSON value first.
            let body = match op {
                Some(op) if v03 => m.into_value().and_then(|v| {
                    jsonrpc::success_text(&id, &compat03::response::result_to_v03(op, v))
                        .map_err(A2aError::internal)
                }),
                _ => jsonrpc::success_text(&id, &m).map_err(A2aError::internal),
            };
            match body {
                Ok(body) => (json_text(StatusCode::OK, body), "ok"),
                Err(e) => (error_response(Some(&id), &e), e.reason()),
            }
        }
        Ok(Outcome::Resumed(stream)) => (
            sse::render(
                framing(id),
                None,
                stream,
                state.config.sse_keepalive,
                state.shutdown.clone(),
            ),
            "stream",
        ),
        Ok(Outcome::Stream(mut stream)) => match stream.next().await {
            Some(Ok(first)) => {
                task_id = task_id.or_else(|| first.event().task_id().map(str::to_owned));
                (
                    sse::render(
                        framing(id),
                        Some(first),
                        stream,
                        state.config.sse_keepalive,
                        state.shutdown.clone(),
                    ),
                    "stream",
                )
            }
            Some(Err(e)) => (error_response(Some(&id), &e), e.reason()),
            None => (
                error_response(Some(&id), &A2aError::internal("empty event stream")),
                "INTERNAL_ERROR",
            ),
        },
        Err(e) => (error_response(Some(&id), &e), e.reason()),
    };
    let label = op.map_or("unknown", Operation::metric_label);
    let agent = &state.config.agent.id;
    metrics::counter!(
        REQUESTS,
        crate::telemetry::metrics::request_labels("jsonrpc", label, Some(outcome_label), agent)
    )
    .increment(1);
    metrics::histogram!(
        REQUEST_DURATION,
        crate::telemetry::metrics::request_labels("jsonrpc", label, None, agent)
    )
    .record(elapsed.as_secs_f64());
    tracing::info!(
        rpc.method = %crate::telemetry::prefix_chars(&method, 64),
        a2a.version = if v03 { "0.3" } else { PROTOCOL_VERSION },
        task.id = task_id.as_deref().unwrap_or("-"),
        caller = call.owner.as_str(),
        agent = crate::telemetry::metrics::agent_field(agent),
        peer = %crate::telemetry::LogPeer(peer),
        outcome = outcome_label,
        duration_ms = crate::telemetry::millis(elapsed),
        "request"
    );
    resp
}
