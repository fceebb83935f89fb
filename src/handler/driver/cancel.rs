//! Cancel and expiry: CancelTask while a turn runs (signal the run, call the
//! executor's `cancel`, record CANCELED) or while the task is idle, the shutdown's
//! abort of a running turn, and [`Expire`](super::command::Expire), which closes an
//! idle task FAILED.

use std::time::Duration;

use super::Driver;
use super::command::{already_ended, send_once, stopped};
use super::executor_run::{panic_message, unbox};
use super::turn::Running;
use crate::error::A2aError;
use crate::executor::{EventQueue, ExecutorError, RequestContext};
use crate::protocol::time::Timestamp;
use crate::protocol::{StreamResponse, Task, TaskState};
use crate::store::StoreError;
use crate::telemetry::tasks;

/// How long `AgentExecutor::cancel` may take before the run is aborted anyway.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);

impl Driver {
    /// Stops a running executor and records `state` (FAILED on shutdown).
    pub(super) async fn abort(&mut self, r: &mut Running, state: TaskState, reason: &str) {
        r.ctx.cancellation.cancel();
        r.exec.abort();
        r.events.close();
        while let Ok(ev) = r.events.try_recv() {
            self.on_event(r, ev);
        }
        self.commit(r).await;
        if self.task.is_none() {
            send_once(
                &mut r.reply,
                Err(A2aError::Unavailable("the gateway is shutting down".into())),
            );
            return;
        }
        if !self.state().is_some_and(TaskState::is_terminal) {
            if state == TaskState::Failed {
                self.outcomes.cause(tasks::reason::SHUTDOWN);
            }
            let ev = self.status_event(state, reason);
            if let Err(e) = self.persist(ev).await {
                tracing::error!(task.id = %self.task_id(), error = %e, "cannot record the abort");
            }
        }
    }

    /// CancelTask while the executor runs: signal, call `cancel`, abort, record CANCELED.
    /// When the executor's agent refuses ([`A2aError::TaskNotCancelable`] from
    /// `cancel`, the run still going): that error, and the run goes on.
    pub(super) async fn cancel_running(&mut self, r: &mut Running) -> Result<Task, A2aError> {
        r.ctx.cancellation.cancel();
        let mut cancel = {
            let executor = self.inner.executor.clone();
            let (ctx, queue) = (r.ctx.clone(), r.queue.clone());
            tokio::spawn(async move { executor.cancel(unbox(ctx), queue).await })
        };
        let deadline = tokio::time::sleep(CANCEL_TIMEOUT);
        tokio::pin!(deadline);
        // The run goes on (it may see its cancellation and say so) until `cancel`
        // returns; whatever it queues meanwhile is recorded.
        let mut exec_ended = false;
        loop {
            tokio::select! {
                res = &mut cancel => {
                    // The executor's agent refused (an A2A upstream's -32002): the task
                    // goes on as it is and the caller is told.
                    if !exec_ended && let Some(refused) = not_cancelable(&res) {
                        tracing::info!(task.id = %self.task_id(), "the agent refused to cancel the task");
                        return Err(refused);
                    }
                    if let Err(e) = outcome_err(res) {
                        tracing::warn!(task.id = %self.task_id(), error = %e, "executor cancel failed");
                    }
                    break;
                }
                Some(ev) = r.events.recv() => {
                    self.on_event(r, ev);
                    self.commit(r).await;
                }
                _ = &mut r.exec, if !exec_ended => exec_ended = true,
                _ = &mut deadline => {
                    tracing::warn!(task.id = %self.task_id(), "executor cancel timed out");
                    cancel.abort();
                    break;
                }
            }
        }
        self.abort(r, TaskState::Canceled, "canceled by the client")
            .await;
        if self.broken {
            return Err(stopped());
        }
        self.task
            .clone()
            .ok_or_else(|| A2aError::TaskNotFound(self.task_id().to_owned()))
    }

    /// [`Command::Expire`](super::command::Command::Expire) on a task with no run in progress.
    pub(super) async fn expire_idle(
        &mut self,
        states: &[TaskState],
        older_than: Timestamp,
        reason: &str,
    ) -> Result<bool, A2aError> {
        if self.broken || !self.reload().await? {
            return Ok(false);
        }
        let waiting = self.task.as_ref().is_some_and(|t| {
            states.contains(&t.status.state) && t.status.timestamp.is_none_or(|ts| ts < older_than)
        });
        if !waiting {
            return Ok(false);
        }
        self.outcomes
            .cause(if states.contains(&TaskState::InputRequired) {
                tasks::reason::INPUT_TIMEOUT
            } else {
                tasks::reason::STALLED
            });
        let ev = self.status_event(TaskState::Failed, reason);
        match self.append(ev).await {
            Ok(()) => {
                tracing::info!(task.id = %self.task_id(), %reason, "idle task closed FAILED");
                Ok(true)
            }
            // Another instance wrote first (a follow-up): not abandoned after all.
            Err(StoreError::Conflict { .. }) => {
                self.reload().await?;
                Ok(false)
            }
            Err(e) => {
                self.broken = true;
                Err(A2aError::internal(format!(
                    "closing task {}: {e}",
                    self.task_id()
                )))
            }
        }
    }

    /// CancelTask on a task with no run in progress.
    pub(super) async fn cancel_idle(&mut self) -> Result<Task, A2aError> {
        if self.broken {
            return Err(stopped());
        }
        let Some(task) = self.task.clone() else {
            return Err(A2aError::TaskNotFound(self.task_id().to_owned()));
        };
        if task.status.state.is_terminal() {
            return already_ended(task);
        }
        let (queue, mut events) = EventQueue::bounded(self.inner.config.event_queue_capacity);
        let last_message = task
            .history()
            .iter()
            .rev()
            .find(|m| m.role == crate::protocol::Role::User)
            .cloned();
        let message = last_message.unwrap_or_else(|| crate::executor::new_user_text_message(""));
        let mut ctx = RequestContext::new(
            message,
            task.id.clone(),
            task.context_id.clone(),
            crate::executor::CallContext::new(&self.key.0.tenant, &self.key.0.owner)
                .with_agent(&self.key.0.agent),
        );
        ctx.current_task = Some(Box::new(task));
        ctx.cancellation.cancel();
        let executor = self.inner.executor.clone();
        let cancel = tokio::spawn(async move { executor.cancel(ctx, queue).await });
        let res = tokio::time::timeout(CANCEL_TIMEOUT, cancel).await;
        events.close();
        while let Ok(ev) = events.try_recv() {
            if ev.task_id() == Some(self.task_id())
                && !matches!(ev, StreamResponse::Message(_))
                && !self.state().is_some_and(TaskState::is_terminal)
            {
                self.persist(ev).await?;
            }
        }
        match res {
            Ok(res) => {
                if let Some(refused) = not_cancelable(&res) {
                    tracing::info!(task.id = %self.task_id(), "the agent refused to cancel the task");
                    return Err(refused);
                }
                if let Err(e) = outcome_err(res) {
                    tracing::warn!(task.id = %self.task_id(), error = %e, "executor cancel failed");
                }
            }
            Err(_) => tracing::warn!(task.id = %self.task_id(), "executor cancel timed out"),
        }
        if !self.state().is_some_and(TaskState::is_terminal) {
            let ev = self.status_event(TaskState::Canceled, "canceled by the client");
            self.persist(ev).await?;
        }
        Ok(self.task.clone().expect("task exists"))
    }
}

fn panic_text(e: tokio::task::JoinError) -> String {
    if e.is_cancelled() {
        return "the run was aborted".into();
    }
    panic_message(e.into_panic().as_ref())
}

/// The executor's `cancel` answered [`A2aError::TaskNotCancelable`] (its agent refused):
/// that error, for the caller.
fn not_cancelable(
    res: &Result<Result<(), ExecutorError>, tokio::task::JoinError>,
) -> Option<A2aError> {
    match res {
        Ok(Err(e)) => match e.downcast_ref::<A2aError>() {
            Some(refused @ A2aError::TaskNotCancelable { .. }) => Some(refused.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// How a spawned `AgentExecutor::cancel` ended: its error or panic text.
fn outcome_err(
    res: Result<Result<(), ExecutorError>, tokio::task::JoinError>,
) -> Result<(), String> {
    match res {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(panic_text(e)),
    }
}
