//! Upstream metrics of every kind (see `docs/operations.md`):
//!
//! - `a2a_upstream_responses_total{status}` (counter) and
//!   `a2a_upstream_request_duration_seconds{status}` (histogram): each attempt of an
//!   invocation, by HTTP status or `error` ([`attempt`]);
//! - `a2a_upstream_retries_total{reason}` (counter): attempts made again ([`retry`]);
//! - `a2a_upstream_failures_total{category}` (counter): invocations that failed their
//!   task, by [`UpstreamError::category`];
//! - `a2a_upstream_first_chunk_seconds` (histogram): from an accepted attempt's start
//!   to the first byte of its reply body;
//!
//! and the `agent` label every `a2a_upstream_*` metric of an invocation carries for an
//! agent of `[agents.<id>]` ([`labels`]; the token and credential fetch metrics carry
//! none: a credential's cache is shared by the agents that use it). Also:
//!
//! - `a2a_context_queued_messages` (gauge) and `a2a_context_queue_wait_seconds`
//!   (histogram): messages waiting for their context's turn (one invocation per
//!   runtime session at a time), and how long each waited.

use tokio::time::Instant;

use futures::StreamExt;
use futures::stream::BoxStream;

use super::errors::UpstreamError;

/// Counter of failed invocations by `category`.
pub const FAILURES: &str = "a2a_upstream_failures_total";
/// Histogram of the time to the first reply byte (seconds).
pub const FIRST_CHUNK: &str = "a2a_upstream_first_chunk_seconds";
/// Gauge of messages waiting for their context's turn.
pub const QUEUED: &str = "a2a_context_queued_messages";
/// Histogram of the wait for the context's turn (seconds).
pub const QUEUE_WAIT: &str = "a2a_context_queue_wait_seconds";

/// The labels of an upstream metric of a call to `agent`: `pairs`, and `agent` for an
/// agent of `[agents.<id>]` (left out for the agent at `/`, `""`, as on the request
/// metrics, so a gateway with one agent keeps its series as they were).
pub(crate) fn labels(agent: &str, pairs: &[(&'static str, &str)]) -> Vec<metrics::Label> {
    let mut labels: Vec<metrics::Label> = pairs
        .iter()
        .map(|(k, v)| metrics::Label::new(*k, (*v).to_owned()))
        .collect();
    if !agent.is_empty() {
        labels.push(metrics::Label::new("agent", agent.to_owned()));
    }
    labels
}

/// Records one invocation attempt to `agent`: `a2a_upstream_responses_total{status}`
/// and `a2a_upstream_request_duration_seconds{status}` (`elapsed`: the time to the reply
/// headers; `status` is the HTTP code, or `error` when no reply came).
pub(crate) fn attempt(status: &str, elapsed: std::time::Duration, agent: &str) {
    let labels = labels(agent, &[("status", status)]);
    metrics::counter!("a2a_upstream_responses_total", labels.clone()).increment(1);
    metrics::histogram!("a2a_upstream_request_duration_seconds", labels)
        .record(elapsed.as_secs_f64());
}

/// Counts one attempt to `agent` made again, by `reason` (`connect`, `timeout` or
/// `status`), in `a2a_upstream_retries_total`.
pub(crate) fn retry(reason: &'static str, agent: &str) {
    metrics::counter!(
        "a2a_upstream_retries_total",
        labels(agent, &[("reason", reason)])
    )
    .increment(1);
}

/// The bounded `reason` label of `a2a_upstream_retries_total` for `e`.
pub(crate) fn retry_reason(e: &UpstreamError) -> &'static str {
    match e {
        UpstreamError::Connect(_) => "connect",
        UpstreamError::Timeout { .. } => "timeout",
        _ => "status",
    }
}

/// Counts one invocation by `agent` that failed its task.
pub(crate) fn failure(e: &UpstreamError, agent: &str) {
    metrics::counter!(FAILURES, labels(agent, &[("category", e.category())])).increment(1);
}

/// Records the first chunk of `body` (an attempt to `agent` that started at
/// `started`).
pub(crate) fn first_chunk<T: Send + 'static, E: Send + 'static>(
    body: BoxStream<'static, Result<T, E>>,
    started: Instant,
    agent: &str,
) -> BoxStream<'static, Result<T, E>> {
    let mut first = true;
    let histogram = metrics::histogram!(FIRST_CHUNK, labels(agent, &[]));
    body.inspect(move |item| {
        if first && item.is_ok() {
            first = false;
            histogram.record(started.elapsed().as_secs_f64());
        }
    })
    .boxed()
}

/// Counts a message in `a2a_context_queued_messages` while it waits for its context's
/// turn; dropping it records the wait.
pub(crate) struct QueueWait(Instant);

impl QueueWait {
    /// Starts waiting.
    pub(crate) fn start() -> Self {
        metrics::gauge!(QUEUED).increment(1.0);
        Self(Instant::now())
    }
}

impl Drop for QueueWait {
    fn drop(&mut self) {
        metrics::gauge!(QUEUED).decrement(1.0);
        metrics::histogram!(QUEUE_WAIT).record(self.0.elapsed().as_secs_f64());
    }
}
