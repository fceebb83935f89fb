//! Store writes: the driver stages events (folding each into its snapshot), writes
//! them with one append and only then publishes them, retrying a store that fails
//! for a moment; after a failure that outlasts the retries it records the task FAILED
//! once the store works again.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::Driver;
use super::command::{reject, stopped};
use crate::error::A2aError;
use crate::protocol::{StreamResponse, TaskState};
use crate::store::{FoldedArtifacts, StoreError, StoredEvent, projection};
use crate::telemetry::tasks;

/// The pauses between attempts of a store write that failed with a database error
/// (a lock held by a backup or `VACUUM`, a failover): about 8 s of retrying, plus
/// each attempt's own wait for locks, before the run is given up.
const WRITE_RETRY_DELAYS: [Duration; 4] = [
    Duration::from_millis(100),
    Duration::from_millis(400),
    Duration::from_millis(1500),
    Duration::from_secs(6),
];
/// How long a driver whose run was stopped by a store failure keeps trying to record
/// the task FAILED once the store works again, before it leaves that to the stale-task
/// sweep.
const STORE_RECOVERY: Duration = Duration::from_secs(300);
/// The longest pause between those attempts.
const STORE_RECOVERY_MAX_DELAY: Duration = Duration::from_secs(30);

impl Driver {
    /// Folds `event` into the snapshot in place (the first event, a Task, makes it).
    fn fold(&mut self, event: &StreamResponse) {
        match &mut self.task {
            Some(task) => projection::apply_to(task, event),
            None => self.task = projection::apply(None, event),
        }
    }

    /// Folds `event` into the snapshot as the next sequence number and stages it;
    /// nothing is published before [`flush`](Self::flush) wrote it.
    pub(super) fn stage(&mut self, event: StreamResponse) {
        let seq = self.seq + 1;
        self.fold(&event);
        self.seq = seq;
        self.staged.push(Arc::new(StoredEvent::new(seq, event)));
    }

    /// Writes every staged event in one append, then publishes them in order. The
    /// store write comes first: no subscriber sees an event that is not durable. On
    /// failure the driver stops writing (its snapshot is ahead of the store).
    pub(super) async fn flush(&mut self) -> Result<(), A2aError> {
        if self.staged.is_empty() {
            return Ok(());
        }
        if self.broken {
            self.staged.clear();
            return Err(stopped());
        }
        let staged = std::mem::take(&mut self.staged);
        let started = std::time::Instant::now();
        let span = self.outcomes.write_span(self.task_id(), staged.len());
        // The snapshot's artifacts are lent to the store for the write (a SQL store
        // compacting its checkpoint takes them instead of folding its log again) and
        // taken back after it: the store holds no reference by then, so nothing is
        // copied. Nothing reads the snapshot meanwhile (`self` is borrowed here).
        let artifacts: FoldedArtifacts =
            Arc::new(self.task.as_mut().and_then(|t| t.artifacts.take()));
        let written =
            tracing::Instrument::instrument(self.write_retrying(&staged, &artifacts), span).await;
        if let Some(task) = self.task.as_mut() {
            task.artifacts = Arc::try_unwrap(artifacts).unwrap_or_else(|shared| (*shared).clone());
        }
        self.outcomes.store_write(
            &self.key.1,
            staged.len(),
            started.elapsed(),
            written.is_ok(),
        );
        if let Err(e) = written {
            self.broken = true;
            let what = format!("events {}..={}", staged[0].seq, self.seq);
            if matches!(e, StoreError::Backend(_)) {
                // The caller sees the category and an id; the store's own error
                // (file names, addresses) is logged under that id.
                let id = crate::telemetry::correlation_id();
                tracing::error!(task.id = %self.task_id(), correlation_id = %id, error = %e, "the task store failed; stopping the run");
                self.store_failure = Some(crate::telemetry::with_correlation(
                    &format!(
                        "the task store failed to record {what} of this task; the run was stopped"
                    ),
                    &id,
                ));
            }
            return Err(A2aError::internal(format!(
                "persisting {what} of task {}: {e}",
                self.task_id()
            )));
        }
        self.outcomes.written(staged.iter().map(|e| &e.event));
        self.publish(staged);
        Ok(())
    }

    /// Writes `events`, after which the task's artifacts are `artifacts` (see
    /// [`TaskStore::append_all_folded`](crate::store::TaskStore::append_all_folded)),
    /// retrying database errors after [`WRITE_RETRY_DELAYS`]. A conflict after a failed
    /// attempt may mean that attempt was committed after all (its answer lost): the
    /// write counts as done when the store holds exactly up to the last event.
    async fn write_retrying(
        &self,
        events: &[Arc<StoredEvent>],
        artifacts: &FoldedArtifacts,
    ) -> Result<(), StoreError> {
        let (scope, id) = (self.scope(), self.task_id());
        let mut delays = WRITE_RETRY_DELAYS.iter();
        let mut retried = false;
        loop {
            let appended = self
                .inner
                .store
                .append_all_folded(scope, id, events, artifacts);
            match appended.await {
                Ok(()) => {
                    self.wake_push();
                    return Ok(());
                }
                Err(StoreError::Backend(e)) => {
                    let Some(delay) = delays.next() else {
                        return Err(StoreError::Backend(e));
                    };
                    tracing::warn!(task.id = %id, error = %e, retry_in_ms = delay.as_millis() as u64, "task store write failed; retrying");
                    tokio::time::sleep(*delay).await;
                    retried = true;
                }
                Err(e @ StoreError::Conflict { .. }) if retried => {
                    let last = events.last().map_or(0, |e| e.seq);
                    return match self.inner.store.get(scope, id).await {
                        Ok(Some(rec)) if rec.last_seq == last => Ok(()),
                        _ => Err(e),
                    };
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// After a store failure stopped a run: once the store works again, records the
    /// task FAILED with the reason (on top of what the store holds), so that its
    /// subscribers get a final event and it does not stay WORKING. Retries with
    /// growing pauses for up to [`STORE_RECOVERY`], answering commands meanwhile with
    /// an error; gives up at shutdown or after that (the stale-task sweep closes the
    /// task later).
    pub(super) async fn close_after_store_failure(&mut self) {
        let Some(reason) = self.store_failure.take() else {
            return;
        };
        let shutdown = self.inner.shutdown.clone();
        let deadline = tokio::time::Instant::now() + STORE_RECOVERY;
        let mut delay = Duration::from_secs(1);
        loop {
            self.staged.clear();
            if let Ok(exists) = self.reload().await {
                if !exists {
                    return;
                }
                if self.state().is_some_and(TaskState::is_terminal) {
                    self.broken = false;
                    return;
                }
                let ev = self.status_event(TaskState::Failed, &reason);
                self.outcomes.cause(tasks::reason::STORE);
                if self.append(ev).await.is_ok() {
                    tracing::warn!(task.id = %self.task_id(), %reason, "task closed FAILED after a store failure");
                    self.broken = false;
                    return;
                }
            }
            let pause = tokio::time::sleep(delay);
            tokio::pin!(pause);
            if tokio::time::Instant::now() + delay > deadline {
                tracing::error!(task.id = %self.task_id(), "the task store is still failing; the task stays as stored until the stale-task sweep closes it");
                return;
            }
            loop {
                tokio::select! {
                    _ = &mut pause => break,
                    _ = shutdown.cancelled() => return,
                    cmd = self.rx.next() => match cmd {
                        Some(cmd) => reject(cmd),
                        None => return,
                    },
                }
            }
            delay = (delay * 2).min(STORE_RECOVERY_MAX_DELAY);
        }
    }

    /// Stages and writes one event (see [`flush`](Self::flush)).
    pub(super) async fn persist(&mut self, event: StreamResponse) -> Result<(), A2aError> {
        if self.broken {
            return Err(stopped());
        }
        self.stage(event);
        self.flush().await
    }

    /// Tells the push sender that events were stored (their outbox rows with them).
    fn wake_push(&self) {
        if let Some(push) = &self.inner.config.push {
            push.wake();
        }
    }

    /// Appends `event` as the next sequence number at once (nothing may be staged),
    /// then folds and publishes it. Store errors are returned as they are.
    pub(super) async fn append(&mut self, event: StreamResponse) -> Result<(), StoreError> {
        debug_assert!(self.staged.is_empty());
        let ev = Arc::new(StoredEvent::new(self.seq + 1, event));
        let started = std::time::Instant::now();
        let written = self
            .inner
            .store
            .append_all(self.scope(), self.task_id(), std::slice::from_ref(&ev))
            .await;
        self.outcomes
            .store_write(&self.key.1, 1, started.elapsed(), written.is_ok());
        written?;
        self.outcomes.written([&ev.event]);
        self.wake_push();
        self.fold(&ev.event);
        self.seq = ev.seq;
        self.publish(vec![ev]);
        Ok(())
    }

    /// Publishes written `events` as one [`EventGroup`](super::command::EventGroup), when anyone follows the task. A
    /// subscriber that comes after the check reads these events from the store: it
    /// subscribes before it reads, and they were written before the check.
    fn publish(&self, events: Vec<Arc<StoredEvent>>) {
        if self.bus.receiver_count() > 0 {
            let _ = self.bus.send(Arc::new(events));
        }
    }

    /// Re-reads the task from the store (another instance sharing it may have
    /// written since this driver loaded it). `false` when it no longer exists.
    pub(super) async fn reload(&mut self) -> Result<bool, A2aError> {
        let rec = self
            .inner
            .store
            .get(&self.key.0, &self.key.1)
            .await
            .map_err(A2aError::internal)?;
        Ok(match rec {
            Some(rec) => {
                if rec.last_seq != self.seq {
                    self.task = Some(rec.task);
                    self.seq = rec.last_seq;
                }
                true
            }
            None => false,
        })
    }
}
