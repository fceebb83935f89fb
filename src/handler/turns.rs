//! Turns: one executor run per user message, and how a turn ends while more
//! messages wait.
//!
//! A message sent with the `taskId` of a task that is being worked on is accepted at
//! once: the driver records it in the task's log (its history) and queues it as the
//! task's next turn. The task must not settle while a message waits for its turn,
//! so when the running turn reports COMPLETED or INPUT_REQUIRED and a message is
//! queued, the driver records that status as WORKING, keeps its status message, and
//! marks it with [`TURN_ENDED_METADATA`] in the event's metadata:
//! `{"messageId": <the message whose turn ended>, "state": <the state it reported>}`.
//! The next queued message then becomes the executor's next run on the task.
//!
//! Callers follow their own turn: a blocking SendMessage returns, and its stream
//! ends, at the first event that settles the task (terminal, INPUT_REQUIRED,
//! AUTH_REQUIRED for blocking calls) or that ends the turn of its message.

use serde_json::json;

use crate::protocol::{StreamResponse, TaskState};

/// The metadata key of a status update that ends a turn while another message
/// waits (see the module docs).
pub const TURN_ENDED_METADATA: &str = "a2aGatewayTurnEnded";

/// Whether a turn ending in `state` is held open (recorded as WORKING) when a
/// message waits: the states that would otherwise settle the task and leave the
/// queued message unanswered or refused. FAILED, REJECTED and CANCELED end the task
/// as they are; AUTH_REQUIRED leaves the turn running (the agent waits for the
/// client's credentials).
pub(crate) fn held_open(state: TaskState) -> bool {
    matches!(state, TaskState::Completed | TaskState::InputRequired)
}

/// Rewrites a status update that ends the turn of `message_id` in a settling state
/// into a WORKING update marked with [`TURN_ENDED_METADATA`]. Returns the state the
/// turn reported when it did so; other events are returned unchanged.
pub(crate) fn hold_open(
    ev: StreamResponse,
    message_id: &str,
) -> (StreamResponse, Option<TaskState>) {
    let StreamResponse::StatusUpdate(mut e) = ev else {
        return (ev, None);
    };
    let ended = e.status.state;
    if !held_open(ended) {
        return (StreamResponse::StatusUpdate(e), None);
    }
    e.status.state = TaskState::Working;
    e.metadata.get_or_insert_with(Default::default).insert(
        TURN_ENDED_METADATA.to_owned(),
        json!({"messageId": message_id, "state": ended.as_str()}),
    );
    (StreamResponse::StatusUpdate(e), Some(ended))
}

/// Whether `ev` ends the turn of the message `message_id` (an update marked by
/// [`hold_open`] for that message).
pub(crate) fn ends_turn_of(ev: &StreamResponse, message_id: &str) -> bool {
    let StreamResponse::StatusUpdate(e) = ev else {
        return false;
    };
    e.metadata
        .as_ref()
        .and_then(|m| m.get(TURN_ENDED_METADATA))
        .and_then(|v| v.get("messageId"))
        .and_then(|v| v.as_str())
        .is_some_and(|id| id == message_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{TaskStatus, TaskStatusUpdateEvent};

    fn status(state: TaskState) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus::new(state),
            metadata: None,
        })
    }

    #[test]
    fn completed_and_input_required_are_held_open_and_marked() {
        for s in [TaskState::Completed, TaskState::InputRequired] {
            let (ev, ended) = hold_open(status(s), "m1");
            assert_eq!(ended, Some(s));
            assert_eq!(ev.state(), Some(TaskState::Working));
            assert!(ends_turn_of(&ev, "m1"));
            assert!(!ends_turn_of(&ev, "m2"));
        }
        for s in [
            TaskState::Failed,
            TaskState::Rejected,
            TaskState::Canceled,
            TaskState::AuthRequired,
            TaskState::Working,
        ] {
            let (ev, ended) = hold_open(status(s), "m1");
            assert_eq!((ev.state(), ended), (Some(s), None));
            assert!(!ends_turn_of(&ev, "m1"));
        }
    }
}
