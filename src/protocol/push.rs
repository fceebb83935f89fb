//! Push-notification config messages (spec §3.1.7-3.1.10, §4.3; proto
//! `TaskPushNotificationConfig`, `AuthenticationInfo` and the Get/List/Delete requests).

use serde::{Deserialize, Serialize};

use super::params::opt_i32;

/// Credentials a webhook call presents (proto `AuthenticationInfo`): sent as
/// `Authorization: <scheme> <credentials>`. A2A 0.3 clients send `schemes` (a list);
/// its first entry is taken.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationInfo {
    /// HTTP authentication scheme, such as `Bearer` (case kept as given).
    #[serde(default)]
    pub scheme: String,
    /// The A2A 0.3 form of `scheme`.
    #[serde(default, skip_serializing)]
    pub schemes: Vec<String>,
    /// The credentials for that scheme (a secret: redacted in Get and List answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

impl std::fmt::Debug for AuthenticationInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthenticationInfo")
            .field("scheme", &self.scheme)
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// A webhook registered for a task (proto `TaskPushNotificationConfig`, spec §4.3).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    /// Opaque routing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Id of this registration (chosen by the server when empty).
    #[serde(default)]
    pub id: String,
    /// The task (`task_id` accepted).
    #[serde(default, alias = "task_id")]
    pub task_id: String,
    /// Where events are posted.
    #[serde(default)]
    pub url: String,
    /// Token echoed with every call (`X-A2A-Notification-Token`); a secret, redacted in
    /// Get and List answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Credentials the calls carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

impl std::fmt::Debug for TaskPushNotificationConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskPushNotificationConfig")
            .field("id", &self.id)
            .field("task_id", &self.task_id)
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("authentication", &self.authentication)
            .finish()
    }
}

/// GetTaskPushNotificationConfig and DeleteTaskPushNotificationConfig request (spec
/// §3.1.8, §3.1.10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfigRequest {
    /// Opaque routing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The task.
    #[serde(default, alias = "task_id")]
    pub task_id: String,
    /// The registration.
    #[serde(default)]
    pub id: String,
}

/// ListTaskPushNotificationConfigs request (spec §3.1.9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTaskPushNotificationConfigsRequest {
    /// Opaque routing key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The task.
    #[serde(default, alias = "task_id")]
    pub task_id: String,
    /// Most registrations per page (1..=100, default 50).
    #[serde(
        default,
        alias = "page_size",
        deserialize_with = "opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub page_size: Option<i32>,
    /// Cursor from the previous page (the last id it held).
    #[serde(default, alias = "page_token", skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
}

/// ListTaskPushNotificationConfigs response: one page, ordered by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTaskPushNotificationConfigsResponse {
    /// The registrations, secrets redacted.
    pub configs: Vec<TaskPushNotificationConfig>,
    /// Cursor for the next page; empty on the last.
    pub next_page_token: String,
}
