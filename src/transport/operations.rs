//! The one operation table every binding shares (spec §3.1, §5.3): JSON-RPC, HTTP+JSON
//! (REST) and gRPC adapters each turn their request into an [`Operation`], the caller's
//! [`CallContext`] and the request message in its ProtoJSON form (a
//! [`serde_json::Value`]), call [`invoke`], and render the [`Outcome`] or the
//! [`A2aError`] in their own framing. Decoding the request message, validating its
//! shape and calling the handler happen here once, so the three bindings cannot drift.
//!
//! The checks every binding makes before an operation also live here:
//! [`negotiate_version`] (`A2A-Version`, spec §3.6), [`check_content_type`],
//! [`requested_extensions`] (`A2A-Extensions`), [`call_context`] (who is calling and in
//! which tenant) and [`parse_last_event_id`] (the SSE resume cursor).

use axum::http::{HeaderMap, header};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::AppState;
use crate::error::A2aError;
use crate::executor::CallContext;
use crate::handler::EventStream;
use crate::identity::{AuthFailure, Identity};
use crate::protocol::{
    AgentCard, CancelTaskRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, ListTasksRequest, ListTasksResponse,
    SendMessageRequest, SendMessageResponse, SubscribeToTaskRequest, Task,
    TaskPushNotificationConfig, TaskPushNotificationConfigRequest,
};

/// One A2A operation (spec §3.1). [`Operation::name`] is its A2A 1.0 name, which is
/// also the JSON-RPC method (spec §9.3) and the gRPC method of `lf.a2a.v1.A2AService`
/// (spec §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SendMessage (§3.1.1).
    SendMessage,
    /// SendStreamingMessage (§3.1.2).
    SendStreamingMessage,
    /// GetTask (§3.1.3).
    GetTask,
    /// ListTasks (§3.1.4).
    ListTasks,
    /// CancelTask (§3.1.5).
    CancelTask,
    /// SubscribeToTask (§3.1.6).
    SubscribeToTask,
    /// CreateTaskPushNotificationConfig (§3.1.7).
    CreateTaskPushNotificationConfig,
    /// GetTaskPushNotificationConfig (§3.1.8).
    GetTaskPushNotificationConfig,
    /// ListTaskPushNotificationConfigs (§3.1.9).
    ListTaskPushNotificationConfigs,
    /// DeleteTaskPushNotificationConfig (§3.1.10).
    DeleteTaskPushNotificationConfig,
    /// GetExtendedAgentCard (§3.1.11).
    GetExtendedAgentCard,
}

impl Operation {
    /// Every operation, in the spec's order.
    pub const ALL: [Operation; 11] = [
        Operation::SendMessage,
        Operation::SendStreamingMessage,
        Operation::GetTask,
        Operation::ListTasks,
        Operation::CancelTask,
        Operation::SubscribeToTask,
        Operation::CreateTaskPushNotificationConfig,
        Operation::GetTaskPushNotificationConfig,
        Operation::ListTaskPushNotificationConfigs,
        Operation::DeleteTaskPushNotificationConfig,
        Operation::GetExtendedAgentCard,
    ];

    /// The A2A 1.0 operation name (`SendMessage`, `GetTask`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Operation::SendMessage => "SendMessage",
            Operation::SendStreamingMessage => "SendStreamingMessage",
            Operation::GetTask => "GetTask",
            Operation::ListTasks => "ListTasks",
            Operation::CancelTask => "CancelTask",
            Operation::SubscribeToTask => "SubscribeToTask",
            Operation::CreateTaskPushNotificationConfig => "CreateTaskPushNotificationConfig",
            Operation::GetTaskPushNotificationConfig => "GetTaskPushNotificationConfig",
            Operation::ListTaskPushNotificationConfigs => "ListTaskPushNotificationConfigs",
            Operation::DeleteTaskPushNotificationConfig => "DeleteTaskPushNotificationConfig",
            Operation::GetExtendedAgentCard => "GetExtendedAgentCard",
        }
    }

    /// The operation named `name` (exact A2A 1.0 spelling), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.name() == name)
    }

    /// Whether the operation answers with a stream of events (SSE or gRPC server
    /// streaming) rather than one message.
    pub fn is_streaming(self) -> bool {
        matches!(
            self,
            Operation::SendStreamingMessage | Operation::SubscribeToTask
        )
    }

    /// A bounded label for metrics and logs: the operation name, with the four
    /// push-config operations grouped as `PushNotificationConfig`.
    pub fn metric_label(self) -> &'static str {
        match self {
            Operation::CreateTaskPushNotificationConfig
            | Operation::GetTaskPushNotificationConfig
            | Operation::ListTaskPushNotificationConfigs
            | Operation::DeleteTaskPushNotificationConfig => "PushNotificationConfig",
            op => op.name(),
        }
    }
}

/// What an operation produced, before a binding frames it.
// Returned once per request and matched at once: boxing the message would only add an
// allocation per response.
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    /// One response message (a Task, a `SendMessageResponse`, a `ListTasksResponse`, an
    /// AgentCard ...), still typed: JSON bindings serialize it straight to the response
    /// body, gRPC and the 0.3 translation take its ProtoJSON [`Value`].
    Message(ResponseMessage),
    /// A stream whose first event decides between a stream response and a plain error
    /// (the handler may still fail before it): bindings take the first item before
    /// committing to a streaming response.
    Stream(EventStream),
    /// A stream already validated (a resume with `Last-Event-ID`): its response headers
    /// go out at once, even if the next event is far off.
    Resumed(EventStream),
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Message(m) => f.debug_tuple("Message").field(m).finish(),
            Outcome::Stream(_) => f.write_str("Stream(..)"),
            Outcome::Resumed(_) => f.write_str("Resumed(..)"),
        }
    }
}

/// The response message of a unary operation (spec §3.1), one variant per message type.
/// It serializes as the message's ProtoJSON; [`ResponseMessage::Empty`] (the answer of
/// DeleteTaskPushNotificationConfig, `google.protobuf.Empty`) serializes as `null`, which
/// each binding frames its own way.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum ResponseMessage {
    /// SendMessage: `{"task":…}` or `{"message":…}`.
    SendMessage(SendMessageResponse),
    /// GetTask and CancelTask.
    Task(Task),
    /// ListTasks.
    ListTasks(ListTasksResponse),
    /// GetExtendedAgentCard.
    AgentCard(Box<AgentCard>),
    /// CreateTaskPushNotificationConfig and GetTaskPushNotificationConfig.
    PushConfig(TaskPushNotificationConfig),
    /// ListTaskPushNotificationConfigs.
    PushConfigs(ListTaskPushNotificationConfigsResponse),
    /// DeleteTaskPushNotificationConfig (no content).
    Empty,
}

impl ResponseMessage {
    /// The id of the task the message is or carries (a Task, or a SendMessage answered
    /// with a Task), for request logs.
    pub fn task_id(&self) -> Option<&str> {
        match self {
            ResponseMessage::SendMessage(SendMessageResponse::Task(t))
            | ResponseMessage::Task(t) => Some(&t.id),
            _ => None,
        }
    }

    /// The message as a ProtoJSON [`Value`] (`Value::Null` for [`ResponseMessage::Empty`]).
    ///
    /// # Errors
    /// [`A2aError::Internal`] if serialization fails (it cannot for these types: no map
    /// has non-string keys).
    pub fn into_value(self) -> Result<Value, A2aError> {
        serde_json::to_value(&self).map_err(A2aError::internal)
    }
}

/// The A2A protocol versions a request can ask for (spec §3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolVersion {
    /// A2A 1.0: every binding.
    V1_0,
    /// A2A 0.3: JSON-RPC only, translated at the edge.
    V0_3,
}

/// The protocol version this gateway speaks natively.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The version a request asks for (`A2A-Version` header or, for HTTP bindings, the
/// `A2A-Version` query parameter), as sent, trimmed; `None` when absent.
pub fn requested_version(headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    if let Some(v) = headers.get("a2a-version") {
        return Some(v.to_str().unwrap_or("<not text>").trim().to_owned());
    }
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        k.eq_ignore_ascii_case("a2a-version")
            .then(|| v.trim().to_owned())
    })
}

/// Reads a requested version as `Major.Minor` (spec §3.6: a patch component such as
/// the `7` of `1.0.7` is ignored). `None` (no version sent) is `Ok(None)`: the binding
/// decides what that means.
///
/// # Errors
/// [`A2aError::VersionNotSupported`] (-32009) for anything but 1.0 and 0.3, including
/// text that is not `Major.Minor[.Patch]` with decimal numbers.
pub fn negotiate_version(requested: Option<&str>) -> Result<Option<ProtocolVersion>, A2aError> {
    let Some(v) = requested.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let refuse = || {
        A2aError::VersionNotSupported(format!(
            "A2A-Version {v:?} is not supported; this server speaks {PROTOCOL_VERSION} (and 0.3 on JSON-RPC)"
        ))
    };
    let mut parts = v.split('.');
    let number = |p: Option<&str>| -> Option<u32> {
        let p = p?;
        (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse().ok())
            .flatten()
    };
    let (Some(major), Some(minor)) = (number(parts.next()), number(parts.next())) else {
        return Err(refuse());
    };
    match parts.next() {
        None => {}
        Some(p) if number(Some(p)).is_some() && parts.next().is_none() => {}
        Some(_) => return Err(refuse()),
    }
    match (major, minor) {
        (1, 0) => Ok(Some(ProtocolVersion::V1_0)),
        (0, 3) => Ok(Some(ProtocolVersion::V0_3)),
        _ => Err(refuse()),
    }
}

/// Accepts a POST whose `Content-Type` is JSON (`application/json`,
/// `application/a2a+json`, `application/json-rpc`, `text/json`, any parameters), or
/// which has neither a `Content-Type` nor a `body` (a REST cancel may send nothing).
///
/// A body without a `Content-Type` is refused: a browser sends a cross-origin POST
/// without a preflight only when its media type is one an HTML form can send, or
/// none, so requiring JSON means no web page can make a visitor's browser send the
/// gateway a message (see `docs/operations.md`, "Browsers").
///
/// # Errors
/// [`A2aError::ContentTypeNotSupported`] (-32005) naming the media type received, or
/// saying that none was.
pub fn check_content_type(headers: &HeaderMap, body: &[u8]) -> Result<(), A2aError> {
    let Some(ct) = headers.get(header::CONTENT_TYPE) else {
        if body.is_empty() {
            return Ok(());
        }
        return Err(A2aError::ContentTypeNotSupported(
            "the request has no Content-Type; send application/json or application/a2a+json".into(),
        ));
    };
    let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
    let essence = ct.split(';').next().unwrap_or("").trim();
    if matches!(
        essence,
        "application/json" | "application/a2a+json" | "application/json-rpc" | "text/json"
    ) {
        Ok(())
    } else {
        Err(A2aError::ContentTypeNotSupported(format!(
            "request Content-Type {essence:?} is not supported; send application/json or application/a2a+json"
        )))
    }
}

/// Extension URIs the client activates (`A2A-Extensions`, comma-separated, possibly
/// repeated), trimmed, empty entries dropped.
pub fn requested_extensions(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("a2a-extensions")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The caller of one request to `agent`: the owner is the authenticated caller's
/// [`Identity::owner`] (`None`: the anonymous owner); the tenant is the one the request message's `tenant` field names
/// (a REST path tenant is put there by its adapter), bound to the credential by
/// [`Identity::tenant_for`]; the agent is `agent.id`; and the extensions `headers`
/// activate.
///
/// # Errors
/// [`AuthFailure::TenantNotAllowed`] when the request names a tenant the credential does
/// not allow; [`AuthFailure::AgentNotAllowed`] when the caller's owner is not one of
/// `agent.callers` (both already logged and counted).
pub fn call_context(
    agent: &super::AgentAccess,
    identity: Option<&Identity>,
    headers: &HeaderMap,
    params: &Value,
) -> Result<CallContext, AuthFailure> {
    let mut ctx = CallContext::anonymous();
    ctx.agent = agent.id.clone();
    if let Some(callers) = &agent.callers
        && !identity.is_some_and(|id| callers.contains(&id.owner))
    {
        // Counted as every refusal is; logged here with who was refused where (the
        // request's peer is in its request log line).
        metrics::counter!(
            crate::telemetry::metrics::AUTH_FAILURES,
            "reason" => AuthFailure::AgentNotAllowed.reason()
        )
        .increment(1);
        tracing::warn!(
            caller = identity.map_or("-", |id| id.owner.as_str()),
            agent = %agent.id,
            reason = AuthFailure::AgentNotAllowed.reason(),
            "authentication failed: the caller is not among the agent's callers"
        );
        return Err(AuthFailure::AgentNotAllowed);
    }
    let requested = params.get("tenant").and_then(Value::as_str).unwrap_or("");
    match identity {
        Some(id) => {
            ctx.owner = id.owner.clone();
            // Only a JWT the gateway verified may be forwarded (never an API key).
            if id.scheme == crate::config::ServerAuthKind::Jwt {
                ctx.caller_token = id.bearer.clone().map(crate::executor::CallerToken::new);
            }
            ctx.tenant = id
                .tenant_for(requested)
                .inspect_err(|f| crate::identity::record(*f, None))?;
        }
        None => ctx.tenant = requested.to_owned(),
    }
    ctx.requested_extensions = requested_extensions(headers);
    ctx.trace_parent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(crate::telemetry::trace::TraceParent::parse);
    Ok(ctx)
}

/// A request's SSE resume cursor, read from its `Last-Event-ID` header: `Ok(None)`
/// without one. An unusable header is kept as its error, which only SubscribeToTask
/// reports (other operations ignore the cursor).
pub type ResumeCursor = Result<Option<u64>, A2aError>;

/// The request's `Last-Event-ID` header as a [`ResumeCursor`] (see
/// [`parse_last_event_id`]).
///
/// # Errors
/// [`A2aError::InvalidParams`] (inside the cursor) for several `Last-Event-ID` headers
/// (which one would be the cursor?), a value that is not text, or one this server did
/// not issue.
pub fn last_event_id_header(headers: &axum::http::HeaderMap) -> ResumeCursor {
    let mut values = headers.get_all("last-event-id").iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(A2aError::InvalidParams(
            "several Last-Event-ID headers: send one, the id of the last event received".into(),
        ));
    }
    parse_last_event_id(Some(first.to_str().unwrap_or("<not text>")))
}

/// Reads a `Last-Event-ID` (the SSE resume cursor this server issued as `id:`): absent
/// or empty is `None`.
///
/// # Errors
/// [`A2aError::InvalidParams`] for anything but decimal digits that fit 64 bits.
pub fn parse_last_event_id(value: Option<&str>) -> Result<Option<u64>, A2aError> {
    let Some(s) = value.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    s.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| s.parse::<u64>().ok())
        .flatten()
        .map(Some)
        .ok_or_else(|| {
            let shown: String = s.chars().take(64).collect();
            A2aError::InvalidParams(format!(
                "Last-Event-ID {shown:?} is not an event id this server issued"
            ))
        })
}

/// Decodes a request message from its ProtoJSON form. A missing body (`null`) is an
/// empty message.
///
/// # Errors
/// [`A2aError::InvalidParams`] when it is not an object or a field has the wrong type.
pub fn decode<T: DeserializeOwned>(params: Value) -> Result<T, A2aError> {
    let params = match params {
        Value::Null => Value::Object(Default::default()),
        p @ Value::Object(_) => p,
        _ => return Err(A2aError::InvalidParams("params must be an object".into())),
    };
    if nesting_depth(&params) > MAX_PARAMS_DEPTH {
        return Err(A2aError::InvalidParams(format!(
            "the request message is nested deeper than {MAX_PARAMS_DEPTH} levels of objects and arrays"
        )));
    }
    serde_json::from_value(params).map_err(|e| A2aError::InvalidParams(e.to_string()))
}

/// The deepest nesting of objects and arrays a request message may have, counted from
/// its own top level (`{"message":{"metadata":{...}}}` is 3 at `metadata`). Stored
/// values must stay readable on every binding: protobuf decoders (prost, the Python and
/// Go runtimes) stop at 100 nested messages, and each JSON level of `metadata` or a data
/// part is three protobuf messages (`Struct`, its map entry, `Value`), so 32 JSON levels
/// keep a Task inside a `ListTasksResponse` below that limit.
pub const MAX_PARAMS_DEPTH: usize = 32;

/// The nesting depth of `v` (a scalar is 0, `{}` and `[]` are 1), without recursion.
fn nesting_depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let depth = depth + 1;
        match v {
            Value::Object(m) => stack.extend(m.values().map(|c| (c, depth))),
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, depth))),
            _ => continue,
        }
        deepest = deepest.max(depth);
    }
    deepest
}

/// Runs `op` for `call` with the request message `params` (ProtoJSON) on the state's
/// handler. `cursor` is the binding's resume cursor for SubscribeToTask (the SSE
/// `Last-Event-ID` header, [`last_event_id_header`]), ignored by other operations.
///
/// # Errors
/// InvalidParams when `params` does not decode as the operation's request message or
/// (SubscribeToTask) `cursor` holds an error, and every error the handler's
/// operation returns (see [`RequestHandler`](crate::handler::RequestHandler)).
pub async fn invoke(
    state: &AppState,
    call: &CallContext,
    op: Operation,
    params: Value,
    cursor: ResumeCursor,
) -> Result<Outcome, A2aError> {
    use tracing::Instrument;
    // The handler operation's span (exported with `[telemetry] otlp_endpoint`), a child
    // of the caller's `traceparent`.
    let span = tracing::info_span!("a2a.operation", rpc.method = op.name());
    crate::telemetry::otlp::adopt(&span, call.trace_parent.as_ref());
    run(state, call, op, params, cursor).instrument(span).await
}

async fn run(
    state: &AppState,
    call: &CallContext,
    op: Operation,
    params: Value,
    cursor: ResumeCursor,
) -> Result<Outcome, A2aError> {
    let h = &state.handler;
    match op {
        Operation::SendMessage => Ok(Outcome::Message(ResponseMessage::SendMessage(
            h.send_message(call, decode::<SendMessageRequest>(params)?)
                .await?,
        ))),
        Operation::SendStreamingMessage => Ok(Outcome::Stream(
            h.send_streaming_message(call, decode::<SendMessageRequest>(params)?)
                .await?,
        )),
        Operation::GetTask => Ok(Outcome::Message(ResponseMessage::Task(
            h.get_task(call, decode::<GetTaskRequest>(params)?).await?,
        ))),
        Operation::ListTasks => Ok(Outcome::Message(ResponseMessage::ListTasks(
            h.list_tasks(call, decode::<ListTasksRequest>(params)?)
                .await?,
        ))),
        Operation::CancelTask => Ok(Outcome::Message(ResponseMessage::Task(
            h.cancel_task(call, decode::<CancelTaskRequest>(params)?)
                .await?,
        ))),
        Operation::SubscribeToTask => {
            let last = cursor?;
            let stream = h
                .subscribe_to_task(call, decode::<SubscribeToTaskRequest>(params)?, last)
                .await?;
            Ok(match last {
                Some(_) => Outcome::Resumed(stream),
                None => Outcome::Stream(stream),
            })
        }
        Operation::GetExtendedAgentCard => Ok(Outcome::Message(ResponseMessage::AgentCard(
            Box::new(h.get_extended_agent_card(call)?),
        ))),
        Operation::CreateTaskPushNotificationConfig => {
            Ok(Outcome::Message(ResponseMessage::PushConfig(
                h.create_push_config(call, decode::<TaskPushNotificationConfig>(params)?)
                    .await?,
            )))
        }
        Operation::GetTaskPushNotificationConfig => {
            Ok(Outcome::Message(ResponseMessage::PushConfig(
                h.get_push_config(call, decode::<TaskPushNotificationConfigRequest>(params)?)
                    .await?,
            )))
        }
        Operation::ListTaskPushNotificationConfigs => {
            Ok(Outcome::Message(ResponseMessage::PushConfigs(
                h.list_push_configs(
                    call,
                    decode::<ListTaskPushNotificationConfigsRequest>(params)?,
                )
                .await?,
            )))
        }
        Operation::DeleteTaskPushNotificationConfig => {
            h.delete_push_config(call, decode::<TaskPushNotificationConfigRequest>(params)?)
                .await?;
            Ok(Outcome::Message(ResponseMessage::Empty))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for op in Operation::ALL {
            assert_eq!(Operation::from_name(op.name()), Some(op));
        }
        assert_eq!(Operation::from_name("message/send"), None);
        assert_eq!(Operation::from_name("sendMessage"), None);
    }

    #[test]
    fn versions_are_major_minor() {
        use ProtocolVersion::*;
        for (v, want) in [
            ("1.0", Some(V1_0)),
            ("1.0.7", Some(V1_0)),
            ("1.0.0", Some(V1_0)),
            ("0.3", Some(V0_3)),
            ("0.3.0", Some(V0_3)),
            ("", None),
        ] {
            assert_eq!(negotiate_version(Some(v)).unwrap(), want, "{v}");
        }
        assert_eq!(negotiate_version(None).unwrap(), None);
        for bad in [
            "1.1", "2.0", "1", "1.", "1.0.", "1.0.x", "1.0.0.0", "v1.0", " 1.0", "+1.0", "1.-0",
            "0.2",
        ] {
            let err = negotiate_version(Some(bad)).unwrap_err();
            assert_eq!(err.jsonrpc_code(), -32009, "{bad}");
        }
    }

    #[test]
    fn content_types() {
        let with = |ct: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, ct.parse().unwrap());
            h
        };
        assert_eq!(
            check_content_type(&HeaderMap::new(), b"{}")
                .unwrap_err()
                .jsonrpc_code(),
            -32005,
            "a body without Content-Type is refused"
        );
        assert!(
            check_content_type(&HeaderMap::new(), b"").is_ok(),
            "nothing sent"
        );
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/A2A+JSON",
        ] {
            assert!(check_content_type(&with(ok), b"{}").is_ok(), "{ok}");
        }
        for bad in ["text/plain", "application/xml", "multipart/form-data; b=1"] {
            assert_eq!(
                check_content_type(&with(bad), b"")
                    .unwrap_err()
                    .jsonrpc_code(),
                -32005,
                "{bad}"
            );
        }
    }

    #[test]
    fn last_event_ids() {
        assert_eq!(parse_last_event_id(None).unwrap(), None);
        assert_eq!(parse_last_event_id(Some(" ")).unwrap(), None);
        assert_eq!(parse_last_event_id(Some("42")).unwrap(), Some(42));
        for bad in ["-1", "4x", "99999999999999999999999", "1.5"] {
            assert_eq!(
                parse_last_event_id(Some(bad)).unwrap_err().jsonrpc_code(),
                -32602,
                "{bad}"
            );
        }
    }

    #[test]
    fn decode_refuses_params_nested_too_deep() {
        let nested = |levels: usize| {
            let inner = format!("{}1{}", "{\"b\":".repeat(levels), "}".repeat(levels));
            serde_json::from_str::<Value>(&format!(
                r#"{{"message":{{"messageId":"m","role":"ROLE_USER","parts":[{{"text":"hi"}}],"metadata":{inner}}}}}"#
            ))
            .unwrap()
        };
        // params (1) > message (2) > metadata (3) > 29 more levels = 32: accepted.
        assert!(decode::<SendMessageRequest>(nested(30)).is_ok());
        let e = decode::<SendMessageRequest>(nested(31)).unwrap_err();
        assert!(
            matches!(e, A2aError::InvalidParams(ref m) if m.contains("32 levels")),
            "{e:?}"
        );
        assert_eq!(nesting_depth(&Value::Null), 0);
        assert_eq!(nesting_depth(&serde_json::json!([[], {}])), 2);
    }

    #[test]
    fn decode_refuses_non_objects() {
        assert!(decode::<GetTaskRequest>(Value::Array(vec![])).is_err());
        assert!(decode::<ListTasksRequest>(Value::Null).is_ok());
    }

    #[test]
    fn response_messages_serialize_as_their_message() {
        use crate::protocol::{TaskState, TaskStatus};
        let task = Task {
            id: "t-1".into(),
            context_id: "c-1".into(),
            status: TaskStatus::new(TaskState::Completed),
            artifacts: None,
            history: None,
            metadata: None,
        };
        let sent = ResponseMessage::SendMessage(SendMessageResponse::Task(task.clone()));
        assert_eq!(sent.task_id(), Some("t-1"));
        let text = serde_json::to_string(&sent).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            serde_json::json!({"task": serde_json::to_value(&task).unwrap()})
        );
        assert_eq!(
            sent.into_value().unwrap(),
            serde_json::json!({"task": serde_json::to_value(&task).unwrap()})
        );
        let got = ResponseMessage::Task(task.clone());
        assert_eq!(got.task_id(), Some("t-1"));
        assert_eq!(
            got.into_value().unwrap(),
            serde_json::to_value(&task).unwrap()
        );
        assert_eq!(
            serde_json::to_string(&ResponseMessage::Empty).unwrap(),
            "null"
        );
        assert_eq!(ResponseMessage::Empty.task_id(), None);
    }
}
