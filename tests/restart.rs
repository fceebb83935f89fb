//! Restart and recovery with the real binary: `a2a-gateway serve` in front of a
//! [`MockRuntime`], one task completed and one streaming, the gateway killed
//! with SIGKILL and started again on the same store. The completed task comes back
//! intact from GetTask and ListTasks; the interrupted one is FAILED with
//! "interrupted by a gateway restart"; every event the client saw before the kill is
//! in the store (replayed by SubscribeToTask with `Last-Event-ID: 0`). On SQLite, and
//! again on PostgreSQL, where the restarted instance does not guess: the killed
//! instance's lease lapses and the task is FAILED naming it. A second `serve` on the SQLite file of a running one is
//! refused. And `serve` closing an unanswered INPUT_REQUIRED task after
//! `input_required_ttl_secs`. Push: deliveries pending at SIGKILL are sent after the
//! restart, a coalesced range in flight at SIGKILL is sent again exactly (SQLite and
//! PostgreSQL), and two instances on one PostgreSQL never send overlapping ranges.
//!
//! PostgreSQL reads `A2A_GATEWAY_TEST_POSTGRES_URL` and runs in a schema of its own
//! (dropped afterwards). Without the variable the test is skipped with a note, except
//! when `CI=true`: then a missing variable or an unreachable server fails.
//!
//! Every child gets a cleared environment, listens on `127.0.0.1:0`, and is killed on
//! drop. Every wait is bounded.

use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_gateway::test_util::{
    GatewayBuilder, GatewayProcess, PgSchema, free_port, rpc_result, rpc_stream, user_message,
};
use a2a_gateway::upstream::mock::{MockReply, MockRuntime};
use axum::Router;
use axum::routing::post;
use futures::{Stream, StreamExt};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");
const START_TIMEOUT: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(20);
/// SSE chunks the fake upstream sends for the streaming prompt before it stalls.
const CHUNKS: usize = 4;

// ---------------------------------------------------------------- the upstream

/// A [`MockRuntime`] answering by prompt: `quick` gets a JSON answer at once, `ask` a
/// JSON `input_required` control object, `chunks` an SSE stream of [`CHUNKS`] text frames
/// that then ends (`chunks N`: N frames); any other prompt gets an SSE stream of
/// [`CHUNKS`] text frames that then stalls (never ends).
async fn start_upstream() -> MockRuntime {
    let upstream = MockRuntime::start().await;
    let frames = |n: usize| (0..n).map(|i| json!(format!("part {i}; "))).collect();
    upstream.answer_with(move |request| match request.prompt().as_deref() {
        Some("ask") => {
            MockReply::Json(json!({"a2a_control": "input_required", "text": "which region?"}))
        }
        Some("quick") => MockReply::Json(json!({"result": "the quick answer"})),
        Some(p) if p.starts_with("chunks") => MockReply::Sse(frames(
            p.strip_prefix("chunks ")
                .and_then(|n| n.parse().ok())
                .unwrap_or(CHUNKS),
        )),
        _ => MockReply::SseThenStall(frames(CHUNKS)),
    });
    upstream
}

// ---------------------------------------------------------------- the gateway child

/// `a2a-gateway` in `dir` with exactly `env` (plus PATH), every wait bounded by
/// [`START_TIMEOUT`].
fn gateway(dir: &Path, env: &[(String, String)]) -> GatewayBuilder {
    GatewayProcess::init(BIN)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .timeout(START_TIMEOUT)
}

/// `a2a-gateway serve`, once it listens.
fn serve(dir: &Path, env: &[(String, String)]) -> GatewayProcess {
    gateway(dir, env).arg("serve").start()
}

fn gateway_env(upstream: &str, store_url: &str) -> Vec<(String, String)> {
    [
        ("A2A_GATEWAY_SERVER__LISTEN", "127.0.0.1:0"),
        ("A2A_GATEWAY_UPSTREAM__URL", upstream),
        ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "none"),
        ("A2A_GATEWAY_UPSTREAM__STOP_SESSION_ON_CANCEL", "false"),
        ("A2A_GATEWAY_STORE__URL", store_url),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

// ---------------------------------------------------------------- client

/// One SSE event: its id and the JSON-RPC `result`.
#[derive(Debug, Clone)]
struct Ev {
    id: u64,
    result: Value,
}

type Events = Pin<Box<dyn Stream<Item = Ev> + Send>>;

async fn stream(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    params: Value,
    last_event_id: Option<u64>,
) -> Events {
    let events = rpc_stream(client, url, method, params, last_event_id).await;
    Box::pin(events.map(|e| Ev {
        id: e.id.expect("every task event has an id"),
        result: e.result,
    }))
}

async fn next(events: &mut Events) -> Option<Ev> {
    tokio::time::timeout(WAIT, events.next())
        .await
        .expect("an event within the bound")
}

fn message(text: &str) -> Value {
    json!({"message": user_message(text)})
}

fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

fn artifact_text(task: &Value) -> String {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

// ---------------------------------------------------------------- the scenario

/// The whole scenario against `store_url` (a store no other gateway uses).
/// `clustered`: a PostgreSQL store in cluster mode (the default there), where the
/// restarted instance does not recover at start: the killed instance's lease lapses
/// (`lease_secs` = 2 here) and the task is closed FAILED naming that instance.
async fn kill_and_restart(store_url: &str, clustered: bool) {
    let dir = tempfile::tempdir().unwrap();
    let upstream = start_upstream().await;
    let mut env = gateway_env(&upstream.url(), store_url);
    if clustered {
        env.push(("A2A_GATEWAY_STORE__LEASE_SECS".into(), "2".into()));
    }
    let client = reqwest::Client::new();

    let mut first = serve(dir.path(), &env);
    let url = first.url.clone();

    // A completed task.
    let done = rpc_result(&client, &url, "SendMessage", message("quick")).await;
    let done = done["task"].clone();
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(artifact_text(&done), "the quick answer");
    let done_id = done["id"].as_str().unwrap().to_owned();
    let done_before = rpc_result(&client, &url, "GetTask", json!({"id": done_id})).await;

    // A streaming task: read until every chunk the upstream sent has arrived.
    let mut live = stream(&client, &url, "SendStreamingMessage", message("slow"), None).await;
    let mut seen = Vec::new();
    let mut chunks = 0;
    while chunks < CHUNKS {
        let ev = next(&mut live).await.expect("the stream stays open");
        if ev.result.get("artifactUpdate").is_some() {
            chunks += 1;
        }
        seen.push(ev);
    }
    let slow_id = seen[0].result["task"]["id"].as_str().unwrap().to_owned();
    let seen_text: String = seen
        .iter()
        .filter_map(|e| e.result.get("artifactUpdate"))
        .flat_map(|a| {
            a["artifact"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        seen_text,
        (0..CHUNKS)
            .map(|i| format!("part {i}; "))
            .collect::<String>()
    );

    first.kill();
    drop(live);
    let first_logs = first.logs();
    drop(first);

    let second = serve(dir.path(), &env);
    let url = second.url.clone();
    if clustered {
        // Closed by the lease sweep within the lease time plus a margin.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let t = rpc_result(&client, &url, "GetTask", json!({"id": slow_id})).await;
            if t["status"]["state"] == "TASK_STATE_FAILED" {
                break;
            }
            assert!(Instant::now() < deadline, "not closed within 10 s: {t}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    } else {
        assert!(
            second
                .logs()
                .contains("marked tasks interrupted by the previous run FAILED"),
            "{}",
            second.logs()
        );
    }

    // The completed task, intact.
    let done_after = rpc_result(&client, &url, "GetTask", json!({"id": done_id})).await;
    assert_eq!(
        done_after, done_before,
        "the completed task is returned intact"
    );
    let history = done_after["history"].as_array().unwrap();
    assert!(
        history.iter().any(|m| m["parts"][0]["text"] == "quick"),
        "{done_after}"
    );

    // The interrupted task: FAILED with the documented reason, its chunks kept.
    let slow = rpc_result(&client, &url, "GetTask", json!({"id": slow_id})).await;
    assert_eq!(slow["status"]["state"], "TASK_STATE_FAILED", "{slow}");
    if clustered {
        let reason = status_text(&slow);
        assert!(
            reason.contains("running this task stopped (no heartbeat for 2 s)"),
            "{reason}"
        );
    } else {
        assert_eq!(status_text(&slow), "interrupted by a gateway restart");
    }
    assert_eq!(artifact_text(&slow), seen_text);

    // ListTasks: both, the completed one exactly as GetTask has it.
    let list = rpc_result(
        &client,
        &url,
        "ListTasks",
        json!({"includeArtifacts": true, "pageSize": 10}),
    )
    .await;
    let tasks = list["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{list}");
    let listed_done = tasks.iter().find(|t| t["id"] == done_id.as_str()).unwrap();
    assert_eq!(listed_done, &done_before);
    let listed_slow = tasks.iter().find(|t| t["id"] == slow_id.as_str()).unwrap();
    assert_eq!(listed_slow["status"]["state"], "TASK_STATE_FAILED");

    // Every event the client saw is in the store: a resume from 0 replays them, with
    // the same ids and content, then the FAILED status, then the stream ends.
    let mut replay = stream(
        &client,
        &url,
        "SubscribeToTask",
        json!({"id": slow_id}),
        Some(0),
    )
    .await;
    let mut stored = Vec::new();
    while let Some(ev) = next(&mut replay).await {
        stored.push(ev);
    }
    let ids: Vec<u64> = stored.iter().map(|e| e.id).collect();
    assert_eq!(
        ids,
        (1..=stored.len() as u64).collect::<Vec<_>>(),
        "{ids:?}"
    );
    for ev in &seen {
        let s = stored
            .iter()
            .find(|s| s.id == ev.id)
            .unwrap_or_else(|| panic!("event {} the client saw is not in the store", ev.id));
        if ev.result.get("task").is_some() {
            // The client saw a snapshot at that seq; the log holds the event that made it.
            assert!(s.result.get("task").is_some(), "{:?}", s.result);
        } else {
            assert_eq!(s.result, ev.result, "event {}", ev.id);
        }
    }
    let last = stored.last().unwrap();
    assert_eq!(
        last.result["statusUpdate"]["status"]["state"], "TASK_STATE_FAILED",
        "{:?}",
        last.result
    );
    assert!(last.id > seen.last().unwrap().id);
    drop(second);
    drop(first_logs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigkill_and_restart_keeps_completed_tasks_and_fails_the_interrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    kill_and_restart(&url, false).await;
}

/// Runs `a2a-gateway <args>` with exactly `env` (plus PATH) in `dir`, expecting it to
/// exit within [`START_TIMEOUT`]; returns its status and stderr.
fn run_to_exit(
    dir: &Path,
    env: &[(String, String)],
    args: &[&str],
) -> (std::process::ExitStatus, String) {
    let out = gateway(dir, env).args(args).run();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 15, "one store, one writer": a second `serve` (or `migrate`) on the SQLite
/// file a running gateway uses refuses to start, naming the file and the running
/// process's pid, and leaves that gateway's running task alone (it is not marked
/// FAILED, and its stream goes on). After the first gateway is SIGKILLed, its stale
/// lock does not block a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_serve_on_one_sqlite_file_is_refused_and_a_killed_ones_lock_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let store_url = format!("sqlite://{}", db.display());
    let upstream = start_upstream().await;
    let env = gateway_env(&upstream.url(), &store_url);
    let client = reqwest::Client::new();

    let mut first = serve(dir.path(), &env);
    let url = first.url.clone();
    let mut live = stream(&client, &url, "SendStreamingMessage", message("slow"), None).await;
    let opened = next(&mut live).await.expect("the task");
    let slow_id = opened.result["task"]["id"].as_str().unwrap().to_owned();
    let mut chunks = 0;
    while chunks < CHUNKS {
        let ev = next(&mut live).await.expect("the stream stays open");
        if ev.result.get("artifactUpdate").is_some() {
            chunks += 1;
        }
    }

    let pid = first.pid();
    for args in [&["serve"][..], &["migrate"][..]] {
        let (status, err) = run_to_exit(dir.path(), &env, args);
        assert!(!status.success(), "{args:?}: {status}\n{err}");
        assert!(
            err.contains(&db.display().to_string()) && err.contains(&format!("pid {pid}")),
            "{args:?} names the file and the holder: {err}"
        );
    }

    // The first gateway's task is untouched and still running.
    let slow = rpc_result(&client, &url, "GetTask", json!({"id": slow_id})).await;
    assert_eq!(slow["status"]["state"], "TASK_STATE_WORKING", "{slow}");
    let logs = first.logs();
    assert!(!logs.contains("sequence conflict"), "{logs}");

    first.kill();
    drop(live);
    let second = serve(dir.path(), &env);
    let slow = rpc_result(&client, &second.url, "GetTask", json!({"id": slow_id})).await;
    assert_eq!(slow["status"]["state"], "TASK_STATE_FAILED", "{slow}");
    assert_eq!(status_text(&slow), "interrupted by a gateway restart");
}

/// `serve` runs the retention job: with a TTL of 1 s and a pass every second, an
/// unanswered INPUT_REQUIRED task is closed FAILED with the documented reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_closes_an_unanswered_input_required_task_after_the_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = start_upstream().await;
    let store_url = format!("sqlite://{}", dir.path().join("t.db").display());
    let mut env = gateway_env(&upstream.url(), &store_url);
    env.push((
        "A2A_GATEWAY_STORE__INPUT_REQUIRED_TTL_SECS".into(),
        "1".into(),
    ));
    env.push(("A2A_GATEWAY_STORE__PURGE_INTERVAL_SECS".into(), "1".into()));
    let gw = serve(dir.path(), &env);
    let client = reqwest::Client::new();
    let task = rpc_result(&client, &gw.url, "SendMessage", message("ask")).await;
    let task = task["task"].clone();
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{task}"
    );
    let id = task["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + WAIT;
    let closed = loop {
        let t = rpc_result(&client, &gw.url, "GetTask", json!({"id": id})).await;
        if t["status"]["state"] != "TASK_STATE_INPUT_REQUIRED" {
            break t;
        }
        assert!(Instant::now() < deadline, "not closed within {WAIT:?}: {t}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(closed["status"]["state"], "TASK_STATE_FAILED", "{closed}");
    assert_eq!(
        status_text(&closed),
        "no input received within 1 s; the task was closed"
    );
    // The answer that comes too late is refused.
    let mut late = message("eu-west-1");
    late["message"]["taskId"] = json!(id);
    let body: Value = client
        .post(&gw.url)
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": late}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["error"]["code"], -32004, "{body}");
}

// ---------------------------------------------------------------- PostgreSQL

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_and_restart_keeps_completed_tasks_and_fails_the_interrupted_one() {
    PgSchema::run("postgres_sigkill_and_restart", async |schema| {
        kill_and_restart(&schema.url(), true).await
    })
    .await;
}

// ---------------------------------------------------------------- push outbox

/// A webhook receiver on `listener`: every call's `webhook-id` and body, in arrival order.
fn start_receiver(listener: tokio::net::TcpListener) -> Arc<Mutex<Vec<(String, Value)>>> {
    let calls: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let seen = calls.clone();
    let app = Router::new().route(
        "/hook",
        post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let seen = seen.clone();
                async move {
                    let id = headers["webhook-id"].to_str().unwrap().to_owned();
                    let body: Value = serde_json::from_slice(&body).unwrap();
                    seen.lock().unwrap().push((id, body));
                    "ok"
                }
            },
        ),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    calls
}

/// Issue 10: deliveries still pending when the gateway is SIGKILLed (the receiver was
/// down) are sent after the restart, each event once after deduplication by
/// `webhook-id`, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_push_deliveries_pending_at_sigkill_are_sent_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite://{}", dir.path().join("gw.db").display());
    push_pending_at_sigkill(dir.path(), &store_url).await;
}

/// The same on PostgreSQL (skipped without `A2A_GATEWAY_TEST_POSTGRES_URL`, refused
/// under `CI=true`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_push_deliveries_pending_at_sigkill_are_sent_after_restart() {
    PgSchema::run(
        "postgres_push_deliveries_pending_at_sigkill",
        async |schema| {
            let dir = tempfile::tempdir().unwrap();
            push_pending_at_sigkill(dir.path(), &schema.url()).await
        },
    )
    .await;
}

async fn push_pending_at_sigkill(dir: &Path, store_url: &str) {
    let upstream = start_upstream().await;
    // The receiver's port, closed for now: every attempt is refused and retried.
    let port = free_port();
    let mut env = gateway_env(&upstream.url(), store_url);
    for (k, v) in [
        ("A2A_GATEWAY_PUSH__ALLOW_HTTP", "true"),
        ("A2A_GATEWAY_PUSH__ALLOW_CIDRS", "[\"127.0.0.1/32\"]"),
        ("A2A_GATEWAY_PUSH__INITIAL_BACKOFF_MS", "100"),
        ("A2A_GATEWAY_PUSH__MAX_BACKOFF_SECS", "1"),
        ("A2A_GATEWAY_PUSH__MAX_ATTEMPTS", "100"),
        ("A2A_GATEWAY_PUSH__TIMEOUT_SECS", "1"),
        // A claim of the killed process is taken over after this.
        ("A2A_GATEWAY_PUSH__LEASE_SECS", "2"),
    ] {
        env.push((k.into(), v.into()));
    }
    let mut gw = serve(dir, &env);
    let client = reqwest::Client::new();
    let result = rpc_result(
        &client,
        &gw.url,
        "SendMessage",
        json!({"message": message("quick")["message"], "configuration": {"taskPushNotificationConfig": {
            "id": "hook", "url": format!("http://127.0.0.1:{port}/hook"), "token": "tok"}}}),
    )
    .await;
    let task = result["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{result}");
    let task_id = task["id"].as_str().unwrap().to_owned();
    // Let a few attempts fail, then kill the gateway with the deliveries pending.
    tokio::time::sleep(Duration::from_millis(500)).await;
    gw.kill();

    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("the receiver's port is free again");
    let calls = start_receiver(listener);
    let gw = serve(dir, &env);
    let deadline = Instant::now() + WAIT;
    let delivered = loop {
        let mut ids = std::collections::HashSet::new();
        let unique: Vec<Value> = calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(id, _)| ids.insert(id.clone()))
            .map(|(_, b)| b.clone())
            .collect();
        let done = unique
            .last()
            .is_some_and(|b| b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED");
        if done {
            break unique;
        }
        assert!(
            Instant::now() < deadline,
            "not delivered after the restart: {unique:?}\n{}",
            gw.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let kinds: Vec<String> = delivered
        .iter()
        .map(|b| b.as_object().unwrap().keys().next().unwrap().clone())
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("task"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "artifactUpdate"), "{kinds:?}");
    assert_eq!(
        delivered[0]["task"]["status"]["state"],
        "TASK_STATE_SUBMITTED"
    );
    for b in &delivered {
        let (_, inner) = b.as_object().unwrap().iter().next().unwrap();
        let id = inner.get("taskId").or_else(|| inner.get("id")).unwrap();
        assert_eq!(id, &json!(task_id), "{b}");
    }
    // Arrival order never goes back to an older event once a newer one arrived.
    let order: Vec<String> = calls
        .lock()
        .unwrap()
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    let mut started: Vec<String> = vec![];
    for id in order {
        match started.iter().position(|d| *d == id) {
            Some(pos) => assert_eq!(pos, started.len() - 1, "an older event after a newer one"),
            None => started.push(id),
        }
    }
    // The restarted gateway's task is the same (the store kept it).
    let got = rpc_result(&client, &gw.url, "GetTask", json!({"id": task_id})).await;
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
}

/// A webhook receiver on `listener` that answers coalesced artifact updates (more than
/// one part) 503 while `fail` holds, and takes 300 ms over a single-part one (so the
/// chunks after it are all pending when it is answered), 200 otherwise: every call's
/// `webhook-id`, body and answer, in arrival order.
type Calls = Arc<Mutex<Vec<(String, Value, u16)>>>;

fn start_failing_receiver(
    listener: tokio::net::TcpListener,
    fail: Arc<std::sync::atomic::AtomicBool>,
) -> Calls {
    let calls: Calls = Arc::default();
    let seen = calls.clone();
    let app = Router::new().route(
        "/hook",
        post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let (seen, fail) = (seen.clone(), fail.clone());
                async move {
                    let id = headers["webhook-id"].to_str().unwrap().to_owned();
                    let body: Value = serde_json::from_slice(&body).unwrap();
                    let parts = body["artifactUpdate"]["artifact"]["parts"]
                        .as_array()
                        .map_or(0, Vec::len);
                    let failing = fail.load(std::sync::atomic::Ordering::SeqCst);
                    if parts == 1 && failing {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    let status = if parts > 1 && failing { 503 } else { 200 };
                    seen.lock().unwrap().push((id, body, status));
                    axum::http::StatusCode::from_u16(status).unwrap()
                }
            },
        ),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    calls
}

/// The text of an artifact as a receiver that drops duplicates by `webhook-id` and
/// appends parts (spec append rule) rebuilds it from 2xx-answered `calls`.
fn reassembled(calls: &[(String, Value, u16)]) -> String {
    let mut ids = std::collections::HashSet::new();
    let mut text = String::new();
    for (id, body, status) in calls {
        if *status != 200 || !ids.insert(id.clone()) {
            continue;
        }
        let Some(u) = body.get("artifactUpdate") else {
            continue;
        };
        if u["append"] != true {
            text.clear();
        }
        for p in u["artifact"]["parts"].as_array().unwrap() {
            text.push_str(p["text"].as_str().unwrap_or_default());
        }
    }
    text
}

/// Issue 44: a coalesced range attempted before a SIGKILL is sent again after the
/// restart as exactly that range (same `webhook-id`, same body), although the
/// restarted gateway would choose a longer one now (`max_coalesce_events` 2, then 256).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_coalesced_range_in_flight_at_sigkill_is_resent_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite://{}", dir.path().join("gw.db").display());
    coalesced_range_at_sigkill(dir.path(), &store_url).await;
}

/// The same on PostgreSQL (skipped without `A2A_GATEWAY_TEST_POSTGRES_URL`, refused
/// under `CI=true`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_coalesced_range_in_flight_at_sigkill_is_resent_whole() {
    PgSchema::run("postgres_coalesced_range_at_sigkill", async |schema| {
        let dir = tempfile::tempdir().unwrap();
        coalesced_range_at_sigkill(dir.path(), &schema.url()).await
    })
    .await;
}

async fn coalesced_range_at_sigkill(dir: &Path, store_url: &str) {
    let upstream = start_upstream().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let calls = start_failing_receiver(listener, fail.clone());
    let mut env = gateway_env(&upstream.url(), store_url);
    for (k, v) in [
        ("A2A_GATEWAY_PUSH__ALLOW_HTTP", "true"),
        ("A2A_GATEWAY_PUSH__ALLOW_CIDRS", "[\"127.0.0.1/32\"]"),
        ("A2A_GATEWAY_PUSH__INITIAL_BACKOFF_MS", "100"),
        ("A2A_GATEWAY_PUSH__MAX_BACKOFF_SECS", "1"),
        ("A2A_GATEWAY_PUSH__MAX_ATTEMPTS", "100"),
        ("A2A_GATEWAY_PUSH__TIMEOUT_SECS", "1"),
        ("A2A_GATEWAY_PUSH__LEASE_SECS", "2"),
    ] {
        env.push((k.into(), v.into()));
    }
    let mut first_env = env.clone();
    first_env.push(("A2A_GATEWAY_PUSH__MAX_COALESCE_EVENTS".into(), "2".into()));
    let mut gw = serve(dir, &first_env);
    let client = reqwest::Client::new();
    let result = rpc_result(
        &client,
        &gw.url,
        "SendMessage",
        json!({"message": message("chunks")["message"], "configuration": {"taskPushNotificationConfig": {
            "id": "hook", "url": format!("http://127.0.0.1:{port}/hook")}}}),
    )
    .await;
    assert_eq!(
        result["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{result}"
    );
    // The first coalesced POST (a range of 2) is refused.
    let deadline = Instant::now() + WAIT;
    let attempted = loop {
        let first = calls
            .lock()
            .unwrap()
            .iter()
            .find(|(_, _, status)| *status == 503)
            .cloned();
        if let Some(first) = first {
            break first;
        }
        assert!(Instant::now() < deadline, "no artifact POST\n{}", gw.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let parts = attempted.1["artifactUpdate"]["artifact"]["parts"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        parts, 2,
        "a coalesced range of max_coalesce_events: {attempted:?}"
    );
    gw.kill();
    let before = calls.lock().unwrap().len();
    fail.store(false, std::sync::atomic::Ordering::SeqCst);
    let gw = serve(dir, &env);
    let deadline = Instant::now() + WAIT;
    loop {
        let done = calls.lock().unwrap().iter().any(|(_, b, s)| {
            *s == 200 && b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        });
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not delivered after the restart\n{}",
            gw.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let calls = calls.lock().unwrap().clone();
    let resent = calls[before..]
        .iter()
        .find(|(_, b, _)| b.get("artifactUpdate").is_some())
        .unwrap();
    assert!(
        calls[..before]
            .iter()
            .all(|(id, _, status)| *status == 503 || *id != attempted.0),
        "the range was not delivered before the kill"
    );
    assert_eq!(resent.0, attempted.0, "the same webhook-id");
    assert_eq!(resent.1, attempted.1, "the same range, not a longer one");
    let expected: String = (0..CHUNKS).map(|i| format!("part {i}; ")).collect();
    assert_eq!(reassembled(&calls), expected, "every chunk once, in order");
}

/// Issue 44: two instances on one PostgreSQL share webhooks' deliveries (each claims
/// the heads it finds due; every third artifact POST is refused, so heads are retried,
/// by either instance): every `webhook-id` always carries the same body, no chunk is
/// in two different ranges, and each artifact reassembles exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_instances_never_send_overlapping_ranges() {
    PgSchema::run("postgres_two_instances_coalesce", async |schema| {
        two_instances_coalesce(&schema.url()).await
    })
    .await;
}

async fn two_instances_coalesce(store_url: &str) {
    const TASKS: usize = 6;
    const FRAMES: usize = 60;
    let upstream = start_upstream().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // (path, webhook-id, body, status) of every call, in arrival order.
    type PathCalls = Arc<Mutex<Vec<(String, String, Value, u16)>>>;
    let calls: PathCalls = Arc::default();
    let seen = calls.clone();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let app = Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let (seen, count) = (seen.clone(), count.clone());
            async move {
                let id = headers["webhook-id"].to_str().unwrap().to_owned();
                let body: Value = serde_json::from_slice(&body).unwrap();
                let mut status = 200;
                if body.get("artifactUpdate").is_some() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    if count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 3 == 2 {
                        status = 503;
                    }
                }
                seen.lock()
                    .unwrap()
                    .push((uri.path().to_owned(), id, body, status));
                axum::http::StatusCode::from_u16(status).unwrap()
            }
        },
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut env = gateway_env(&upstream.url(), store_url);
    for (k, v) in [
        ("A2A_GATEWAY_PUSH__ALLOW_HTTP", "true"),
        ("A2A_GATEWAY_PUSH__ALLOW_CIDRS", "[\"127.0.0.1/32\"]"),
        ("A2A_GATEWAY_PUSH__INITIAL_BACKOFF_MS", "50"),
        ("A2A_GATEWAY_PUSH__MAX_BACKOFF_SECS", "1"),
        ("A2A_GATEWAY_PUSH__MAX_ATTEMPTS", "100"),
        ("A2A_GATEWAY_PUSH__TIMEOUT_SECS", "1"),
        ("A2A_GATEWAY_PUSH__LEASE_SECS", "2"),
        ("A2A_GATEWAY_PUSH__POLL_INTERVAL_MS", "20"),
        ("A2A_GATEWAY_PUSH__MAX_COALESCE_EVENTS", "8"),
    ] {
        env.push((k.into(), v.into()));
    }
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let gws = [serve(dir_a.path(), &env), serve(dir_b.path(), &env)];
    let client = reqwest::Client::new();
    let sends = (0..TASKS).map(|i| {
        let (client, url) = (client.clone(), gws[i % 2].url.clone());
        async move {
            rpc_result(
                &client,
                &url,
                "SendMessage",
                json!({"message": message(&format!("chunks {FRAMES}"))["message"],
                    "configuration": {"taskPushNotificationConfig": {
                    "id": "hook", "url": format!("http://127.0.0.1:{port}/hook/{i}")}}}),
            )
            .await
        }
    });
    for result in futures::future::join_all(sends).await {
        assert_eq!(
            result["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{result}"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done = calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, _, b, s)| {
                *s == 200 && b["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
            })
            .count();
        if done == TASKS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{done} of {TASKS} delivered\n{}\n{}",
            gws[0].logs(),
            gws[1].logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let calls = calls.lock().unwrap().clone();
    let expected: String = (0..FRAMES).map(|i| format!("part {i}; ")).collect();
    let mut coalesced = 0;
    for i in 0..TASKS {
        let path = format!("/hook/{i}");
        let mine: Vec<(String, Value, u16)> = calls
            .iter()
            .filter(|(p, ..)| *p == path)
            .map(|(_, id, b, s)| (id.clone(), b.clone(), *s))
            .collect();
        let mut bodies: std::collections::HashMap<&str, &Value> = Default::default();
        let mut parts_seen = std::collections::HashMap::new();
        for (id, body, _) in &mine {
            if let Some(earlier) = bodies.insert(id, body) {
                assert_eq!(earlier, body, "{path}: {id} carried two bodies");
                continue;
            }
            if let Some(parts) = body["artifactUpdate"]["artifact"]["parts"].as_array() {
                coalesced += usize::from(parts.len() > 1);
                for p in parts {
                    let text = p["text"].as_str().unwrap_or_default().to_owned();
                    if !text.is_empty() {
                        assert!(
                            parts_seen.insert(text.clone(), id.clone()).is_none(),
                            "{path}: {text:?} in two ranges"
                        );
                    }
                }
            }
        }
        assert_eq!(reassembled(&mine), expected, "{path}");
    }
    assert!(coalesced > 0, "some POSTs were coalesced");
}
