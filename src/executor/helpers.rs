//! Constructors and accessors in the style of the SDKs' `a2a.helpers`.

use crate::protocol::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};

/// A new unique id: a UUID v7 (RFC 9562), hyphenated: 48 bits of Unix time in
/// milliseconds, then (as the `uuid` crate fills them) a counter that starts at a
/// random value each millisecond, and random bits. Ids made later sort later, so
/// the task and event indexes of the SQL stores grow at their right edge instead of
/// being written at random pages (a batch of new tasks dirties a few pages, not one
/// per task). An id shows when it was made and is not a secret: every task lookup
/// is scoped to its caller, so knowing another caller's task id grants nothing.
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A SUBMITTED task for a user message, using its `taskId` and `contextId` (new ids
/// where missing), with the message as the first history entry.
pub fn new_task(message: &Message) -> Task {
    Task {
        id: message.task_id.clone().unwrap_or_else(new_id),
        context_id: message.context_id.clone().unwrap_or_else(new_id),
        status: TaskStatus::new(TaskState::Submitted),
        artifacts: None,
        history: Some(vec![message.clone()]),
        metadata: None,
    }
}

/// An agent message with one text part.
pub fn new_agent_text_message(
    text: impl Into<String>,
    context_id: Option<&str>,
    task_id: Option<&str>,
) -> Message {
    new_agent_parts_message(vec![Part::text(text)], context_id, task_id)
}

/// An agent message with the given parts.
pub fn new_agent_parts_message(
    parts: Vec<Part>,
    context_id: Option<&str>,
    task_id: Option<&str>,
) -> Message {
    Message {
        message_id: new_id(),
        context_id: context_id.map(str::to_owned),
        task_id: task_id.map(str::to_owned),
        role: Role::Agent,
        parts,
        metadata: None,
        extensions: Vec::new(),
        reference_task_ids: Vec::new(),
    }
}

/// A user message with one text part (for clients and tests).
pub fn new_user_text_message(text: impl Into<String>) -> Message {
    Message {
        role: Role::User,
        ..new_agent_text_message(text, None, None)
    }
}

/// An artifact with a new id, a name and one text part.
pub fn new_text_artifact(name: impl Into<String>, text: impl Into<String>) -> Artifact {
    Artifact {
        artifact_id: new_id(),
        name: Some(name.into()),
        description: None,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: Vec::new(),
    }
}

/// The text parts of `message` joined with `delimiter`.
pub fn get_message_text(message: &Message, delimiter: &str) -> String {
    get_parts_text(&message.parts, delimiter)
}

/// The text parts of `artifact` joined with `delimiter`.
pub fn get_artifact_text(artifact: &Artifact, delimiter: &str) -> String {
    get_parts_text(&artifact.parts, delimiter)
}

fn get_parts_text(parts: &[Part], delimiter: &str) -> String {
    parts
        .iter()
        .filter_map(Part::as_text)
        .collect::<Vec<_>>()
        .join(delimiter)
}
