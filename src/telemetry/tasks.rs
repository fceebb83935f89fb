//! Task outcome metrics: what became of each run of the executor.
//!
//! - `a2a_tasks_total{state, reason}` (counter): one per terminal or interrupted
//!   state a task reached and the store recorded. `state` is `completed`, `failed`,
//!   `canceled`, `rejected`, `input_required` or `auth_required`; `reason` is a
//!   bounded category: `none` (completed), `client` (canceled), `agent` (rejected,
//!   interrupted, or a failure the agent reported without a category), an upstream
//!   failure category ([`crate::upstream::UpstreamError::category`]: `broken`,
//!   `truncated`, `malformed`, `control`, `status_5xx`, …) or a failure the gateway
//!   decided ([`reason`]).
//! - `a2a_task_duration_seconds{state}` (histogram): from the start of the turn (the
//!   message's run) to that state.
//! - `a2a_store_write_duration_seconds{outcome}` (histogram): one task-log write
//!   (retries included), `ok` or `error`; a write slower than [`SLOW_STORE_WRITE`] is
//!   logged at `warn` with its kind and duration, never the SQL.
//!
//! The task driver owns one [`TurnMetrics`]: it begins it at each run and reports
//! every event it has durably written; the executor names a failure's category
//! through [`FailureCause`] (reachable as
//! [`crate::executor::RequestContext::set_failure_reason`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::metrics::{STORE_WRITE_DURATION, TASK_DURATION, TASKS};
use crate::protocol::{StreamResponse, TaskState};

/// A task-log write slower than this is logged at `warn`.
pub const SLOW_STORE_WRITE: Duration = Duration::from_secs(1);

/// The `reason` categories the gateway itself decides.
pub mod reason {
    /// A COMPLETED task.
    pub const NONE: &str = "none";
    /// A task canceled by a client.
    pub const CLIENT: &str = "client";
    /// The agent's own decision (REJECTED, INPUT_REQUIRED, AUTH_REQUIRED) or a FAILED
    /// state the executor reported without a category.
    pub const AGENT: &str = "agent";
    /// The executor returned an error.
    pub const AGENT_ERROR: &str = "agent_error";
    /// The executor panicked.
    pub const AGENT_PANIC: &str = "agent_panic";
    /// The executor returned without reporting a final state.
    pub const NO_FINAL_STATE: &str = "no_final_state";
    /// The gateway shut down before the task finished.
    pub const SHUTDOWN: &str = "shutdown";
    /// A task-store write failed.
    pub const STORE: &str = "store";
    /// An INPUT_REQUIRED task got no input within `[store] input_required_ttl_secs`.
    pub const INPUT_TIMEOUT: &str = "input_timeout";
    /// A SUBMITTED or WORKING task stalled (the instance running it stopped).
    pub const STALLED: &str = "stalled";
    /// A SUBMITTED or WORKING task found at start-up (a restart interrupted it).
    pub const RESTART: &str = "restart";
}

/// The `state` label of a task state; `None` for states that are neither terminal
/// nor interrupted (they are not counted).
pub fn state_label(state: TaskState) -> Option<&'static str> {
    Some(match state {
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::Rejected => "rejected",
        TaskState::InputRequired => "input_required",
        TaskState::AuthRequired => "auth_required",
        TaskState::Unspecified | TaskState::Submitted | TaskState::Working => return None,
    })
}

/// Every `(state, reason)` pair the gateway writes on its own, set to 0 when the
/// recorder is installed so that the rate queries have a series from the first
/// scrape (upstream failure categories appear with their first occurrence).
pub(crate) const PRESET: &[(&str, &str)] = &[
    ("completed", reason::NONE),
    ("canceled", reason::CLIENT),
    ("rejected", reason::AGENT),
    ("input_required", reason::AGENT),
    ("auth_required", reason::AGENT),
    ("failed", reason::AGENT),
    ("failed", reason::SHUTDOWN),
    ("failed", reason::RESTART),
];

/// Counts one task state (outside the driver: restart recovery).
pub fn count(state: TaskState, reason: &'static str) {
    if let Some(state) = state_label(state) {
        metrics::counter!(TASKS, "state" => state, "reason" => reason).increment(1);
    }
}

/// The category of the FAILED state a run is about to report, shared by the
/// executor (which knows why the upstream failed) and the task driver (which counts
/// the state once it is written). The last category set before the state is written
/// wins; it is used once.
#[derive(Debug, Clone, Default)]
pub struct FailureCause(Arc<Mutex<Option<&'static str>>>);

impl FailureCause {
    /// Names the category of the next FAILED state (a short, bounded, snake_case
    /// word: it becomes a label value).
    pub fn set(&self, category: &'static str) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(category);
    }

    fn take(&self) -> Option<&'static str> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// What a turn's metrics take from the run that starts it: the cause its executor may
/// name and the request's trace. The executor API makes it from a
/// [`crate::executor::RequestContext`].
#[derive(Debug, Clone, Default)]
pub struct TurnStart {
    /// The context's failure cause.
    pub cause: FailureCause,
    /// The request's trace, which the turn's store writes join.
    pub trace: Option<super::trace::TraceParent>,
}

/// The task driver's view of the current turn (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct TurnMetrics {
    started: Option<Instant>,
    cause: FailureCause,
    trace: Option<super::trace::TraceParent>,
    /// The `outcome="ok"` series of the store-write histogram, looked up once per
    /// driver instead of once per write (a streamed reply writes every few events; the
    /// registry lookup hashes the name and labels each time).
    write_ok: Option<metrics::Histogram>,
    /// The agent of the task (`[agents.<id>]`): the `agent` label of its task metrics,
    /// left out for the agent at `/`.
    agent: Option<String>,
}

impl TurnMetrics {
    /// The metrics of a task of `agent` (`""`: the agent at `/`).
    pub(crate) fn for_agent(agent: &str) -> Self {
        Self {
            agent: (!agent.is_empty()).then(|| agent.to_owned()),
            ..Self::default()
        }
    }

    /// A run starts: its duration counts from now, its failure cause is the run's
    /// context's, its store writes join the request's trace.
    pub(crate) fn begin(&mut self, run: impl Into<TurnStart>) {
        let TurnStart { cause, trace } = run.into();
        self.started = Some(Instant::now());
        self.cause = cause;
        self.trace = trace;
    }

    /// The span of one task-log write (`store.write`), in the current run's trace.
    pub(crate) fn write_span(&self, task_id: &str, events: usize) -> tracing::Span {
        let span = tracing::info_span!("store.write", task.id = %task_id, events);
        super::otlp::adopt(&span, self.trace.as_ref());
        span
    }

    /// The gateway decides the next FAILED state itself (shutdown, store failure, …).
    pub(crate) fn cause(&self, category: &'static str) {
        self.cause.set(category);
    }

    /// Records one task-log write of `events` events that took `elapsed` in the
    /// store-write histogram (seconds), and logs a warning when it took
    /// [`SLOW_STORE_WRITE`] or more.
    pub(crate) fn store_write(
        &mut self,
        task_id: &str,
        events: usize,
        elapsed: Duration,
        ok: bool,
    ) {
        let seconds = elapsed.as_secs_f64();
        if ok {
            self.write_ok
                .get_or_insert_with(|| metrics::histogram!(STORE_WRITE_DURATION, "outcome" => "ok"))
                .record(seconds);
        } else {
            metrics::histogram!(STORE_WRITE_DURATION, "outcome" => "error").record(seconds);
        }
        if elapsed >= SLOW_STORE_WRITE {
            tracing::warn!(
                task.id = %task_id,
                store.statement = "append_events",
                events,
                duration_ms = super::millis(elapsed),
                "slow task store write"
            );
        }
    }

    /// Events the store has just recorded: counts every terminal or interrupted
    /// state among them and ends the turn's duration at the first.
    pub(crate) fn written<'a>(&mut self, events: impl IntoIterator<Item = &'a StreamResponse>) {
        for ev in events {
            let state = match ev {
                StreamResponse::StatusUpdate(e) => e.status.state,
                StreamResponse::Task(t) => t.status.state,
                _ => continue,
            };
            let Some(label) = state_label(state) else {
                continue;
            };
            let why = match state {
                TaskState::Completed => reason::NONE,
                TaskState::Canceled => reason::CLIENT,
                TaskState::Failed => self.cause.take().unwrap_or(reason::AGENT),
                _ => reason::AGENT,
            };
            let mut labels = vec![
                metrics::Label::new("state", label),
                metrics::Label::new("reason", why),
            ];
            if let Some(agent) = &self.agent {
                labels.push(metrics::Label::new("agent", agent.clone()));
            }
            metrics::counter!(TASKS, labels.clone()).increment(1);
            if let Some(started) = self.started.take() {
                labels.remove(1);
                metrics::histogram!(TASK_DURATION, labels).record(started.elapsed().as_secs_f64());
            }
        }
    }
}
