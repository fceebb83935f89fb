//! Operations endpoints beyond health: `GET /metrics` in the Prometheus text format.
//!
//! The metrics themselves (names, types, descriptions) are the catalogue of
//! [`crate::telemetry::metrics`].
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
use crate::telemetry::metrics::{
    ACCEPT_ERRORS, ACTIVE_TASKS, AUTH_FAILURES, CONNECTIONS_OVER_LIMIT, CONNECTIONS_TIMED_OUT,
    CONTEXT_QUEUED_MESSAGES, CONTEXT_QUEUED_MESSAGES_TOTAL, OPEN_CONNECTIONS, OPEN_STREAMS, TASKS,
};
use crate::telemetry::{metrics as catalogue, tasks};

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
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .expect("bucket list is not empty");
            match builder.install_recorder() {
                Ok(handle) => {
                    catalogue::describe();
                    // Present from the first scrape, before any stream opened.
                    metrics::gauge!(OPEN_STREAMS).set(0.0);
                    metrics::gauge!(ACTIVE_TASKS).set(0.0);
                    metrics::gauge!(OPEN_CONNECTIONS).set(0.0);
                    metrics::counter!(ACCEPT_ERRORS).absolute(0);
                    metrics::gauge!(CONTEXT_QUEUED_MESSAGES).set(0.0);
                    metrics::counter!(CONTEXT_QUEUED_MESSAGES_TOTAL).absolute(0);
                    for outcome in ["refusal_lane", "closed"] {
                        metrics::counter!(CONNECTIONS_OVER_LIMIT, "outcome" => outcome).absolute(0);
                    }
                    for reason in ["header", "idle"] {
                        metrics::counter!(CONNECTIONS_TIMED_OUT, "reason" => reason).absolute(0);
                    }
                    for reason in ["missing", "invalid"] {
                        metrics::counter!(AUTH_FAILURES, "reason" => reason).increment(0);
                    }
                    for (state, reason) in tasks::PRESET {
                        metrics::counter!(TASKS, "state" => *state, "reason" => *reason)
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
