//! EventQueue: the bounded channel from an executor to the request handler.

use tokio::sync::mpsc;

use crate::protocol::StreamResponse;

/// The handler stopped reading: the task was canceled, finished or the server is
/// shutting down. An executor that sees this should return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("event queue closed: the task is no longer accepting events")]
pub struct QueueClosed;

/// Where an executor publishes its events. Bounded: `enqueue_event` waits while the
/// handler is persisting earlier events, so a fast executor cannot outrun the store.
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct EventQueue {
    tx: mpsc::Sender<StreamResponse>,
}

impl EventQueue {
    /// Default capacity in events.
    pub const DEFAULT_CAPACITY: usize = 64;

    /// A queue holding at most `capacity` unprocessed events, and its receiving end.
    pub fn bounded(capacity: usize) -> (Self, mpsc::Receiver<StreamResponse>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Self { tx }, rx)
    }

    /// Publishes one event (a Task, Message, TaskStatusUpdateEvent or
    /// TaskArtifactUpdateEvent), waiting for room.
    ///
    /// # Errors
    /// [`QueueClosed`] once the handler no longer accepts events for this task.
    pub async fn enqueue_event(&self, event: impl Into<StreamResponse>) -> Result<(), QueueClosed> {
        self.tx.send(event.into()).await.map_err(|_| QueueClosed)
    }

    /// Whether the handler still accepts events.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}
