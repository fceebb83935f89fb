//! The checks of a request's own fields and of the caller, made before anything is
//! read or started: ids, the tenant, the message, `historyLength`, and the extensions
//! the card requires.

use super::request_handler::RequestHandler;
use crate::error::A2aError;
use crate::executor::CallContext;
use crate::protocol::{Message, Role};

/// A request's `historyLength` (absent: the whole history).
///
/// # Errors
/// InvalidParams for a negative one.
pub(super) fn history_length(v: Option<i32>) -> Result<Option<u32>, A2aError> {
    match v {
        Some(n) if n < 0 => Err(A2aError::InvalidParams(format!(
            "historyLength must be 0 or more, got {n}"
        ))),
        Some(n) => Ok(Some(n as u32)),
        None => Ok(None),
    }
}

/// The page size of ListTasks and ListTaskPushNotificationConfigs when the request
/// sets none.
pub(super) const DEFAULT_PAGE_SIZE: i32 = 50;
/// The largest page size those two operations take.
pub(super) const MAX_PAGE_SIZE: i32 = 100;

/// Longest id (task, context, message) a client may send, in bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// Refuses an id longer than [`MAX_ID_BYTES`] or holding a NUL character (which no SQL
/// text column stores: PostgreSQL refuses it).
pub(super) fn check_id(field: &str, id: &str) -> Result<(), A2aError> {
    if id.contains('\0') {
        return Err(A2aError::InvalidParams(format!(
            "{field} contains a NUL character"
        )));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(A2aError::InvalidParams(format!(
            "{field} is {} bytes long; ids are at most {MAX_ID_BYTES} bytes",
            id.len()
        )));
    }
    Ok(())
}

/// Refuses a caller scope whose tenant is longer than an id may be, or holds the
/// separator of agent and tenant in ids hashed from a scope and in tenant keys stored
/// before migration 0007 ([`crate::scope::AGENT_SEPARATOR`]).
pub(super) fn check_call(call: &CallContext) -> Result<(), A2aError> {
    if call.tenant.contains(crate::scope::AGENT_SEPARATOR) {
        return Err(A2aError::InvalidParams(
            "tenant contains the control character U+001F".into(),
        ));
    }
    check_id("tenant", &call.tenant)
}

/// The string when it is set and not empty (proto3 has no unset string: an empty one
/// is unset).
pub(super) fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

/// Refuses a message without an id or parts, not from the user, or with an id
/// [`check_id`] refuses.
pub(super) fn validate_message(message: &Message) -> Result<(), A2aError> {
    if message.message_id.is_empty() {
        return Err(A2aError::InvalidParams(
            "message.messageId is required".into(),
        ));
    }
    if message.role != Role::User {
        return Err(A2aError::InvalidParams(format!(
            "message.role must be ROLE_USER, got {}",
            message.role
        )));
    }
    if message.parts.is_empty() {
        return Err(A2aError::InvalidParams(
            "message.parts must contain at least one part".into(),
        ));
    }
    check_id("message.messageId", &message.message_id)?;
    check_id("message.taskId", message.task_id.as_deref().unwrap_or(""))?;
    check_id(
        "message.contextId",
        message.context_id.as_deref().unwrap_or(""),
    )?;
    for id in &message.reference_task_ids {
        check_id("message.referenceTaskIds[]", id)?;
    }
    Ok(())
}

impl RequestHandler {
    /// Refuses a task operation whose caller did not activate (`A2A-Extensions`) every
    /// extension the card marks `required` (spec §1, §3.3.4). Checked by SendMessage,
    /// SendStreamingMessage, GetTask, ListTasks, CancelTask and SubscribeToTask; not by
    /// GetExtendedAgentCard (discovery: it is where a client learns what the agent
    /// needs); the push-config operations check it too. URIs compare exactly.
    ///
    /// # Errors
    /// [`A2aError::ExtensionSupportRequired`] (-32008) naming the missing URIs.
    pub fn check_extensions(&self, call: &CallContext) -> Result<(), A2aError> {
        let missing: Vec<&str> = self
            .inner
            .config
            .required_extensions
            .iter()
            .filter(|uri| !call.requested_extensions.iter().any(|r| r == *uri))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(A2aError::ExtensionSupportRequired(format!(
            "this agent requires the extension{} {}; activate {} with the A2A-Extensions header",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            if missing.len() == 1 { "it" } else { "them" },
        )))
    }
}
