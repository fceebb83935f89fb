//! Several agents in one `a2a-gateway serve` (`[agents.<id>]`, docs/agents.md): the
//! reviewer on the real `BedrockAgentCoreApp` (tests/python/upstream_agent.py), the
//! helper on a [`MockRuntime`], both under their prefixes on one listener, one store and
//! one set of API keys.
//!
//! - The official Python client (a2a-sdk 1.x in `.venv`, and the 0.3 release in
//!   `.venv03`) resolves each agent's card from the agent's own URL and sends on
//!   JSON-RPC and HTTP+JSON (tests/python/agents_client.py).
//! - A task of one agent is TaskNotFound through the other on every operation of both
//!   HTTP bindings, and never listed there.
//! - `callers`: any other caller gets 403 / PERMISSION_DENIED on every operation, and
//!   the upstream never sees the message.
//! - The same on PostgreSQL in cluster mode.
//!
//! Python comes from `A2A_GATEWAY_TEST_PYTHON` (default `.venv/bin/python`), the 0.3
//! client from `A2A_GATEWAY_TEST_PYTHON03` (default `.venv03/bin/python`); without them
//! the test is skipped with a note, unless `CI=true`, where it fails.

use std::path::Path;
use std::sync::Arc;

mod bindings_common;

use bindings_common::server::Receiver;

use a2a_gateway::test_util::{
    AgentCoreApp, GatewayProcess, PgSchema, official_client, python_for, rpc_with, user_message,
};
use a2a_gateway::upstream::mock::{MockReply, MockRuntime};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");

/// API keys and their callers: team-a may use both agents, team-b the helper only,
/// team-c neither.
const KEYS: [(&str, &str); 3] = [
    ("team-a", "key-a-0123456789"),
    ("team-b", "key-b-0123456789"),
    ("team-c", "key-c-0123456789"),
];

fn sha256_hex(s: &str) -> String {
    a2a_gateway::config::sha256_hex(s)
}

/// The gateway's config: no agent at `/`; the reviewer (callers team-a) at the default
/// prefix on `reviewer_url`, the helper (callers team-a, team-b) at `/team/helper/` on
/// `helper_url`, the store at `store_url`.
fn config(reviewer_url: &str, helper_url: &str, store: &str) -> String {
    let mut keys = String::new();
    for (caller, key) in KEYS {
        keys.push_str(&format!(
            "[[server.auth.keys]]\ncaller = \"{caller}\"\nsha256 = \"{}\"\n",
            sha256_hex(key)
        ));
    }
    format!(
        "[server]\nmax_concurrent_tasks = 8\n[server.auth]\nkind = \"api_key\"\n{keys}\
         [store]\n{store}\n\
         [agents.reviewer]\nname = \"Release reviewer\"\ndescription = \"Reviews release notes.\"\n\
         callers = [\"team-a\"]\ngrpc_listen = \"127.0.0.1:0\"\n\
         [agents.reviewer.upstream]\nurl = \"{reviewer_url}\"\n\
         [agents.helper]\nname = \"Helper\"\ndescription = \"Helps.\"\npath = \"/team/helper/\"\n\
         callers = [\"team-a\", \"team-b\"]\nmax_concurrent_tasks = 2\n\
         [agents.helper.upstream]\nurl = \"{helper_url}\"\n"
    )
}

fn key(caller: &str) -> &'static str {
    KEYS.iter().find(|(c, _)| *c == caller).unwrap().1
}

/// One JSON-RPC call to the agent at `base` as `caller`.
async fn call(base: &str, caller: &str, method: &str, params: Value) -> Value {
    let client = reqwest::Client::new();
    rpc_with(client.post(base).bearer_auth(key(caller)), method, params).await
}

fn error_reason(reply: &Value) -> &str {
    reply["error"]["data"][0]["reason"].as_str().unwrap_or("")
}

/// A blocking SendMessage to the agent at `base` as `caller`; the task it made.
async fn send(base: &str, caller: &str, text: &str) -> Value {
    let reply = call(
        base,
        caller,
        "SendMessage",
        json!({"message": user_message(text)}),
    )
    .await;
    assert!(reply.get("error").is_none(), "{reply}");
    reply["result"]["task"].clone()
}

/// Every operation of the JSON-RPC and HTTP+JSON bindings, through the agent at
/// `other`, on task `id` of another agent, as `caller` (allowed on both): each answers
/// TaskNotFound, and ListTasks does not list it.
async fn refused_everywhere(other: &str, caller: &str, id: &str) {
    let push = json!({"taskId": id, "id": "p1", "url": "https://receiver.example/hook"});
    for (method, params) in [
        ("GetTask", json!({"id": id})),
        ("CancelTask", json!({"id": id})),
        ("SubscribeToTask", json!({"id": id})),
        ("CreateTaskPushNotificationConfig", push.clone()),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "p1"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": id})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": "p1"}),
        ),
        (
            "SendMessage",
            json!({"message": {"messageId": "follow-up", "role": "ROLE_USER", "taskId": id,
                               "parts": [{"text": "dict"}]}}),
        ),
    ] {
        let reply = call(other, caller, method, params).await;
        assert_eq!(reply["error"]["code"], -32001, "{method}: {reply}");
        assert_eq!(error_reason(&reply), "TASK_NOT_FOUND", "{method}: {reply}");
    }
    let listed = call(other, caller, "ListTasks", json!({})).await;
    let tasks = listed["result"]["tasks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(tasks.iter().all(|t| t["id"] != id), "{listed}");

    let rest = format!("{other}a2a/rest");
    let client = reqwest::Client::new();
    let requests = [
        client.get(format!("{rest}/tasks/{id}")),
        client
            .post(format!("{rest}/tasks/{id}:cancel"))
            .json(&json!({})),
        client.get(format!("{rest}/tasks/{id}:subscribe")),
        client
            .post(format!("{rest}/tasks/{id}/pushNotificationConfigs"))
            .json(&json!({"id": "p1", "url": "https://receiver.example/hook"})),
        client.get(format!("{rest}/tasks/{id}/pushNotificationConfigs")),
        client.get(format!("{rest}/tasks/{id}/pushNotificationConfigs/p1")),
        client.delete(format!("{rest}/tasks/{id}/pushNotificationConfigs/p1")),
        client.post(format!("{rest}/message:send")).json(&json!({
            "message": {"messageId": "follow-up-rest", "role": "ROLE_USER", "taskId": id,
                        "parts": [{"text": "dict"}]}
        })),
    ];
    for request in requests {
        let r = request
            .bearer_auth(key(caller))
            .header("A2A-Version", "1.0")
            .send()
            .await
            .unwrap();
        let url = r.url().to_string();
        assert_eq!(r.status(), 404, "{url}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(
            body["error"]["details"][0]["reason"], "TASK_NOT_FOUND",
            "{url}: {body}"
        );
    }
    let r: Value = client
        .get(format!("{rest}/tasks"))
        .bearer_auth(key(caller))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tasks = r["tasks"].as_array().cloned().unwrap_or_default();
    assert!(tasks.iter().all(|t| t["id"] != id), "{r}");
}

/// Every task operation on the gRPC listener at `authority` (one agent's), as `caller`,
/// on task `id` of another agent: TaskNotFound (`NOT_FOUND`), and not listed.
async fn refused_on_grpc(authority: &str, caller: &str, id: &str) {
    use bindings_common::client::{Binding, Operation, Opts};
    let grpc = bindings_common::grpc::Grpc::new(authority);
    let opts = Opts::bearer(key(caller));
    for (op, req) in [
        (Operation::GetTask, json!({"id": id})),
        (Operation::CancelTask, json!({"id": id})),
        (
            Operation::CreateTaskPushNotificationConfig,
            json!({"taskId": id, "id": "p1", "url": "https://receiver.example/hook"}),
        ),
        (
            Operation::GetTaskPushNotificationConfig,
            json!({"taskId": id, "id": "p1"}),
        ),
        (
            Operation::ListTaskPushNotificationConfigs,
            json!({"taskId": id}),
        ),
        (
            Operation::DeleteTaskPushNotificationConfig,
            json!({"taskId": id, "id": "p1"}),
        ),
    ] {
        let failure = grpc.unary(op, req, &opts).await.unwrap_err();
        assert_eq!(failure.reason, "TASK_NOT_FOUND", "{op:?}: {failure:?}");
        assert_eq!(failure.code, "NOT_FOUND", "{op:?}: {failure:?}");
    }
    let refused = match grpc
        .stream(Operation::SubscribeToTask, json!({"id": id}), &opts)
        .await
    {
        Err(f) => f,
        Ok(mut events) => futures::StreamExt::next(&mut events)
            .await
            .expect("an event or an error")
            .unwrap_err(),
    };
    assert_eq!(refused.reason, "TASK_NOT_FOUND", "{refused:?}");
    let listed = grpc
        .unary(Operation::ListTasks, json!({}), &opts)
        .await
        .unwrap();
    let tasks = listed["tasks"].as_array().cloned().unwrap_or_default();
    assert!(tasks.iter().all(|t| t["id"] != id), "{listed}");
}

/// `caller` may not use the agent at `base`: every operation tried on both bindings
/// answers HTTP 403 before anything runs.
async fn denied_everywhere(base: &str, caller: &str) {
    let client = reqwest::Client::new();
    for (method, params) in [
        ("SendMessage", json!({"message": user_message("dict")})),
        ("GetTask", json!({"id": "x"})),
        ("ListTasks", json!({})),
        ("CancelTask", json!({"id": "x"})),
        ("GetExtendedAgentCard", json!({})),
    ] {
        let r = client
            .post(base)
            .bearer_auth(key(caller))
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{method}");
    }
    for request in [
        client
            .post(format!("{base}a2a/rest/message:send"))
            .json(&json!({"message": user_message("dict")})),
        client.get(format!("{base}a2a/rest/tasks")),
    ] {
        let r = request
            .bearer_auth(key(caller))
            .header("A2A-Version", "1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{}", r.url());
    }
}

/// Starts the two upstreams and the gateway over `store` (a `[store]` body).
async fn start(py: &Path, store: &str) -> (AgentCoreApp, MockRuntime, GatewayProcess) {
    let app = AgentCoreApp::start(py).await;
    let mock = MockRuntime::start().await;
    mock.answer_with(|r| {
        MockReply::Json(json!(format!("helper: {}", r.prompt().unwrap_or_default())))
    });
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(config(&app.url, &mock.url(), store))
        .start();
    (app, mock, gw)
}

async fn two_agents(test: &str, store: &str) {
    let Some(py) = python_for(
        test,
        "A2A_GATEWAY_TEST_PYTHON",
        ".venv/bin/python",
        "bedrock_agentcore.runtime",
    ) else {
        return;
    };
    let (_app, mock, gw) = start(&py, store).await;
    let reviewer = format!("{}agents/reviewer/", gw.url);
    let helper = format!("{}team/helper/", gw.url);

    // The index names both, with absolute card URLs; nothing is served at `/`.
    let index: Value = reqwest::get(format!("{}agents", gw.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        index["agents"],
        json!([
            {"id": "helper", "name": "Helper", "cardUrl": format!("{helper}.well-known/agent-card.json")},
            {"id": "reviewer", "name": "Release reviewer", "cardUrl": format!("{reviewer}.well-known/agent-card.json")},
        ])
    );
    let root = reqwest::get(format!("{}.well-known/agent-card.json", gw.url))
        .await
        .unwrap();
    assert_eq!(root.status(), 404);

    // Each card's interfaces are absolute and under its prefix; the reviewer's gRPC
    // interface names its own port.
    let mut reviewer_grpc = String::new();
    for (base, name) in [(&reviewer, "Release reviewer"), (&helper, "Helper")] {
        let card: Value = reqwest::Client::new()
            .get(format!("{base}.well-known/agent-card.json"))
            .header("A2A-Version", "1.0")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(card["name"], name);
        let mut urls: Vec<&str> = card["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["url"].as_str().unwrap())
            .collect();
        if name == "Release reviewer" {
            let grpc = urls.remove(2);
            assert!(grpc.starts_with("127.0.0.1:"), "{card}");
            assert_ne!(grpc.trim_start_matches("127.0.0.1:"), "0");
            assert!(!gw.url.contains(grpc), "a port of its own: {card}");
            reviewer_grpc = grpc.to_owned();
        }
        assert_eq!(
            urls,
            [base.as_str(), &format!("{base}a2a/rest"), base.as_str()],
            "{card}"
        );
    }

    // The official clients, from each agent's own URL, on both HTTP bindings.
    for binding in ["JSONRPC", "HTTP+JSON"] {
        let got = official_client(
            &py,
            json!({"sdk": "1", "url": reviewer, "binding": binding, "key": key("team-a"), "text": "dict"}),
        )
        .await;
        assert_eq!(got["card"], "Release reviewer", "{got}");
        assert_eq!(got["state"], "TASK_STATE_COMPLETED", "{got}");
        assert_eq!(got["text"], "from a dict", "{got}");
        assert_eq!(got["got"], "TASK_STATE_COMPLETED", "{got}");
        let got = official_client(
            &py,
            json!({"sdk": "1", "url": helper, "binding": binding, "key": key("team-b"), "text": "hi"}),
        )
        .await;
        assert_eq!(got["card"], "Helper", "{got}");
        assert_eq!(got["text"], "helper: hi", "{got}");
        assert_eq!(got["got"], "TASK_STATE_COMPLETED", "{got}");
        let denied = official_client(
            &py,
            json!({"sdk": "1", "url": reviewer, "binding": binding, "key": key("team-b"), "text": "dict"}),
        )
        .await;
        assert!(
            denied["message"].as_str().unwrap_or("").contains("403"),
            "{denied}"
        );
    }
    // gRPC: the client resolves the card from the reviewer's URL and dials the
    // reviewer's own port; the helper offers no gRPC interface.
    let got = official_client(
        &py,
        json!({"sdk": "1", "url": reviewer, "binding": "GRPC", "key": key("team-a"), "text": "dict"}),
    )
    .await;
    assert_eq!(got["transport"], "GrpcTransport", "{got}");
    assert_eq!(got["text"], "from a dict", "{got}");
    assert_eq!(got["got"], "TASK_STATE_COMPLETED", "{got}");
    let task = got["task"].as_str().unwrap().to_owned();
    // The task made over gRPC is the reviewer's: found there, not through the helper.
    let there = call(&reviewer, "team-a", "GetTask", json!({"id": task})).await;
    assert_eq!(there["result"]["id"], task.as_str(), "{there}");
    let elsewhere = call(&helper, "team-a", "GetTask", json!({"id": task})).await;
    assert_eq!(error_reason(&elsewhere), "TASK_NOT_FOUND", "{elsewhere}");
    let denied = official_client(
        &py,
        json!({"sdk": "1", "url": reviewer, "binding": "GRPC", "key": key("team-b"), "text": "dict"}),
    )
    .await;
    assert!(
        denied["message"]
            .as_str()
            .unwrap_or("")
            .contains("PERMISSION_DENIED")
            || denied["message"].as_str().unwrap_or("").contains("403"),
        "{denied}"
    );
    let no_grpc = official_client(
        &py,
        json!({"sdk": "1", "url": helper, "binding": "GRPC", "key": key("team-a"), "text": "x"}),
    )
    .await;
    assert!(no_grpc.get("error").is_some(), "{no_grpc}");

    if let Some(py03) = python_for(
        test,
        "A2A_GATEWAY_TEST_PYTHON03",
        ".venv03/bin/python",
        "a2a.client",
    ) {
        for (base, caller, text, want) in [
            (&reviewer, "team-a", "string", "The answer is 42"),
            (&helper, "team-b", "hello", "helper: hello"),
        ] {
            let got = official_client(
                &py03,
                json!({"sdk": "03", "url": base, "binding": "JSONRPC", "key": key(caller), "text": text}),
            )
            .await;
            assert_eq!(got["state"], "completed", "{got}");
            assert_eq!(got["text"], want, "{got}");
            assert_eq!(got["interface"], base.as_str(), "{got}");
        }
    }

    // A task of each agent is not found through the other, on every operation.
    let on_reviewer = send(&reviewer, "team-a", "dict").await;
    let on_helper = send(&helper, "team-a", "x").await;
    refused_everywhere(&helper, "team-a", on_reviewer["id"].as_str().unwrap()).await;
    refused_everywhere(&reviewer, "team-a", on_helper["id"].as_str().unwrap()).await;
    refused_on_grpc(&reviewer_grpc, "team-a", on_helper["id"].as_str().unwrap()).await;
    // ...and still there through its own.
    let got = call(
        &reviewer,
        "team-a",
        "GetTask",
        json!({"id": on_reviewer["id"]}),
    )
    .await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got}"
    );
    let listed = call(&helper, "team-a", "ListTasks", json!({})).await;
    let ids: Vec<&Value> = listed["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(ids, [&on_helper["id"]], "{listed}");

    // callers: refused before anything runs (the helper's runtime sees nothing).
    let before = mock.invocations().len();
    denied_everywhere(&reviewer, "team-b").await;
    denied_everywhere(&helper, "team-c").await;
    assert_eq!(mock.invocations().len(), before);
    drop(gw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!(
        "url = \"sqlite://{}\"",
        dir.path().join("tasks.db").display()
    );
    two_agents("two_agents_on_sqlite", &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_on_postgres_in_cluster_mode() {
    let Some(schema) = PgSchema::create("two_agents_on_postgres").await else {
        return;
    };
    let store = format!("url = \"{}\"\ncluster = true", schema.url());
    two_agents("two_agents_on_postgres_in_cluster_mode", &store).await;
    schema.close().await;
}

/// One agent whose upstream credentials cannot be had: `/readyz` stays 200 and names
/// it, its own `<prefix>readyz` is 503, the other agent's is 200; requests are counted
/// per agent in `/metrics`.
#[tokio::test]
async fn readiness_and_metrics_name_the_agent() {
    let mock = MockRuntime::start().await;
    // A token endpoint nobody listens on: no token is obtainable.
    let closed = a2a_gateway::test_util::free_port();
    let toml = format!(
        "[store]\nurl = \"memory:\"\n\
         [agents.ok]\n[agents.ok.upstream]\nurl = \"{url}\"\n\
         [agents.broken]\n[agents.broken.upstream]\nurl = \"{url}\"\n\
         [agents.broken.upstream.auth]\nkind = \"oauth2\"\nclient_id = \"c\"\n\
         client_secret = \"not-a-real-secret\"\ntoken_url = \"http://127.0.0.1:{closed}/token\"\n",
        url = mock.url()
    );
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(toml)
        .start();
    let get = |path: String| async move {
        let r = reqwest::get(path).await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    let (status, body) = get(format!("{}readyz", gw.url)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("agent broken not ready:"), "{body}");
    assert!(!body.contains("agent ok"), "{body}");
    assert!(!body.contains("not-a-real-secret"), "{body}");
    let (status, body) = get(format!("{}agents/broken/readyz", gw.url)).await;
    assert_eq!(status, 503, "{body}");
    let (status, body) = get(format!("{}agents/ok/readyz", gw.url)).await;
    assert_eq!(status, 200, "{body}");

    let client = reqwest::Client::new();
    let reply = rpc_with(
        client.post(format!("{}agents/ok/", gw.url)),
        "SendMessage",
        json!({"message": user_message("hi")}),
    )
    .await;
    assert_eq!(
        reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{reply}"
    );
    let (_, metrics) = get(format!("{}metrics", gw.url)).await;
    let line = metrics
        .lines()
        .find(|l| {
            l.starts_with("a2a_requests_total{")
                && l.contains("agent=\"ok\"")
                && l.contains("method=\"SendMessage\"")
        })
        .unwrap_or_else(|| panic!("no a2a_requests_total for agent ok:\n{metrics}"));
    assert!(line.ends_with(" 1"), "{line}");
    assert!(
        metrics.lines().any(|l| l.starts_with("a2a_tasks_total{")
            && l.contains("agent=\"ok\"")
            && l.contains("state=\"completed\"")),
        "no a2a_tasks_total for agent ok:\n{metrics}"
    );
    // The upstream metrics of the call carry the agent too.
    for name in [
        "a2a_upstream_responses_total{",
        "a2a_upstream_request_duration_seconds_count{",
        "a2a_upstream_first_chunk_seconds_count{",
    ] {
        let line = metrics
            .lines()
            .find(|l| l.starts_with(name) && l.contains("agent=\"ok\""))
            .unwrap_or_else(|| panic!("no {name} for agent ok:\n{metrics}"));
        assert!(line.ends_with(" 1"), "{line}");
    }
    // A tenant holding the separator of the stored agent key is refused.
    let odd = rpc_with(
        client.post(format!("{}agents/ok/", gw.url)),
        "ListTasks",
        json!({"tenant": "x\u{1f}y"}),
    )
    .await;
    assert_eq!(odd["error"]["code"], -32602, "{odd}");

    // The prefix without its `/` is the JSON-RPC endpoint too; a path that only starts
    // with the same letters is no agent's.
    let bare = rpc_with(
        client.post(format!("{}agents/ok", gw.url)),
        "SendMessage",
        json!({"message": user_message("bare")}),
    )
    .await;
    assert_eq!(
        bare["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{bare}"
    );
    let (status, _) = get(format!("{}agents/okay/.well-known/agent-card.json", gw.url)).await;
    assert_eq!(status, 404);

    // The CLI's client commands work from the agent's URL (its card under the prefix).
    for url in [
        format!("{}agents/ok/", gw.url),
        format!("{}agents/ok/.well-known/agent-card.json", gw.url),
    ] {
        let out = GatewayProcess::init(BIN)
            .args(["send", "--url", &url, "from the cli"])
            .run_async()
            .await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{url}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = GatewayProcess::init(BIN)
        .args(["card", "--url", &format!("{}agents/broken/", gw.url)])
        .run_async()
        .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("broken") || stdout.contains("a2a-gateway"),
        "{stdout}"
    );

    // The request's log line names the agent.
    let logs = gw.logs_when(
        |l| l.contains(" request ") && l.contains("agent=\"ok\""),
        std::time::Duration::from_secs(10),
    );
    assert!(logs.contains("agent=\"ok\""), "{logs}");
}

/// `check-config` lists each agent with its derived URLs (behind a `public_url` with a
/// path of its own), and refuses an agent whose upstream `serve` would refuse.
#[test]
fn check_config_lists_each_agent_with_its_urls() {
    let toml = config(
        "http://127.0.0.1:9/invocations",
        "http://127.0.0.1:9/invocations",
        "url = \"memory:\"",
    )
    .replace(
        "[server]\n",
        "[server]\npublic_url = \"https://gw.example.com/a2a/\"\n",
    );
    let out = GatewayProcess::init(BIN)
        .arg("check-config")
        .config(toml)
        .run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "# derived: agent at /: none (only [agents.*] are configured)",
        "# derived: agent reviewer: card https://gw.example.com/a2a/agents/reviewer/.well-known/agent-card.json",
        "# derived: agent reviewer: card interface: HTTP+JSON https://gw.example.com/a2a/agents/reviewer/a2a/rest (A2A 1.0)",
        "# derived: agent reviewer: card interface: GRPC gw.example.com:",
        "# derived: agent helper: card https://gw.example.com/a2a/team/helper/.well-known/agent-card.json",
        "# derived: agent helper: card interface: JSONRPC https://gw.example.com/a2a/team/helper/ (A2A 1.0)",
        "# derived: agent helper: invocation URL: http://127.0.0.1:9/invocations",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("key-a-0123456789"));
    assert!(
        !stdout.contains("warning: callers names"),
        "every caller named has a key: {stdout}"
    );
    // A caller no key has (a typo): a warning, not a refusal (keys reload on SIGHUP).
    let typo = config(
        "http://127.0.0.1:9/invocations",
        "http://127.0.0.1:9/invocations",
        "url = \"memory:\"",
    )
    .replace("callers = [\"team-a\"]", "callers = [\"team-aa\"]");
    let out = GatewayProcess::init(BIN)
        .arg("check-config")
        .config(typo)
        .run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("# derived: agent reviewer: warning: callers names \"team-aa\""),
        "{stdout}"
    );

    let bad = config("http://127.0.0.1:9/invocations", "", "url = \"memory:\"");
    let out = GatewayProcess::init(BIN)
        .arg("check-config")
        .config(bad)
        .run();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("agents.helper"), "{stderr}");
}

/// `SIGHUP` adds, changes and removes agents while tasks run and another agent is under
/// load: the removed agent's running task finishes (its request was routed before), new
/// requests to it get 404; the changed agent serves its new card and its running task
/// finishes; the added one serves; a config that does not load changes nothing; the
/// agent under load (unchanged) never fails a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_adds_changes_and_removes_agents() {
    let mock = MockRuntime::start().await;
    mock.hold();
    let steady = MockRuntime::start().await;
    let agents = |list: &[(&str, &str)]| {
        let mut toml = format!(
            "[store]\nurl = \"memory:\"\n\
             [agents.steady]\n[agents.steady.upstream]\nurl = \"{}\"\n",
            steady.url()
        );
        for (id, name) in list {
            toml.push_str(&format!(
                "[agents.{id}]\nname = \"{name}\"\n[agents.{id}.upstream]\nurl = \"{}\"\n",
                mock.url()
            ));
        }
        toml
    };
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(agents(&[("a", "Agent A"), ("b", "Agent B")]))
        .start();
    let client = reqwest::Client::new();
    // Load on `steady` until the reloads are done: every request must complete.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (client, stop) = (client.clone(), stop.clone());
        let url = format!("{}agents/steady/", gw.url);
        tokio::spawn(async move {
            let mut done = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = rpc_with(
                    client.post(&url),
                    "SendMessage",
                    json!({"message": user_message("load")}),
                )
                .await;
                assert_eq!(
                    r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
                    "{r}"
                );
                done += 1;
            }
            done
        })
    };
    // A blocking send to `a` (held by the runtime), and a task of `b` left running.
    let on_a = {
        let url = format!("{}agents/a/", gw.url);
        let client = client.clone();
        tokio::spawn(async move {
            rpc_with(
                client.post(url),
                "SendMessage",
                json!({"message": user_message("a")}),
            )
            .await
        })
    };
    let b_task = rpc_with(
        client.post(format!("{}agents/b/", gw.url)),
        "SendMessage",
        json!({"message": user_message("b"), "configuration": {"returnImmediately": true}}),
    )
    .await;
    let b_id = b_task["result"]["task"]["id"].as_str().unwrap().to_owned();
    mock.wait_invocations(2).await;

    let index = |gw_url: String| async move {
        let v: Value = reqwest::get(format!("{gw_url}agents"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                format!(
                    "{}={}",
                    a["id"].as_str().unwrap(),
                    a["name"].as_str().unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    let path = gw.config_path().unwrap().to_owned();
    // A config that does not load changes nothing.
    std::fs::write(&path, "[agents.BAD]\n").unwrap();
    gw.hang_up();
    gw.logs_when(
        |l| l.contains("SIGHUP: API keys unchanged, agents unchanged"),
        std::time::Duration::from_secs(10),
    );
    assert_eq!(
        index(gw.url.clone()).await,
        ["a=Agent A", "b=Agent B", "steady=a2a-gateway"]
    );

    // Remove `a`, change `b`, add `c`.
    std::fs::write(&path, agents(&[("b", "Agent B2"), ("c", "Agent C")])).unwrap();
    gw.hang_up();
    let logs = gw.logs_when(
        |l| l.contains("SIGHUP: agents reloaded"),
        std::time::Duration::from_secs(10),
    );
    assert!(logs.contains("SIGHUP: agents reloaded agents=3"), "{logs}");
    assert_eq!(
        index(gw.url.clone()).await,
        ["b=Agent B2", "c=Agent C", "steady=a2a-gateway"]
    );
    let gone = client
        .post(format!("{}agents/a/", gw.url))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
    let card: Value = reqwest::get(format!("{}agents/b/.well-known/agent-card.json", gw.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["name"], "Agent B2");

    // The runtime answers: the removed agent's request and the changed agent's task
    // finish; the added agent serves.
    mock.release(10);
    let a_reply = on_a.await.unwrap();
    assert_eq!(
        a_reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{a_reply}"
    );
    let on_c = rpc_with(
        client.post(format!("{}agents/c/", gw.url)),
        "SendMessage",
        json!({"message": user_message("c")}),
    )
    .await;
    assert_eq!(
        on_c["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{on_c}"
    );
    // The task `b` started before the reload finishes; read through the new `b`.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let got = rpc_with(
            client.post(format!("{}agents/b/", gw.url)),
            "GetTask",
            json!({"id": b_id}),
        )
        .await;
        if got["result"]["status"]["state"] == "TASK_STATE_COMPLETED" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{got}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let done = load.await.expect("no request to the steady agent failed");
    assert!(done > 0);
}

/// 50 agents in one `serve`: every one answers on its own prefix, each over its own
/// upstream (every tenth one the real BedrockAgentCoreApp, the others a MockRuntime
/// each), tasks stay with their agent, and the index lists all.
async fn fifty_agents(test: &str, store: &str) {
    let Some(py) = python_for(
        test,
        "A2A_GATEWAY_TEST_PYTHON",
        ".venv/bin/python",
        "bedrock_agentcore.runtime",
    ) else {
        return;
    };
    let app = AgentCoreApp::start(&py).await;
    let mut mocks = Vec::new();
    let mut toml = format!("[store]\n{store}\n");
    for i in 0..50 {
        let url = match i % 10 {
            0 => app.url.clone(),
            _ => {
                let mock = MockRuntime::start().await;
                mock.answer_with(move |_| MockReply::Json(json!(format!("agent {i}"))));
                let url = mock.url();
                mocks.push(mock);
                url
            }
        };
        toml.push_str(&format!(
            "[agents.a{i:02}]\nname = \"Agent {i}\"\nmax_concurrent_tasks = 4\n\
             [agents.a{i:02}.upstream]\nurl = \"{url}\"\n"
        ));
    }
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(toml)
        .start();
    let index: Value = reqwest::get(format!("{}agents", gw.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(index["agents"].as_array().unwrap().len(), 50);
    let client = reqwest::Client::new();
    let sends = (0..50).map(|i| {
        let client = client.clone();
        let url = format!("{}agents/a{i:02}/", gw.url);
        async move {
            let text = if i % 10 == 0 { "string" } else { "hi" };
            let reply = rpc_with(
                client.post(&url),
                "SendMessage",
                json!({"message": user_message(text)}),
            )
            .await;
            (i, url, reply)
        }
    });
    let replies = futures::future::join_all(sends).await;
    for (i, _, reply) in &replies {
        let task = &reply["result"]["task"];
        assert_eq!(
            task["status"]["state"], "TASK_STATE_COMPLETED",
            "{i}: {reply}"
        );
        let text = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
        if i % 10 == 0 {
            assert_eq!(text, "The answer is 42");
        } else {
            assert_eq!(text, format!("agent {i}"));
        }
    }
    // Each agent lists its own task only; another agent does not find it.
    for (i, url, reply) in replies.iter().step_by(7) {
        let id = &reply["result"]["task"]["id"];
        let listed = rpc_with(client.post(url), "ListTasks", json!({})).await;
        let ids: Vec<&Value> = listed["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["id"])
            .collect();
        assert_eq!(ids, [id], "{i}: {listed}");
        let other = format!("{}agents/a{:02}/", gw.url, (i + 1) % 50);
        let got = rpc_with(client.post(other), "GetTask", json!({"id": id})).await;
        assert_eq!(error_reason(&got), "TASK_NOT_FOUND", "{i}: {got}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_agents_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    fifty_agents(
        "fifty_agents_on_sqlite",
        &format!(
            "url = \"sqlite://{}\"",
            dir.path().join("tasks.db").display()
        ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_agents_on_postgres_in_cluster_mode() {
    let Some(schema) = PgSchema::create("fifty_agents_on_postgres").await else {
        return;
    };
    fifty_agents(
        "fifty_agents_on_postgres_in_cluster_mode",
        &format!("url = \"{}\"\ncluster = true", schema.url()),
    )
    .await;
    schema.close().await;
}

/// Push per agent: each agent's task pushes to its own webhook, signed `v1a` with the
/// gateway's key, which each agent's card names at its own JWKS URL under its prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_per_agent() {
    let mock = MockRuntime::start().await;
    let receiver = Receiver::start().await;
    let toml = format!(
        "[store]\nurl = \"memory:\"\n\
         [push]\nallow_http = true\nallow_cidrs = [\"127.0.0.1/32\"]\n\
         initial_backoff_ms = 50\npoll_interval_ms = 50\n\
         [agents.a]\n[agents.a.upstream]\nurl = \"{url}\"\n\
         [agents.b]\n[agents.b.upstream]\nurl = \"{url}\"\n",
        url = mock.url()
    );
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(toml)
        .start();
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for agent in ["a", "b"] {
        let base = format!("{}agents/{agent}/", gw.url);
        let card: Value = reqwest::get(format!("{base}.well-known/agent-card.json"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(card["capabilities"]["pushNotifications"], true, "{card}");
        let jwks_uri = card["capabilities"]["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|e| e["params"]["jwksUri"].as_str())
            .unwrap()
            .to_owned();
        assert_eq!(jwks_uri, format!("{base}.well-known/jwks.json"));
        let jwks: Value = reqwest::get(&jwks_uri).await.unwrap().json().await.unwrap();
        assert!(!jwks["keys"].as_array().unwrap().is_empty(), "{jwks}");
        let reply = rpc_with(
            client.post(&base),
            "SendMessage",
            json!({"message": user_message(agent), "configuration": {
                "taskPushNotificationConfig": {"id": "hook", "url": format!("{}/{agent}", receiver.url)}}}),
        )
        .await;
        ids.push(reply["result"]["task"]["id"].as_str().unwrap().to_owned());
    }
    for (agent, id) in ["a", "b"].iter().zip(&ids) {
        let path = format!("/{agent}");
        let calls = receiver
            .wait_for(&path, |calls| {
                calls
                    .iter()
                    .any(|h| String::from_utf8_lossy(&h.body).contains("TASK_STATE_COMPLETED"))
            })
            .await;
        for h in &calls {
            let body = String::from_utf8_lossy(&h.body);
            assert!(body.contains(id.as_str()), "{agent}: {body}");
            assert!(h.headers.contains_key("webhook-signature"));
        }
    }
}

/// One agent's slow upstream takes only its own run slots (`max_concurrent_tasks`):
/// with them all held, that agent refuses more (retryable) while the other agent serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_agent_never_slows_another() {
    let slow = MockRuntime::start().await;
    slow.hold();
    let fast = MockRuntime::start().await;
    let toml = format!(
        "[server]\nmax_concurrent_tasks = 100\n[store]\nurl = \"memory:\"\n\
         [agents.slow]\nmax_concurrent_tasks = 2\n[agents.slow.upstream]\nurl = \"{}\"\n\
         [agents.fast]\n[agents.fast.upstream]\nurl = \"{}\"\n",
        slow.url(),
        fast.url()
    );
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(toml)
        .start();
    let client = reqwest::Client::new();
    let slow_url = format!("{}agents/slow/", gw.url);
    for i in 0..2 {
        let r = rpc_with(
            client.post(&slow_url),
            "SendMessage",
            json!({"message": user_message(&format!("s{i}")), "configuration": {"returnImmediately": true}}),
        )
        .await;
        assert!(r.get("result").is_some(), "{r}");
    }
    slow.wait_invocations(2).await;
    let refused = rpc_with(
        client.post(&slow_url),
        "SendMessage",
        json!({"message": user_message("s2")}),
    )
    .await;
    assert_eq!(error_reason(&refused), "UNAVAILABLE", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maximum of 2 running tasks"),
        "{refused}"
    );
    for i in 0..5 {
        let done = rpc_with(
            client.post(format!("{}agents/fast/", gw.url)),
            "SendMessage",
            json!({"message": user_message(&format!("f{i}"))}),
        )
        .await;
        assert_eq!(
            done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{done}"
        );
    }
    slow.release(10);
}

/// An agent whose upstream is an A2A agent (`kind = "a2a"`, the official a2a-sdk 1.x
/// agent of tests/a2a_agents) beside one on the AgentCore contract: the A2A agent's card
/// fills what `[agents.<id>]` does not set (its description and skills), its interfaces
/// stay the gateway's own under the agent's prefix, and a streamed message and a
/// follow-up to INPUT_REQUIRED reach the same upstream task through the prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_upstream_agent_beside_an_agentcore_one() {
    use a2a_gateway::test_util::{A2aAgent, AgentKind};
    let test = "an_a2a_upstream_agent_beside_an_agentcore_one";
    let Some(agent) = A2aAgent::start(AgentKind::Sdk1, &[]) else {
        a2a_gateway::test_util::skip(
            test,
            "the a2a-sdk 1.x agent of tests/a2a_agents did not start",
        );
        return;
    };
    let mock = MockRuntime::start().await;
    let toml = format!(
        "[store]\nurl = \"memory:\"\n\
         [agents.native]\nname = \"Native\"\n[agents.native.upstream]\nkind = \"a2a\"\nurl = \"{}\"\n\
         [agents.hosted]\nname = \"Hosted\"\n[agents.hosted.upstream]\nurl = \"{}\"\n",
        agent.url,
        mock.url()
    );
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(toml)
        .start();
    let card: Value = reqwest::get(format!(
        "{}agents/native/.well-known/agent-card.json",
        gw.url
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        card["name"], "Native",
        "[agents.native] sets the name: {card}"
    );
    let upstream_card: Value = reqwest::get(format!("{}.well-known/agent-card.json", agent.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        card["description"], upstream_card["description"],
        "the upstream's description fills the unset one: {card}"
    );
    assert_eq!(card["skills"], upstream_card["skills"], "{card}");
    let interfaces = card["supportedInterfaces"].to_string();
    assert!(
        interfaces.contains(&format!("{}agents/native/", gw.url)),
        "the gateway's own interfaces under the prefix: {card}"
    );
    assert!(
        !interfaces.contains(&agent.url),
        "never the upstream's URL: {card}"
    );

    let base = format!("{}agents/native/", gw.url);
    let client = reqwest::Client::new();
    let asked = rpc_with(
        client.post(&base),
        "SendMessage",
        json!({"message": user_message("ask")}),
    )
    .await;
    let task = &asked["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    let mut follow = user_message("forty-two");
    follow["taskId"] = task["id"].clone();
    follow["contextId"] = task["contextId"].clone();
    let answered = rpc_with(
        client.post(&base),
        "SendMessage",
        json!({"message": follow}),
    )
    .await;
    let done = &answered["result"]["task"];
    assert_eq!(
        done["status"]["state"], "TASK_STATE_COMPLETED",
        "{answered}"
    );
    let text = done["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or("");
    let seen: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    assert_eq!(seen["answer"], "forty-two", "{answered}");
    assert_eq!(
        seen["task_id"], seen["first_turn"]["task_id"],
        "the upstream saw one task both turns: {seen}"
    );
    assert_ne!(
        seen["task_id"], task["id"],
        "gateway ids are not the upstream's"
    );

    // The other agent neither sees nor serves the first one's task.
    let other = rpc_with(
        client.post(format!("{}agents/hosted/", gw.url)),
        "GetTask",
        json!({"id": task["id"]}),
    )
    .await;
    assert_eq!(other["error"]["code"], -32001, "{other}");
    let hosted = rpc_with(
        client.post(format!("{}agents/hosted/", gw.url)),
        "SendMessage",
        json!({"message": user_message("hi")}),
    )
    .await;
    assert_eq!(
        hosted["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{hosted}"
    );

    // The a2a agent's calls are in the upstream metrics too, with its agent label.
    let metrics = reqwest::get(format!("{}metrics", gw.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "a2a_upstream_responses_total{",
        "a2a_upstream_request_duration_seconds_count{",
    ] {
        let line = metrics
            .lines()
            .find(|l| {
                l.starts_with(name)
                    && l.contains("agent=\"native\"")
                    && l.contains("status=\"200\"")
            })
            .unwrap_or_else(|| panic!("no {name} for agent native:\n{metrics}"));
        let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(count >= 2.0, "both turns counted: {line}");
    }
}

/// A reload reaches an agent's own gRPC port: a change of `callers` applies to gRPC
/// calls as to HTTP ones, a removed agent's port answers NOT_FOUND (as its HTTP routes
/// answer 404), and a reload that would move, add or drop a gRPC port (bound at start
/// only) changes nothing and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_reaches_the_agents_grpc_port() {
    use bindings_common::client::{Binding, Operation, Opts};
    let mock = MockRuntime::start().await;
    let mut keys = String::new();
    for (caller, key) in KEYS {
        keys.push_str(&format!(
            "[[server.auth.keys]]\ncaller = \"{caller}\"\nsha256 = \"{}\"\n",
            sha256_hex(key)
        ));
    }
    let config = |callers: &str, grpc: &str, with_p: bool| {
        let mut toml = format!(
            "[server.auth]\nkind = \"api_key\"\n{keys}[store]\nurl = \"memory:\"\n\
             [agents.other]\n[agents.other.upstream]\nurl = \"{}\"\n",
            mock.url()
        );
        if with_p {
            toml.push_str(&format!(
                "[agents.p]\ncallers = [\"{callers}\"]\ngrpc_listen = \"{grpc}\"\n\
                 [agents.p.upstream]\nurl = \"{}\"\n",
                mock.url()
            ));
        }
        toml
    };
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(config("team-a", "127.0.0.1:0", true))
        .start();
    let card: Value = reqwest::get(format!("{}agents/p/.well-known/agent-card.json", gw.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let authority = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["protocolBinding"] == "GRPC")
        .and_then(|i| i["url"].as_str())
        .expect("a GRPC interface")
        .to_owned();
    let grpc = bindings_common::grpc::Grpc::new(&authority);
    let list = |caller: &'static str| {
        let grpc = &grpc;
        async move {
            grpc.unary(Operation::ListTasks, json!({}), &Opts::bearer(key(caller)))
                .await
        }
    };
    assert!(list("team-a").await.is_ok());
    assert_eq!(list("team-b").await.unwrap_err().code, "PERMISSION_DENIED");
    let logs = gw.logs_when(
        |l| l.contains("not among the agent's callers"),
        std::time::Duration::from_secs(10),
    );
    let refusal = logs
        .lines()
        .find(|l| l.contains("not among the agent's callers"))
        .unwrap();
    assert!(
        refusal.contains("team-b") && refusal.contains("agent=p"),
        "the refusal names who and where: {refusal}"
    );

    let path = gw.config_path().unwrap().to_owned();
    let reload = |text: String, expect: &'static str| {
        std::fs::write(&path, text).unwrap();
        gw.hang_up();
        gw.logs_when(|l| l.contains(expect), std::time::Duration::from_secs(10))
    };
    // callers team-a -> team-b: gRPC follows.
    reload(
        config("team-b", "127.0.0.1:0", true),
        "SIGHUP: agents reloaded",
    );
    assert_eq!(list("team-a").await.unwrap_err().code, "PERMISSION_DENIED");
    assert!(list("team-b").await.is_ok());
    let card: Value = reqwest::get(format!("{}agents/p/.well-known/agent-card.json", gw.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        card.to_string().contains(&authority),
        "the card still names the bound port, not :0: {card}"
    );

    // Another port: refused, nothing changes.
    let logs = reload(
        config("team-a", "127.0.0.1:1", true),
        "SIGHUP: agents unchanged",
    );
    assert!(logs.contains("agents.p.grpc_listen"), "{logs}");
    assert!(list("team-b").await.is_ok(), "the last good state stays");

    // A caller no key has (a typo) in a reloaded `callers`: applied, and warned about
    // as at start.
    let logs = reload(
        config("team-zz", "127.0.0.1:0", true),
        "agents.p.callers names a caller no API key has",
    );
    assert!(
        logs.contains("agents.p.callers names a caller no API key has"),
        "{logs}"
    );

    // Removed: its port answers NOT_FOUND, its HTTP routes 404.
    reload(config("", "", false), "SIGHUP: agents reloaded agents=1");
    assert_eq!(list("team-b").await.unwrap_err().code, "NOT_FOUND");
    let gone = reqwest::get(format!("{}agents/p/.well-known/agent-card.json", gw.url))
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
}

/// A static bearer token (here read from its file) is not a token fetch: its calls are
/// not counted in `a2a_upstream_token_fetches_total`, which counts token endpoint calls.
#[tokio::test]
async fn a_static_bearer_token_is_not_counted_as_a_token_fetch() {
    let mock = MockRuntime::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "static-token\n").unwrap();
    let toml = format!(
        "[store]\nurl = \"memory:\"\n[agents.a]\n[agents.a.upstream]\nurl = \"{}\"\n\
         [agents.a.upstream.auth]\nkind = \"bearer\"\ntoken_file = {:?}\n",
        mock.url(),
        token.display().to_string()
    );
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(toml)
        .start();
    let reply = rpc_with(
        reqwest::Client::new().post(format!("{}agents/a/", gw.url)),
        "SendMessage",
        json!({"message": user_message("hi")}),
    )
    .await;
    assert_eq!(
        reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{reply}"
    );
    assert_eq!(
        mock.invocations()[0].header("authorization"),
        Some("Bearer static-token")
    );
    let metrics = reqwest::get(format!("{}metrics", gw.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !metrics.contains("a2a_upstream_token_fetches_total{"),
        "a static token counted as a fetch:\n{metrics}"
    );
}

/// An unknown path under an agent's prefix answers 404 with the hint of that agent
/// (its JSON-RPC endpoint, HTTP+JSON root and card under the prefix), not the root's.
#[tokio::test]
async fn an_unknown_path_under_a_prefix_names_that_agents_endpoints() {
    let mock = MockRuntime::start().await;
    let toml = format!(
        "[store]\nurl = \"memory:\"\n[agents.a]\npath = \"/team/a/\"\n\
         [agents.a.upstream]\nurl = \"{}\"\n",
        mock.url()
    );
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(toml)
        .start();
    let r = reqwest::get(format!("{}team/a/nothing-here", gw.url))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let text = r.text().await.unwrap();
    assert!(text.contains("the agent a at /team/a/"), "{text}");
    assert!(text.contains("POST /team/a/ with a JSON-RPC"), "{text}");
    assert!(text.contains("/team/a/a2a/rest"), "{text}");
    assert!(
        text.contains("/team/a/.well-known/agent-card.json"),
        "{text}"
    );
}

/// A counting OAuth token endpoint on 127.0.0.1:0: answers every client with a token
/// for an hour and records the `Authorization` (client id and secret) of each fetch.
async fn token_endpoint() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::{Router, http::HeaderMap, routing::post};
    let fetches: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let seen = fetches.clone();
    let app = Router::new().route(
        "/token",
        post(move |headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                seen.lock().unwrap().push(auth);
                axum::Json(json!({
                    "access_token": format!("token-{}", new_token_number()),
                    "token_type": "Bearer",
                    "expires_in": 3600
                }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, fetches)
}

fn new_token_number() -> usize {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

/// Credential caches are per credential: agents whose upstream auth is the same OAuth
/// client (id, secret, scope, token endpoint) share one token (one fetch for all of
/// them, also for an agent added by `SIGHUP`); an agent with another client id, or the
/// same id with another secret, gets tokens of its own.
#[tokio::test]
async fn agents_with_the_same_credential_share_one_token_cache() {
    use base64::Engine as _;
    let mock = MockRuntime::start().await;
    let (token_url, fetches) = token_endpoint().await;
    let agent = |id: &str, client: &str, secret: &str| {
        format!(
            "[agents.{id}]\n[agents.{id}.upstream]\nurl = \"{url}\"\n\
             [agents.{id}.upstream.auth]\nkind = \"oauth2\"\nclient_id = \"{client}\"\n\
             client_secret = \"{secret}\"\nscope = \"invoke\"\ntoken_url = \"{token_url}\"\n",
            url = mock.url()
        )
    };
    let first = format!(
        "[store]\nurl = \"memory:\"\n{}{}{}{}",
        agent("a", "shared", "secret-1"),
        agent("b", "shared", "secret-1"),
        agent("c", "other", "secret-1"),
        agent("d", "shared", "secret-2"),
    );
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(first.clone())
        .start();
    let client = reqwest::Client::new();
    let send_to = |id: &'static str| {
        let (client, url) = (client.clone(), format!("{}agents/{id}/", gw.url));
        async move {
            let reply = rpc_with(
                client.post(url),
                "SendMessage",
                json!({"message": user_message("hi")}),
            )
            .await;
            assert_eq!(
                reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
                "{id}: {reply}"
            );
        }
    };
    for id in ["a", "b", "c", "d", "a", "b"] {
        send_to(id).await;
    }
    let basic = |client: &str, secret: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{client}:{secret}"))
        )
    };
    let count = |auth: &str| {
        fetches
            .lock()
            .unwrap()
            .iter()
            .filter(|a| *a == auth)
            .count()
    };
    let shared = basic("shared", "secret-1");
    assert_eq!(count(&shared), 1, "a and b share one token");
    assert_eq!(count(&basic("other", "secret-1")), 1, "c has its own");
    assert_eq!(count(&basic("shared", "secret-2")), 1, "d has its own");
    assert_eq!(fetches.lock().unwrap().len(), 3);

    // An agent added by SIGHUP with a's credential shares a's token too.
    let path = gw.config_path().unwrap().to_owned();
    std::fs::write(
        &path,
        format!("{first}{}", agent("e", "shared", "secret-1")),
    )
    .unwrap();
    gw.hang_up();
    gw.logs_when(
        |l| l.contains("SIGHUP: agents reloaded"),
        std::time::Duration::from_secs(10),
    );
    send_to("e").await;
    assert_eq!(count(&shared), 1, "the added agent shares a's token");
    assert_eq!(fetches.lock().unwrap().len(), 3);
    assert!(
        !gw.logs().contains("secret-1"),
        "a client secret in the logs"
    );
}

/// `SIGHUP` reads an agent's `client_secret_file` again: a new secret in the same file
/// is a change, so the agent gets new credentials and fetches a token with the new
/// secret; an unchanged file keeps the cached token.
#[tokio::test]
async fn sighup_reads_a_rotated_secret_from_the_same_file() {
    use base64::Engine as _;
    let mock = MockRuntime::start().await;
    let (token_url, fetches) = token_endpoint().await;
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("client_secret");
    std::fs::write(&secret_file, "rotating-secret-1\n").unwrap();
    let toml = format!(
        "[store]\nurl = \"memory:\"\n[agents.a]\n[agents.a.upstream]\nurl = \"{}\"\n\
         [agents.a.upstream.auth]\nkind = \"oauth2\"\nclient_id = \"rot\"\n\
         client_secret_file = \"{}\"\nscope = \"invoke\"\ntoken_url = \"{token_url}\"\n",
        mock.url(),
        secret_file.display()
    );
    let gw = GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(toml)
        .start();
    let client = reqwest::Client::new();
    let send = || async {
        let reply = rpc_with(
            client.post(format!("{}agents/a/", gw.url)),
            "SendMessage",
            json!({"message": user_message("hi")}),
        )
        .await;
        assert_eq!(
            reply["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{reply}"
        );
    };
    let basic = |secret: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("rot:{secret}"))
        )
    };
    let count = |auth: &str| {
        fetches
            .lock()
            .unwrap()
            .iter()
            .filter(|a| *a == auth)
            .count()
    };
    send().await;
    assert_eq!(count(&basic("rotating-secret-1")), 1);
    let reloads = |gw: &GatewayProcess| gw.logs().matches("SIGHUP: agents reloaded").count();
    // The same file content: the agent and its token stay.
    gw.hang_up();
    gw.logs_when(
        |l| l.contains("SIGHUP: agents reloaded"),
        std::time::Duration::from_secs(10),
    );
    send().await;
    assert_eq!(
        fetches.lock().unwrap().len(),
        1,
        "an unchanged secret refetched"
    );
    // A rotated secret in the same file.
    std::fs::write(&secret_file, "rotating-secret-2\n").unwrap();
    let before = reloads(&gw);
    gw.hang_up();
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while reloads(&gw) == before {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the second SIGHUP is logged");
    send().await;
    assert_eq!(
        count(&basic("rotating-secret-2")),
        1,
        "the new secret is used"
    );
    assert_eq!(fetches.lock().unwrap().len(), 2);
    assert!(
        !gw.logs().contains("rotating-secret"),
        "a secret in the logs"
    );
}
