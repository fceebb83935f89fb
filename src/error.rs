//! One error type for every A2A and JSON-RPC error, mapped in one place to its
//! JSON-RPC code, HTTP status, gRPC status and `google.rpc.ErrorInfo` reason
//! (A2A spec §5.4 table as of v1.0.1; see `docs/bindings.md`).

use serde_json::{Value, json};

use crate::protocol::jsonrpc::ErrorObject;

/// The `ErrorInfo.domain` of every A2A error.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

/// Every error a client can receive. The `Display` text is what the client sees: it
/// never contains internal causes (those are logged once by [`A2aError::internal`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum A2aError {
    /// -32700: the body is not JSON.
    #[error("Parse error: {0}")]
    ParseError(String),
    /// -32600: not a valid JSON-RPC 2.0 request object.
    #[error("Invalid request: {0}")]
    InvalidRequest(String),
    /// -32601: unknown method.
    #[error("Method not found: {0}")]
    MethodNotFound(String),
    /// -32602: parameters fail validation.
    #[error("Invalid params: {0}")]
    InvalidParams(String),
    /// -32603: a server fault. The text carries only a reference id for the logs.
    #[error("Internal error: {0}")]
    Internal(String),
    /// -32000 (gateway-specific, HTTP 503): too many tasks are running; retry later.
    #[error("Server busy: {0}")]
    Unavailable(String),
    /// -32001: no such task for this caller.
    #[error("Task not found: {0}")]
    TaskNotFound(String),
    /// -32001 as well (the spec names TaskNotFoundError for a missing push config,
    /// §3.1.8): the caller's task exists but has no push notification config `id`.
    #[error("Push notification config not found: task {task_id} has no config {id}")]
    PushConfigNotFound {
        /// The task, which exists.
        task_id: String,
        /// The config id asked for.
        id: String,
    },
    /// -32002: the task cannot be canceled (already in a terminal state).
    #[error("Task cannot be canceled: task {task_id} is already {state}")]
    TaskNotCancelable {
        /// The task.
        task_id: String,
        /// Its terminal state.
        state: crate::protocol::TaskState,
    },
    /// -32003: push notifications are not supported.
    #[error("Push notifications are not supported")]
    PushNotificationNotSupported,
    /// -32004: the operation is not supported (e.g. a message to a terminal task).
    #[error("Unsupported operation: {0}")]
    UnsupportedOperation(String),
    /// -32005: a media type in the request is not supported.
    #[error("Content type not supported: {0}")]
    ContentTypeNotSupported(String),
    /// -32006: the agent produced an invalid response.
    #[error("Invalid agent response: {0}")]
    InvalidAgentResponse(String),
    /// -32007: no extended agent card is configured.
    #[error("Extended agent card is not configured")]
    ExtendedAgentCardNotConfigured,
    /// -32008: a required extension was not requested by the client.
    #[error("Extension support required: {0}")]
    ExtensionSupportRequired(String),
    /// -32009: the requested protocol version is not supported.
    #[error("Version not supported: {0}")]
    VersionNotSupported(String),
}

impl A2aError {
    /// Logs `cause` once at error level with a fresh reference id and returns an
    /// [`A2aError::Internal`] that carries only that id.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        let reference = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        tracing::error!(error.reference = %reference, error.cause = %cause, "internal error");
        Self::Internal(format!("see server logs, reference {reference}"))
    }

    /// The JSON-RPC error code.
    pub fn jsonrpc_code(&self) -> i32 {
        match self {
            Self::ParseError(_) => -32700,
            Self::InvalidRequest(_) => -32600,
            Self::MethodNotFound(_) => -32601,
            Self::InvalidParams(_) => -32602,
            Self::Internal(_) => -32603,
            Self::Unavailable(_) => -32000,
            Self::TaskNotFound(_) | Self::PushConfigNotFound { .. } => -32001,
            Self::TaskNotCancelable { .. } => -32002,
            Self::PushNotificationNotSupported => -32003,
            Self::UnsupportedOperation(_) => -32004,
            Self::ContentTypeNotSupported(_) => -32005,
            Self::InvalidAgentResponse(_) => -32006,
            Self::ExtendedAgentCardNotConfigured => -32007,
            Self::ExtensionSupportRequired(_) => -32008,
            Self::VersionNotSupported(_) => -32009,
        }
    }

    /// The HTTP status of the HTTP+JSON binding (spec v1.0.1 table).
    pub fn http_status(&self) -> u16 {
        match self {
            Self::ParseError(_) | Self::InvalidRequest(_) | Self::InvalidParams(_) => 400,
            Self::MethodNotFound(_) => 404,
            Self::Internal(_) => 500,
            Self::Unavailable(_) => 503,
            Self::TaskNotFound(_) | Self::PushConfigNotFound { .. } => 404,
            Self::TaskNotCancelable { .. }
            | Self::PushNotificationNotSupported
            | Self::UnsupportedOperation(_)
            | Self::ContentTypeNotSupported(_)
            | Self::ExtendedAgentCardNotConfigured
            | Self::ExtensionSupportRequired(_)
            | Self::VersionNotSupported(_) => 400,
            Self::InvalidAgentResponse(_) => 500,
        }
    }

    /// The gRPC status code name (spec v1.0.1 table).
    pub fn grpc_status(&self) -> &'static str {
        match self {
            Self::ParseError(_) | Self::InvalidRequest(_) | Self::InvalidParams(_) => {
                "INVALID_ARGUMENT"
            }
            Self::MethodNotFound(_) => "UNIMPLEMENTED",
            Self::Internal(_) | Self::InvalidAgentResponse(_) => "INTERNAL",
            Self::Unavailable(_) => "UNAVAILABLE",
            Self::TaskNotFound(_) | Self::PushConfigNotFound { .. } => "NOT_FOUND",
            Self::ContentTypeNotSupported(_) => "INVALID_ARGUMENT",
            Self::TaskNotCancelable { .. }
            | Self::PushNotificationNotSupported
            | Self::UnsupportedOperation(_)
            | Self::ExtendedAgentCardNotConfigured
            | Self::ExtensionSupportRequired(_)
            | Self::VersionNotSupported(_) => "FAILED_PRECONDITION",
        }
    }

    /// The `google.rpc.ErrorInfo` reason: the error name in UPPER_SNAKE_CASE.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::ParseError(_) => "PARSE_ERROR",
            Self::InvalidRequest(_) => "INVALID_REQUEST",
            Self::MethodNotFound(_) => "METHOD_NOT_FOUND",
            Self::InvalidParams(_) => "INVALID_PARAMS",
            Self::Internal(_) => "INTERNAL_ERROR",
            Self::Unavailable(_) => "UNAVAILABLE",
            Self::TaskNotFound(_) | Self::PushConfigNotFound { .. } => "TASK_NOT_FOUND",
            Self::TaskNotCancelable { .. } => "TASK_NOT_CANCELABLE",
            Self::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            Self::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
            Self::ContentTypeNotSupported(_) => "CONTENT_TYPE_NOT_SUPPORTED",
            Self::InvalidAgentResponse(_) => "INVALID_AGENT_RESPONSE",
            Self::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            Self::ExtensionSupportRequired(_) => "EXTENSION_SUPPORT_REQUIRED",
            Self::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
        }
    }

    /// Whether a client may retry the same request later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }

    /// The ErrorInfo metadata (string values only, as the proto requires).
    fn metadata(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        if let Self::TaskNotFound(id)
        | Self::TaskNotCancelable { task_id: id, .. }
        | Self::PushConfigNotFound { task_id: id, .. } = self
        {
            m.insert("taskId".into(), Value::String(id.clone()));
        }
        if let Self::PushConfigNotFound { id, .. } = self {
            m.insert("configId".into(), Value::String(id.clone()));
        }
        m
    }

    /// The typed details array: one `google.rpc.ErrorInfo`.
    pub fn details(&self) -> Value {
        json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason(),
            "domain": ERROR_DOMAIN,
            "metadata": self.metadata(),
        }])
    }

    /// The HTTP+JSON error body (spec §11.6, v1.0.1: a `google.rpc.Status` in ProtoJSON,
    /// the AIP-193 shape): `{"error":{"code":<HTTP status>,"status":"<gRPC code name>",
    /// "message":"…","details":[ErrorInfo]}}`.
    pub fn to_http_error_body(&self) -> Value {
        json!({
            "error": {
                "code": self.http_status(),
                "status": self.grpc_status(),
                "message": self.to_string(),
                "details": self.details(),
            }
        })
    }

    /// The JSON-RPC error object with an ErrorInfo in `data` (spec §9.5).
    pub fn to_error_object(&self) -> ErrorObject {
        ErrorObject {
            code: self.jsonrpc_code(),
            message: self.to_string(),
            data: Some(self.details()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_spec_v1_0_1() {
        use A2aError::*;
        let s = String::new;
        let table: Vec<(A2aError, i32, u16, &str, &str)> = vec![
            (
                ParseError(s()),
                -32700,
                400,
                "INVALID_ARGUMENT",
                "PARSE_ERROR",
            ),
            (
                InvalidRequest(s()),
                -32600,
                400,
                "INVALID_ARGUMENT",
                "INVALID_REQUEST",
            ),
            (
                MethodNotFound(s()),
                -32601,
                404,
                "UNIMPLEMENTED",
                "METHOD_NOT_FOUND",
            ),
            (
                InvalidParams(s()),
                -32602,
                400,
                "INVALID_ARGUMENT",
                "INVALID_PARAMS",
            ),
            (Internal(s()), -32603, 500, "INTERNAL", "INTERNAL_ERROR"),
            (Unavailable(s()), -32000, 503, "UNAVAILABLE", "UNAVAILABLE"),
            (
                TaskNotFound(s()),
                -32001,
                404,
                "NOT_FOUND",
                "TASK_NOT_FOUND",
            ),
            (
                PushConfigNotFound {
                    task_id: s(),
                    id: s(),
                },
                -32001,
                404,
                "NOT_FOUND",
                "TASK_NOT_FOUND",
            ),
            (
                TaskNotCancelable {
                    task_id: s(),
                    state: crate::protocol::TaskState::Completed,
                },
                -32002,
                400,
                "FAILED_PRECONDITION",
                "TASK_NOT_CANCELABLE",
            ),
            (
                PushNotificationNotSupported,
                -32003,
                400,
                "FAILED_PRECONDITION",
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ),
            (
                UnsupportedOperation(s()),
                -32004,
                400,
                "FAILED_PRECONDITION",
                "UNSUPPORTED_OPERATION",
            ),
            (
                ContentTypeNotSupported(s()),
                -32005,
                400,
                "INVALID_ARGUMENT",
                "CONTENT_TYPE_NOT_SUPPORTED",
            ),
            (
                InvalidAgentResponse(s()),
                -32006,
                500,
                "INTERNAL",
                "INVALID_AGENT_RESPONSE",
            ),
            (
                ExtendedAgentCardNotConfigured,
                -32007,
                400,
                "FAILED_PRECONDITION",
                "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ),
            (
                ExtensionSupportRequired(s()),
                -32008,
                400,
                "FAILED_PRECONDITION",
                "EXTENSION_SUPPORT_REQUIRED",
            ),
            (
                VersionNotSupported(s()),
                -32009,
                400,
                "FAILED_PRECONDITION",
                "VERSION_NOT_SUPPORTED",
            ),
        ];
        for (err, code, http, grpc, reason) in table {
            assert_eq!(err.jsonrpc_code(), code, "{err:?}");
            assert_eq!(err.http_status(), http, "{err:?}");
            assert_eq!(err.grpc_status(), grpc, "{err:?}");
            assert_eq!(err.reason(), reason, "{err:?}");
            let obj = err.to_error_object();
            assert_eq!(obj.code, code);
            let info = &obj.data.unwrap()[0];
            assert_eq!(info["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
            assert_eq!(info["domain"], ERROR_DOMAIN);
            assert_eq!(info["reason"], reason);
        }
    }

    #[test]
    fn internal_hides_cause() {
        let e = A2aError::internal("db password=hunter2 refused");
        assert!(!e.to_string().contains("hunter2"));
        assert!(e.to_string().contains("reference"));
    }
}
