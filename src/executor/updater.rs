//! TaskUpdater: typed helpers that publish one task's events.

use std::sync::Arc;

use crate::protocol::{
    Message, Part, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};

use super::{EventQueue, QueueClosed, RequestContext, helpers};

/// Publishes the events of one task to an [`EventQueue`]. Cheap to clone: clones
/// share one copy of the ids and the user's message.
#[derive(Debug, Clone)]
pub struct TaskUpdater {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    queue: EventQueue,
    task_id: String,
    context_id: String,
    initial_message: Option<Message>,
}

impl TaskUpdater {
    /// An updater for `task_id` in `context_id`.
    pub fn new(
        queue: EventQueue,
        task_id: impl Into<String>,
        context_id: impl Into<String>,
    ) -> Self {
        Self::with(queue, task_id.into(), context_id.into(), None)
    }

    /// An updater for the task of `context`, remembering the user's message so that
    /// [`submit`](Self::submit) puts it in the task's history.
    pub fn from_context(context: &RequestContext, queue: EventQueue) -> Self {
        Self::with(
            queue,
            context.task_id.clone(),
            context.context_id.clone(),
            Some(context.message.clone()),
        )
    }

    fn with(
        queue: EventQueue,
        task_id: String,
        context_id: String,
        initial_message: Option<Message>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                queue,
                task_id,
                context_id,
                initial_message,
            }),
        }
    }

    /// The task id.
    pub fn task_id(&self) -> &str {
        &self.shared.task_id
    }

    /// The context id.
    pub fn context_id(&self) -> &str {
        &self.shared.context_id
    }

    /// Publishes the Task itself in SUBMITTED state (with the user's message as
    /// history when built by [`from_context`](Self::from_context)).
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn submit(&self) -> Result<(), QueueClosed> {
        let task = Task {
            id: self.shared.task_id.clone(),
            context_id: self.shared.context_id.clone(),
            status: TaskStatus::new(TaskState::Submitted),
            artifacts: None,
            history: self.shared.initial_message.clone().map(|m| vec![m]),
            metadata: None,
        };
        self.shared.queue.enqueue_event(task).await
    }

    /// Publishes a status update with `state` and an optional agent message.
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn update_status(
        &self,
        state: TaskState,
        message: Option<Message>,
    ) -> Result<(), QueueClosed> {
        let event = TaskStatusUpdateEvent {
            task_id: self.shared.task_id.clone(),
            context_id: self.shared.context_id.clone(),
            status: TaskStatus {
                state,
                message,
                timestamp: Some(crate::protocol::time::now()),
            },
            metadata: None,
        };
        self.shared.queue.enqueue_event(event).await
    }

    /// WORKING.
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn start_work(&self, message: Option<Message>) -> Result<(), QueueClosed> {
        self.update_status(TaskState::Working, message).await
    }

    /// COMPLETED (terminal).
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn complete(&self, message: Option<Message>) -> Result<(), QueueClosed> {
        self.update_status(TaskState::Completed, message).await
    }

    /// FAILED (terminal).
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn failed(&self, message: Option<Message>) -> Result<(), QueueClosed> {
        self.update_status(TaskState::Failed, message).await
    }

    /// CANCELED (terminal).
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn cancel(&self, message: Option<Message>) -> Result<(), QueueClosed> {
        self.update_status(TaskState::Canceled, message).await
    }

    /// REJECTED (terminal).
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn reject(&self, message: Option<Message>) -> Result<(), QueueClosed> {
        self.update_status(TaskState::Rejected, message).await
    }

    /// INPUT_REQUIRED (interrupted): the message should say what input is needed.
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn requires_input(&self, message: Option<Message>) -> Result<(), QueueClosed> {
        self.update_status(TaskState::InputRequired, message).await
    }

    /// AUTH_REQUIRED (interrupted): the message should say what authorization is needed.
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn requires_auth(&self, message: Option<Message>) -> Result<(), QueueClosed> {
        self.update_status(TaskState::AuthRequired, message).await
    }

    /// Publishes an artifact or a chunk of one and returns its id (a new id when
    /// `artifact_id` is `None`). `append: true` adds `parts` to the artifact with that
    /// id sent earlier; `last_chunk: true` marks its end.
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn add_artifact(
        &self,
        parts: Vec<Part>,
        artifact_id: Option<String>,
        name: Option<String>,
        append: bool,
        last_chunk: bool,
    ) -> Result<String, QueueClosed> {
        let artifact_id = artifact_id.unwrap_or_else(helpers::new_id);
        let event = TaskArtifactUpdateEvent {
            task_id: self.shared.task_id.clone(),
            context_id: self.shared.context_id.clone(),
            artifact: crate::protocol::Artifact {
                artifact_id: artifact_id.clone(),
                name,
                description: None,
                parts,
                metadata: None,
                extensions: Vec::new(),
            },
            append,
            last_chunk,
            metadata: None,
        };
        self.shared.queue.enqueue_event(event).await?;
        Ok(artifact_id)
    }

    /// Publishes a direct reply: an agent Message with `parts` instead of a task
    /// (A2A `SendMessageResponse.message`). Valid only as the run's first event for a
    /// new task: the handler then stores nothing and ends the response with it; on a
    /// task that exists it is rejected. The message carries the context id, no task id.
    ///
    /// # Errors
    /// [`QueueClosed`] when the handler no longer accepts events.
    pub async fn reply_message(&self, parts: Vec<Part>) -> Result<(), QueueClosed> {
        let message = helpers::new_agent_parts_message(parts, Some(&self.shared.context_id), None);
        self.shared.queue.enqueue_event(message).await
    }

    /// An agent message for this task (not published; pass it to a status method).
    pub fn new_agent_message(&self, parts: Vec<Part>) -> Message {
        helpers::new_agent_parts_message(
            parts,
            Some(&self.shared.context_id),
            Some(&self.shared.task_id),
        )
    }

    /// An agent text message for this task (not published).
    pub fn new_agent_text(&self, text: impl Into<String>) -> Message {
        self.new_agent_message(vec![Part::text(text)])
    }
}
