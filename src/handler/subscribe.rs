//! SubscribeToTask (spec §3.1.6): following a task's events from its snapshot, or
//! resuming after the last event a dropped stream delivered.

use super::request_handler::RequestHandler;
use super::stream::{EventStream, StreamEnd, task_stream};
use super::validation::{check_call, check_id};
use crate::error::A2aError;
use crate::executor::CallContext;
use crate::protocol::SubscribeToTaskRequest;
use crate::scope::Scope;

impl RequestHandler {
    /// SubscribeToTask (spec §3.1.6): the current Task snapshot, then live events
    /// until the task is terminal. Unlike SendStreamingMessage, the stream stays open
    /// through INPUT_REQUIRED and AUTH_REQUIRED: it follows the task, not one message,
    /// so a follow-up sent while it is open shows on it, up to the final state.
    ///
    /// With `last_event_id` (the SSE `Last-Event-ID` of a dropped stream), the
    /// snapshot is skipped and every event after that sequence number is replayed
    /// from the store, in order and exactly once, followed by live events until the
    /// task is terminal: a resume is a subscription, whichever stream dropped. A
    /// resume of a task that ended after `last_event_id` replays up to its final event.
    ///
    /// # Errors
    /// TaskNotFound; ExtensionSupportRequired; InvalidParams for a `last_event_id`
    /// beyond the task's last event;
    /// UnsupportedOperation when streaming is off or the task is terminal (and, with
    /// `last_event_id`, nothing newer is left to replay).
    pub async fn subscribe_to_task(
        &self,
        call: &CallContext,
        req: SubscribeToTaskRequest,
        last_event_id: Option<u64>,
    ) -> Result<EventStream, A2aError> {
        check_call(call)?;
        if !self.inner.terms.get().streaming {
            return Err(A2aError::UnsupportedOperation(
                "streaming is not supported by this agent".into(),
            ));
        }
        self.check_extensions(call)?;
        check_id("id", &req.id)?;
        let scope = Scope::from(call);
        // The checks need the task's state and last event only; the snapshot (with
        // its artifacts, however large) is read once, below, and not for a resume.
        let head = self.head(&scope, &req.id).await?;
        if let Some(n) = last_event_id
            && n > head.last_seq
        {
            return Err(A2aError::InvalidParams(format!(
                "Last-Event-ID {n} is beyond the last event of task {} ({})",
                req.id, head.last_seq
            )));
        }
        let terminal = head.state.is_terminal();
        let resumable = last_event_id.is_some_and(|n| n < head.last_seq);
        if terminal && !resumable {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {} is already {}; use GetTask",
                req.id, head.state
            )));
        }
        let key = (scope.clone(), req.id.clone());
        let live = (!terminal).then(|| self.with_handle(&key, false, |h| h.bus.subscribe()));
        if let Some(after) = last_event_id {
            let follow = self.inner.follow(scope, req.id, after, live, true);
            return Ok(task_stream(None, false, None, StreamEnd::Terminal, follow));
        }
        // Read the snapshot after subscribing so that nothing falls between.
        let rec = self.load(&scope, &req.id).await?;
        let follow = self.inner.follow(scope, req.id, rec.last_seq, live, false);
        Ok(task_stream(
            Some((rec.task, rec.last_seq)),
            true,
            None,
            StreamEnd::Terminal,
            follow,
        ))
    }
}
