//! The driver's vocabulary: the commands a task's driver takes, the answers it gives,
//! the handle they travel through and the answers the handler gives without a driver
//! (a task that already ended). The handler's operations and the driver's loop
//! ([`super`]) both build on these words; nothing here carries a command out.

use std::sync::Arc;

use futures::channel::mpsc;
use tokio::sync::{broadcast, oneshot};

use crate::error::A2aError;
use crate::executor::RequestContext;
use crate::protocol::time::Timestamp;
use crate::protocol::{Message, Task, TaskState};
use crate::store::StoredEvent;

/// What the driver publishes on a task's bus: the events of one store write, in
/// sequence order (consecutive numbers), shared by every subscriber. One bus message per
/// write, not per event: a burst of events costs one send and one wake-up per
/// subscriber, and the bus's slots ([`HandlerConfig::subscriber_buffer`]) count writes.
///
/// [`HandlerConfig::subscriber_buffer`]: crate::handler::HandlerConfig::subscriber_buffer
pub(crate) type EventGroup = Arc<Vec<Arc<StoredEvent>>>;

pub(crate) use crate::scope::TaskKey;

/// A command to a task's driver.
pub(crate) enum Command {
    Run(Box<Run>),
    Cancel(oneshot::Sender<Result<Task, A2aError>>),
    /// Close an abandoned or stalled task (see [`Expire`]). Boxed, like `Run`, so that
    /// a `Command` is 16 bytes (each message is a node of the channel).
    Expire(Box<Expire>),
}

/// Closes the task FAILED with `reason` if it is still in one of `states` with a
/// status timestamp before `older_than` and no message is being processed here. The
/// answer says whether it was closed. Going through the driver keeps it the single
/// writer: a follow-up that reaches the driver first wins (the task is no longer
/// idle), one that comes after finds a terminal task and is refused like any message
/// to one. Used for abandoned INPUT_REQUIRED tasks and for SUBMITTED/WORKING tasks
/// that stalled because the instance running them stopped.
pub(crate) struct Expire {
    pub states: &'static [TaskState],
    pub older_than: Timestamp,
    pub reason: String,
    pub reply: oneshot::Sender<Result<bool, A2aError>>,
}

/// One message to process.
pub(crate) struct Run {
    /// Boxed: a `RequestContext` is about 540 bytes, and the driver's future would
    /// otherwise hold it in several of its states for every open task.
    pub ctx: Box<RequestContext>,
    pub permit: crate::handler::run_limits::RunPermit,
    /// The caller waiting for the run's start; `None` once it was answered (a
    /// message queued behind a running turn).
    pub reply: Option<oneshot::Sender<Result<RunStart, A2aError>>>,
    /// The user message is already in the task's log (recorded when it was queued).
    pub recorded: bool,
}

/// What a caller of SendMessage gets once the run has produced its first event.
pub(crate) enum RunStart {
    /// A Message-only response; nothing is stored.
    Message(Message),
    /// The task exists: its snapshot at `seq`, and the bus subscribed before `seq`
    /// was published. `fresh`: the snapshot is this run's first event. `queued`: the
    /// message was recorded behind a running turn and waits for its own; the
    /// snapshot (WORKING, the message in its history) is current.
    Task {
        snapshot: Task,
        seq: u64,
        events: broadcast::Receiver<EventGroup>,
        fresh: bool,
        queued: bool,
    },
}

/// The handle kept in the registry. Commands go through a `futures` unbounded
/// channel: a node per message and under 100 bytes of state, where tokio's
/// preallocates a block of 32 slots (about 1 KB measured for every open task, for a
/// channel that carries a message or two in a task's life).
#[derive(Clone)]
pub(crate) struct Handle {
    pub cmd: mpsc::UnboundedSender<Command>,
    pub bus: broadcast::Sender<EventGroup>,
}

/// The refusal of a message to a task in terminal `state`.
pub(crate) fn terminal_refusal(task_id: &str, state: TaskState) -> A2aError {
    A2aError::UnsupportedOperation(format!(
        "task {task_id} is in terminal state {state} and accepts no more messages"
    ))
}

/// CancelTask's answer for a task that has already ended: the task itself when it
/// is CANCELED (cancel is idempotent), TaskNotCancelable when it ended otherwise.
pub(crate) fn already_ended(task: Task) -> Result<Task, A2aError> {
    if task.status.state == TaskState::Canceled {
        return Ok(task);
    }
    Err(A2aError::TaskNotCancelable {
        task_id: task.id.clone(),
        state: task.status.state,
    })
}

/// The error of every operation on a driver whose store write failed: its snapshot
/// may hold events that are not in the store, so it is never shown to a client.
pub(super) fn stopped() -> A2aError {
    A2aError::internal("task driver stopped after a store failure")
}

/// Answers a command with [`stopped`] without acting on it.
pub(super) fn reject(cmd: Command) {
    match cmd {
        Command::Run(mut run) => {
            send_once(&mut run.reply, Err(stopped()));
        }
        Command::Cancel(reply) => {
            let _ = reply.send(Err(stopped()));
        }
        Command::Expire(x) => {
            let _ = x.reply.send(Err(stopped()));
        }
    }
}

/// Answers a caller once; a caller that went away is ignored.
pub(super) fn send_once<T>(slot: &mut Option<oneshot::Sender<T>>, value: T) {
    if let Some(tx) = slot.take() {
        let _ = tx.send(value);
    }
}
