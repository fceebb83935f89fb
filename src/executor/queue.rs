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
///
/// Events travel boxed: a channel allocates its slots in blocks of 32 whatever its
/// capacity, and a boxed slot is 8 bytes where a `StreamResponse` is about 330, so a
/// running task's first block is about 0.3 KB instead of 10.5 KB.
#[derive(Debug, Clone)]
pub struct EventQueue {
    tx: mpsc::Sender<Box<StreamResponse>>,
}

/// The receiving end of an [`EventQueue`], read by the request handler's task driver
/// (and by tests of an executor).
#[derive(Debug)]
pub struct EventReceiver {
    rx: mpsc::Receiver<Box<StreamResponse>>,
}

impl EventReceiver {
    /// The next event, waiting for one; `None` once every [`EventQueue`] is dropped
    /// (or the receiver was closed) and nothing is left.
    pub async fn recv(&mut self) -> Option<StreamResponse> {
        self.rx.recv().await.map(|b| *b)
    }

    /// The next event if one is queued now.
    ///
    /// # Errors
    /// [`mpsc::error::TryRecvError::Empty`] when none is queued,
    /// [`mpsc::error::TryRecvError::Disconnected`] when none will come.
    pub fn try_recv(&mut self) -> Result<StreamResponse, mpsc::error::TryRecvError> {
        self.rx.try_recv().map(|b| *b)
    }

    /// Stops accepting events: [`EventQueue::enqueue_event`] fails with [`QueueClosed`]
    /// from now on; what is queued can still be read.
    pub fn close(&mut self) {
        self.rx.close();
    }
}

impl EventQueue {
    /// Default capacity in events.
    pub const DEFAULT_CAPACITY: usize = 64;

    /// A queue holding at most `capacity` unprocessed events, and its receiving end.
    pub fn bounded(capacity: usize) -> (Self, EventReceiver) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Self { tx }, EventReceiver { rx })
    }

    /// Publishes one event (a Task, Message, TaskStatusUpdateEvent or
    /// TaskArtifactUpdateEvent), waiting for room.
    ///
    /// The event is boxed before the returned future is made, so that future holds a
    /// pointer, not the event (an executor awaiting it keeps it for as long as the
    /// queue is full, and every future that can await it is sized by it).
    ///
    /// # Errors
    /// [`QueueClosed`] once the handler no longer accepts events for this task.
    pub fn enqueue_event(
        &self,
        event: impl Into<StreamResponse>,
    ) -> impl Future<Output = Result<(), QueueClosed>> + Send + '_ {
        self.send_boxed(Box::new(event.into()))
    }

    async fn send_boxed(&self, event: Box<StreamResponse>) -> Result<(), QueueClosed> {
        self.tx.send(event).await.map_err(|_| QueueClosed)
    }

    /// Whether the handler still accepts events.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}
