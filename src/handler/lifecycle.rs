//! The handler's start and end: tasks a restart interrupted are marked FAILED before
//! serving, and a shutdown refuses new messages, gives running tasks their grace and
//! then aborts the rest.

use std::time::Duration;

use super::request_handler::RequestHandler;
use crate::error::A2aError;
use crate::protocol::{StreamResponse, TaskState};

/// How many task ids the restart-recovery summary line names.
const RECOVERY_SAMPLE: usize = 10;

impl RequestHandler {
    /// Marks every SUBMITTED or WORKING task in the store FAILED with the reason
    /// "interrupted by a gateway restart". Call once at start-up, before serving,
    /// on a store no other running instance uses. Returns how many were marked.
    ///
    /// # Errors
    /// Internal on a store failure.
    pub async fn recover_interrupted(&self) -> Result<usize, A2aError> {
        let mut n = 0;
        let mut sample: Vec<String> = Vec::new();
        loop {
            let batch = self
                .inner
                .store
                .unsettled(256)
                .await
                .map_err(A2aError::internal)?;
            if batch.is_empty() {
                if n > 0 {
                    // One line, not one per task: the count and the first few ids.
                    tracing::warn!(
                        tasks = n,
                        sample = %sample.join(","),
                        "tasks interrupted by a gateway restart marked FAILED"
                    );
                }
                return Ok(n);
            }
            for (scope, id) in batch {
                let Some(rec) = self
                    .inner
                    .store
                    .get(&scope, &id)
                    .await
                    .map_err(A2aError::internal)?
                else {
                    continue;
                };
                let ctx = rec.task.context_id.clone();
                let ev = StreamResponse::StatusUpdate(crate::protocol::TaskStatusUpdateEvent {
                    task_id: id.clone(),
                    context_id: ctx.clone(),
                    status: crate::protocol::TaskStatus::with_message(
                        TaskState::Failed,
                        crate::executor::new_agent_text_message(
                            "interrupted by a gateway restart",
                            Some(&ctx),
                            Some(&id),
                        ),
                    ),
                    metadata: None,
                });
                self.inner
                    .store
                    .append(&scope, &id, rec.last_seq + 1, &ev)
                    .await
                    .map_err(A2aError::internal)?;
                tracing::debug!(task.id = %id, "task interrupted by a gateway restart marked FAILED");
                crate::telemetry::tasks::count(
                    TaskState::Failed,
                    crate::telemetry::tasks::reason::RESTART,
                );
                if sample.len() < RECOVERY_SAMPLE {
                    sample.push(id.chars().take(128).collect::<String>());
                }
                n += 1;
            }
        }
    }

    /// Whether [`shutdown`](Self::shutdown) has begun: new messages are refused
    /// (`Unavailable`) while the running tasks get their grace.
    pub fn is_closing(&self) -> bool {
        self.inner
            .closing
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Stops accepting messages, waits up to `grace` for running executors, then
    /// aborts the rest, marking their tasks FAILED ("the gateway shut down before
    /// the task finished"). Open streams end after their final event.
    pub async fn shutdown(&self, grace: Duration) {
        let max = self.inner.config.max_concurrent_tasks.max(1) as u32;
        let all = self.inner.permits.clone();
        // New runs are refused from now on; running ones get `grace`.
        self.inner
            .closing
            .store(true, std::sync::atomic::Ordering::Release);
        let _ = tokio::time::timeout(grace, all.acquire_many(max)).await;
        self.inner.shutdown.cancel();
        // Give drivers a moment to record the abort.
        let _ = tokio::time::timeout(Duration::from_secs(5), self.inner.permits.acquire_many(max))
            .await;
    }
}
