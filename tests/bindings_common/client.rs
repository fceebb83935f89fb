//! The binding-neutral client every scenario is written against.

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde_json::Value;

pub use a2a_gateway::transport::operations::Operation;

/// Per-call options beyond the request message.
#[derive(Debug, Clone, Default)]
pub struct Opts {
    /// `A2A-Version` to send (the binding's service parameter); `None` sends `1.0`.
    pub version: Option<&'static str>,
    /// The resume cursor (SSE `Last-Event-ID`).
    pub last_event_id: Option<String>,
    /// A `Content-Type` other than JSON, for the content-type error (HTTP bindings).
    pub content_type: Option<&'static str>,
    /// The credential sent as `Authorization: Bearer <credential>` (every binding).
    pub bearer: Option<String>,
}

impl Opts {
    /// Options that authenticate with `credential`.
    pub fn bearer(credential: &str) -> Self {
        Opts {
            bearer: Some(credential.to_owned()),
            ..Opts::default()
        }
    }

    /// Options that resume after event `id`.
    pub fn resume_after(id: u64) -> Self {
        Opts {
            last_event_id: Some(id.to_string()),
            ..Opts::default()
        }
    }
}

/// An error as a client sees it, normalized across bindings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The `google.rpc.ErrorInfo` reason (`TASK_NOT_FOUND`, ...).
    pub reason: String,
    /// The binding's own code: the JSON-RPC error code, the HTTP status, the gRPC code
    /// name.
    pub code: String,
}

/// The codes one A2A error has on each binding (spec §5.4 table).
#[derive(Debug, Clone, Copy)]
pub struct Codes {
    /// JSON-RPC error code.
    pub jsonrpc: i64,
    /// HTTP status on HTTP+JSON.
    pub http: u16,
    /// gRPC status code name.
    pub grpc: &'static str,
}

/// One event of a stream: the SSE `id:` (or the binding's equivalent) and the
/// `StreamResponse` in ProtoJSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The event's sequence number, the resume cursor.
    pub id: Option<u64>,
    /// The `StreamResponse`.
    pub body: Value,
}

/// Events as they arrive; an error after the first event is an `Err` item.
pub type Events = BoxStream<'static, Result<Event, Failure>>;

/// One A2A binding, as a client.
#[async_trait]
pub trait Binding: Send + Sync {
    /// `JSONRPC`, `HTTP+JSON`, `GRPC`.
    fn name(&self) -> &'static str;

    /// The code this binding reports for an error with these codes.
    fn code(&self, codes: Codes) -> String;

    /// Calls a unary operation with `request` (ProtoJSON, `tenant` included).
    async fn unary(&self, op: Operation, request: Value, opts: &Opts) -> Result<Value, Failure>;

    /// Calls a streaming operation (SendStreamingMessage, SubscribeToTask). An error
    /// before the first event is `Err`.
    async fn stream(&self, op: Operation, request: Value, opts: &Opts) -> Result<Events, Failure>;
}
