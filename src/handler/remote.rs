//! The handler's part in several instances on one store (see [`crate::cluster`]):
//! a driver takes the task's lease before acting and gives it up when idle (the
//! driver's `lease` module); a message waits for the lease another instance holds;
//! CancelTask asks the holder;
//! cancel requests from other instances reach the local driver; and orphaned tasks
//! (their instance died) are closed FAILED naming the lost instance.
//!
//! Without a cluster (memory, SQLite, or PostgreSQL used by one instance that did
//! not join) none of this runs and every function here returns at once.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::driver::command::{Command, TaskKey};
use super::request_handler::RequestHandler;
use crate::cluster::{Cluster, Orphan};
use crate::error::A2aError;
use crate::protocol::time::Timestamp;
use crate::protocol::{Task, TaskState};

/// How long CancelTask waits for the instance running the task to record the end.
const REMOTE_CANCEL_WAIT: Duration = Duration::from_secs(30);
/// How often an unanswered cancel request is repeated (a notification may be lost
/// while the holder's listener reconnects).
const REMOTE_CANCEL_REPEAT: Duration = Duration::from_secs(2);
/// How often a message waiting for another instance's lease re-checks it without a
/// release notification.
const LEASE_RECHECK: Duration = Duration::from_secs(1);
/// Orphans closed per sweep round.
const ORPHAN_BATCH: usize = 256;
/// The states in which a task is being processed (an orphan when nobody is).
const PROCESSING: &[TaskState] = &[
    TaskState::Submitted,
    TaskState::Working,
    TaskState::AuthRequired,
];

impl RequestHandler {
    /// Joins `cluster`: from now on drivers take leases, subscribers are woken by
    /// other instances' writes, cancel requests from other instances (`cancels`, see
    /// [`Cluster::join`]) reach the local driver, and every `sweep_interval` orphaned
    /// tasks are closed FAILED naming the lost instance; the executor gets the
    /// cluster's session leases too
    /// ([`AgentExecutor::use_session_leases`](crate::AgentExecutor::use_session_leases):
    /// one invocation per runtime session across instances). This replaces the start-up
    /// recovery and the stale-task sweep for the shared store. Call once, before
    /// serving; the returned task runs until the handler shuts down.
    ///
    /// # Errors
    /// Internal when a cluster was joined already.
    pub fn join_cluster(
        &self,
        cluster: Cluster,
        mut cancels: mpsc::UnboundedReceiver<TaskKey>,
    ) -> Result<JoinHandle<()>, A2aError> {
        self.inner
            .cluster
            .set(cluster.clone())
            .map_err(|_| A2aError::internal("the handler joined a cluster already"))?;
        self.inner
            .executor
            .use_session_leases(std::sync::Arc::new(cluster.session_leases(self.agent())));
        let handler = self.clone();
        let stop = self.inner.shutdown.clone();
        Ok(tokio::spawn(async move {
            let mut tick = tokio::time::interval(cluster.options().sweep_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    Some(key) = cancels.recv() => handler.cancel_requested(key),
                    _ = tick.tick() => {
                        if let Err(e) = handler.close_orphans(&cluster).await {
                            tracing::warn!(error = %e, "orphaned-task sweep failed; retrying at the next interval");
                        }
                    }
                }
            }
        }))
    }

    /// Another instance asked to cancel a task this one is processing.
    fn cancel_requested(&self, key: TaskKey) {
        tracing::info!(task.id = %key.1, "cancel requested by another gateway instance");
        let (tx, rx) = oneshot::channel();
        if !self.with_handle(&key, false, |h| {
            h.cmd.unbounded_send(Command::Cancel(tx)).is_ok()
        }) {
            return;
        }
        tokio::spawn(async move {
            if let Ok(Err(e)) = rx.await {
                tracing::warn!(task.id = %key.1, error = %e, "cancel requested by another instance failed");
            }
        });
    }

    /// Closes FAILED every orphaned task this instance manages to take over. Returns
    /// how many were closed.
    ///
    /// # Errors
    /// Internal on a store failure.
    pub async fn close_orphans(&self, cluster: &Cluster) -> Result<usize, A2aError> {
        let orphans = cluster
            .orphans(ORPHAN_BATCH)
            .await
            .map_err(A2aError::internal)?;
        let mut closed = 0;
        for orphan in orphans {
            if !cluster
                .take_over(&orphan)
                .await
                .map_err(A2aError::internal)?
            {
                continue;
            }
            let reason = orphan_reason(&orphan, cluster);
            let key = (orphan.scope, orphan.task_id);
            match self
                .expire(key.clone(), PROCESSING, Timestamp::MAX_UTC, &reason)
                .await
            {
                Ok(true) => {
                    closed += 1;
                    tracing::warn!(task.id = %key.1, lost_instance = ?orphan.lost, "orphaned task closed FAILED");
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(task.id = %key.1, error = %e, "cannot close an orphaned task")
                }
            }
            // The driver gives the lease up when it goes idle; make sure it does
            // when it never ran.
            if !self.has_driver(&key) {
                cluster.release(&key).await;
            }
        }
        if closed > 0 {
            metrics::counter!("a2a_orphaned_tasks_closed_total").increment(closed as u64);
        }
        Ok(closed)
    }

    /// Before a message to an existing task: waits while another live instance holds
    /// the task's lease (it is running a turn), so that turns run one after the
    /// other across instances. Returns at once without a cluster or when this
    /// instance holds it (its driver queues the message). A dead holder's task is
    /// closed by the sweep, which releases the lease.
    pub(super) async fn wait_for_lease(&self, key: &TaskKey) -> Result<(), A2aError> {
        let Some(c) = self.inner.cluster() else {
            return Ok(());
        };
        let mut wake = None;
        loop {
            if c.holds(key) {
                return Ok(());
            }
            match c.holder(key).await.map_err(A2aError::internal)? {
                Some(h) if h.instance != c.instance() => {
                    tracing::debug!(task.id = %key.1, holder = %h.instance, "waiting for another instance's turn");
                }
                _ => return Ok(()),
            }
            let wake = wake.get_or_insert_with(|| c.watch(key));
            tokio::select! {
                _ = wake.changed() => {}
                _ = tokio::time::sleep(LEASE_RECHECK) => {}
            }
        }
    }

    /// CancelTask in a cluster: the holder of the task's lease is asked to cancel
    /// (it aborts the run, calls the executor's cancel and writes CANCELED), and the
    /// answer is the task once it ended; without a holder the local driver cancels.
    pub(super) async fn cancel_in_cluster(
        &self,
        c: &Cluster,
        key: TaskKey,
    ) -> Result<Task, A2aError> {
        let deadline = tokio::time::Instant::now() + REMOTE_CANCEL_WAIT + c.options().lease;
        let mut wake = c.watch(&key);
        let mut asked: Option<(String, tokio::time::Instant)> = None;
        loop {
            let holder = c.holder(&key).await.map_err(A2aError::internal)?;
            match holder {
                Some(h) if h.instance != c.instance() => {
                    if c.missed_heartbeat(&h) {
                        // Killed or cut off: nobody can cancel the run until its lease
                        // lapses and an instance closes the task. Say so now (a retry
                        // then finds the task ended) rather than hold the caller.
                        c.request_cancel(&key).await.map_err(A2aError::internal)?;
                        return Err(stalled_holder(&h, c, &key.1));
                    }
                    let now = tokio::time::Instant::now();
                    let repeat = asked.as_ref().is_none_or(|(who, at)| {
                        *who != h.instance || now.duration_since(*at) >= REMOTE_CANCEL_REPEAT
                    });
                    if repeat {
                        c.request_cancel(&key).await.map_err(A2aError::internal)?;
                        tracing::info!(task.id = %key.1, holder = %h.instance, alive = h.alive, "asked the instance running the task to cancel it");
                        asked = Some((h.instance.clone(), now));
                    }
                    tokio::select! {
                        _ = wake.changed() => {}
                        _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    }
                    let rec = self.load(&key.0, &key.1).await?;
                    if rec.task.status.state.is_terminal() {
                        return super::driver::command::already_ended(rec.task);
                    }
                    if tokio::time::Instant::now() >= deadline {
                        return Err(A2aError::Unavailable(format!(
                            "gateway instance {} running task {} did not confirm the cancel; retry",
                            h.instance, key.1
                        )));
                    }
                }
                _ => match self.cancel_here(&key).await {
                    // The lease was taken between the check and the claim.
                    Err(A2aError::Unavailable(_)) if tokio::time::Instant::now() < deadline => {}
                    r => return r,
                },
            }
        }
    }
}

/// The retryable refusal of a cancel whose task is held by an instance that missed its
/// heartbeat ([`Cluster::missed_heartbeat`]).
fn stalled_holder(h: &crate::store::cluster::Holder, c: &Cluster, task_id: &str) -> A2aError {
    let silent = h
        .heartbeat_age
        .map(|age| format!(" for {} s", age.as_secs()))
        .unwrap_or_default();
    A2aError::Unavailable(format!(
        "gateway instance {} running task {task_id} has not answered{silent}; once its lease \
         lapses (at most {} s) another instance closes the task; retry the cancel then",
        h.instance,
        c.options().lease.as_secs()
    ))
}

/// The status message of an orphan closed by this instance.
fn orphan_reason(orphan: &Orphan, c: &Cluster) -> String {
    match &orphan.lost {
        Some(lost) => format!(
            "the gateway instance {lost} running this task stopped (no heartbeat for {} s); closed by {}",
            c.options().lease.as_secs(),
            c.instance()
        ),
        None => format!(
            "no gateway instance was running this task; closed by {}",
            c.instance()
        ),
    }
}
