//! The executor API (the A2A SDKs' vocabulary): an [`AgentExecutor`] reads a
//! [`RequestContext`], does the work, and publishes events to an [`EventQueue`],
//! usually through a [`TaskUpdater`]. The request handler persists and fans out
//! every event; executors know nothing of HTTP or storage.

mod context;
mod helpers;
mod leases;
mod links;
mod queue;
mod updater;

pub use context::{CallContext, CallerToken, RequestContext};
pub use helpers::*;
pub use leases::{HeldLease, LeaseError, SessionLeases};
pub use links::{LinkError, UpstreamLink, UpstreamLinks};
pub use queue::{EventQueue, EventReceiver, QueueClosed};
pub use updater::TaskUpdater;

use async_trait::async_trait;

/// The error an executor returns; the task ends FAILED with its `Display` text as the
/// reason, so it must not contain secrets.
pub type ExecutorError = Box<dyn std::error::Error + Send + Sync>;

/// The agent logic behind the server.
///
/// Contract (as in the official SDKs):
/// - Message-only: enqueue exactly one `Message` and return.
/// - Task lifecycle: enqueue the `Task` first (for a new task; [`TaskUpdater::submit`]
///   does it), then status and artifact updates, ending with a terminal state
///   (COMPLETED, FAILED, CANCELED, REJECTED) or an interrupted one (INPUT_REQUIRED,
///   AUTH_REQUIRED), then return. A follow-up message to an interrupted task calls
///   `execute` again with `context.current_task` set.
///
/// Returning without a terminal or interrupted state, returning `Err`, or panicking
/// leaves the task FAILED with a readable reason. Events after a terminal state are
/// rejected and logged.
///
/// The future `execute` returns is polled by the task's driver, in the driver's own
/// tokio task (not spawned apart): like any async code it must not block its thread
/// (blocking or CPU-heavy work belongs in `tokio::task::spawn_blocking`). It is also
/// polled while the driver writes the events it queued earlier to the task store, so
/// it may queue more meanwhile, up to the queue's capacity (then
/// [`EventQueue::enqueue_event`] waits); those go into the next write.
#[async_trait]
pub trait AgentExecutor: Send + Sync + 'static {
    /// Handles one incoming message.
    ///
    /// # Errors
    /// Any error fails the task with the error's text as the reason.
    async fn execute(
        &self,
        context: RequestContext,
        queue: EventQueue,
    ) -> Result<(), ExecutorError>;

    /// Handles CancelTask. Called while `execute` may still run; `execute` is aborted
    /// right after this returns (and `context.cancellation()` is already cancelled).
    /// If the task is still not terminal afterwards, the handler marks it CANCELED.
    ///
    /// The default does nothing beyond that.
    ///
    /// # Errors
    /// An error is logged; the task still ends CANCELED.
    async fn cancel(
        &self,
        context: RequestContext,
        queue: EventQueue,
    ) -> Result<(), ExecutorError> {
        let _ = (context, queue);
        Ok(())
    }

    /// Called once when the handler joins a cluster of instances on one store, with
    /// the cluster's [`SessionLeases`]. An executor that must serialise something
    /// across instances keeps them: the AgentCore executor takes a runtime session's
    /// lease around each invocation. The default ignores them.
    fn use_session_leases(&self, leases: std::sync::Arc<dyn SessionLeases>) {
        let _ = leases;
    }

    /// Called once when the handler is built, with the task store's durable
    /// [`UpstreamLinks`]. An executor whose agent has tasks of its own (the `a2a`
    /// upstream kind) keeps there which task of the agent each gateway task is, so that
    /// a follow-up or a cancel after a restart still reaches it. The default ignores
    /// them.
    fn use_upstream_links(&self, links: std::sync::Arc<dyn UpstreamLinks>) {
        let _ = links;
    }
}
