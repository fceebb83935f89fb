//! Streaming events and response unions (spec §4.2, §3.1.2).

use serde::{Deserialize, Serialize};

use super::Metadata;
use super::task::{Artifact, Message, Task, TaskStatus};

/// A change of a task's status (spec §4.2.1). The 0.3 `final` flag is gone: the
/// stream closing signals the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    /// The task.
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// The task's context.
    #[serde(alias = "context_id")]
    pub context_id: String,
    /// The new status.
    pub status: TaskStatus,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A new artifact or a chunk of one (spec §4.2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    /// The task.
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// The task's context.
    #[serde(alias = "context_id")]
    pub context_id: String,
    /// The artifact, or the parts of it this chunk adds.
    pub artifact: Artifact,
    /// `true`: append these parts to the artifact with the same id sent earlier.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    /// `true`: this is the artifact's last chunk.
    #[serde(
        default,
        alias = "last_chunk",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub last_chunk: bool,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// One item of a stream, a webhook body, or an executor's output (spec §3.2.3):
/// `{"task":…}`, `{"message":…}`, `{"statusUpdate":…}` or `{"artifactUpdate":…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    /// A task snapshot.
    Task(Task),
    /// A message (a Message-only response).
    Message(Message),
    /// A status change.
    #[serde(alias = "status_update")]
    StatusUpdate(TaskStatusUpdateEvent),
    /// An artifact or artifact chunk.
    #[serde(alias = "artifact_update")]
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl StreamResponse {
    /// The task id this event belongs to, if any.
    pub fn task_id(&self) -> Option<&str> {
        match self {
            Self::Task(t) => Some(&t.id),
            Self::Message(m) => m.task_id.as_deref(),
            Self::StatusUpdate(e) => Some(&e.task_id),
            Self::ArtifactUpdate(e) => Some(&e.task_id),
        }
    }

    /// The task state this event sets, if it sets one.
    pub fn state(&self) -> Option<super::TaskState> {
        match self {
            Self::Task(t) => Some(t.status.state),
            Self::StatusUpdate(e) => Some(e.status.state),
            _ => None,
        }
    }
}

impl From<Task> for StreamResponse {
    fn from(v: Task) -> Self {
        Self::Task(v)
    }
}
impl From<Message> for StreamResponse {
    fn from(v: Message) -> Self {
        Self::Message(v)
    }
}
impl From<TaskStatusUpdateEvent> for StreamResponse {
    fn from(v: TaskStatusUpdateEvent) -> Self {
        Self::StatusUpdate(v)
    }
}
impl From<TaskArtifactUpdateEvent> for StreamResponse {
    fn from(v: TaskArtifactUpdateEvent) -> Self {
        Self::ArtifactUpdate(v)
    }
}

/// The result of SendMessage: `{"task":…}` or `{"message":…}` (spec §3.1.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    /// The task the message created or continued.
    Task(Task),
    /// A direct reply without a task.
    Message(Message),
}
