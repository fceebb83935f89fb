//! The store conformance suite: every [`TaskStore`] backend must pass [`run_all`]
//! unchanged. Each check uses fresh random tenants and ids, so the suite can run
//! repeatedly against the same database.
//!
//! - [`tasks`]: the event log, snapshots, scopes, lists, recovery reads, the purge.
//! - [`push`]: webhook configs, the outbox written with the events, claims and
//!   settlements, the signing key ([`crate::store::PushStore`]).
//!
//! Each backend runs it from its own tests (the memory store and SQLite in memory in
//! their modules; a SQLite file and PostgreSQL in `tests/stores.rs`).

pub mod push;
pub mod tasks;

use crate::executor::{new_agent_text_message, new_user_text_message};
use crate::protocol::time::Timestamp;
use crate::protocol::{
    Artifact, Part, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use crate::store::TaskStore;

/// Runs every check against `store`: the task cases, then the push cases. Panics on the
/// first failure.
pub async fn run_all(store: &dyn TaskStore) {
    tasks::run_all(store).await;
    push::run_all(store).await;
}

/// A SUBMITTED task with one user message, its status stamped `at`.
pub fn task_at(id: &str, context_id: &str, at: Timestamp) -> Task {
    let mut msg = new_user_text_message("hello");
    msg.task_id = Some(id.into());
    msg.context_id = Some(context_id.into());
    Task {
        id: id.into(),
        context_id: context_id.into(),
        status: TaskStatus {
            state: TaskState::Submitted,
            message: None,
            timestamp: Some(at),
        },
        artifacts: None,
        history: Some(vec![msg]),
        metadata: None,
    }
}

/// A status update of task `id` to `state`, with an agent message, stamped `at`.
pub fn status(id: &str, ctx: &str, state: TaskState, at: Timestamp) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: id.into(),
        context_id: ctx.into(),
        status: TaskStatus {
            state,
            message: Some(new_agent_text_message(
                format!("now {state}"),
                Some(ctx),
                Some(id),
            )),
            timestamp: Some(at),
        },
        metadata: None,
    })
}

/// An update of artifact `out` of task `id` with one text part.
pub fn chunk(id: &str, ctx: &str, text: &str, append: bool, last: bool) -> StreamResponse {
    StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
        task_id: id.into(),
        context_id: ctx.into(),
        artifact: Artifact {
            artifact_id: "out".into(),
            name: Some("result".into()),
            description: None,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: vec![],
        },
        append,
        last_chunk: last,
        metadata: None,
    })
}
