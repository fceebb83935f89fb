//! Retention and hygiene: a periodic job that deletes terminal tasks older than the
//! retention period and closes INPUT_REQUIRED tasks nobody answered.
//!
//! - **Purge.** Terminal tasks (COMPLETED, FAILED, CANCELED, REJECTED) whose status
//!   timestamp is older than `retention` are deleted with their events through
//!   [`TaskStore::purge_expired`](crate::store::TaskStore::purge_expired), in
//!   transactions of at most [`MaintenanceConfig::batch`] tasks, so that appends of
//!   running tasks are never held up for long.
//! - **INPUT_REQUIRED TTL.** A task still INPUT_REQUIRED `input_required_ttl` after its
//!   last status change is closed **FAILED** with the status message
//!   "no input received within N s; the task was closed" (see [`ttl_reason`]). The
//!   closing event is written by the task's driver, the single writer of its log: a
//!   follow-up message that reaches the driver first keeps the task open; one that
//!   comes after the close is refused as a message to a terminal task. The executor is
//!   not called (its run already ended when it asked for input).
//!
//! The job's clock is the wall clock at its start plus tokio's monotonic time since, so
//! a wall-clock step does not purge early, and tests can drive it with paused time.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::driver::command::{Command, Expire};
use super::request_handler::RequestHandler;
use crate::error::A2aError;
use crate::protocol::TaskState;
use crate::protocol::time::{self, Timestamp};

/// Tasks per purge transaction unless configured otherwise.
pub const DEFAULT_PURGE_BATCH: usize = 100;
/// Expired INPUT_REQUIRED tasks fetched per round.
const EXPIRE_BATCH: usize = 100;
/// Rounds of one pass over expired INPUT_REQUIRED tasks (bounds a pass when tasks
/// keep being answered at the same moment).
const EXPIRE_ROUNDS: usize = 100;

/// Settings of the retention job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaintenanceConfig {
    /// Terminal tasks are deleted this long after their last status change.
    pub retention: Duration,
    /// INPUT_REQUIRED tasks are closed this long after their last status change.
    pub input_required_ttl: Duration,
    /// Time between passes (the first pass runs at start).
    pub interval: Duration,
    /// Tasks per purge transaction (at least 1).
    pub batch: usize,
    /// SUBMITTED or WORKING tasks whose status has not changed for this long are
    /// closed FAILED (their instance stopped); `None` disables the sweep.
    pub stale_after: Option<Duration>,
}

impl MaintenanceConfig {
    /// The job `[store]` describes (`retention_days`, `input_required_ttl_secs`,
    /// `purge_interval_secs`), with [`DEFAULT_PURGE_BATCH`].
    pub fn from_store_config(store: &crate::config::StoreConfig) -> Self {
        Self {
            retention: store.retention(),
            input_required_ttl: store.input_required_ttl(),
            interval: store.purge_interval(),
            batch: DEFAULT_PURGE_BATCH,
            stale_after: Some(store.stale_task()),
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    /// Terminal tasks deleted.
    pub purged: u64,
    /// INPUT_REQUIRED tasks closed FAILED.
    pub closed: usize,
    /// Stalled SUBMITTED/WORKING tasks closed FAILED.
    pub stalled: usize,
}

/// The status message of a SUBMITTED/WORKING task closed after `after` without a
/// status change: "no progress for N s; the gateway instance running it stopped".
pub fn stale_reason(after: Duration) -> String {
    format!(
        "no progress for {} s; the gateway instance running it stopped",
        after.as_secs()
    )
}

/// Unsettled tasks examined per stale sweep.
const STALE_SCAN_LIMIT: usize = 10_000;

/// The status message of a task closed after waiting `ttl` for input:
/// "no input received within N s; the task was closed".
pub fn ttl_reason(ttl: Duration) -> String {
    format!(
        "no input received within {} s; the task was closed",
        ttl.as_secs()
    )
}

fn minus(now: Timestamp, d: Duration) -> Timestamp {
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .unwrap_or(Timestamp::MIN_UTC)
}

impl RequestHandler {
    /// Deletes terminal tasks whose status timestamp is before `older_than`, with
    /// their events, in transactions of at most `batch` tasks. Returns how many.
    ///
    /// # Errors
    /// Internal on a store failure (batches already committed stay deleted).
    pub async fn purge_expired(
        &self,
        older_than: Timestamp,
        batch: usize,
    ) -> Result<u64, A2aError> {
        self.inner
            .store
            .purge_expired(older_than, batch.max(1))
            .await
            .map_err(A2aError::internal)
    }

    /// Closes FAILED, with `reason` as the status message, every INPUT_REQUIRED task
    /// whose status timestamp is before `older_than` and which is not processing a
    /// follow-up at this moment. Each close goes through the task's driver. Returns
    /// how many were closed.
    ///
    /// # Errors
    /// Internal on a store failure.
    pub async fn close_abandoned_input_required(
        &self,
        older_than: Timestamp,
        reason: &str,
    ) -> Result<usize, A2aError> {
        let mut closed = 0;
        for _ in 0..EXPIRE_ROUNDS {
            let batch = self
                .inner
                .store
                .expired_input_required(older_than, EXPIRE_BATCH)
                .await
                .map_err(A2aError::internal)?;
            let fetched = batch.len();
            let mut closed_now = 0;
            for key in batch {
                if self
                    .expire(key, &[TaskState::InputRequired], older_than, reason)
                    .await?
                {
                    closed_now += 1;
                }
            }
            closed += closed_now;
            // A short page is the last one; a page where nothing could be closed
            // (every task busy with a follow-up) would come back unchanged.
            if fetched < EXPIRE_BATCH || closed_now == 0 {
                break;
            }
        }
        Ok(closed)
    }

    /// Asks the task's driver to close it ([`Command::Expire`]).
    pub(super) async fn expire(
        &self,
        key: super::driver::command::TaskKey,
        states: &'static [TaskState],
        older_than: Timestamp,
        reason: &str,
    ) -> Result<bool, A2aError> {
        self.ask(&key, false, |reply| {
            Ok(Command::Expire(Box::new(Expire {
                states,
                older_than,
                reason: reason.to_owned(),
                reply,
            })))
        })
        .await
    }

    /// Closes FAILED, with `reason`, every SUBMITTED or WORKING task (of any scope)
    /// whose status timestamp is before `older_than` and that this instance is not
    /// running: tasks left behind by a gateway instance that stopped while another
    /// instance keeps serving the same store. Looks at up to 10,000 unsettled tasks
    /// per call. Returns how many were closed.
    ///
    /// # Errors
    /// Internal on a store failure.
    pub async fn close_stalled(
        &self,
        older_than: Timestamp,
        reason: &str,
    ) -> Result<usize, A2aError> {
        let unsettled = self
            .inner
            .store
            .unsettled(STALE_SCAN_LIMIT)
            .await
            .map_err(A2aError::internal)?;
        let mut closed = 0;
        for (scope, id) in unsettled {
            let Some(rec) = self
                .inner
                .store
                .get(&scope, &id)
                .await
                .map_err(A2aError::internal)?
            else {
                continue;
            };
            if rec.task.status.timestamp.is_some_and(|ts| ts >= older_than) {
                continue;
            }
            let states: &'static [TaskState] = &[TaskState::Submitted, TaskState::Working];
            if self.expire((scope, id), states, older_than, reason).await? {
                closed += 1;
            }
        }
        Ok(closed)
    }

    /// One pass of the retention job as of `now`: purge, then close abandoned
    /// INPUT_REQUIRED tasks, then stalled SUBMITTED/WORKING ones.
    ///
    /// # Errors
    /// Internal on a store failure.
    pub async fn run_maintenance(
        &self,
        now: Timestamp,
        config: &MaintenanceConfig,
    ) -> Result<MaintenanceReport, A2aError> {
        let purged = self
            .purge_expired(minus(now, config.retention), config.batch)
            .await?;
        let closed = self
            .close_abandoned_input_required(
                minus(now, config.input_required_ttl),
                &ttl_reason(config.input_required_ttl),
            )
            .await?;
        let stalled = match config.stale_after {
            Some(after) => {
                self.close_stalled(minus(now, after), &stale_reason(after))
                    .await?
            }
            None => 0,
        };
        if purged > 0 || closed > 0 || stalled > 0 {
            tracing::info!(purged, closed, stalled, "retention pass");
        }
        metrics::counter!("a2a_stalled_tasks_closed_total").increment(stalled as u64);
        metrics::counter!("a2a_store_purged_tasks_total").increment(purged);
        metrics::counter!("a2a_input_required_closed_total").increment(closed as u64);
        Ok(MaintenanceReport {
            purged,
            closed,
            stalled,
        })
    }

    /// Starts the retention job: a pass at once, then every `config.interval`, until
    /// `stop` is cancelled (a pass in progress is abandoned there; what it committed
    /// stays). A failed pass is logged and retried at the next interval.
    pub fn spawn_maintenance(
        &self,
        config: MaintenanceConfig,
        stop: CancellationToken,
    ) -> JoinHandle<()> {
        let handler = self.clone();
        tokio::spawn(async move {
            let wall0 = time::now();
            let t0 = tokio::time::Instant::now();
            let mut tick = tokio::time::interval(config.interval.max(Duration::from_millis(1)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let elapsed = chrono::Duration::from_std(t0.elapsed()).unwrap_or_default();
                let now = wall0 + elapsed;
                tokio::select! {
                    _ = stop.cancelled() => return,
                    r = handler.run_maintenance(now, &config) => {
                        if let Err(e) = r {
                            tracing::error!(error = %e, "retention pass failed; retrying at the next interval");
                        }
                    }
                }
            }
        })
    }
}
