//! The HTTP+JSON binding (spec §11), mounted at [`REST_PATH`] next to JSON-RPC on the
//! same listener. Every route also answers under a `/{tenant}` prefix; the path tenant
//! becomes the request message's `tenant`, and so the call's tenant.
//!
//! | Route (relative to the interface URL) | Operation |
//! |---|---|
//! | `POST /message:send` | SendMessage |
//! | `POST /message:stream` (SSE) | SendStreamingMessage |
//! | `GET /tasks/{id}` | GetTask |
//! | `GET /tasks` | ListTasks |
//! | `POST /tasks/{id}:cancel` | CancelTask |
//! | `GET` or `POST /tasks/{id}:subscribe` (SSE) | SubscribeToTask |
//! | `POST /tasks/{id}/pushNotificationConfigs` | CreateTaskPushNotificationConfig |
//! | `GET /tasks/{id}/pushNotificationConfigs/{configId}` | GetTaskPushNotificationConfig |
//! | `GET /tasks/{id}/pushNotificationConfigs` | ListTaskPushNotificationConfigs |
//! | `DELETE /tasks/{id}/pushNotificationConfigs/{configId}` | DeleteTaskPushNotificationConfig |
//! | `GET /extendedAgentCard` | GetExtendedAgentCard |
//!
//! This adapter only translates ([`request`]: path, query and body to the request
//! message; [`response`]: media type and error bodies) and calls the shared
//! [operation table](super::operations), exactly as JSON-RPC does. Order of checks:
//! authentication (401 before the body is read), the path (percent-encoded UTF-8, else
//! 400), the route's method and verb suffix (405), `A2A-Version` (1.0 only; header or
//! `?A2A-Version=`), the `Content-Type` of a POST body (415), the body (bounded: 413,
//! 408), the query and body fields (400), then the operation.
//!
//! Static path segments win over a tenant: `/tasks/x` is GetTask of `x`, never ListTasks
//! of tenant `tasks`, so a tenant named `tasks`, `message:send`, `message:stream` or
//! `extendedAgentCard` cannot be reached through a path prefix (send it in the body or
//! over JSON-RPC).

pub mod query;
pub mod request;
pub mod response;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{ConnectInfo, RawPathParams, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{MethodRouter, any, get, post};
use axum::{Extension, Router};
use futures::StreamExt;
use serde_json::Value;

use super::operations::{self, Operation, Outcome, ProtocolVersion, ResponseMessage};
use super::{AppState, http_body, sse};
use crate::error::A2aError;
use crate::telemetry::metrics::{REQUEST_DURATION, REQUESTS};
use request::Route;

/// Where the binding is mounted on the listener, and what the card's HTTP+JSON interface
/// URL adds to the public URL.
pub const REST_PATH: &str = "/a2a/rest";

/// The binding's routes (to be nested at [`REST_PATH`]), each with and without a
/// `/{tenant}` prefix. Unknown paths get 404 and known paths with the wrong method 405,
/// both with the binding's JSON error body.
pub fn routes() -> Router<AppState> {
    let table: [(&str, MethodRouter<AppState>, Route); 7] = [
        ("/message:send", post(handle), Route::Send),
        ("/message:stream", post(handle), Route::Stream),
        ("/tasks", get(handle), Route::Tasks),
        // Every method reaches `handle`: whether one fits depends on the `:verb` suffix.
        ("/tasks/{id}", any(handle), Route::Task),
        (
            "/tasks/{id}/pushNotificationConfigs",
            get(handle).post(handle),
            Route::PushConfigs,
        ),
        (
            "/tasks/{id}/pushNotificationConfigs/{config_id}",
            get(handle).delete(handle),
            Route::PushConfig,
        ),
        ("/extendedAgentCard", get(handle), Route::ExtendedCard),
    ];
    let mut router = Router::new();
    for (path, methods, route) in table {
        let methods = methods.layer(Extension(route));
        router = router
            .route(path, methods.clone())
            .route(&format!("/{{tenant}}{path}"), methods);
    }
    router
        .fallback(unknown_route)
        .method_not_allowed_fallback(wrong_method)
}

async fn unknown_route(uri: Uri, headers: HeaderMap) -> Response {
    response::not_found(response::media_type(&headers), uri.path())
}

async fn wrong_method(method: Method, headers: HeaderMap) -> Response {
    // axum adds the `Allow` header of the route.
    response::method_not_allowed(response::media_type(&headers), method.as_str(), None)
}

/// The path parameters, percent-decoded.
fn path_params(
    params: Result<RawPathParams, RawPathParamsRejection>,
) -> Result<HashMap<String, String>, A2aError> {
    match params {
        Ok(p) => Ok(p
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()),
        Err(RawPathParamsRejection::MissingPathParams(_)) => Ok(HashMap::new()),
        Err(_) => Err(A2aError::InvalidParams(
            "a path segment is not valid percent-encoded UTF-8".into(),
        )),
    }
}

/// One request on any route: see the module docs for the order of checks.
#[allow(clippy::too_many_arguments)]
async fn handle(
    State(state): State<AppState>,
    Extension(route): Extension<Route>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    method: Method,
    uri: Uri,
    params: Result<RawPathParams, RawPathParamsRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let media = response::media_type(&headers);
    let peer = peer.map(|Extension(ConnectInfo(addr))| addr);
    let identity = match state.config.auth.verify(&headers, peer).await {
        Ok(identity) => identity,
        Err(failure) => return failure.rest_response(media),
    };
    let who = Who {
        agent: state.config.agent.id.clone(),
        caller: identity
            .as_ref()
            .map(|i| i.owner.clone())
            .unwrap_or_else(|| crate::executor::CallContext::ANONYMOUS.to_owned()),
        peer,
    };
    let path = match path_params(params) {
        Ok(p) => p,
        Err(e) => return response::error(media, &e),
    };
    let (op, task_id) = match request::operation(route, &method, path.get("id").map(String::as_str))
    {
        Ok(found) => found,
        Err(request::Misroute::Method(allow)) => {
            return response::method_not_allowed(media, method.as_str(), Some(allow));
        }
        Err(request::Misroute::UnknownVerb) => return response::not_found(media, uri.path()),
    };
    let requested = operations::requested_version(&headers, query.as_deref());
    let version = operations::negotiate_version(requested.as_deref()).and_then(|v| match v {
        Some(ProtocolVersion::V0_3) => Err(A2aError::VersionNotSupported(format!(
            "A2A-Version 0.3 is not served on HTTP+JSON; this binding speaks {}",
            operations::PROTOCOL_VERSION
        ))),
        v => Ok(v),
    });
    if let Err(e) = version {
        return finish(
            &who,
            started,
            op,
            response::error(media, &e),
            e.reason(),
            None,
        );
    }
    let bytes = if method == Method::POST {
        let bytes = match http_body::read(&headers, body, state.config.max_body_bytes).await {
            Ok(b) => b,
            Err((status, e)) => {
                let resp = response::error_with(status, media, &e);
                return finish(&who, started, op, resp, e.reason(), None);
            }
        };
        if let Err(e) = operations::check_content_type(&headers, &bytes) {
            let resp = response::error_with(StatusCode::UNSUPPORTED_MEDIA_TYPE, media, &e);
            return finish(&who, started, op, resp, e.reason(), None);
        }
        bytes
    } else {
        Bytes::new()
    };
    let message = match request::message(
        op,
        &method,
        &path,
        task_id.as_deref(),
        query.as_deref(),
        &bytes,
    ) {
        Ok(m) => m,
        Err(e) => {
            return finish(
                &who,
                started,
                op,
                response::error(media, &e),
                e.reason(),
                None,
            );
        }
    };
    let call = match operations::call_context(
        &state.config.agent,
        identity.as_ref(),
        &headers,
        &message,
    ) {
        Ok(call) => call,
        Err(refused) => return refused.rest_response(media),
    };
    let cursor = operations::last_event_id_header(&headers);
    let mut task = task_id.or_else(|| {
        message
            .pointer("/message/taskId")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let outcome = operations::invoke(&state, &call, op, message, cursor).await;
    let (resp, label) = match outcome {
        Ok(Outcome::Message(m)) => {
            if task.is_none() {
                task = m.task_id().map(str::to_owned);
            }
            // DeleteTaskPushNotificationConfig answers `{}` (google.protobuf.Empty).
            let body = match &m {
                ResponseMessage::Empty => Ok("{}".to_owned()),
                m => serde_json::to_string(m),
            };
            match body {
                Ok(body) if op == Operation::GetExtendedAgentCard => (
                    super::agent_card::extended_response(&headers, media, body, &state.card.get()),
                    "ok",
                ),
                Ok(body) => (response::json(StatusCode::OK, media, body), "ok"),
                Err(e) => {
                    let e = A2aError::internal(e);
                    (response::error(media, &e), e.reason())
                }
            }
        }
        Ok(Outcome::Resumed(stream)) => (
            sse::render(
                sse::Framing::Bare,
                None,
                stream,
                state.config.sse_keepalive,
                state.shutdown.clone(),
            ),
            "stream",
        ),
        Ok(Outcome::Stream(mut stream)) => match stream.next().await {
            Some(Ok(first)) => {
                task = task.or_else(|| first.event().task_id().map(str::to_owned));
                (
                    sse::render(
                        sse::Framing::Bare,
                        Some(first),
                        stream,
                        state.config.sse_keepalive,
                        state.shutdown.clone(),
                    ),
                    "stream",
                )
            }
            Some(Err(e)) => (response::error(media, &e), e.reason()),
            None => {
                let e = A2aError::internal("empty event stream");
                (response::error(media, &e), e.reason())
            }
        },
        Err(e) => (response::error(media, &e), e.reason()),
    };
    finish(&who, started, op, resp, label, task.as_deref())
}

/// Who sent a request, for its log line: the authenticated caller's owner (or `anonymous`)
/// and the peer address.
struct Who {
    caller: String,
    /// The agent the request is for (`""`: the agent at `/`).
    agent: String,
    peer: Option<SocketAddr>,
}

/// Counts and logs one request (`a2a_requests_total{binding="rest"}`, the duration
/// histogram and the `request` log line, as JSON-RPC does).
fn finish(
    who: &Who,
    started: Instant,
    op: Operation,
    resp: Response,
    outcome: &'static str,
    task: Option<&str>,
) -> Response {
    let elapsed = started.elapsed();
    let label = op.metric_label();
    metrics::counter!(
        REQUESTS,
        crate::telemetry::metrics::request_labels("rest", label, Some(outcome), &who.agent)
    )
    .increment(1);
    metrics::histogram!(
        REQUEST_DURATION,
        crate::telemetry::metrics::request_labels("rest", label, None, &who.agent)
    )
    .record(elapsed.as_secs_f64());
    let task: Option<String> = task.map(|t| t.chars().take(128).collect());
    tracing::info!(
        rpc.method = op.name(),
        binding = "rest",
        task.id = task.as_deref().unwrap_or("-"),
        caller = who.caller.as_str(),
        agent = crate::telemetry::metrics::agent_field(&who.agent),
        peer = %crate::telemetry::LogPeer(who.peer),
        outcome,
        duration_ms = crate::telemetry::millis(elapsed),
        "request"
    );
    resp
}
