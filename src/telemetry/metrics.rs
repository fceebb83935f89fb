//! The metrics catalogue: the name, type and description of every metric the gateway
//! records, in one place (all prefixed `a2a_`). `docs/operations.md` has a row for each,
//! with its labels and their values, and the queries to watch them by.
//!
//! Code records a metric through the `metrics` facade by its constant here
//! (`metrics::counter!(REQUESTS, ...)`); [`describe`] hands every description to the
//! recorder `ops::install_metrics` installs. The catalogue imports nothing of ours, so
//! every layer can name a metric without importing the layer that records it.

use metrics::Unit;

/// A2A requests, by `binding`, `method` and `outcome` (transport, one per request).
pub const REQUESTS: &str = "a2a_requests_total";
/// Request latency to the response head, by `binding` and `method` (seconds).
pub const REQUEST_DURATION: &str = "a2a_request_duration_seconds";
/// Executor runs in progress, refreshed at each scrape of `/metrics`.
pub const ACTIVE_TASKS: &str = "a2a_active_tasks";
/// Open SSE response streams.
pub const OPEN_STREAMS: &str = "a2a_open_streams";
/// Response stream lifetimes, by `binding` and `outcome` (seconds;
/// [`super::streams`]).
pub const STREAM_DURATION: &str = "a2a_stream_duration_seconds";

/// Upstream invocation latency to the reply head, by `status` (seconds).
pub const UPSTREAM_REQUEST_DURATION: &str = "a2a_upstream_request_duration_seconds";
/// Upstream invocation attempts, by `status` (the HTTP code, or `error`).
pub const UPSTREAM_RESPONSES: &str = "a2a_upstream_responses_total";
/// Upstream retries, by `reason` (`429`, `503`, `connect`, ...).
pub const UPSTREAM_RETRIES: &str = "a2a_upstream_retries_total";
/// Times an `a2a` upstream's task was got back after its stream ended before the task
/// settled, by `how` (`resubscribe`, `poll`: one GetTask).
pub const UPSTREAM_RESUMES: &str = "a2a_upstream_resumes_total";
/// Token endpoint calls, by `outcome` (`ok`, `error`).
pub const UPSTREAM_TOKEN_FETCHES: &str = "a2a_upstream_token_fetches_total";
/// Fetches of AWS credentials through the chain (`upstream.auth.kind = "sigv4"`), by
/// `outcome` (`ok`, `error`, `kept`: a refresh failed and the still-valid cached
/// credentials stay in use).
pub const UPSTREAM_CREDENTIAL_FETCHES: &str = "a2a_upstream_credential_fetches_total";
/// Token endpoint call latency, by `outcome` (seconds).
pub const UPSTREAM_TOKEN_FETCH_DURATION: &str = "a2a_upstream_token_fetch_duration_seconds";
/// Upstream invocations that failed their task, by `category`.
pub const UPSTREAM_FAILURES: &str = "a2a_upstream_failures_total";
/// From an upstream attempt's start to the first byte of its reply body (seconds).
pub const UPSTREAM_FIRST_CHUNK: &str = "a2a_upstream_first_chunk_seconds";
/// Messages waiting for their context's turn (one invocation per runtime session).
pub const CONTEXT_QUEUED_MESSAGES: &str = "a2a_context_queued_messages";
/// Messages that waited for an earlier message of the same context.
pub const CONTEXT_QUEUED_MESSAGES_TOTAL: &str = "a2a_context_queued_messages_total";
/// Each wait for the context's turn (seconds).
pub const CONTEXT_QUEUE_WAIT: &str = "a2a_context_queue_wait_seconds";

/// Connections open now, the refusal lane included.
pub const OPEN_CONNECTIONS: &str = "a2a_open_connections";
/// Connections accepted beyond `server.max_connections`, by `outcome` (`refusal_lane`,
/// `closed`).
pub const CONNECTIONS_OVER_LIMIT: &str = "a2a_connections_over_limit_total";
/// Connections closed by the header or idle timeout, by `reason` (`header`, `idle`).
pub const CONNECTIONS_TIMED_OUT: &str = "a2a_connections_timed_out_total";
/// Failed accepts on the listener (EMFILE, ...).
pub const ACCEPT_ERRORS: &str = "a2a_accept_errors_total";

/// A2A requests refused by `[server.auth]`, by `reason`.
pub const AUTH_FAILURES: &str = "a2a_auth_failures_total";
/// JWKS (and discovery) fetches, by `result` (`ok`, `error`).
pub const JWKS_FETCHES: &str = "a2a_auth_jwks_fetches_total";
/// Usable keys in the cached JWKS.
pub const JWKS_KEYS: &str = "a2a_auth_jwks_keys";
/// 1 while the last JWKS fetch failed (the last good keys stay in use), else 0.
pub const JWKS_STALE: &str = "a2a_auth_jwks_stale";
/// Unix time of the last successful JWKS fetch (seconds).
pub const JWKS_LAST_SUCCESS: &str = "a2a_auth_jwks_last_success_timestamp_seconds";

/// Terminal and interrupted task states written, by `state` and `reason`
/// ([`super::tasks`]).
pub const TASKS: &str = "a2a_tasks_total";
/// From a turn's start to the state it ended in, by `state` (seconds).
pub const TASK_DURATION: &str = "a2a_task_duration_seconds";
/// Task-log writes (retries included), by `outcome` (seconds).
pub const STORE_WRITE_DURATION: &str = "a2a_store_write_duration_seconds";
/// Terminal tasks deleted by the retention job.
pub const STORE_PURGED_TASKS: &str = "a2a_store_purged_tasks_total";
/// INPUT_REQUIRED tasks closed FAILED after `[store] input_required_ttl_secs`.
pub const INPUT_REQUIRED_CLOSED: &str = "a2a_input_required_closed_total";
/// SUBMITTED or WORKING tasks closed FAILED by the stale sweep.
pub const STALLED_TASKS_CLOSED: &str = "a2a_stalled_tasks_closed_total";
/// Tasks of a lost instance closed FAILED by another instance.
pub const ORPHANED_TASKS_CLOSED: &str = "a2a_orphaned_tasks_closed_total";

/// Push deliveries settled, by `outcome` (`delivered`, `retried`, `failed`, `disabled`).
pub const PUSH_DELIVERIES: &str = "a2a_push_deliveries_total";
/// Webhook POSTs made (each attempt).
pub const PUSH_ATTEMPTS: &str = "a2a_push_attempts_total";
/// From the event being stored to the webhook's 2xx (seconds).
pub const PUSH_DELIVERY_LATENCY: &str = "a2a_push_delivery_latency_seconds";
/// Age of the oldest delivery not yet settled (seconds; 0 when none).
pub const PUSH_OLDEST_PENDING: &str = "a2a_push_oldest_pending_seconds";
/// Push configs disabled (410 Gone, or `[push]` failures in a row).
pub const PUSH_CONFIGS_DISABLED: &str = "a2a_push_configs_disabled_total";

/// The type of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// A distribution of seconds (the buckets of `ops::install_metrics`).
    Histogram,
}

/// One metric: its name, type and the description `/metrics` shows as `# HELP`.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// The name (one of the constants of this module).
    pub name: &'static str,
    /// Its type.
    pub kind: Kind,
    /// What it counts or measures.
    pub help: &'static str,
}

const fn counter(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        kind: Kind::Counter,
        help,
    }
}

const fn gauge(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        kind: Kind::Gauge,
        help,
    }
}

const fn histogram(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        kind: Kind::Histogram,
        help,
    }
}

/// Every metric the gateway records.
pub const CATALOGUE: &[Metric] = &[
    counter(
        REQUESTS,
        "A2A requests by binding, method, outcome and agent (`[agents.<id>]`)",
    ),
    histogram(REQUEST_DURATION, "A2A request latency to the response head"),
    gauge(ACTIVE_TASKS, "Executor runs in progress"),
    gauge(OPEN_STREAMS, "Open SSE response streams"),
    histogram(
        STREAM_DURATION,
        "SSE response streams from start to end, by binding and outcome",
    ),
    histogram(
        UPSTREAM_REQUEST_DURATION,
        "Upstream invocation latency to the reply head, by status",
    ),
    counter(
        UPSTREAM_RESPONSES,
        "Upstream invocation attempts by HTTP status",
    ),
    counter(UPSTREAM_RETRIES, "Upstream retries by reason"),
    counter(
        UPSTREAM_RESUMES,
        "A2A upstream tasks got back after a broken stream, by how",
    ),
    counter(UPSTREAM_TOKEN_FETCHES, "Token endpoint calls by outcome"),
    counter(
        UPSTREAM_CREDENTIAL_FETCHES,
        "AWS credential fetches through the chain by outcome (ok, error, kept)",
    ),
    histogram(
        UPSTREAM_TOKEN_FETCH_DURATION,
        "Token endpoint calls, by outcome",
    ),
    counter(
        UPSTREAM_FAILURES,
        "Upstream invocations that failed their task, by category",
    ),
    histogram(
        UPSTREAM_FIRST_CHUNK,
        "From an upstream attempt's start to the first byte of its reply body",
    ),
    gauge(
        CONTEXT_QUEUED_MESSAGES,
        "Messages waiting for their context's turn (one invocation per runtime session)",
    ),
    counter(
        CONTEXT_QUEUED_MESSAGES_TOTAL,
        "Messages that waited for an earlier message of the same context",
    ),
    histogram(CONTEXT_QUEUE_WAIT, "Waits for the context's turn"),
    gauge(
        OPEN_CONNECTIONS,
        "Connections open now (refusal lane included)",
    ),
    counter(
        CONNECTIONS_OVER_LIMIT,
        "Connections accepted beyond server.max_connections, by outcome (refusal_lane, closed)",
    ),
    counter(
        CONNECTIONS_TIMED_OUT,
        "Connections closed by the header or idle timeout, by reason",
    ),
    counter(
        ACCEPT_ERRORS,
        "Failed accepts on the listener (e.g. out of file descriptors)",
    ),
    counter(
        AUTH_FAILURES,
        "A2A requests refused by [server.auth] (401, 403, or 503 while no JWKS was fetched), by reason",
    ),
    counter(JWKS_FETCHES, "JWKS (and discovery) fetches, by result"),
    gauge(JWKS_KEYS, "Usable keys in the cached JWKS"),
    gauge(
        JWKS_STALE,
        "1 while the last JWKS fetch failed (the last good keys are in use)",
    ),
    gauge(
        JWKS_LAST_SUCCESS,
        "Unix time of the last successful JWKS fetch",
    ),
    counter(
        TASKS,
        "Terminal and interrupted task states written, by state and reason category",
    ),
    histogram(
        TASK_DURATION,
        "From a turn's start to the state it ended in",
    ),
    histogram(
        STORE_WRITE_DURATION,
        "Task-log writes (retries included), by outcome",
    ),
    counter(
        STORE_PURGED_TASKS,
        "Terminal tasks deleted by the retention job",
    ),
    counter(
        INPUT_REQUIRED_CLOSED,
        "INPUT_REQUIRED tasks closed FAILED after [store] input_required_ttl_secs",
    ),
    counter(
        STALLED_TASKS_CLOSED,
        "SUBMITTED or WORKING tasks closed FAILED by the stale sweep",
    ),
    counter(
        ORPHANED_TASKS_CLOSED,
        "Tasks of a lost instance closed FAILED by another instance",
    ),
    counter(PUSH_DELIVERIES, "Push deliveries settled, by outcome"),
    counter(PUSH_ATTEMPTS, "Webhook POSTs made (each attempt)"),
    histogram(
        PUSH_DELIVERY_LATENCY,
        "From the event being stored to the webhook's 2xx",
    ),
    gauge(
        PUSH_OLDEST_PENDING,
        "Age of the oldest push delivery not yet settled (0 when none)",
    ),
    counter(
        PUSH_CONFIGS_DISABLED,
        "Push configs disabled (410 Gone, or [push] failures in a row)",
    ),
];

/// Gives the installed recorder the description of every metric of the [`CATALOGUE`]
/// (histograms in seconds).
pub fn describe() {
    for m in CATALOGUE {
        match m.kind {
            Kind::Counter => metrics::describe_counter!(m.name, m.help),
            Kind::Gauge => metrics::describe_gauge!(m.name, m.help),
            Kind::Histogram => metrics::describe_histogram!(m.name, Unit::Seconds, m.help),
        }
    }
}

/// The labels of a request metric ([`REQUESTS`], [`REQUEST_DURATION`]): `binding`,
/// `method`, `outcome` (the counter only), and `agent` for a request to an agent of
/// `[agents.<id>]` (`docs/agents.md`); left out for the agent at `/`, so a gateway with
/// one agent keeps its series as they were.
pub fn request_labels(
    binding: &'static str,
    method: &'static str,
    outcome: Option<&'static str>,
    agent: &str,
) -> Vec<metrics::Label> {
    let mut labels = vec![
        metrics::Label::new("binding", binding),
        metrics::Label::new("method", method),
    ];
    if let Some(outcome) = outcome {
        labels.push(metrics::Label::new("outcome", outcome));
    }
    if !agent.is_empty() {
        labels.push(metrics::Label::new("agent", agent.to_owned()));
    }
    labels
}

/// The `agent` field of a log line: the agent id, or `-` for the agent at `/`.
pub fn agent_field(agent: &str) -> &str {
    if agent.is_empty() { "-" } else { agent }
}

#[cfg(test)]
mod tests {
    use super::CATALOGUE;

    /// Names in `src` that look like metrics but are not (the notification channel,
    /// env keys, PostgreSQL tables).
    const NOT_METRICS: &[&str] = &[
        "a2a_gateway",
        "a2a_control",
        "a2a_gateway_log__format",
        "a2a_session_leases",
        "a2a_task_leases",
        // Table names (the owner step of migration 0008 names the tables it rewrites).
        "a2a_tasks",
        "a2a_task_artifacts",
        "a2a_task_events",
        "a2a_push_configs",
        "a2a_push_outbox",
        "a2a_upstream_links",
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

    /// A metric recorded under a name written out (not one of this module's constants)
    /// is still one of the catalogue's, so that it is described; and the catalogue
    /// names each metric once.
    #[test]
    fn every_metric_in_the_code_is_in_the_catalogue() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut names = std::collections::BTreeSet::new();
        literals(&root.join("src"), &mut names);
        let catalogue: std::collections::BTreeSet<&str> =
            CATALOGUE.iter().map(|m| m.name).collect();
        assert_eq!(
            catalogue.len(),
            CATALOGUE.len(),
            "a name is in the catalogue twice"
        );
        let missing: Vec<_> = names
            .iter()
            .filter(|n| !NOT_METRICS.contains(&n.as_str()))
            .filter(|n| !catalogue.contains(n.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "metrics missing from CATALOGUE: {missing:?}"
        );
    }
}
