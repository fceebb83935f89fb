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

    /// [`recv`](Self::recv) without unboxing: a future awaiting it holds a pointer
    /// where `recv`'s output is a whole event (the task driver awaits it in a
    /// `select!` whose output its future keeps).
    pub(crate) async fn recv_boxed(&mut self) -> Option<Box<StreamResponse>> {
        self.rx.recv().await
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
    /// TaskArtifactUpdateEvent), waiting for room. Like any future it does nothing
    /// until polled; events are queued in the order their futures are first polled.
    ///
    /// When the queue has room (the usual case: the handler keeps up) the first poll
    /// queues the event and is ready; only a full queue makes a waiting future, boxed
    /// (and polled at once, so it takes its place among the waiters). So the future an
    /// executor awaits is a few words whatever the event: every future that can await
    /// it (held for as long as the executor's task lives) is sized by it.
    ///
    /// # Errors
    /// [`QueueClosed`] once the handler no longer accepts events for this task.
    pub fn enqueue_event(
        &self,
        event: impl Into<StreamResponse>,
    ) -> impl Future<Output = Result<(), QueueClosed>> + Send + '_ {
        let mut event = Some(Box::new(event.into()));
        let mut waiting = None;
        std::future::poll_fn(move |cx| {
            if let Some(ev) = event.take() {
                match self.tx.try_send(ev) {
                    Ok(()) => return std::task::Poll::Ready(Ok(())),
                    Err(mpsc::error::TrySendError::Closed(_)) => {
                        return std::task::Poll::Ready(Err(QueueClosed));
                    }
                    Err(mpsc::error::TrySendError::Full(ev)) => {
                        waiting = Some(Box::pin(self.send_boxed(ev)));
                    }
                }
            }
            match waiting.as_mut() {
                Some(send) => send.as_mut().poll(cx),
                // Polled again after it returned Ready(Ok) at once.
                None => std::task::Poll::Ready(Ok(())),
            }
        })
    }

    async fn send_boxed(&self, event: Box<StreamResponse>) -> Result<(), QueueClosed> {
        self.tx.send(event).await.map_err(|_| QueueClosed)
    }

    /// Whether the handler still accepts events.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{TaskState, TaskStatus, TaskStatusUpdateEvent};
    use futures::FutureExt;

    fn status(n: usize) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: format!("t{n}"),
            context_id: "c".into(),
            status: TaskStatus::new(TaskState::Working),
            metadata: None,
        })
    }

    #[tokio::test]
    async fn a_full_queue_waits_for_room_and_keeps_the_order() {
        let (queue, mut rx) = EventQueue::bounded(2);
        // Nothing is queued before a future is polled, nor by one dropped unpolled.
        drop(queue.enqueue_event(status(9)));
        let second = queue.enqueue_event(status(1));
        let first = queue.enqueue_event(status(0));
        assert!(rx.try_recv().is_err());
        first.await.unwrap();
        second.await.unwrap();
        assert_eq!(rx.try_recv().unwrap().task_id(), Some("t0"));
        queue.enqueue_event(status(2)).await.unwrap();
        // Full: the third waits until the handler reads.
        let mut third = Box::pin(queue.enqueue_event(status(3)));
        assert!((&mut third).now_or_never().is_none());
        assert_eq!(rx.try_recv().unwrap().task_id(), Some("t1"));
        // The room that read made is the waiting third's: a later event cannot take it.
        let mut fourth = Box::pin(queue.enqueue_event(status(4)));
        assert!((&mut fourth).now_or_never().is_none());
        third.await.unwrap();
        assert_eq!(rx.try_recv().unwrap().task_id(), Some("t2"));
        fourth.await.unwrap();
        for want in ["t3", "t4"] {
            assert_eq!(rx.recv().await.unwrap().task_id(), Some(want));
        }
        // Closed while one waits, and closed before: both fail, nothing is queued.
        let mut full = Box::pin(queue.enqueue_event(status(5)));
        queue.enqueue_event(status(6)).await.unwrap();
        queue.enqueue_event(status(7)).await.unwrap();
        assert!((&mut full).now_or_never().is_none());
        rx.close();
        assert_eq!(full.await, Err(QueueClosed));
        assert_eq!(queue.enqueue_event(status(8)).await, Err(QueueClosed));
        for want in ["t6", "t7"] {
            assert_eq!(rx.recv().await.unwrap().task_id(), Some(want));
        }
        assert!(rx.recv().await.is_none());
    }
}
