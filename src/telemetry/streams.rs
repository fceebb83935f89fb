//! The end of a response stream (SSE, spec §9.4.2, §11.7; gRPC server streams, §10): one `stream ended` log
//! line with its outcome, event count and duration, and the histogram
//! `a2a_stream_duration_seconds{binding, outcome}`.
//!
//! `outcome` is `completed` (the task's stream ended: a final or interrupted state
//! was delivered), `error` (an error event ended it), `shutdown` (cut at shutdown
//! after [`crate::transport::sse::SHUTDOWN_DRAIN`]) or `disconnected` (the client
//! went away first).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::metrics::{OPEN_STREAMS, STREAM_DURATION};

/// How a stream ended (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamOutcome {
    /// The event stream ran out.
    Completed,
    /// An error event was the last.
    Error,
    /// Shutdown cut it.
    Shutdown,
    /// Dropped before any of the above: the client disconnected.
    Disconnected,
}

impl StreamOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Error => "error",
            Self::Shutdown => "shutdown",
            Self::Disconnected => "disconnected",
        }
    }
}

#[derive(Debug)]
struct State {
    binding: &'static str,
    started: Instant,
    events: u64,
    task_id: Option<String>,
    outcome: Option<StreamOutcome>,
    _open: OpenStreamGuard,
}

/// Shared by the pieces of one stream; the log line and the metric are written when
/// the last clone is dropped (with the response body). Also counts the stream in
/// `a2a_open_streams` while it lives.
#[derive(Debug, Clone)]
pub struct StreamEnd(Arc<Mutex<State>>);

impl StreamEnd {
    /// A stream of `binding` (`jsonrpc`, `rest`, `grpc`) starting now.
    pub fn new(binding: &'static str) -> Self {
        Self(Arc::new(Mutex::new(State {
            binding,
            started: Instant::now(),
            events: 0,
            task_id: None,
            outcome: None,
            _open: OpenStreamGuard::new(),
        })))
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// One event was sent, of task `task_id` when known.
    pub fn event(&self, task_id: Option<&str>) {
        self.with(|s| {
            s.events += 1;
            if s.task_id.is_none() {
                s.task_id = task_id.map(|t| t.chars().take(128).collect());
            }
        });
    }

    /// Records how the stream ended; the first call wins.
    pub fn end(&self, outcome: StreamOutcome) {
        self.with(|s| {
            s.outcome.get_or_insert(outcome);
        });
    }
}

impl Drop for State {
    fn drop(&mut self) {
        let outcome = self.outcome.unwrap_or(StreamOutcome::Disconnected).as_str();
        let elapsed = self.started.elapsed();
        metrics::histogram!(STREAM_DURATION, "binding" => self.binding, "outcome" => outcome)
            .record(elapsed.as_secs_f64());
        tracing::info!(
            binding = self.binding,
            task.id = self.task_id.as_deref().unwrap_or("-"),
            outcome,
            events = self.events,
            duration_ms = super::millis(elapsed),
            "stream ended"
        );
    }
}

/// Counts one open SSE stream in `a2a_open_streams` for as long as it lives.
#[derive(Debug)]
pub struct OpenStreamGuard(());

impl OpenStreamGuard {
    /// Increments the gauge; dropping the guard decrements it.
    pub fn new() -> Self {
        metrics::gauge!(OPEN_STREAMS).increment(1.0);
        Self(())
    }
}

impl Default for OpenStreamGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for OpenStreamGuard {
    fn drop(&mut self) {
        metrics::gauge!(OPEN_STREAMS).decrement(1.0);
    }
}
