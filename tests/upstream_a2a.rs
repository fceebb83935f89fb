//! The `a2a` upstream kind end to end: `a2a-gateway serve` in front of the real A2A
//! agents of `tests/a2a_agents` (built with the official SDKs: a2a-sdk 1.x speaking
//! 1.0, a2a-sdk 0.3 speaking 0.3), called over the gateway's JSON-RPC binding. What the
//! agent saw comes from its own call log (`GET /calls`).
//!
//! Needs `.venv` (a2a-sdk 1.x) and `.venv03` (a2a-sdk 0.3); without them each test is
//! skipped with a note, unless `CI=true`, where it fails.

use std::time::Duration;

mod bindings_common;

use a2a_gateway::test_util::{
    A2aAgent, AgentKind, GatewayProcess, free_port, rpc, rpc_result, rpc_stream, skip, user_message,
};
use futures::StreamExt;
use serde_json::{Value, json};

/// The agent `kind` with `args`, or `None` (skipped) when its Python cannot run it.
fn agent(test: &str, kind: AgentKind, args: &[&str]) -> Option<A2aAgent> {
    let a = A2aAgent::start(kind, args);
    if a.is_none() {
        skip(
            test,
            "the upstream A2A agent did not start (.venv with a2a-sdk 1.x and .venv03 with a2a-sdk 0.3 are needed; see tests/a2a_agents/README.md)",
        );
    }
    a
}

/// `serve` (memory store) in front of the A2A agent at `url`, with `extra` env.
fn gateway(url: &str, extra: &[(&str, &str)]) -> GatewayProcess {
    GatewayProcess::init(env!("CARGO_BIN_EXE_a2a-gateway"))
        .arg("serve")
        .listen("127.0.0.1:0")
        .env("A2A_GATEWAY_STORE__URL", "memory:")
        .env("A2A_GATEWAY_UPSTREAM__KIND", "a2a")
        .env("A2A_GATEWAY_UPSTREAM__URL", url)
        .env("A2A_GATEWAY_UPSTREAM__MAX_RETRIES", "1")
        .envs(extra.iter().copied())
        .start()
}

fn text_of(parts: &Value) -> String {
    parts
        .as_array()
        .map(|ps| ps.iter().filter_map(|p| p["text"].as_str()).collect())
        .unwrap_or_default()
}

/// The text of every artifact of `task`, by artifact id.
fn artifact_text(task: &Value, id: &str) -> String {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["artifactId"] == id)
        .map(|a| text_of(&a["parts"]))
        .collect()
}

fn status_text(task: &Value) -> String {
    text_of(&task["status"]["message"]["parts"])
}

async fn send(http: &reqwest::Client, gw: &GatewayProcess, message: Value) -> Value {
    rpc_result(http, &gw.url, "SendMessage", json!({ "message": message })).await
}

async fn get_task(http: &reqwest::Client, gw: &GatewayProcess, id: &str) -> Value {
    rpc_result(http, &gw.url, "GetTask", json!({ "id": id })).await
}

/// Blocking send, streamed send (each chunk once, in order), a direct Message reply, a
/// failure with the agent's words, ask then follow-up (the agent saw one task both
/// turns), for one agent.
async fn basics(kind: AgentKind, test: &str, version: &str) {
    basics_over(kind, test, version, &[]).await;
}

async fn basics_over(kind: AgentKind, test: &str, version: &str, extra: &[(&str, &str)]) {
    let Some(agent) = agent(test, kind, &[]) else {
        return;
    };
    let gw = gateway(&agent.url, extra);
    let binding = if extra.is_empty() {
        "JSONRPC"
    } else {
        "HTTP+JSON"
    };
    let logs = gw.logs_when(
        |l| l.contains("read the A2A agent's card"),
        Duration::from_secs(10),
    );
    assert!(
        logs.contains(&format!("upstream.binding=\"{binding}\"")),
        "{logs}"
    );
    let http = reqwest::Client::new();

    // The published card takes the agent's name and skills.
    let card: Value =
        a2a_gateway::test_util::get_json(&http, &format!("{}.well-known/agent-card.json", gw.url))
            .await;
    assert_ne!(card["name"], "a2a-gateway", "{card}");
    assert!(
        card["supportedInterfaces"][0]["url"]
            .as_str()
            .unwrap()
            .starts_with(gw.url.trim_end_matches('/'))
    );

    // Blocking.
    let r = send(&http, &gw, user_message("hello there")).await;
    let task = &r["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(artifact_text(task, "echo"), "echo: hello there", "{r}");
    let gw_task = task["id"].as_str().unwrap().to_owned();
    let calls = agent.calls().await;
    let last = calls.last().unwrap();
    assert_eq!(last["headers"]["a2a-version"], version, "{last}");
    assert_ne!(last["task_id"], gw_task.as_str(), "gateway ids are its own");

    // Streamed: each chunk once, in order, then COMPLETED.
    let mut events = rpc_stream(
        &http,
        &gw.url,
        "SendStreamingMessage",
        json!({ "message": user_message("stream 5 20") }),
        None,
    )
    .await;
    let mut chunks = Vec::new();
    let mut last_state = String::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .unwrap()
    {
        if let Some(a) = ev.result.get("artifactUpdate") {
            chunks.push(text_of(&a["artifact"]["parts"]));
        }
        if let Some(s) = ev.state() {
            last_state = s.to_owned();
        }
    }
    let want: Vec<String> = (1..=5).map(|i| format!("chunk {i}/5\n")).collect();
    assert_eq!(chunks, want);
    assert_eq!(last_state, "TASK_STATE_COMPLETED");

    // A direct Message reply stays one.
    let r = send(&http, &gw, user_message("message hi")).await;
    assert!(r.get("message").is_some(), "{r}");
    assert!(
        text_of(&r["message"]["parts"]).contains("message: message hi"),
        "{r}"
    );

    // The agent's failure, in its words.
    let r = send(&http, &gw, user_message("fail please")).await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_FAILED", "{r}");
    assert!(status_text(&r["task"]).contains("failed on purpose"), "{r}");
    assert!(status_text(&r["task"]).contains("[correlation id "), "{r}");

    // Ask, then the follow-up reaches the same task and context of the agent.
    let r = send(&http, &gw, user_message("ask")).await;
    let task = &r["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    let (id, ctx) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );
    let mut follow = user_message("42");
    follow["taskId"] = id.into();
    follow["contextId"] = ctx.into();
    let r = send(&http, &gw, follow).await;
    let task = &r["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(task["id"], id);
    let answer: Value = serde_json::from_str(&artifact_text(task, "answer")).unwrap();
    assert_eq!(
        answer["task_id"], answer["first_turn"]["task_id"],
        "{answer}"
    );
    assert_eq!(
        answer["context_id"], answer["first_turn"]["context_id"],
        "{answer}"
    );
    assert_eq!(answer["answer"], "42");
    assert_ne!(answer["task_id"], id, "gateway ids are its own");
}

#[tokio::test]
async fn sdk1_agent_blocking_streamed_message_fail_ask() {
    basics(
        AgentKind::Sdk1,
        "sdk1_agent_blocking_streamed_message_fail_ask",
        "1.0",
    )
    .await;
}

/// The same over the agent's HTTP+JSON interface (`protocol_binding = "HTTP+JSON"`).
#[tokio::test]
async fn sdk1_agent_over_http_json() {
    let test = "sdk1_agent_over_http_json";
    let rest = [("A2A_GATEWAY_UPSTREAM__PROTOCOL_BINDING", "HTTP+JSON")];
    basics_over(AgentKind::Sdk1, test, "1.0", &rest).await;
    cancel_over(AgentKind::Sdk1, test, &rest).await;
    broken_stream_over(AgentKind::Sdk1, test, "abort", &rest).await;
}

#[tokio::test]
async fn js_agent_blocking_streamed_message_fail_ask() {
    basics(
        AgentKind::Js,
        "js_agent_blocking_streamed_message_fail_ask",
        "1.0",
    )
    .await;
}

#[tokio::test]
async fn js_agent_cancel_and_killed_stream() {
    let test = "js_agent_cancel_and_killed_stream";
    cancel(AgentKind::Js, test).await;
    broken_stream(AgentKind::Js, test, "abort").await;
}

#[tokio::test]
async fn sdk03_agent_blocking_streamed_message_fail_ask() {
    basics(
        AgentKind::Sdk03,
        "sdk03_agent_blocking_streamed_message_fail_ask",
        "0.3",
    )
    .await;
}

/// The official a2a-sdk 1.x client, on the gateway's JSON-RPC and HTTP+JSON bindings,
/// in front of the a2a-sdk 0.3 agent: a streamed task (each chunk once, in order) and
/// an ask / follow-up that reaches the agent's same task (1.0 client, 0.3 agent).
#[tokio::test]
async fn official_python_client_through_the_gateway_to_the_0_3_agent() {
    let test = "official_python_client_through_the_gateway_to_the_0_3_agent";
    let Some(agent) = agent(test, AgentKind::Sdk03, &[]) else {
        return;
    };
    let gw = gateway(&agent.url, &[]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/a2a_upstream_client.py"
    );
    for binding in ["JSONRPC", "HTTP+JSON"] {
        let out = tokio::process::Command::new(a2a_gateway::test_util::python())
            .args([script, gw.url.as_str(), binding])
            .output()
            .await
            .expect("run the Python client");
        assert!(
            out.status.success(),
            "{binding}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            gw.logs()
        );
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        let want: Vec<String> = (1..=4).map(|i| format!("chunk {i}/4\n")).collect();
        assert_eq!(r["chunks"], json!(want), "{binding}: {r}");
        assert_eq!(r["stream_state"], "TASK_STATE_COMPLETED", "{binding}: {r}");
        assert_eq!(
            r["ask_state"], "TASK_STATE_INPUT_REQUIRED",
            "{binding}: {r}"
        );
        assert_eq!(r["follow_state"], "TASK_STATE_COMPLETED", "{binding}: {r}");
        let answer = &r["answer"];
        assert_eq!(answer["task_id"], answer["first_turn"]["task_id"], "{r}");
        assert_ne!(
            answer["task_id"], r["task_id"],
            "gateway ids are its own: {r}"
        );
    }
}

/// Cancel reaches the agent's own cancel; the gateway task ends CANCELED.
async fn cancel(kind: AgentKind, test: &str) {
    cancel_over(kind, test, &[]).await;
}

async fn cancel_over(kind: AgentKind, test: &str, extra: &[(&str, &str)]) {
    let Some(agent) = agent(test, kind, &[]) else {
        return;
    };
    let gw = gateway(&agent.url, extra);
    let http = reqwest::Client::new();
    let mut events = rpc_stream(
        &http,
        &gw.url,
        "SendStreamingMessage",
        json!({ "message": user_message("slow") }),
        None,
    )
    .await;
    let mut task_id = None;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .unwrap()
    {
        if let Some(a) = ev.result.get("artifactUpdate") {
            task_id = a["taskId"].as_str().map(str::to_owned);
            break;
        }
    }
    let task_id = task_id.expect("a first tick");
    let r = rpc_result(&http, &gw.url, "CancelTask", json!({ "id": task_id })).await;
    assert_eq!(r["status"]["state"], "TASK_STATE_CANCELED", "{r}");
    let calls = agent.calls().await;
    assert!(
        calls.iter().any(|c| c["op"] == "cancel"),
        "the agent's cancel ran: {calls:?}"
    );
    let t = get_task(&http, &gw, &task_id).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_CANCELED", "{t}");
}

#[tokio::test]
async fn sdk1_agent_cancel_runs_the_agents_cancel() {
    cancel(AgentKind::Sdk1, "sdk1_agent_cancel_runs_the_agents_cancel").await;
}

#[tokio::test]
async fn sdk03_agent_cancel_runs_the_agents_cancel() {
    cancel(
        AgentKind::Sdk03,
        "sdk03_agent_cancel_runs_the_agents_cancel",
    )
    .await;
}

/// The agent's first stream of the task is cut after 2 chunks: the gateway gets the
/// task back (resubscribing, or polling) and its client sees every chunk once.
async fn broken_stream(kind: AgentKind, test: &str, mode: &str) {
    broken_stream_over(kind, test, mode, &[]).await;
}

async fn broken_stream_over(kind: AgentKind, test: &str, mode: &str, extra: &[(&str, &str)]) {
    let Some(agent) = agent(test, kind, &["--break-after", "2", "--break-mode", mode]) else {
        return;
    };
    let gw = gateway(&agent.url, extra);
    let http = reqwest::Client::new();
    let mut events = rpc_stream(
        &http,
        &gw.url,
        "SendStreamingMessage",
        json!({ "message": user_message("stream 6 100") }),
        None,
    )
    .await;
    let mut task_id = String::new();
    let mut last_state = String::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(60), events.next())
        .await
        .unwrap()
    {
        if let Some(t) = ev.result.get("task") {
            task_id = t["id"].as_str().unwrap_or_default().to_owned();
        }
        if let Some(s) = ev.state() {
            last_state = s.to_owned();
        }
    }
    assert_eq!(last_state, "TASK_STATE_COMPLETED", "{}", gw.logs());
    let t = get_task(&http, &gw, &task_id).await;
    let want: String = (1..=6).map(|i| format!("chunk {i}/6\n")).collect();
    assert_eq!(artifact_text(&t, "stream"), want, "{t}");
    assert!(gw.logs().contains("getting the task back"), "{}", gw.logs());
}

#[tokio::test]
async fn sdk1_agent_killed_stream_is_resumed() {
    broken_stream(
        AgentKind::Sdk1,
        "sdk1_agent_killed_stream_is_resumed",
        "abort",
    )
    .await;
}

#[tokio::test]
async fn sdk1_agent_stream_ending_early_is_resumed() {
    broken_stream(
        AgentKind::Sdk1,
        "sdk1_agent_stream_ending_early_is_resumed",
        "eof",
    )
    .await;
}

#[tokio::test]
async fn sdk03_agent_killed_stream_is_resumed() {
    broken_stream(
        AgentKind::Sdk03,
        "sdk03_agent_killed_stream_is_resumed",
        "abort",
    )
    .await;
}

/// A client that drops its stream resumes at the gateway with `Last-Event-ID`
/// (SubscribeToTask): it gets the rest of the chunks, each once.
#[tokio::test]
async fn a_client_resumes_at_the_gateway_by_last_event_id() {
    let test = "a_client_resumes_at_the_gateway_by_last_event_id";
    let Some(agent) = agent(test, AgentKind::Sdk1, &[]) else {
        return;
    };
    let gw = gateway(&agent.url, &[]);
    let http = reqwest::Client::new();
    let mut events = rpc_stream(
        &http,
        &gw.url,
        "SendStreamingMessage",
        json!({ "message": user_message("stream 6 100") }),
        None,
    )
    .await;
    let (mut task_id, mut last_id, mut chunks) = (String::new(), None, Vec::new());
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .unwrap()
    {
        last_id = ev.id;
        if let Some(a) = ev.result.get("artifactUpdate") {
            task_id = a["taskId"].as_str().unwrap().to_owned();
            chunks.push(text_of(&a["artifact"]["parts"]));
            if chunks.len() == 2 {
                break;
            }
        }
    }
    drop(events);
    let mut events = rpc_stream(
        &http,
        &gw.url,
        "SubscribeToTask",
        json!({ "id": task_id }),
        last_id,
    )
    .await;
    let mut last_state = String::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .unwrap()
    {
        if let Some(a) = ev.result.get("artifactUpdate") {
            chunks.push(text_of(&a["artifact"]["parts"]));
        }
        if let Some(s) = ev.state() {
            last_state = s.to_owned();
        }
    }
    let want: Vec<String> = (1..=6).map(|i| format!("chunk {i}/6\n")).collect();
    assert_eq!(chunks, want);
    assert_eq!(last_state, "TASK_STATE_COMPLETED");
}

/// An agent whose card says it does not stream: blocking calls (and polling) behind
/// the gateway's streams.
#[tokio::test]
async fn non_streaming_agent_is_called_blocking() {
    let test = "non_streaming_agent_is_called_blocking";
    let Some(agent) = agent(test, AgentKind::Sdk1, &["--no-streaming"]) else {
        return;
    };
    let gw = gateway(&agent.url, &[("A2A_GATEWAY_AGENT__NAME", "front")]);
    let http = reqwest::Client::new();
    let r = send(&http, &gw, user_message("stream 3 10")).await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    let want: String = (1..=3).map(|i| format!("chunk {i}/3\n")).collect();
    assert_eq!(artifact_text(&r["task"], "stream"), want, "{r}");
    // `[agent]` keeps what it sets.
    let card: Value =
        a2a_gateway::test_util::get_json(&http, &format!("{}.well-known/agent-card.json", gw.url))
            .await;
    assert_eq!(card["name"], "front");
}

/// On SQLite: a task waiting for input survives a SIGKILL of the gateway, and the
/// follow-up sent to the restarted gateway reaches the same task of the agent (the link
/// is in the store, migration 0006); a task running when the gateway was killed is
/// FAILED at the restart (the recovery of interrupted tasks; it is not resumed).
#[tokio::test]
async fn sqlite_sigkill_keeps_the_agent_task_link_and_fails_the_running_task() {
    let test = "sqlite_sigkill_keeps_the_agent_task_link_and_fails_the_running_task";
    let Some(agent) = agent(test, AgentKind::Sdk1, &[]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("gw.db").display());
    let env = [("A2A_GATEWAY_STORE__URL", store.as_str())];
    let http = reqwest::Client::new();
    let mut gw = gateway(&agent.url, &env);
    let r = send(&http, &gw, user_message("ask")).await;
    let asked = r["task"].clone();
    assert_eq!(asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    let mut events = rpc_stream(
        &http,
        &gw.url,
        "SendStreamingMessage",
        json!({ "message": user_message("slow") }),
        None,
    )
    .await;
    let mut slow_id = String::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .unwrap()
    {
        if let Some(a) = ev.result.get("artifactUpdate") {
            slow_id = a["taskId"].as_str().unwrap().to_owned();
            break;
        }
    }
    gw.kill();
    drop(events);

    let gw = gateway(&agent.url, &env);
    let t = get_task(&http, &gw, &slow_id).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_FAILED", "{t}");
    let mut follow = user_message("after the restart");
    follow["taskId"] = asked["id"].clone();
    follow["contextId"] = asked["contextId"].clone();
    let r = send(&http, &gw, follow).await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    let answer: Value = serde_json::from_str(&artifact_text(&r["task"], "answer")).unwrap();
    assert_eq!(
        answer["task_id"], answer["first_turn"]["task_id"],
        "{answer}"
    );
    assert_eq!(answer["answer"], "after the restart");
}

/// An `a2a` agent of `[agents.<id>]` beside the one at `/` (its handler a sibling of the
/// first) keeps its link to the agent's task in the store too: after a restart, a
/// follow-up to its waiting task reaches the same task of the agent, as at `/`.
#[tokio::test]
async fn a_named_a2a_agent_keeps_its_agent_task_link_across_a_restart() {
    let test = "a_named_a2a_agent_keeps_its_agent_task_link_across_a_restart";
    let Some(agent) = agent(test, AgentKind::Sdk1, &[]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("gw.db").display());
    let env = [
        ("A2A_GATEWAY_STORE__URL", store.as_str()),
        ("A2A_GATEWAY_AGENTS__P__UPSTREAM__KIND", "a2a"),
        ("A2A_GATEWAY_AGENTS__P__UPSTREAM__URL", agent.url.as_str()),
    ];
    let http = reqwest::Client::new();
    let gw = gateway(&agent.url, &env);
    let named = format!("{}agents/p/", gw.url);
    let r = rpc_result(
        &http,
        &named,
        "SendMessage",
        json!({ "message": user_message("ask") }),
    )
    .await;
    let asked = r["task"].clone();
    assert_eq!(asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    drop(gw);

    let gw = gateway(&agent.url, &env);
    let named = format!("{}agents/p/", gw.url);
    let mut follow = user_message("after the restart");
    follow["taskId"] = asked["id"].clone();
    follow["contextId"] = asked["contextId"].clone();
    let r = rpc_result(&http, &named, "SendMessage", json!({ "message": follow })).await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    let answer: Value = serde_json::from_str(&artifact_text(&r["task"], "answer")).unwrap();
    assert_eq!(
        answer["task_id"], answer["first_turn"]["task_id"],
        "the follow-up reached another task of the agent: {answer}"
    );
    assert_eq!(answer["answer"], "after the restart");
}

/// Nothing listens at the agent's URL at start: `serve` starts, `/readyz` says why, a
/// message fails with a readable reason and a correlation id.
#[tokio::test]
async fn upstream_down_at_start() {
    let url = format!("http://127.0.0.1:{}/", free_port());
    let gw = gateway(&url, &[("A2A_GATEWAY_UPSTREAM__CONNECT_TIMEOUT_SECS", "2")]);
    let http = reqwest::Client::new();
    let r = http.get(format!("{}readyz", gw.url)).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let body = r.text().await.unwrap();
    assert!(
        body.contains("no usable card from the upstream A2A agent"),
        "{body}"
    );
    let r = send(&http, &gw, user_message("hello")).await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_FAILED", "{r}");
    let reason = status_text(&r["task"]);
    assert!(
        reason.contains("could not connect to the A2A agent"),
        "{reason}"
    );
    assert!(reason.contains("correlation id"), "{reason}");
}

/// A stand-in agent on 127.0.0.1:0 with a valid 1.0 card whose JSON-RPC endpoint
/// answers `body` with `status`.
async fn bad_agent(status: u16, body: &'static str) -> String {
    use axum::routing::{get, post};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let card = json!({
        "name": "bad", "description": "d", "version": "1",
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": false}, "skills": [],
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
    });
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || {
                let card = card.clone();
                async move { axum::Json(card) }
            }),
        )
        .route(
            "/",
            post(move || async move { (axum::http::StatusCode::from_u16(status).unwrap(), body) }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// Garbage or a 404 from the agent: the task fails with a readable reason and a
/// correlation id; never a 500.
// Multi-threaded: the stand-in agent answers the card while `start` blocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_upstream_fails_the_task_readably() {
    let http = reqwest::Client::new();
    for (status, body, want) in [
        (200, "<html>nope</html>", "not JSON"),
        (404, "not here", "404"),
        (
            200,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"odd\":1}}",
            "not an A2A event",
        ),
        // Another request's answer (JSON-RPC id) is no answer to this one.
        (
            200,
            "{\"jsonrpc\":\"2.0\",\"id\":987654,\"result\":{\"task\":{\"id\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}",
            "id (987654) is not the request's",
        ),
    ] {
        let url = bad_agent(status, body).await;
        let gw = gateway(&url, &[]);
        let r = rpc(
            &http,
            &gw.url,
            "SendMessage",
            json!({ "message": user_message("hi") }),
        )
        .await;
        let task = &r["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{r}");
        let reason = status_text(task);
        assert!(reason.contains(want), "{status} {body}: {reason}");
        assert!(reason.contains("correlation id"), "{reason}");
    }
}

/// A stand-in A2A agent that answers 1.0 calls -32009 (version not supported) and 0.3
/// ones: `message/send` leaves the task INPUT_REQUIRED, `tasks/cancel` refuses
/// (-32002). Returns its URL and the (method, `A2A-Version`) of each call.
async fn refusing_agent() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
) {
    use axum::routing::{get, post};
    let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let card = json!({
        "name": "refusing", "description": "d", "version": "1",
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": false}, "skills": [],
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
    });
    let seen = calls.clone();
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || {
                let card = card.clone();
                async move { axum::Json(card) }
            }),
        )
        .route(
            "/",
            post(move |headers: axum::http::HeaderMap, body: String| {
                let seen = seen.clone();
                async move {
                    let req: Value = serde_json::from_str(&body).unwrap();
                    let method = req["method"].as_str().unwrap_or("").to_owned();
                    let version = headers
                        .get("a2a-version")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned();
                    seen.lock().unwrap().push((method.clone(), version));
                    let id = req["id"].clone();
                    let answer = match method.as_str() {
                        "message/send" => json!({"jsonrpc": "2.0", "id": id, "result": {
                            "kind": "task", "id": "agent-task", "contextId": "agent-ctx",
                            "status": {"state": "input-required", "message": {"kind": "message",
                                "role": "agent", "messageId": "m", "parts": [{"kind": "text", "text": "which one?"}]}}}}),
                        "tasks/cancel" => json!({"jsonrpc": "2.0", "id": id, "error": {
                            "code": -32002, "message": "Task cannot be canceled"}}),
                        _ => json!({"jsonrpc": "2.0", "id": id, "error": {
                            "code": -32009, "message": "A2A version 1.0 is not supported"}}),
                    };
                    axum::Json(answer)
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

/// A 1.0 call answered -32009 is made again in 0.3, and 0.3 is spoken from then on; an
/// agent that refuses to cancel (-32002) leaves the gateway task as it is and the
/// caller gets -32002.
// Multi-threaded: the stand-in agent answers the card while `start` blocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_fallback_and_a_refused_cancel() {
    let (url, calls) = refusing_agent().await;
    let gw = gateway(&url, &[]);
    let http = reqwest::Client::new();
    let r = send(&http, &gw, user_message("hello")).await;
    let task = &r["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    assert_eq!(status_text(task), "which one?");
    assert_ne!(task["id"], "agent-task");
    let id = task["id"].as_str().unwrap().to_owned();
    let r = rpc(&http, &gw.url, "CancelTask", json!({ "id": id })).await;
    assert_eq!(r["error"]["code"], -32002, "{r}");
    let t = get_task(&http, &gw, &id).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{t}");
    let calls = calls.lock().unwrap().clone();
    let pairs: Vec<(&str, &str)> = calls
        .iter()
        .map(|(m, v)| (m.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("SendMessage", "1.0"),
            ("message/send", "0.3"),
            ("tasks/cancel", "0.3"),
        ]
    );
}

/// bedrock-agentcore's A2A app (`build_a2a_app`) as an AgentCore A2A runtime (the ARN
/// set, its URL overridden to the local app): 0.3 by default, every call in the runtime
/// session of its context.
#[tokio::test]
async fn agentcore_a2a_app_is_spoken_0_3_in_the_context_session() {
    let test = "agentcore_a2a_app_is_spoken_0_3_in_the_context_session";
    let Some(agent) = agent(test, AgentKind::AgentCore, &[]) else {
        return;
    };
    let gw = gateway(
        &agent.url,
        &[(
            "A2A_GATEWAY_UPSTREAM__AGENT_RUNTIME_ARN",
            "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-1",
        )],
    );
    let http = reqwest::Client::new();
    let r = send(&http, &gw, user_message("ask")).await;
    let task = &r["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    let mut follow = user_message("7");
    follow["taskId"] = task["id"].clone();
    follow["contextId"] = task["contextId"].clone();
    let r = send(&http, &gw, follow).await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    let calls = agent.calls().await;
    assert_eq!(calls.len(), 2, "{calls:?}");
    let session = calls[0]["headers"]["x-amzn-bedrock-agentcore-runtime-session-id"].clone();
    assert!(session.as_str().is_some_and(|s| s.len() >= 33), "{calls:?}");
    for c in &calls {
        assert_eq!(c["headers"]["a2a-version"], "0.3", "{c}");
        assert_eq!(
            c["headers"]["x-amzn-bedrock-agentcore-runtime-session-id"],
            session
        );
    }
}

/// An AgentCore A2A runtime busy with the session (HTTP 409, JSON-RPC -32054 "session
/// operation in progress") is asked again after a short backoff.
// Multi-threaded: the stand-in agent answers the card while `start` blocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentcore_session_busy_is_retried() {
    use axum::routing::{get, post};
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/invocations/", listener.local_addr().unwrap());
    let card = json!({"name": "runtime", "description": "d", "version": "1", "url": url,
        "protocolVersion": "0.3.0", "capabilities": {"streaming": false}, "skills": [],
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"]});
    let calls = busy.clone();
    let app = axum::Router::new()
        .route(
            "/invocations/.well-known/agent-card.json",
            get(move || {
                let card = card.clone();
                async move { axum::Json(card) }
            }),
        )
        .route(
            "/invocations/",
            post(move |body: String| {
                let calls = calls.clone();
                async move {
                    let req: Value = serde_json::from_str(&body).unwrap();
                    let id = req["id"].clone();
                    if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                        return (
                            axum::http::StatusCode::CONFLICT,
                            axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": {
                                "code": -32054, "message": "Session operation in progress, please retry"}})),
                        );
                    }
                    (
                        axum::http::StatusCode::OK,
                        axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {
                            "kind": "task", "id": "t", "contextId": "c",
                            "status": {"state": "completed"},
                            "artifacts": [{"artifactId": "a", "parts": [{"kind": "text", "text": "done"}]}]}})),
                    )
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let gw = gateway(
        &url,
        &[(
            "A2A_GATEWAY_UPSTREAM__AGENT_RUNTIME_ARN",
            "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-1",
        )],
    );
    let http = reqwest::Client::new();
    let r = send(&http, &gw, user_message("hi")).await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(artifact_text(&r["task"], "a"), "done");
    assert_eq!(busy.load(std::sync::atomic::Ordering::SeqCst), 2);
}

/// The agent's card is read again once stale (here: `max-age=0`, no floor), revalidated
/// with its ETag (304 keeps it), and a changed card is used from then on (streaming
/// turned off: the next message is sent with the blocking SendMessage).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_card_is_refreshed_by_its_cache_headers() {
    use a2a_gateway::executor::{
        AgentExecutor, CallContext, EventQueue, RequestContext, new_user_text_message,
    };
    use a2a_gateway::upstream::a2a::{A2aExecutor, A2aSettings};
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::IntoResponse;
    use axum::routing::{get, post};
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Seen {
        /// (If-None-Match sent, answered 304).
        cards: Vec<(Option<String>, bool)>,
        methods: Vec<String>,
        /// The card's generation: 1 streams, 2 does not.
        generation: u32,
    }
    let seen = Arc::new(Mutex::new(Seen {
        generation: 1,
        ..Seen::default()
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let (card_seen, rpc_seen, base) = (seen.clone(), seen.clone(), url.clone());
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move |headers: HeaderMap| {
                let (seen, base) = (card_seen.clone(), base.clone());
                async move {
                    let mut seen = seen.lock().unwrap();
                    let tag = format!("\"gen-{}\"", seen.generation);
                    let asked = headers
                        .get(header::IF_NONE_MATCH)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let same = asked.as_deref() == Some(tag.as_str());
                    seen.cards.push((asked, same));
                    if same {
                        return (StatusCode::NOT_MODIFIED, [(header::CACHE_CONTROL, "max-age=0".to_owned())])
                            .into_response();
                    }
                    let card = json!({"name": "n", "description": "d", "version": "1", "skills": [],
                        "supportedInterfaces": [{"url": base, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
                        "capabilities": {"streaming": seen.generation == 1},
                        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"]});
                    (
                        [(header::CACHE_CONTROL, "max-age=0".to_owned()), (header::ETAG, tag)],
                        axum::Json(card),
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/",
            post(move |body: String| {
                let seen = rpc_seen.clone();
                async move {
                    let req: Value = serde_json::from_str(&body).unwrap();
                    seen.lock().unwrap().methods.push(req["method"].as_str().unwrap().to_owned());
                    axum::Json(json!({"jsonrpc": "2.0", "id": req["id"], "result": {"message": {
                        "messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}}))
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut s = A2aSettings::for_url(&url);
    s.card_min_refresh = Duration::ZERO;
    let exec = A2aExecutor::new(s).unwrap();
    let run = async |exec: &A2aExecutor| {
        let (queue, mut rx) = EventQueue::bounded(16);
        let ctx = RequestContext::new(
            new_user_text_message("hello"),
            uuid::Uuid::new_v4().to_string(),
            uuid::Uuid::new_v4().to_string(),
            CallContext::new("", "alice"),
        );
        exec.execute(ctx, queue).await.unwrap();
        let ev = rx.recv().await.unwrap();
        assert!(
            matches!(ev, a2a_gateway::protocol::StreamResponse::Message(_)),
            "{ev:?}"
        );
    };
    run(&exec).await;
    run(&exec).await;
    seen.lock().unwrap().generation = 2;
    run(&exec).await;
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.cards,
        [
            (None, false),
            (Some("\"gen-1\"".to_owned()), true),
            (Some("\"gen-1\"".to_owned()), false),
        ]
    );
    assert_eq!(
        seen.methods,
        [
            "SendStreamingMessage",
            "SendStreamingMessage",
            "SendMessage"
        ]
    );
}

/// Of the extensions a caller asks for (`A2A-Extensions`), the agent gets those its card
/// declares, in the header and on the message; the rest (and the message's metadata
/// with them) stay at the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_extensions_the_agent_declares_reach_it() {
    use axum::routing::{get, post};
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, Value)>::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let card = json!({"name": "ext", "description": "d", "version": "1", "skills": [],
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": false, "extensions": [{"uri": "urn:test:declared"}]},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"]});
    let record = seen.clone();
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || {
                let card = card.clone();
                async move { axum::Json(card) }
            }),
        )
        .route(
            "/",
            post(move |headers: axum::http::HeaderMap, body: String| {
                let record = record.clone();
                async move {
                    let req: Value = serde_json::from_str(&body).unwrap();
                    let ext = headers
                        .get("a2a-extensions")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned();
                    record
                        .lock()
                        .unwrap()
                        .push((ext, req["params"]["message"].clone()));
                    axum::Json(
                        json!({"jsonrpc": "2.0", "id": req["id"], "result": {"message": {
                        "messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}}}),
                    )
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let gw = gateway(&url, &[]);
    let http = reqwest::Client::new();
    let mut m = user_message("hi");
    m["extensions"] = json!(["urn:test:declared", "urn:test:other"]);
    let r = a2a_gateway::test_util::rpc_with(
        http.post(&gw.url)
            .header("A2A-Extensions", "urn:test:declared, urn:test:other"),
        "SendMessage",
        json!({ "message": m }),
    )
    .await;
    assert!(r["result"].get("message").is_some(), "{r}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, "urn:test:declared");
    assert_eq!(seen[0].1["extensions"], json!(["urn:test:declared"]));
}

/// An AgentCore A2A runtime: after the agent canceled a task, StopRuntimeSession is
/// called for its session when the context holds no other live task; with another task
/// of the context waiting for input, the session is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentcore_cancel_stops_a_session_the_task_had_alone() {
    use axum::routing::{get, post};
    type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>;
    let seen: Seen = Default::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let url = format!("{base}/invocations/");
    let card = json!({"name": "runtime", "description": "d", "version": "1", "url": url,
        "protocolVersion": "0.3.0", "capabilities": {"streaming": false}, "skills": [],
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"]});
    let session_of = |h: &axum::http::HeaderMap| {
        h.get("x-amzn-bedrock-agentcore-runtime-session-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let (rpc_seen, stop_seen) = (seen.clone(), seen.clone());
    let app = axum::Router::new()
        .route(
            "/invocations/.well-known/agent-card.json",
            get(move || {
                let card = card.clone();
                async move { axum::Json(card) }
            }),
        )
        .route(
            "/invocations/",
            post(move |headers: axum::http::HeaderMap, body: String| {
                let seen = rpc_seen.clone();
                async move {
                    let req: Value = serde_json::from_str(&body).unwrap();
                    let method = req["method"].as_str().unwrap().to_owned();
                    seen.lock()
                        .unwrap()
                        .push((method.clone(), session_of(&headers)));
                    let n = seen.lock().unwrap().len();
                    let (id, state) = if method == "tasks/cancel" {
                        (req["params"]["id"].as_str().unwrap().to_owned(), "canceled")
                    } else {
                        (format!("agent-task-{n}"), "input-required")
                    };
                    axum::Json(json!({"jsonrpc": "2.0", "id": req["id"], "result": {
                        "kind": "task", "id": id, "contextId": "agent-ctx",
                        "status": {"state": state}}}))
                }
            }),
        )
        .route(
            "/stopruntimesession",
            post(move |headers: axum::http::HeaderMap| {
                let seen = stop_seen.clone();
                async move {
                    seen.lock()
                        .unwrap()
                        .push(("stop".into(), session_of(&headers)));
                    axum::Json(json!({}))
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let gw = gateway(
        &url,
        &[(
            "A2A_GATEWAY_UPSTREAM__AGENT_RUNTIME_ARN",
            "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-1",
        )],
    );
    let http = reqwest::Client::new();
    let stops = |seen: &Seen| {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == "stop")
            .count()
    };

    // Alone in its context: canceled at the agent, then its session stopped.
    let r = send(&http, &gw, user_message("one")).await;
    let id = r["task"]["id"].as_str().unwrap().to_owned();
    let r = rpc_result(&http, &gw.url, "CancelTask", json!({ "id": id })).await;
    assert_eq!(r["status"]["state"], "TASK_STATE_CANCELED", "{r}");
    assert_eq!(stops(&seen), 1);
    {
        let seen = seen.lock().unwrap();
        let send_session = &seen[0].1;
        assert!(send_session.len() >= 33, "{seen:?}");
        assert!(
            seen.iter().all(|(_, s)| s == send_session),
            "one session: {seen:?}"
        );
    }

    // Two tasks of one context: canceling one leaves the session alone.
    let r = send(&http, &gw, user_message("two")).await;
    let (a, ctx) = (r["task"]["id"].clone(), r["task"]["contextId"].clone());
    let mut m = user_message("three");
    m["contextId"] = ctx;
    send(&http, &gw, m).await;
    let r = rpc_result(&http, &gw.url, "CancelTask", json!({ "id": a })).await;
    assert_eq!(r["status"]["state"], "TASK_STATE_CANCELED", "{r}");
    assert_eq!(stops(&seen), 1, "{:?}", seen.lock().unwrap());
}

/// An a2a-sdk 0.3 agent whose executor raises drops its stream and leaves the task
/// SUBMITTED for good (its resubscription stays silent): the gateway task still fails,
/// with a readable reason and a correlation id, once `stall_for` (30 s) has passed, not
/// after `read_timeout` (900 s) or `resume_for` (300 s).
#[tokio::test]
async fn sdk03_agent_crash_fails_the_task_promptly() {
    let Some(agent) = agent(
        "sdk03_agent_crash_fails_the_task_promptly",
        AgentKind::Sdk03,
        &[],
    ) else {
        return;
    };
    let gw = gateway(&agent.url, &[]);
    let http = reqwest::Client::new();
    let mut events = rpc_stream(
        &http,
        &gw.url,
        "SendStreamingMessage",
        json!({ "message": user_message("crash now") }),
        None,
    )
    .await;
    let mut id = String::new();
    let mut last_state = String::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(90), events.next())
        .await
        .expect("the crashed task settles well before resume_for")
    {
        if let Some(t) = ev.result.get("task") {
            id = t["id"].as_str().unwrap().to_owned();
        }
        if let Some(s) = ev.state() {
            last_state = s.to_owned();
        }
    }
    assert_eq!(last_state, "TASK_STATE_FAILED");
    let task = get_task(&http, &gw, &id).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    let reason = status_text(&task);
    assert!(reason.contains("the A2A agent"), "{reason}");
    assert!(reason.contains("SUBMITTED"), "{reason}");
    assert!(reason.contains("correlation id"), "{reason}");
}

/// An a2a-sdk 1.x agent whose executor raises answers JSON-RPC -32603 in its stream and
/// marks its task FAILED without a status message: the gateway task's FAILED still
/// carries a readable reason (the agent's error) and a correlation id.
#[tokio::test]
async fn sdk1_agent_crash_fails_the_task_with_a_reason() {
    let Some(agent) = agent(
        "sdk1_agent_crash_fails_the_task_with_a_reason",
        AgentKind::Sdk1,
        &[],
    ) else {
        return;
    };
    let gw = gateway(&agent.url, &[]);
    let http = reqwest::Client::new();
    let r = send(&http, &gw, user_message("crash now")).await;
    let task = &r["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{r}");
    let reason = status_text(task);
    assert!(reason.contains("the A2A agent"), "{reason}");
    assert!(reason.contains("crashed on purpose"), "{reason}");
    assert!(reason.contains("correlation id"), "{reason}");
}

/// Push stays at the gateway: a task streamed by the a2a-sdk 1.x agent, with a webhook
/// registered inline, is delivered from the gateway's own outbox (signed, every chunk
/// once and in order once coalesced ranges are unfolded, COMPLETED last), and the push
/// config never reaches the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_is_delivered_by_the_gateway_never_forwarded() {
    let test = "push_is_delivered_by_the_gateway_never_forwarded";
    let Some(agent) = agent(test, AgentKind::Sdk1, &[]) else {
        return;
    };
    let receiver = bindings_common::server::Receiver::start().await;
    let gw = gateway(
        &agent.url,
        &[
            ("A2A_GATEWAY_PUSH__ALLOW_HTTP", "true"),
            ("A2A_GATEWAY_PUSH__ALLOW_CIDRS", "[\"127.0.0.1/32\"]"),
            ("A2A_GATEWAY_PUSH__POLL_INTERVAL_MS", "50"),
        ],
    );
    let http = reqwest::Client::new();
    let reply = rpc(
        &http,
        &gw.url,
        "SendMessage",
        json!({"message": user_message("stream 4 20"), "configuration": {
            "taskPushNotificationConfig": {"id": "hook", "url": format!("{}/hook", receiver.url),
                "token": "tok-a2a"}}}),
    )
    .await;
    assert!(reply.get("error").is_none(), "{reply}");
    let id = reply["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    let calls = receiver
        .wait_for("/hook", |calls| {
            calls
                .iter()
                .any(|h| String::from_utf8_lossy(&h.body).contains("TASK_STATE_COMPLETED"))
        })
        .await;
    let mut chunks = String::new();
    for h in &calls {
        assert!(h.headers.contains_key("webhook-signature"), "signed");
        assert_eq!(h.headers["x-a2a-notification-token"], "tok-a2a");
        let body: Value = serde_json::from_slice(&h.body).unwrap();
        assert!(
            body.to_string().contains(&id),
            "the gateway's task id: {body}"
        );
        if let Some(parts) = body["artifactUpdate"]["artifact"]["parts"].as_array() {
            for p in parts {
                chunks.push_str(p["text"].as_str().unwrap_or(""));
            }
        }
    }
    assert_eq!(chunks, "chunk 1/4\nchunk 2/4\nchunk 3/4\nchunk 4/4\n");
    let seen = agent.calls().await;
    let text = Value::Array(seen).to_string();
    assert!(
        text.contains("stream 4 20"),
        "the agent got the message: {text}"
    );
    assert!(
        !text.contains("tok-a2a") && !text.contains(&receiver.url),
        "no push config reached the agent: {text}"
    );
}

/// The official clients through the gateway to the a2a-sdk 1.x agent: the 1.x client
/// resolves the gateway's card and sends on each of its bindings (JSON-RPC, HTTP+JSON,
/// gRPC on the shared listener), the 0.3 client on JSON-RPC; each gets the agent's answer
/// as the gateway's task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_clients_on_every_binding_through_the_gateway() {
    use a2a_gateway::test_util::{official_client, python_for};
    let test = "official_clients_on_every_binding_through_the_gateway";
    let Some(agent) = agent(test, AgentKind::Sdk1, &[]) else {
        return;
    };
    let Some(py) = python_for(
        test,
        "A2A_GATEWAY_TEST_PYTHON",
        ".venv/bin/python",
        "a2a.client",
    ) else {
        return;
    };
    let gw = gateway(&agent.url, &[]);
    for binding in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let got = official_client(
            &py,
            json!({"sdk": "1", "url": gw.url, "binding": binding, "key": null,
                "text": format!("hello over {binding}")}),
        )
        .await;
        assert_eq!(got["state"], "TASK_STATE_COMPLETED", "{binding}: {got}");
        assert_eq!(got["text"], format!("echo: hello over {binding}"), "{got}");
        assert_eq!(
            got["got"], "TASK_STATE_COMPLETED",
            "{binding}: read back: {got}"
        );
        let transport = got["transport"].as_str().unwrap_or_default().to_lowercase();
        let expected = match binding {
            "JSONRPC" => "jsonrpc",
            "HTTP+JSON" => "rest",
            _ => "grpc",
        };
        assert!(transport.contains(expected), "{binding}: {got}");
    }
    if let Some(py03) = python_for(
        test,
        "A2A_GATEWAY_TEST_PYTHON03",
        ".venv03/bin/python",
        "a2a.client",
    ) {
        let got = official_client(
            &py03,
            json!({"sdk": "03", "url": gw.url, "binding": "JSONRPC", "key": null,
                "text": "hello from 0.3"}),
        )
        .await;
        assert_eq!(got["state"], "completed", "{got}");
        assert_eq!(got["text"], "echo: hello from 0.3", "{got}");
    }
}

/// The official a2a-sdk 1.x client through the gateway to the a2a-sdk 1.x agent, on each
/// of the gateway's bindings (JSON-RPC, HTTP+JSON, gRPC on the shared listener): a
/// streamed message (each chunk once, in order, then COMPLETED), INPUT_REQUIRED then a
/// follow-up (one gateway task; the agent saw the same task and context both turns),
/// and a cancel mid-stream (CANCELED, and the agent's own cancel ran for its task).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_client_streams_asks_and_cancels_on_every_binding() {
    use a2a_gateway::test_util::{official_client, python_for};
    let test = "official_client_streams_asks_and_cancels_on_every_binding";
    let Some(agent) = agent(test, AgentKind::Sdk1, &[]) else {
        return;
    };
    let Some(py) = python_for(
        test,
        "A2A_GATEWAY_TEST_PYTHON",
        ".venv/bin/python",
        "a2a.client",
    ) else {
        return;
    };
    let gw = gateway(&agent.url, &[]);
    let run = async |binding: &str, scenario: &str, text: &str| {
        official_client(
            &py,
            json!({"sdk": "1", "url": gw.url, "binding": binding, "key": null,
                "text": text, "scenario": scenario}),
        )
        .await
    };
    for binding in ["JSONRPC", "HTTP+JSON", "GRPC"] {
        let got = run(binding, "stream", "stream 4 20").await;
        assert_eq!(
            got["chunks"],
            json!(["chunk 1/4\n", "chunk 2/4\n", "chunk 3/4\n", "chunk 4/4\n"]),
            "{binding}: {got}"
        );
        assert_eq!(
            got["states"].as_array().and_then(|s| s.last()),
            Some(&json!("TASK_STATE_COMPLETED")),
            "{binding}: {got}"
        );
        assert_eq!(got["got"], "TASK_STATE_COMPLETED", "{binding}: {got}");

        let got = run(binding, "ask", "ask").await;
        assert_eq!(
            got["first"], "TASK_STATE_INPUT_REQUIRED",
            "{binding}: {got}"
        );
        assert_eq!(got["second"], "TASK_STATE_COMPLETED", "{binding}: {got}");
        assert_eq!(
            got["second_task"], got["task"],
            "{binding}: one gateway task"
        );
        let answer: Value = serde_json::from_str(got["answer"].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{binding}: {e}: {got}"));
        assert_eq!(answer["answer"], "42", "{binding}: {answer}");
        assert_eq!(
            answer["task_id"], answer["first_turn"]["task_id"],
            "{binding}: the agent saw one task: {answer}"
        );
        assert_eq!(
            answer["context_id"], answer["first_turn"]["context_id"],
            "{binding}: {answer}"
        );
        assert_ne!(answer["task_id"], got["task"], "gateway ids are its own");

        let got = run(binding, "cancel", "slow").await;
        assert_eq!(got["canceled"], "TASK_STATE_CANCELED", "{binding}: {got}");
        assert_eq!(got["got"], "TASK_STATE_CANCELED", "{binding}: {got}");
        // The agent's cancel ran for the agent's task of this run (the last `slow`).
        let calls = agent.calls().await;
        let upstream = calls
            .iter()
            .rev()
            .find(|c| c["op"] == "execute" && c["scenario"] == "slow")
            .and_then(|c| c["task_id"].as_str())
            .unwrap_or_else(|| panic!("{binding}: the agent ran `slow`: {calls:?}"))
            .to_owned();
        assert!(
            calls
                .iter()
                .any(|c| c["op"] == "cancel" && c["task_id"] == upstream.as_str()),
            "{binding}: the agent's cancel ran for {upstream}: {calls:?}"
        );
    }
}

/// A stand-in A2A agent on `listener` whose card is `card` (shared: the test changes
/// it), served with `Cache-Control: max-age=1` and an ETag of its content (304 to a
/// matching `If-None-Match`); its JSON-RPC endpoint answers every message with a direct
/// Message. Returns its base URL.
fn changing_agent(
    listener: tokio::net::TcpListener,
    card: std::sync::Arc<std::sync::Mutex<Value>>,
) -> String {
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::IntoResponse;
    use axum::routing::{get, post};
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let base = url.clone();
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move |headers: HeaderMap| {
                let (card, base) = (card.clone(), base.clone());
                async move {
                    let mut card = card.lock().unwrap().clone();
                    card["supportedInterfaces"] = json!([
                        {"url": base, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
                    ]);
                    let tag = format!("\"{:x}\"", {
                        use std::hash::{Hash, Hasher};
                        let mut h = std::collections::hash_map::DefaultHasher::new();
                        card.to_string().hash(&mut h);
                        h.finish()
                    });
                    let cache = (header::CACHE_CONTROL, "max-age=1".to_owned());
                    if headers
                        .get(header::IF_NONE_MATCH)
                        .is_some_and(|v| v.as_bytes() == tag.as_bytes())
                    {
                        return (StatusCode::NOT_MODIFIED, [cache]).into_response();
                    }
                    ([cache, (header::ETAG, tag)], axum::Json(card)).into_response()
                }
            }),
        )
        .route(
            "/",
            post(|body: String| async move {
                let req: Value = serde_json::from_str(&body).unwrap_or_default();
                axum::Json(
                    json!({"jsonrpc": "2.0", "id": req["id"], "result": {"message": {
                    "messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}}),
                )
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// The card of generation `n` of [`changing_agent`]: its name, description, version and
/// one skill say `n`; it streams when `streaming`.
fn card_generation(n: u32, streaming: bool) -> Value {
    json!({"name": format!("Agent gen {n}"), "description": format!("generation {n}"),
        "version": format!("{n}.0.0"),
        "skills": [{"id": format!("s{n}"), "name": format!("Skill {n}"), "description": "d", "tags": []}],
        "capabilities": {"streaming": streaming},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"]})
}

/// GET `url` with `headers`: the status, the named response headers and the JSON body
/// (`Null` without one).
async fn get_card(
    http: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
) -> (u16, String, String, Value) {
    let mut req = http.get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let header = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (etag, modified) = (header("etag"), header("last-modified"));
    let body = r.json().await.unwrap_or(Value::Null);
    (status, etag, modified, body)
}

/// Polls `f` every 200 ms until it is true, at most `within`.
async fn eventually<F: AsyncFn() -> bool>(within: Duration, f: F) -> bool {
    let until = std::time::Instant::now() + within;
    while std::time::Instant::now() < until {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// An agent whose card (served without `Cache-Control`, so held for
/// `card_refresh_secs`) still says it streams, but which answers SendStreamingMessage
/// with UnsupportedOperation (-32004): the message goes blocking and completes, and the
/// gateway reads the agent's card again at once instead of after its refresh period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_stopped_streaming_is_sent_the_message_blocking_and_its_card_read_again() {
    use axum::routing::{get, post};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let reads = std::sync::Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let (base, counted) = (url.clone(), reads.clone());
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || {
                let (base, counted) = (base.clone(), counted.clone());
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let mut card = card_generation(1, true);
                    card["supportedInterfaces"] = json!([
                        {"url": base, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
                    ]);
                    axum::Json(card)
                }
            }),
        )
        .route(
            "/",
            post(|body: String| async move {
                let req: Value = serde_json::from_str(&body).unwrap_or_default();
                if req["method"] == "SendStreamingMessage" {
                    return axum::Json(json!({"jsonrpc": "2.0", "id": req["id"], "error": {
                        "code": -32004, "message": "Streaming is not supported by the agent"}}));
                }
                axum::Json(
                    json!({"jsonrpc": "2.0", "id": req["id"], "result": {"message": {
                    "messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "blocking hi"}]}}}),
                )
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let gw = gateway(&url, &[]);
    let before = reads.load(Ordering::SeqCst);
    let http = reqwest::Client::new();
    let r = send(&http, &gw, user_message("hello")).await;
    assert_eq!(text_of(&r["message"]["parts"]), "blocking hi", "{r}");
    assert!(
        eventually(Duration::from_secs(5), async || reads
            .load(Ordering::SeqCst)
            > before)
        .await,
        "the card was not read again after the -32004"
    );
}

/// The gateway's card follows the agent's: when the agent's card changes (read again
/// after its max-age), the gateway's public card is rendered again in both generations
/// (new ETags, a later Last-Modified; the 0.3 fields still there), its extended card
/// too, and what the new card declares is enforced (streaming turned off: a streamed
/// message is refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_card_follows_the_agents_card() {
    let card = std::sync::Arc::new(std::sync::Mutex::new(card_generation(1, true)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = changing_agent(listener, card.clone());
    let gw = GatewayProcess::init(env!("CARGO_BIN_EXE_a2a-gateway"))
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(format!(
            "[agent.extended]\ndescription = \"for members\"\n[server.auth]\nkind = \"api_key\"\n\
             [[server.auth.keys]]\ncaller = \"alice\"\nsha256 = \"{}\"\n",
            a2a_gateway::config::sha256_hex("alice-key")
        ))
        .env("A2A_GATEWAY_STORE__URL", "memory:")
        .env("A2A_GATEWAY_UPSTREAM__KIND", "a2a")
        .env("A2A_GATEWAY_UPSTREAM__URL", &url)
        .env("A2A_GATEWAY_UPSTREAM__CARD_MIN_REFRESH_SECS", "1")
        .start();
    let http = reqwest::Client::new();
    let card_url = format!("{}.well-known/agent-card.json", gw.url);
    let v1 = [("A2A-Version", "1.0")];
    let (_, etag, modified, first) = get_card(&http, &card_url, &[]).await;
    let (_, etag_v1, _, first_v1) = get_card(&http, &card_url, &v1).await;
    assert_eq!(first["name"], "Agent gen 1", "{first}");
    assert_eq!(first_v1["skills"][0]["id"], "s1", "{first_v1}");
    assert_eq!(first["capabilities"]["streaming"], true, "{first}");
    let as_alice = async |method: &str, params: Value| {
        a2a_gateway::test_util::rpc_with(
            http.post(&gw.url).bearer_auth("alice-key"),
            method,
            params,
        )
        .await
    };
    let extended = as_alice("GetExtendedAgentCard", json!({})).await;
    assert_eq!(extended["result"]["name"], "Agent gen 1", "{extended}");

    *card.lock().unwrap() = card_generation(2, false);
    let seen = std::sync::Mutex::new(None);
    let changed = eventually(Duration::from_secs(15), async || {
        let got = get_card(&http, &card_url, &[("If-None-Match", &etag)]).await;
        let done = got.0 == 200 && got.3["name"] == "Agent gen 2";
        *seen.lock().unwrap() = Some(got);
        done
    })
    .await;
    let (_, etag2, modified2, second) = seen.into_inner().unwrap().unwrap();
    assert!(changed, "the gateway's card did not follow: {second}");
    assert_ne!(etag2, etag);
    assert_eq!(second["description"], "generation 2", "{second}");
    assert_eq!(second["version"], "2.0.0", "{second}");
    assert_eq!(second["skills"][0]["id"], "s2", "{second}");
    assert_eq!(second["capabilities"]["streaming"], false, "{second}");
    assert!(
        second["url"].is_string() && second["supportedInterfaces"].is_array(),
        "both generations' fields: {second}"
    );
    let modified = httpdate::parse_http_date(&modified).unwrap();
    let modified2 = httpdate::parse_http_date(&modified2).unwrap();
    assert!(modified2 > modified, "Last-Modified moved on");
    // The 1.0 variant is rendered again too.
    let (status, etag2_v1, _, second_v1) = get_card(
        &http,
        &card_url,
        &[("A2A-Version", "1.0"), ("If-None-Match", &etag_v1)],
    )
    .await;
    assert_eq!(status, 200);
    assert_ne!(etag2_v1, etag_v1);
    assert_eq!(second_v1["name"], "Agent gen 2", "{second_v1}");
    assert!(second_v1.get("url").is_none(), "{second_v1}");
    // The old validators no longer match; the new one does.
    let (status, ..) = get_card(&http, &card_url, &[("If-None-Match", &etag2)]).await;
    assert_eq!(status, 304);
    // The extended card follows, and the handler enforces the new card.
    let extended = as_alice("GetExtendedAgentCard", json!({})).await;
    assert_eq!(extended["result"]["name"], "Agent gen 2", "{extended}");
    assert_eq!(
        extended["result"]["description"], "for members",
        "{extended}"
    );
    let refused = as_alice(
        "SendStreamingMessage",
        json!({"message": user_message("hi")}),
    )
    .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("streaming is not supported")),
        "{refused}"
    );
    assert!(
        gw.logs().contains(
            "the upstream A2A agent's card changed: the gateway's card is rendered again"
        ),
        "{}",
        gw.logs()
    );
}

/// An agent down at start: `/readyz` says why and the card is `[agent]`'s; once the
/// agent comes up, its card is merged (tried again every `card_min_refresh_secs`) and
/// `/readyz` turns ready, without a request to the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_down_at_start_is_merged_once_it_comes_up() {
    let port = free_port();
    let gw = gateway(
        &format!("http://127.0.0.1:{port}/"),
        &[
            ("A2A_GATEWAY_UPSTREAM__CONNECT_TIMEOUT_SECS", "2"),
            ("A2A_GATEWAY_UPSTREAM__CARD_MIN_REFRESH_SECS", "1"),
        ],
    );
    let http = reqwest::Client::new();
    let card_url = format!("{}.well-known/agent-card.json", gw.url);
    let r = http.get(format!("{}readyz", gw.url)).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let (.., card) = get_card(&http, &card_url, &[]).await;
    assert_eq!(card["name"], "a2a-gateway", "{card}");

    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let card = std::sync::Arc::new(std::sync::Mutex::new(card_generation(1, true)));
    changing_agent(listener, card);
    let merged = eventually(Duration::from_secs(15), async || {
        get_card(&http, &card_url, &[]).await.3["name"] == "Agent gen 1"
    })
    .await;
    assert!(merged, "{}", gw.logs());
    let r = http.get(format!("{}readyz", gw.url)).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
}

/// `SIGHUP` rebuilds a changed `[agents.<id>]` of kind `a2a` with its agent's card
/// merged (not `[agents.<id>]`'s defaults), and the rebuilt agent's card keeps
/// following the agent's (the index of `/agents` too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_keeps_an_a2a_agents_card_merged_and_following() {
    let card = std::sync::Arc::new(std::sync::Mutex::new(card_generation(1, true)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = changing_agent(listener, card.clone());
    let config = |max: u32| {
        format!(
            "[store]\nurl = \"memory:\"\n[agents.helper]\nmax_concurrent_tasks = {max}\n\
             [agents.helper.upstream]\nkind = \"a2a\"\nurl = \"{url}\"\ncard_min_refresh_secs = 1\n"
        )
    };
    let gw = GatewayProcess::init(env!("CARGO_BIN_EXE_a2a-gateway"))
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(config(4))
        .start();
    let http = reqwest::Client::new();
    let card_url = format!("{}agents/helper/.well-known/agent-card.json", gw.url);
    let (.., first) = get_card(&http, &card_url, &[]).await;
    assert_eq!(first["name"], "Agent gen 1", "{first}");

    std::fs::write(gw.config_path().unwrap(), config(5)).unwrap();
    gw.hang_up();
    gw.logs_when(
        |l| l.contains("SIGHUP: agents reloaded"),
        Duration::from_secs(10),
    );
    let merged = eventually(Duration::from_secs(10), async || {
        get_card(&http, &card_url, &[]).await.3["name"] == "Agent gen 1"
    })
    .await;
    assert!(merged, "the rebuilt agent's card lost the merge");

    *card.lock().unwrap() = card_generation(2, true);
    let followed = eventually(Duration::from_secs(15), async || {
        let (.., card) = get_card(&http, &card_url, &[]).await;
        let index: Value =
            a2a_gateway::test_util::get_json(&http, &format!("{}agents", gw.url)).await;
        card["name"] == "Agent gen 2" && index["agents"][0]["name"] == "Agent gen 2"
    })
    .await;
    assert!(followed, "{}", gw.logs());
}

/// The agent's stream ends before its task settles and the agent then does not answer
/// (503) for a while: the gateway's client is told once, in a WORKING status message,
/// that the answer broke off and the gateway keeps trying; once GetTask answers, the
/// task completes with the agent's artifact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_is_told_once_while_the_gateway_waits_for_a_silent_agent() {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    use axum::routing::{get, post};
    use std::sync::atomic::{AtomicU32, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let base = url.clone();
    let refused = std::sync::Arc::new(AtomicU32::new(0));
    let counted = refused.clone();
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(move || {
                let mut card = card_generation(1, true);
                card["supportedInterfaces"] =
                    json!([{"url": base, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]);
                async move { axum::Json(card) }
            }),
        )
        .route(
            "/",
            post(move |body: String| {
                let refused = counted.clone();
                async move {
                    let req: Value = serde_json::from_str(&body).unwrap_or_default();
                    let task = json!({"id": "up-1", "contextId": "uc-1"});
                    match req["method"].as_str().unwrap_or_default() {
                        // One WORKING, then the stream ends: not settled.
                        "SendStreamingMessage" => {
                            let event = json!({"jsonrpc": "2.0", "id": req["id"], "result": {
                                "statusUpdate": {"taskId": "up-1", "contextId": "uc-1",
                                    "status": {"state": "TASK_STATE_WORKING"}}}});
                            (
                                [(header::CONTENT_TYPE, "text/event-stream")],
                                format!("data: {event}\n\n"),
                            )
                                .into_response()
                        }
                        // Down for the resubscription and the first two polls.
                        _ if refused.fetch_add(1, Ordering::SeqCst) < 3 => {
                            StatusCode::SERVICE_UNAVAILABLE.into_response()
                        }
                        "GetTask" => {
                            let mut task = task;
                            task["status"] = json!({"state": "TASK_STATE_COMPLETED"});
                            task["artifacts"] =
                                json!([{"artifactId": "a", "parts": [{"text": "done"}]}]);
                            axum::Json(json!({"jsonrpc": "2.0", "id": req["id"], "result": task}))
                                .into_response()
                        }
                        _ => StatusCode::SERVICE_UNAVAILABLE.into_response(),
                    }
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let gw = gateway(&url, &[("A2A_GATEWAY_UPSTREAM__MAX_RETRIES", "0")]);
    let http = reqwest::Client::new();
    let mut events = rpc_stream(
        &http,
        &gw.url,
        "SendStreamingMessage",
        json!({ "message": user_message("hello") }),
        None,
    )
    .await;
    let (mut notices, mut artifact, mut last) = (Vec::new(), String::new(), String::new());
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .unwrap()
    {
        if let Some(s) = ev.result.get("statusUpdate") {
            last = s["status"]["state"].as_str().unwrap_or_default().to_owned();
            let text = text_of(&s["status"]["message"]["parts"]);
            if !text.is_empty() {
                notices.push((last.clone(), text));
            }
        }
        if let Some(a) = ev.result.get("artifactUpdate") {
            artifact.push_str(&text_of(&a["artifact"]["parts"]));
        }
    }
    assert_eq!(last, "TASK_STATE_COMPLETED", "{notices:?}");
    assert_eq!(artifact, "done");
    assert_eq!(notices.len(), 1, "told once: {notices:?}");
    assert_eq!(notices[0].0, "TASK_STATE_WORKING");
    assert!(
        notices[0].1.contains("broke off") && notices[0].1.contains("keeps trying"),
        "{notices:?}"
    );
    assert!(refused.load(Ordering::SeqCst) >= 4);
}
