//! Observability end to end (issue 13): a real `a2a-gateway serve` on 127.0.0.1:0, with
//! OAuth2 against a fake token endpoint, in front of a `MockRuntime` answering by prompt,
//! runs a mix of task outcomes: completed, failed by an upstream reset, an event stream cut mid-line, garbage declared as JSON and an invalid control object,
//! canceled during a stream, input-required, and requests that fail. Then:
//!
//! - a real Prometheus (the Debian `prometheus` package; `.ci/run` installs it) scrapes the
//!   gateway's `/metrics`, and every ` ```promql ` query of `docs/operations.md` is evaluated
//!   by it; the ratios are checked against what the mix implies;
//! - every metric `docs/grafana-dashboard.json` queries exists in the real `/metrics`;
//! - the JSON log lines: the request line names the caller and the peer, each stream logs
//!   its end, no line carries `spans`, and the inbound `traceparent` reaches the runtime.
//!
//! The mix runs twice: once before Prometheus starts (so every series exists at its first
//! scrape: `rate` then uses the same sample times for all of them and ratios are exact),
//! once between its scrapes. Without a `prometheus` binary (`A2A_GATEWAY_TEST_PROMETHEUS`,
//! default `prometheus` on `PATH`) the Prometheus part is skipped with a note, unless
//! `CI=true`, where it fails.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use a2a_gateway::test_util::{
    ChildGuard, GatewayProcess, free_port, python_with, rpc_with, skip, user_message,
};
use a2a_gateway::upstream::mock::{MockReply, MockRuntime};
use a2a_gateway::upstream::raw_mock::*;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// The gateway: `serve` with a JSON log, waited for until it logs its URL.
fn start_gateway(dir: &Path, runtime_url: &str, token_url: &str) -> (GatewayProcess, String) {
    let gw = GatewayProcess::init(BIN)
        .current_dir(dir)
        .config(format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[log]\nformat = \"json\"\nlevel = \"info\"\n\n\
             [store]\nurl = \"memory:\"\n\n\
             [upstream]\nurl = \"{runtime_url}\"\nmax_retries = 0\nstop_session_on_cancel = false\n\n\
             [upstream.auth]\nkind = \"oauth2\"\nclient_id = \"obs-client\"\n\
             client_secret = \"obs-secret-value\"\ntoken_url = \"{token_url}\"\n"
        ))
        .arg("serve")
        .timeout(Duration::from_secs(20))
        .start();
    let url = gw.url.clone();
    (gw, url)
}

/// The fake runtime: what it answers depends on the prompt's first word.
async fn runtime() -> MockRuntime {
    let up = MockRuntime::start().await;
    up.answer_with(|req| {
        let prompt = req.prompt().unwrap_or_default();
        match prompt.split_whitespace().next().unwrap_or_default() {
            "complete" => MockReply::Sse(vec![json!("all "), json!("done")]),
            // A reply that starts, then the connection breaks.
            "reset" => MockReply::SseThenBreak(vec![json!("partial")]),
            // The event stream ends in the middle of an event line.
            "truncated" => MockReply::Raw {
                content_type: "text/event-stream; charset=utf-8",
                body: "data: \"Hel".into(),
            },
            // Garbage declared as JSON.
            "garbage" => MockReply::Raw {
                content_type: "application/json",
                body: "\u{1}{not json at all".into(),
            },
            "control" => MockReply::Sse(vec![json!({"a2a_control": "no_such_kind", "text": "x"})]),
            "input" => MockReply::Sse(vec![
                json!({"a2a_control": "input_required", "text": "Which one?"}),
            ]),
            // Streams one chunk, then waits until the gateway hangs up (canceled).
            "hold" => MockReply::SseThenStall(vec![json!("working")]),
            _ => MockReply::status(500),
        }
    });
    up
}

async fn token_endpoint() -> RawServer {
    raw_server(|_, _| {
        vec![Step::Write(json_response(
            r#"{"access_token": "obs-token-value", "token_type": "Bearer", "expires_in": 3600}"#,
        ))]
    })
    .await
}

fn message(text: &str) -> Value {
    json!({"message": user_message(text)})
}

/// A JSON-RPC call in the caller's trace.
async fn rpc(http: &reqwest::Client, url: &str, method: &str, params: Value) -> Value {
    let traced = http
        .post(url)
        .header("traceparent", format!("00-{TRACE_ID}-00f067aa0ba902b7-01"));
    rpc_with(traced, method, params).await
}

fn state_of(v: &Value) -> String {
    v["result"]["task"]["status"]["state"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {v}"))
        .to_owned()
}

/// What one round of the mix sends, and what it must count.
const COMPLETED: usize = 3;
const FAILURES: [&str; 4] = ["reset", "truncated", "garbage", "control"];
const NOT_FOUND: usize = 2;

/// One round: 3 completed, 4 failed (one per category), 1 input-required (blocking
/// SendMessage), 1 canceled during a SendStreamingMessage, 2 GetTask of unknown tasks.
/// 12 requests, 2 of them errors.
async fn mix(http: &reqwest::Client, url: &str) {
    for _ in 0..COMPLETED {
        let v = rpc(http, url, "SendMessage", message("complete it")).await;
        assert_eq!(state_of(&v), "TASK_STATE_COMPLETED", "{v}");
    }
    for word in FAILURES {
        let v = rpc(http, url, "SendMessage", message(word)).await;
        assert_eq!(state_of(&v), "TASK_STATE_FAILED", "{word}: {v}");
    }
    let v = rpc(http, url, "SendMessage", message("input please")).await;
    assert_eq!(state_of(&v), "TASK_STATE_INPUT_REQUIRED", "{v}");
    for _ in 0..NOT_FOUND {
        let v = rpc(http, url, "GetTask", json!({"id": "no-such-task"})).await;
        assert!(v.get("error").is_some(), "{v}");
    }
    // A stream: read until the task exists and works, cancel it, read to its end.
    let resp = http
        .post(url)
        .header("A2A-Version", "1.0")
        .header("accept", "text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "SendStreamingMessage", "params": message("hold on")}))
        .send()
        .await
        .unwrap();
    let mut events = resp.bytes_stream().eventsource();
    let mut task_id = None;
    let mut last = Value::Null;
    let mut canceled = false;
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(20), events.next()).await {
        let v: Value = serde_json::from_str(&ev.unwrap().data).unwrap();
        let r = &v["result"];
        if task_id.is_none() {
            task_id = r["task"]["id"]
                .as_str()
                .or(r["statusUpdate"]["taskId"].as_str())
                .or(r["artifactUpdate"]["taskId"].as_str())
                .map(str::to_owned);
        }
        if !canceled && r.get("artifactUpdate").is_some() {
            let id = task_id.clone().expect("task id");
            let c = rpc(http, url, "CancelTask", json!({"id": id})).await;
            assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED", "{c}");
            canceled = true;
        }
        last = v;
    }
    assert!(canceled, "the stream never showed the reply: {last}");
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_CANCELED",
        "{last}"
    );
}

/// The samples of the Prometheus text exposition: `name{labels}` → value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// Metric family names present in an exposition (`_bucket`, `_sum`, `_count` of a
/// histogram included as written).
fn names(text: &str) -> BTreeSet<String> {
    samples(text)
        .keys()
        .map(|s| s.split('{').next().unwrap().to_owned())
        .collect()
}

fn sum(samples: &BTreeMap<String, f64>, prefix: &str, contains: &[&str]) -> f64 {
    samples
        .iter()
        .filter(|(k, _)| k.starts_with(prefix) && contains.iter().all(|c| k.contains(c)))
        .map(|(_, v)| v)
        .sum()
}

async fn scrape(http: &reqwest::Client, gw: &str) -> String {
    let resp = http.get(format!("{gw}metrics")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap()
}

/// The ` ```promql ` blocks of `docs/operations.md`, each with the paragraph before it.
fn documented_queries() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .unwrap();
    let mut out = Vec::new();
    let mut title = String::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "```promql" {
            let query: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
            out.push((title.clone(), query.join(" ").trim().to_owned()));
        } else if !line.trim().is_empty() {
            title = line.trim().to_owned();
        }
    }
    out
}

/// Metric names a PromQL expression refers to: identifiers starting `a2a_`.
fn metrics_in(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(pos) = expr[i..].find("a2a_") {
        let start = i + pos;
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        let boundary =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        if boundary {
            out.insert(expr[start..end].to_owned());
        }
        i = end;
    }
    out
}

fn prometheus_binary() -> Option<String> {
    let bin = std::env::var("A2A_GATEWAY_TEST_PROMETHEUS").unwrap_or_else(|_| "prometheus".into());
    let found = Command::new(&bin)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Some(bin);
    }
    skip(
        "the PromQL part",
        &format!("no Prometheus binary ({bin}): .ci/run installs the Debian package"),
    );
    None
}

struct Prometheus {
    _proc: ChildGuard,
    url: String,
    http: reqwest::Client,
}

impl Prometheus {
    fn start(bin: &str, dir: &Path, target: &str) -> Prometheus {
        let port = free_port();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: a2a-gateway\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .current_dir(dir)
            .args([
                &format!("--config.file={}", config.display()),
                &format!("--storage.tsdb.path={}", dir.join("tsdb").display()),
                &format!("--web.listen-address=127.0.0.1:{port}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn prometheus");
        Prometheus {
            _proc: ChildGuard(child),
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        }
    }

    /// Evaluates `query` at `at` (Unix seconds; now when `None`): the `data.result`
    /// vector, or the error.
    async fn query_at(&self, query: &str, at: Option<f64>) -> Result<Vec<Value>, String> {
        let mut params = vec![("query", query.to_owned())];
        if let Some(at) = at {
            params.push(("time", format!("{at:.3}")));
        }
        let resp = self
            .http
            .get(format!("{}/api/v1/query", self.url))
            .query(&params)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let v: Value = resp.json().await.map_err(|e| e.to_string())?;
        if v["status"] != "success" {
            return Err(v.to_string());
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    async fn query(&self, query: &str) -> Result<Vec<Value>, String> {
        self.query_at(query, None).await
    }

    /// The single value of a query that returns one series.
    async fn scalar(&self, query: &str) -> f64 {
        let r = self.query(query).await.unwrap();
        assert_eq!(r.len(), 1, "{query}: {r:?}");
        value(&r[0])
    }

    /// Waits (bounded) until `query` returns one series whose value satisfies `ok`.
    async fn wait_for(&self, query: &str, ok: impl Fn(f64) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = self.query(query).await
                && r.len() == 1
                && ok(value(&r[0]))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus never answered {query} as expected"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn value(series: &Value) -> f64 {
    series["value"][1].as_str().unwrap().parse().unwrap()
}

fn by_label(result: &[Value], label: &str) -> BTreeMap<String, f64> {
    result
        .iter()
        .map(|s| {
            (
                s["metric"][label].as_str().unwrap_or("").to_owned(),
                value(s),
            )
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documented_queries_and_dashboard_on_a_real_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let up = runtime().await;
    let token = token_endpoint().await;
    let token_url = token.url.replace("/invocations", "/token");
    let (gw, url) = start_gateway(dir.path(), &up.url(), &token_url);
    let http = reqwest::Client::new();

    // Round 1: every series exists before Prometheus's first scrape.
    mix(&http, &url).await;
    let before = samples(&scrape(&http, &url).await);
    let families = names(&scrape(&http, &url).await);

    // The dashboard's metrics all exist in the real exposition.
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/grafana-dashboard.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(target["expr"].as_str().expect("expr").to_owned());
        }
    }
    assert!(exprs.len() >= 10, "{exprs:?}");
    let wanted: BTreeSet<String> = exprs.iter().flat_map(|e| metrics_in(e)).collect();
    let missing: Vec<&String> = wanted.iter().filter(|m| !families.contains(*m)).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries {missing:?}, not in /metrics:\n{families:?}"
    );
    for topic in [
        "a2a_requests_total",
        "a2a_tasks_total",
        "a2a_upstream_request_duration_seconds_bucket",
        "a2a_upstream_first_chunk_seconds_bucket",
        "a2a_upstream_token_fetches_total",
        "a2a_store_write_duration_seconds_bucket",
        "a2a_open_streams",
    ] {
        assert!(
            wanted.contains(topic),
            "the dashboard has no panel on {topic}"
        );
    }
    // Every documented query names metrics that exist.
    let queries = documented_queries();
    assert!(queries.len() >= 10, "{queries:?}");
    for (title, q) in &queries {
        for m in metrics_in(q) {
            assert!(families.contains(&m), "{title}: {m} is not in /metrics");
        }
    }

    // The counters, straight from /metrics after round 1.
    assert_eq!(
        sum(&before, "a2a_tasks_total", &["state=\"completed\""]),
        COMPLETED as f64
    );
    for (category, n) in [
        ("broken", 1.0),
        ("truncated", 1.0),
        ("malformed", 1.0),
        ("control", 1.0),
    ] {
        assert_eq!(
            sum(
                &before,
                "a2a_tasks_total",
                &["state=\"failed\"", &format!("reason=\"{category}\"")]
            ),
            n,
            "{category}: {before:#?}"
        );
        assert_eq!(
            sum(
                &before,
                "a2a_upstream_failures_total",
                &[&format!("category=\"{category}\"")]
            ),
            n,
            "{category}"
        );
    }
    assert_eq!(
        sum(
            &before,
            "a2a_tasks_total",
            &["state=\"canceled\"", "reason=\"client\""]
        ),
        1.0
    );
    assert_eq!(
        sum(&before, "a2a_tasks_total", &["state=\"input_required\""]),
        1.0
    );
    assert_eq!(
        sum(
            &before,
            "a2a_stream_duration_seconds_count",
            &["binding=\"jsonrpc\"", "outcome=\"completed\""]
        ),
        1.0
    );
    assert_eq!(
        sum(
            &before,
            "a2a_upstream_token_fetches_total",
            &["outcome=\"ok\""]
        ),
        1.0
    );
    assert_eq!(sum(&before, "a2a_open_streams", &[]), 0.0);
    assert_eq!(sum(&before, "a2a_context_queued_messages", &[]), 0.0);
    // At least one write per task (events queued together share one).
    assert!(sum(&before, "a2a_store_write_duration_seconds_count", &[]) >= 9.0);

    // The inbound traceparent reaches the runtime: same trace id, a fresh parent id.
    let traceparents: Vec<String> = up
        .requests()
        .iter()
        .filter_map(|r| r.header("traceparent").map(str::to_owned))
        .collect();
    assert!(!traceparents.is_empty());
    let blocking = traceparents
        .iter()
        .filter(|t| t.starts_with(&format!("00-{TRACE_ID}-")))
        .count();
    assert_eq!(blocking, COMPLETED + FAILURES.len() + 1, "{traceparents:?}");
    assert!(traceparents.iter().all(|t| !t.contains("00f067aa0ba902b7")));

    // The log: JSON lines, `span` without `spans`; the request line names the caller and
    // peer; the stream's end is logged with its outcome, events and duration.
    let logs = gw.logs_when(
        |l| l.matches(r#""message":"request""#).count() >= 12 && l.contains("stream ended"),
        Duration::from_secs(10),
    );
    let lines: Vec<Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines.iter().all(|l| l.get("spans").is_none()), "{logs}");
    assert!(!logs.contains("obs-secret-value") && !logs.contains("obs-token-value"));
    let requests: Vec<&Value> = lines.iter().filter(|l| l["message"] == "request").collect();
    assert!(requests.len() >= 12, "{logs}");
    for r in &requests {
        assert_eq!(r["caller"], "anonymous", "{r}");
        assert!(r["peer"].as_str().unwrap().starts_with("127.0.0.1:"), "{r}");
        let ms = r["duration_ms"].as_f64().unwrap();
        assert!(close(ms, (ms * 1000.0).round() / 1000.0), "{r}");
    }
    let ended: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "stream ended")
        .collect();
    assert_eq!(ended.len(), 1, "{logs}");
    assert_eq!(ended[0]["outcome"], "completed");
    assert!(ended[0]["events"].as_u64().unwrap() >= 3, "{}", ended[0]);
    assert!(ended[0]["task.id"].as_str().unwrap().len() > 8);
    let accepted = lines
        .iter()
        .find(|l| l["message"] == "the runtime accepted the invocation")
        .expect("an accepted invocation");
    assert!(accepted.get("upstream.session").is_none(), "{accepted}");
    assert!(
        accepted["span"]["upstream.session"].is_string(),
        "{accepted}"
    );

    let Some(bin) = prometheus_binary() else {
        return;
    };
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let prom = Prometheus::start(&bin, dir.path(), host);
    // The first scrape saw round 1.
    let tasks_before = sum(&before, "a2a_tasks_total", &[]);
    prom.wait_for("sum(a2a_tasks_total)", |v| v == tasks_before)
        .await;
    // Round 2, then a scrape that saw all of it.
    mix(&http, &url).await;
    let after = samples(&scrape(&http, &url).await);
    let tasks_after = sum(&after, "a2a_tasks_total", &[]);
    assert_eq!(tasks_after, 2.0 * tasks_before);
    prom.wait_for("sum(a2a_tasks_total)", |v| v == tasks_after)
        .await;
    // One evaluation time for every query: the same samples under every `rate`.
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();

    // Every documented query evaluates, and returns data (the alert aside).
    let mut results = BTreeMap::new();
    for (title, q) in &queries {
        let r = prom
            .query_at(q, Some(at))
            .await
            .unwrap_or_else(|e| panic!("{title}: {q}: {e}"));
        let alert = q.contains("> 0");
        assert!(alert || !r.is_empty(), "{title}: {q} returned nothing");
        if alert {
            assert!(r.is_empty(), "{title}: {q} fired: {r:?}");
        }
        results.insert(q.clone(), r);
    }
    let get = |needle: &str| {
        let (_, r) = results
            .iter()
            .find(|(q, _)| q.contains(needle))
            .unwrap_or_else(|| panic!("no documented query with {needle}"));
        r.clone()
    };
    // 12 requests per round, 2 errors: the request error rate is 1/6.
    let errors = get("outcome!~\"ok|stream\"");
    assert!(close(value(&errors[0]), 2.0 / 12.0), "{errors:?}");
    // 3 completed, 4 failed, 1 canceled: the task failure rate is 1/2.
    let failures = get("state=\"failed\"}[5m])) / sum");
    assert!(close(value(&failures[0]), 0.5), "{failures:?}");
    // One failure of each category, at the same rate; completions at three times it.
    let cats = by_label(&get("sum by (category)"), "category");
    let unit = cats["broken"];
    assert!(unit > 0.0);
    for c in ["broken", "truncated", "malformed", "control"] {
        assert!(close(cats[c], unit), "{cats:?}");
    }
    assert_eq!(cats.len(), 4, "{cats:?}");
    let outcomes = get("sum by (state, reason)");
    let rate = |state: &str, reason: &str| {
        outcomes
            .iter()
            .find(|s| s["metric"]["state"] == state && s["metric"]["reason"] == reason)
            .map_or(0.0, value)
    };
    assert!(
        close(rate("completed", "none"), 3.0 * unit),
        "{unit} {cats:?} {outcomes:?}"
    );
    assert!(close(rate("failed", "broken"), unit), "{outcomes:?}");
    assert!(close(rate("canceled", "client"), unit), "{outcomes:?}");
    assert!(close(rate("input_required", "agent"), unit), "{outcomes:?}");
    assert!(close(rate("failed", "shutdown"), 0.0), "{outcomes:?}");
    // Latencies are plausible for a local fake.
    for needle in [
        "a2a_upstream_request_duration_seconds_bucket",
        "a2a_upstream_first_chunk_seconds_bucket",
        "a2a_store_write_duration_seconds_bucket",
    ] {
        let r = get(needle);
        let v = value(&r[0]);
        assert!(v > 0.0 && v < 5.0, "{needle}: {r:?}");
    }
    let by_state = by_label(&get("a2a_task_duration_seconds_bucket"), "state");
    for s in ["completed", "failed", "canceled", "input_required"] {
        assert!(by_state.contains_key(s), "{by_state:?}");
    }
    let streams = by_label(&get("a2a_stream_duration_seconds_bucket"), "outcome");
    assert!(streams.contains_key("completed"), "{streams:?}");
    assert_eq!(prom.scalar("a2a_open_streams").await, 0.0);
    assert_eq!(prom.scalar("a2a_context_queued_messages").await, 0.0);
}

fn python_with_otlp_proto() -> Option<std::path::PathBuf> {
    let py = python_with("opentelemetry.proto.collector.trace.v1.trace_service_pb2");
    if py.is_none() {
        skip(
            "spans_reach_a_real_otlp_receiver",
            "the venv's python cannot import opentelemetry.proto (tests/python/requirements.txt; or set A2A_GATEWAY_TEST_PYTHON)",
        );
    }
    py
}

/// With `[telemetry] otlp_endpoint`, a blocking SendMessage carrying a `traceparent`
/// yields spans at a real OTLP/HTTP receiver (decoded with the official
/// `opentelemetry-proto` package): the operation, the upstream run, its attempt, the
/// token fetch and the store writes, all in the caller's trace, with the task and
/// context ids and no secret; the runtime gets a `traceparent` naming the attempt span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_a_real_otlp_receiver() {
    let Some(py) = python_with_otlp_proto() else {
        return;
    };
    let mut cmd = Command::new(&py);
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/otlp_receiver.py"
    ));
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the receiver");
    let out = child.stdout.take().unwrap();
    let mut receiver = ChildGuard(child);
    let (tx, received) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let port = received
        .recv_timeout(Duration::from_secs(20))
        .expect("the receiver's port")
        .trim_start_matches("port ")
        .to_owned();

    let dir = tempfile::tempdir().unwrap();
    let up = runtime().await;
    let token = token_endpoint().await;
    let token_url = token.url.replace("/invocations", "/token");
    let gw = GatewayProcess::init(BIN)
        .current_dir(dir.path())
        .config(format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[log]\nformat = \"json\"\n\n\
             [store]\nurl = \"sqlite://{}/tasks.db\"\n\n\
             [upstream]\nurl = \"{}\"\nmax_retries = 0\n\n\
             [upstream.auth]\nkind = \"oauth2\"\nclient_id = \"obs-client\"\n\
             client_secret = \"obs-secret-value\"\ntoken_url = \"{token_url}\"\n\n\
             [telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\nservice_name = \"obs-test\"\n",
            dir.path().display(),
            up.url()
        ))
        // Export each batch within 100 ms instead of 5 s.
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .arg("serve")
        .timeout(Duration::from_secs(20))
        .start();
    let url = gw.url.clone();
    let http = reqwest::Client::new();
    let v = rpc(&http, &url, "SendMessage", message("complete it")).await;
    assert_eq!(state_of(&v), "TASK_STATE_COMPLETED", "{v}");
    let task_id = v["result"]["task"]["id"].as_str().unwrap().to_owned();
    let context_id = v["result"]["task"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();

    // Collect spans until the five kinds arrived (bounded).
    let mut spans: Vec<Value> = Vec::new();
    let wanted = [
        "a2a.operation",
        "upstream",
        "upstream.attempt",
        "upstream.token_fetch",
        "store.write",
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    while !wanted.iter().all(|w| spans.iter().any(|s| s["name"] == *w)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match received.recv_timeout(left) {
            Ok(line) => spans.push(serde_json::from_str(&line).unwrap()),
            Err(_) => panic!("spans so far: {spans:#?}\n{}", gw.logs()),
        }
    }
    let all = serde_json::to_string(&spans).unwrap();
    assert!(
        !all.contains("obs-secret-value") && !all.contains("obs-token-value"),
        "{all}"
    );
    assert!(
        !all.contains("complete it"),
        "a message's text in a span: {all}"
    );
    let named = |n: &str| spans.iter().find(|s| s["name"] == n).unwrap().clone();
    for s in &spans {
        assert_eq!(s["service"], "obs-test", "{s}");
        assert_eq!(s["content_type"], "application/x-protobuf", "{s}");
    }
    // All in the caller's trace; the operation and the run are children of its span.
    for w in wanted {
        assert_eq!(named(w)["trace_id"], TRACE_ID, "{w}: {spans:#?}");
    }
    assert_eq!(named("a2a.operation")["parent_span_id"], "00f067aa0ba902b7");
    assert_eq!(
        named("a2a.operation")["attributes"]["rpc.method"],
        "SendMessage"
    );
    let run = named("upstream");
    assert_eq!(run["parent_span_id"], "00f067aa0ba902b7");
    assert_eq!(run["attributes"]["task.id"], task_id.as_str());
    assert_eq!(run["attributes"]["context.id"], context_id.as_str());
    let attempt = named("upstream.attempt");
    assert_eq!(attempt["parent_span_id"], run["span_id"]);
    // (tracing-opentelemetry exports a recorded u64 as a string.)
    let status = attempt["attributes"]["http.status_code"].to_string();
    assert_eq!(status.trim_matches('"'), "200", "{attempt}");
    assert_eq!(
        named("upstream.token_fetch")["parent_span_id"],
        attempt["span_id"]
    );
    assert_eq!(
        named("store.write")["attributes"]["task.id"],
        task_id.as_str()
    );
    // The runtime was called with the attempt span as its parent.
    let sent = up.invocations()[0]
        .header("traceparent")
        .unwrap()
        .to_owned();
    assert_eq!(
        sent,
        format!("00-{TRACE_ID}-{}-01", attempt["span_id"].as_str().unwrap()),
        "{spans:#?}"
    );
    drop(gw);
    let _ = receiver.0.kill();
}
