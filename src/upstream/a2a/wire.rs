//! The A2A version spoken to an agent and what differs by it: JSON-RPC method names,
//! the `A2A-Version` header, the params sent and the results read. 0.3 shapes go
//! through the one translation in [`crate::protocol::v03`].

use serde_json::{Value, json};

use crate::protocol::{Message, StreamResponse, Task, v03};

/// AgentCore's JSON-RPC code for "session operation in progress, please retry".
pub const SESSION_BUSY: i64 = -32054;
/// A2A VersionNotSupportedError.
pub const VERSION_NOT_SUPPORTED: i64 = -32009;
/// A2A TaskNotCancelableError.
pub const TASK_NOT_CANCELABLE: i64 = -32002;
/// A2A TaskNotFoundError.
pub const TASK_NOT_FOUND: i64 = -32001;
/// A2A UnsupportedOperationError (e.g. SendStreamingMessage to an agent that does not
/// stream).
pub const UNSUPPORTED_OPERATION: i64 = -32004;
/// The binding a call goes over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// JSON-RPC 2.0 (`POST` of an envelope to the endpoint).
    JsonRpc,
    /// HTTP+JSON (A2A 1.0 only; see [`super::rest`]).
    HttpJson,
}

impl Binding {
    /// The binding's name in A2A cards (`JSONRPC`, `HTTP+JSON`).
    pub fn name(self) -> &'static str {
        match self {
            Self::JsonRpc => "JSONRPC",
            Self::HttpJson => "HTTP+JSON",
        }
    }
}

/// An A2A version on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireVersion {
    /// A2A 1.0: `SendMessage`, `TASK_STATE_*`, `{"task": …}` results.
    V1_0,
    /// A2A 0.3: `message/send`, `kind` discriminators, lower-case states.
    V0_3,
}

/// The operations the gateway calls on an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// SendMessage / `message/send`.
    Send,
    /// SendStreamingMessage / `message/stream`.
    Stream,
    /// GetTask / `tasks/get`.
    GetTask,
    /// CancelTask / `tasks/cancel`.
    Cancel,
    /// SubscribeToTask / `tasks/resubscribe`.
    Subscribe,
}

impl WireVersion {
    /// The `A2A-Version` header value.
    pub fn header(self) -> &'static str {
        match self {
            Self::V1_0 => "1.0",
            Self::V0_3 => "0.3",
        }
    }

    /// The JSON-RPC method name of `m`.
    pub fn method(self, m: Method) -> &'static str {
        match (self, m) {
            (Self::V1_0, Method::Send) => "SendMessage",
            (Self::V1_0, Method::Stream) => "SendStreamingMessage",
            (Self::V1_0, Method::GetTask) => "GetTask",
            (Self::V1_0, Method::Cancel) => "CancelTask",
            (Self::V1_0, Method::Subscribe) => "SubscribeToTask",
            (Self::V0_3, Method::Send) => "message/send",
            (Self::V0_3, Method::Stream) => "message/stream",
            (Self::V0_3, Method::GetTask) => "tasks/get",
            (Self::V0_3, Method::Cancel) => "tasks/cancel",
            (Self::V0_3, Method::Subscribe) => "tasks/resubscribe",
        }
    }

    /// The params of a send (blocking or streaming) of `message`.
    pub fn send_params(self, message: &Message) -> Value {
        let m = serde_json::to_value(message).unwrap_or_default();
        match self {
            Self::V1_0 => json!({ "message": m }),
            Self::V0_3 => json!({
                "message": v03::message_to_v03(m),
                "configuration": { "blocking": true },
            }),
        }
    }

    /// The params of GetTask, CancelTask and SubscribeToTask of the agent's task `id`.
    pub fn task_params(self, id: &str) -> Value {
        json!({ "id": id })
    }

    /// A send result or stream event as a 1.0 [`StreamResponse`].
    ///
    /// # Errors
    /// A readable reason when it is none of a task, a message or a task update.
    pub fn event(self, result: Value) -> Result<StreamResponse, String> {
        let v1 = match self {
            Self::V1_0 => result,
            Self::V0_3 => v03::event_to_v1(result)?,
        };
        serde_json::from_value(v1)
            .map_err(|e| format!("answered something that is not an A2A event: {e}"))
    }

    /// A GetTask or CancelTask result as a [`Task`].
    ///
    /// # Errors
    /// A readable reason when it is not a task.
    pub fn task(self, result: Value) -> Result<Task, String> {
        let v1 = match self {
            Self::V1_0 => result,
            Self::V0_3 => v03::task_to_v1(result)?,
        };
        serde_json::from_value(v1).map_err(|e| format!("is not an A2A task: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::TaskState;

    #[test]
    fn reads_both_versions() {
        let v1 = json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}});
        assert_eq!(
            WireVersion::V1_0.event(v1).unwrap().state(),
            Some(TaskState::Working)
        );
        let v03 =
            json!({"kind": "task", "id": "t", "contextId": "c", "status": {"state": "working"}});
        assert_eq!(
            WireVersion::V0_3.event(v03).unwrap().state(),
            Some(TaskState::Working)
        );
        assert!(WireVersion::V1_0.event(json!("garbage")).is_err());
        let m = crate::executor::new_user_text_message("hi");
        let p = WireVersion::V0_3.send_params(&m);
        assert_eq!(p["message"]["kind"], "message");
        assert_eq!(p["message"]["parts"][0]["kind"], "text");
    }
}
