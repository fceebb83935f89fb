//! Operations endpoints beyond health: `GET /metrics` in the Prometheus text format.
//!
//! Metric names (all prefixed `a2a_`; see `docs/operations.md`, "Metrics"):
//!
//! | name | type | labels | recorded by |
//! |---|---|---|---|
//! | `a2a_requests_total` | counter | `method`, `outcome` | transport, one per JSON-RPC request |
//! | `a2a_request_duration_seconds` | histogram | `method` | transport (time to the response head) |
//! | `a2a_active_tasks` | gauge | | here, executor runs in progress at scrape time |
//! | `a2a_open_streams` | gauge | | transport, SSE responses currently open |
//! | `a2a_upstream_request_duration_seconds` | histogram | `status` | upstream executor, per attempt, to the reply head |
//! | `a2a_upstream_responses_total` | counter | `status` | upstream executor, per attempt (`status` = HTTP code or `error`) |
//! | `a2a_upstream_retries_total` | counter | `reason` | upstream executor, each retry (`429`, `503`, `connect`, …) |
//! | `a2a_upstream_token_fetches_total` | counter | `outcome` (`ok`, `error`) | upstream token cache, each token endpoint call |
//! | `a2a_auth_failures_total` | counter | `reason` (`missing`, `invalid`, the JWT checks, `insufficient_scope`, `tenant`, `keys_unavailable`; see docs/operations.md) | transport, each request refused by `[server.auth]` (401, 403, or 503 while no JWKS was fetched) |
//! | `a2a_open_connections` | gauge | | listener, connections open now (refusal lane included) |
//! | `a2a_connections_over_limit_total` | counter | `outcome` (`refusal_lane`, `closed`) | listener, each connection accepted beyond `server.max_connections` |
//! | `a2a_connections_timed_out_total` | counter | `reason` (`header`, `idle`) | listener, each connection closed by the header or idle timeout |
//! | `a2a_accept_errors_total` | counter | | listener, each failed `accept` (EMFILE, …) |
//! | `a2a_tasks_total` | counter | `state`, `reason` | task driver, each terminal or interrupted state written ([`crate::telemetry::tasks`]) |
//! | `a2a_task_duration_seconds` | histogram | `state` | task driver, a turn's start to that state |
//! | `a2a_store_write_duration_seconds` | histogram | `outcome` | task driver, each task-log write |
//! | `a2a_stream_duration_seconds` | histogram | `binding`, `outcome` | SSE streams, at their end ([`crate::telemetry::streams`]) |
//! | `a2a_upstream_token_fetch_duration_seconds` | histogram | `outcome` | upstream token cache, each token endpoint call |
//! | `a2a_upstream_failures_total` | counter | `category` | upstream executor, each invocation that failed its task |
//! | `a2a_upstream_first_chunk_seconds` | histogram | | upstream executor, attempt start to the first reply byte |
//! | `a2a_context_queued_messages` | gauge | | upstream executor, messages waiting for their context's turn |
//! | `a2a_context_queue_wait_seconds` | histogram | | upstream executor, each wait for the context's turn |
//! | `a2a_context_queued_messages_total` | counter | | upstream executor, each message that waited for an earlier one of its context; the task shows WORKING with a "queued behind" status message meanwhile |
//!
//! `/metrics` itself is not authenticated (nor are `/healthz`, `/readyz` and the agent card):
//! keep it reachable only from the scraper (firewall, network policy).
//!
//! The recorder is process-wide (the `metrics` facade has one global recorder), so
//! [`install_metrics`] installs it once and returns the same handle afterwards.

use std::sync::OnceLock;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::handler::RequestHandler;

/// Gauge of executor runs in progress.
pub const ACTIVE_TASKS: &str = "a2a_active_tasks";
/// Gauge of open SSE response streams.
pub const OPEN_STREAMS: &str = "a2a_open_streams";

/// Histogram buckets (seconds) for every `*_seconds` histogram: 1 ms to 15 min.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// How often the recorder's histogram samples are folded into their buckets.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs the recorder's upkeep every `every` on a thread of its own, for the life of
/// the process. `install_recorder` leaves this to its caller: until upkeep (or a
/// scrape of `/metrics`) runs, every histogram sample (each request's duration, each
/// store write's...) is kept in a pending list, so a gateway that nobody scrapes grows
/// by a few hundred bytes per request without bound (seen in the 30-minute soak of
/// `benches/soak.rs`: +0.55 MiB a minute at 20 operations a second). A thread, not a
/// tokio task, so that it does not depend on which runtime installed the recorder.
fn spawn_upkeep(handle: PrometheusHandle, every: std::time::Duration) {
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(every);
                handle.run_upkeep();
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the metrics upkeep thread; histogram samples wait for a scrape of /metrics");
    }
}

/// Installs the Prometheus recorder as the global `metrics` recorder (once per process)
/// and returns its handle; `None` when another recorder was installed first.
pub fn install_metrics() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Suffix("_seconds".into()),
                    LATENCY_BUCKETS,
                )
                .expect("bucket list is not empty");
            match builder.install_recorder() {
                Ok(handle) => {
                    describe();
                    // Present from the first scrape, before any stream opened.
                    metrics::gauge!(OPEN_STREAMS).set(0.0);
                    metrics::gauge!(ACTIVE_TASKS).set(0.0);
                    metrics::gauge!(crate::server::OPEN_CONNECTIONS).set(0.0);
                    metrics::counter!(crate::server::ACCEPT_ERRORS).absolute(0);
                    metrics::gauge!(crate::upstream::QUEUED_MESSAGES).set(0.0);
                    metrics::counter!("a2a_context_queued_messages_total").absolute(0);
                    for outcome in ["refusal_lane", "closed"] {
                        metrics::counter!(crate::server::OVER_LIMIT, "outcome" => outcome)
                            .absolute(0);
                    }
                    for reason in ["header", "idle"] {
                        metrics::counter!("a2a_connections_timed_out_total", "reason" => reason)
                            .absolute(0);
                    }
                    for reason in ["missing", "invalid"] {
                        metrics::counter!(crate::transport::auth::AUTH_FAILURES, "reason" => reason)
                            .increment(0);
                    }
                    for (state, reason) in crate::telemetry::tasks::PRESET {
                        metrics::counter!(crate::telemetry::tasks::TASKS, "state" => *state, "reason" => *reason)
                            .increment(0);
                    }
                    spawn_upkeep(handle.clone(), UPKEEP_EVERY);
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics recorder not installed; /metrics is empty");
                    None
                }
            }
        })
        .clone()
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!("a2a_requests_total", "A2A requests by method and outcome");
    describe_histogram!(
        "a2a_request_duration_seconds",
        Unit::Seconds,
        "A2A request latency to the response head"
    );
    describe_gauge!(ACTIVE_TASKS, "Executor runs in progress");
    describe_gauge!(OPEN_STREAMS, "Open SSE response streams");
    describe_histogram!(
        "a2a_upstream_request_duration_seconds",
        Unit::Seconds,
        "Upstream invocation latency to the reply head, by status"
    );
    describe_counter!(
        "a2a_upstream_responses_total",
        "Upstream invocation attempts by HTTP status"
    );
    describe_counter!("a2a_upstream_retries_total", "Upstream retries by reason");
    describe_counter!(
        "a2a_upstream_token_fetches_total",
        "Token endpoint calls by outcome"
    );
    describe_gauge!(
        crate::server::OPEN_CONNECTIONS,
        "Connections open now (refusal lane included)"
    );
    describe_counter!(
        crate::server::OVER_LIMIT,
        "Connections accepted beyond server.max_connections, by outcome (refusal_lane, closed)"
    );
    describe_counter!(
        crate::server::TIMED_OUT,
        "Connections closed by the header or idle timeout, by reason"
    );
    describe_counter!(
        crate::server::ACCEPT_ERRORS,
        "Failed accepts on the listener (e.g. out of file descriptors)"
    );
    describe_counter!(
        crate::telemetry::tasks::TASKS,
        "Terminal and interrupted task states written, by state and reason category"
    );
    describe_histogram!(
        crate::telemetry::tasks::TASK_DURATION,
        Unit::Seconds,
        "From a turn's start to the state it ended in"
    );
    describe_histogram!(
        crate::telemetry::tasks::STORE_WRITE_DURATION,
        Unit::Seconds,
        "Task-log writes (retries included), by outcome"
    );
    describe_histogram!(
        crate::telemetry::streams::STREAM_DURATION,
        Unit::Seconds,
        "SSE response streams from start to end, by binding and outcome"
    );
    describe_histogram!(
        "a2a_upstream_token_fetch_duration_seconds",
        Unit::Seconds,
        "Token endpoint calls, by outcome"
    );
    describe_counter!(
        "a2a_upstream_failures_total",
        "Upstream invocations that failed their task, by category"
    );
    describe_histogram!(
        "a2a_upstream_first_chunk_seconds",
        Unit::Seconds,
        "From an upstream attempt's start to the first byte of its reply body"
    );
    describe_gauge!(
        crate::upstream::QUEUED_MESSAGES,
        "Messages waiting for their context's turn (one invocation per runtime session)"
    );
    describe_histogram!(
        "a2a_context_queue_wait_seconds",
        Unit::Seconds,
        "Waits for the context's turn"
    );
    describe_counter!(
        "a2a_context_queued_messages_total",
        "Messages that waited for an earlier message of the same context"
    );
    describe_counter!(
        crate::transport::auth::AUTH_FAILURES,
        "A2A requests refused by [server.auth] (401, 403, or 503 while no JWKS was fetched), by reason"
    );
}

/// `GET /metrics`: the Prometheus text exposition of `handle`, with the
/// `a2a_active_tasks` gauge refreshed from `handler` at scrape time.
pub fn metrics_routes(handle: Option<PrometheusHandle>, handler: RequestHandler) -> Router {
    Router::new()
        .route("/metrics", get(render))
        .with_state((handle, handler))
}

async fn render(
    State((handle, handler)): State<(Option<PrometheusHandle>, RequestHandler)>,
) -> Response {
    metrics::gauge!(ACTIVE_TASKS).set(handler.active_runs() as f64);
    let body = handle.map(|h| h.render()).unwrap_or_default();
    let mut resp = body.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
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

#[cfg(test)]
mod tests {
    /// Names in `src` that look like metrics but are not (the notification channel,
    /// env keys, PostgreSQL tables).
    const NOT_METRICS: &[&str] = &[
        "a2a_gateway",
        "a2a_control",
        "a2a_gateway_log__format",
        "a2a_session_leases",
        "a2a_task_leases",
    ];

    fn literals(dir: &std::path::Path, found: &mut std::collections::BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                literals(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (i, _) in text.match_indices("\"a2a_") {
                    let rest = &text[i + 1..];
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    if !name.ends_with('_') && rest[name.len()..].starts_with('"') {
                        found.insert(name);
                    }
                }
            }
        }
    }

    #[test]
    fn every_metric_in_the_code_is_in_the_operations_table() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut names = std::collections::BTreeSet::new();
        literals(&root.join("src"), &mut names);
        let docs = std::fs::read_to_string(root.join("docs/operations.md")).unwrap();
        let missing: Vec<_> = names
            .iter()
            .filter(|n| !NOT_METRICS.contains(&n.as_str()))
            .filter(|n| !docs.contains(&format!("| `{n}` |")))
            .collect();
        assert!(names.len() > 30, "the scan found the metrics: {names:?}");
        assert!(
            missing.is_empty(),
            "metrics without a row in docs/operations.md: {missing:?}"
        );
    }
}
