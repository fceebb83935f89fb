//! Request and response messages of the A2A operations (spec §3.1, proto `*Request`).
//!
//! Integer fields are kept signed where the spec asks servers to reject negative
//! values, so validation can name the field instead of failing deserialization.

use serde::{Deserialize, Serialize};

use super::Metadata;
use super::task::{Message, Task, TaskState};
use super::time::{self, Timestamp};

/// SendMessage / SendStreamingMessage request (spec §3.1.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    /// Opaque routing key (spec §8.3.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The message; 0.3 clients may also send it as `request`.
    #[serde(alias = "request")]
    pub message: Message,
    /// Options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// Options of a SendMessage request (spec §3.2.2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    /// Media types the client accepts in output.
    #[serde(
        default,
        alias = "accepted_output_modes",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub accepted_output_modes: Vec<String>,
    /// An inline push notification config (0.3 name: `pushNotificationConfig`).
    #[serde(
        default,
        alias = "task_push_notification_config",
        alias = "pushNotificationConfig",
        alias = "push_notification_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub task_push_notification_config: Option<serde_json::Value>,
    /// At most this many recent history messages in the result; negative is invalid.
    #[serde(
        default,
        alias = "history_length",
        deserialize_with = "opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
    /// `true`: return as soon as the task exists instead of waiting for it to settle.
    #[serde(
        default,
        alias = "return_immediately",
        skip_serializing_if = "Option::is_none"
    )]
    pub return_immediately: Option<bool>,
    /// The 0.3 form of the same choice, inverted (`blocking: false` = return at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
}

impl SendMessageConfiguration {
    /// Whether the caller asked not to wait (1.0 `returnImmediately`, or 0.3 `blocking: false`).
    pub fn returns_immediately(&self) -> bool {
        self.return_immediately.unwrap_or(false) || self.blocking == Some(false)
    }
}

/// GetTask request (spec §3.1.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    /// Opaque routing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The task id.
    pub id: String,
    /// At most this many recent history messages; negative is invalid.
    #[serde(
        default,
        alias = "history_length",
        deserialize_with = "opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
}

/// ListTasks request (spec §3.1.4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    /// Opaque routing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Only tasks of this context.
    #[serde(default, alias = "context_id", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// Only tasks in this state (`TASK_STATE_UNSPECIFIED` = any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskState>,
    /// Page size, 1..=100, default 50.
    #[serde(
        default,
        alias = "page_size",
        deserialize_with = "opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub page_size: Option<i32>,
    /// Opaque cursor from a previous response's `nextPageToken`.
    #[serde(default, alias = "page_token", skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    /// At most this many recent history messages per task; negative is invalid.
    #[serde(
        default,
        alias = "history_length",
        deserialize_with = "opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
    /// Only tasks whose status timestamp is at or after this time.
    #[serde(
        default,
        alias = "status_timestamp_after",
        with = "time::opt_millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub status_timestamp_after: Option<Timestamp>,
    /// Include `artifacts` (default false: the key is absent).
    #[serde(
        default,
        alias = "include_artifacts",
        skip_serializing_if = "Option::is_none"
    )]
    pub include_artifacts: Option<bool>,
}

/// ListTasks response (spec §3.1.4). All four fields are always present.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    /// One page of tasks, newest status first.
    pub tasks: Vec<Task>,
    /// Cursor for the next page; `""` on the last page.
    pub next_page_token: String,
    /// The page size used.
    pub page_size: i32,
    /// Number of tasks matching the filters, over all pages.
    pub total_size: i32,
}

/// CancelTask request (spec §3.1.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelTaskRequest {
    /// Opaque routing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The task id.
    pub id: String,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// SubscribeToTask request (spec §3.1.6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeToTaskRequest {
    /// Opaque routing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The task id.
    pub id: String,
}

/// GetExtendedAgentCard request (spec §3.1.11).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetExtendedAgentCardRequest {
    /// Opaque routing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// ProtoJSON int32: a JSON number or a string holding one (`5` or `"5"`), or null.
pub(crate) fn opt_i32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    use serde::de::Error;
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Number(n)) => n
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("{n} is not a 32-bit integer"))),
        Some(serde_json::Value::String(s)) => s
            .trim()
            .parse::<i32>()
            .map(Some)
            .map_err(|_| D::Error::custom(format!("{s:?} is not a 32-bit integer"))),
        Some(other) => Err(D::Error::custom(format!(
            "expected an integer, got {other}"
        ))),
    }
}
