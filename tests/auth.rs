//! Inbound authentication (`[server.auth] kind = "api_key"`) over real sockets: 401 with a
//! `Bearer` challenge before the body is read, keys mapping to callers, isolation of one
//! caller's tasks from another's, the card's security scheme, the failure metric, and no
//! key in the logs.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use a2a_gateway::TaskUpdater;
use a2a_gateway::app::Gateway;
use a2a_gateway::config::{Config, ConfigSources, sha256_hex};
use a2a_gateway::executor::{AgentExecutor, EventQueue, ExecutorError, RequestContext};
use a2a_gateway::protocol::Part;
use a2a_gateway::store::MemoryTaskStore;
use a2a_gateway::test_util::get_json;
use async_trait::async_trait;
use serde_json::{Value, json};

const KEY_A: &str = "3f1c9a7e0b5d4c2a8e6f1b3d5c7a9e0f-team-a";
const KEY_B: &str = "8b2d4f6a1c3e5b7d9f0a2c4e6b8d0f1a-team-b";
const TASK_NOT_FOUND: i64 = -32001;

/// Asks for input on the first message (the task stays open), completes on the follow-up.
struct AskOnce;

#[async_trait]
impl AgentExecutor for AskOnce {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        if ctx.current_task.is_none() {
            u.submit().await?;
            u.requires_input(Some(u.new_agent_text("and then?")))
                .await?;
        } else {
            u.add_artifact(
                vec![Part::text(format!("done: {}", ctx.user_input()))],
                None,
                None,
                false,
                true,
            )
            .await?;
            u.complete(None).await?;
        }
        Ok(())
    }
}

/// Everything every test of this binary logged, at every level.
fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = buffer.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || Capture(writer.clone()))
            .init();
        buffer
    })
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged() -> String {
    String::from_utf8_lossy(&logs().lock().unwrap()).into_owned()
}

struct Server {
    url: String,
    client: reqwest::Client,
    _key_dir: tempfile::TempDir,
}

/// A gateway with two callers: `team-a` by hash (from the environment, as one inline
/// list) and `team-b` by key file.
async fn start() -> Server {
    logs();
    let key_dir = tempfile::tempdir().unwrap();
    let key_file = key_dir.path().join("team-b.key");
    std::fs::write(&key_file, format!("{KEY_B}\n")).unwrap();
    let keys = format!(
        r#"[{{caller = "team-a", sha256 = "{}"}}, {{caller = "team-b", key_file = "{}"}}]"#,
        sha256_hex(KEY_A),
        key_file.display()
    );
    let config = Config::load(ConfigSources {
        file: None,
        env: vec![
            ("A2A_GATEWAY_SERVER__AUTH__KIND".into(), "api_key".into()),
            ("A2A_GATEWAY_SERVER__AUTH__KEYS".into(), keys),
        ],
        overrides: vec![("store.url".into(), "memory:".into())],
    })
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let gateway = Gateway::new(
        &config,
        Arc::new(AskOnce),
        Arc::new(MemoryTaskStore::new()),
        None,
    );
    tokio::spawn(gateway.serve(listener, Duration::from_secs(1), futures::future::pending()));
    Server {
        url,
        client: reqwest::Client::new(),
        _key_dir: key_dir,
    }
}

impl Server {
    async fn post(&self, key: Option<&str>, body: &Value) -> reqwest::Response {
        let mut req = self
            .client
            .post(&self.url)
            .header("A2A-Version", "1.0")
            .json(body);
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        req.send().await.unwrap()
    }

    /// Calls `method` as the holder of `key` and returns the JSON-RPC response.
    async fn call(&self, key: &str, method: &str, params: Value) -> Value {
        let resp = self
            .post(
                Some(key),
                &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
            )
            .await;
        assert_eq!(resp.status(), 200, "{method}");
        let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
        let text = resp.text().await.unwrap();
        if content_type.starts_with("text/event-stream") {
            panic!("{method} answered with a stream: {text}");
        }
        serde_json::from_str(&text).unwrap()
    }

    /// Sends `text` as a new task (or a follow-up of `task_id`).
    async fn send(&self, key: &str, text: &str, task_id: Option<&str>) -> Value {
        let mut message = json!({
            "messageId": message_id(),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        });
        if let Some(id) = task_id {
            message["taskId"] = json!(id);
        }
        self.call(key, "SendMessage", json!({"message": message}))
            .await
    }
}

/// A message id not used before in this process.
fn message_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("m-{}", N.fetch_add(1, Ordering::Relaxed))
}

fn error_code(response: &Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error: {response}"))
}

fn assert_unauthorized(resp: &reqwest::Response) {
    assert_eq!(resp.status(), 401);
    let challenge = resp.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.starts_with(r#"Bearer realm="a2a-gateway""#),
        "{challenge}"
    );
}

async fn assert_unauthorized_body(resp: reqwest::Response) {
    assert_unauthorized(&resp);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], Value::Null);
    assert_eq!(body["error"]["code"], -32600);
    // No credential: "authentication required"; a wrong one says it is not accepted.
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        ["authentication required", "the credential is not accepted"].contains(&message),
        "{body}"
    );
}

#[tokio::test]
async fn no_or_wrong_key_gets_401_before_the_body_is_read() {
    let server = start().await;
    let get = json!({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "x"}});

    // The body was not read, so the HTTP/1.1 connection ends: the answer says so
    // (issue 43, item 10), and a client does not reuse it.
    let refused = server.post(None, &get).await;
    assert_eq!(refused.version(), reqwest::Version::HTTP_11);
    assert_eq!(refused.headers()["connection"], "close");
    assert_unauthorized_body(refused).await;
    assert_unauthorized_body(server.post(Some("not-a-key"), &get).await).await;
    let resp = server
        .client
        .post(&server.url)
        .basic_auth("team-a", Some(KEY_A))
        .json(&get)
        .send()
        .await
        .unwrap();
    assert_unauthorized_body(resp).await;

    // Not even parsed: garbage, or a body over the limit, is still just "authenticate".
    let resp = server
        .client
        .post(&server.url)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_unauthorized_body(resp).await;

    // A notification (no id) is refused too, not run in the background.
    let note = json!({"jsonrpc": "2.0", "method": "SendMessage", "params": {}});
    assert_unauthorized(&server.post(None, &note).await);
}

#[tokio::test]
async fn the_right_key_works_as_its_caller() {
    let server = start().await;
    for key in [KEY_A, KEY_B] {
        let task = server.send(key, "hello", None).await;
        let task = &task["result"]["task"];
        assert_eq!(
            task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{task}"
        );
        let id = task["id"].as_str().unwrap();
        let done = server.send(key, "more", Some(id)).await;
        assert_eq!(
            done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{done}"
        );
    }
}

#[tokio::test]
async fn one_caller_cannot_reach_another_callers_task() {
    let server = start().await;
    let task = server.send(KEY_A, "secret plans", None).await;
    let task_id = task["result"]["task"]["id"].as_str().unwrap().to_owned();
    let id = json!({"id": task_id});

    // Team B: not found, for every operation, never "not yours".
    let get = server.call(KEY_B, "GetTask", id.clone()).await;
    assert_eq!(error_code(&get), TASK_NOT_FOUND, "{get}");
    let cancel = server.call(KEY_B, "CancelTask", id.clone()).await;
    assert_eq!(error_code(&cancel), TASK_NOT_FOUND, "{cancel}");
    let subscribe = server.call(KEY_B, "SubscribeToTask", id.clone()).await;
    assert_eq!(error_code(&subscribe), TASK_NOT_FOUND, "{subscribe}");
    let follow_up = server.send(KEY_B, "hijack", Some(&task_id)).await;
    assert_eq!(error_code(&follow_up), TASK_NOT_FOUND, "{follow_up}");

    let b_list = server.call(KEY_B, "ListTasks", json!({})).await;
    let b_tasks = b_list["result"]["tasks"].as_array().expect("a task list");
    assert!(
        b_tasks.iter().all(|t| t["id"] != task_id.as_str()),
        "{b_list}"
    );

    // Team A still has it, untouched by B's attempts.
    let get = server.call(KEY_A, "GetTask", id).await;
    assert_eq!(
        get["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{get}"
    );
    let a_list = server.call(KEY_A, "ListTasks", json!({})).await;
    let a_tasks = a_list["result"]["tasks"].as_array().expect("a task list");
    assert!(
        a_tasks.iter().any(|t| t["id"] == task_id.as_str()),
        "{a_list}"
    );
}

#[tokio::test]
async fn card_health_and_readiness_stay_public_and_the_card_declares_the_scheme() {
    let server = start().await;
    for path in ["healthz", "readyz"] {
        let resp = server
            .client
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    let card: Value = get_json(
        &server.client,
        &format!("{}.well-known/agent-card.json", server.url),
    )
    .await;
    let scheme = &card["securitySchemes"]["apiKey"]["httpAuthSecurityScheme"];
    assert_eq!(scheme["scheme"], "Bearer", "{card}");
    assert!(scheme["description"].is_string(), "{card}");
    // The A2A 0.3 shape of the same scheme sits beside the 1.0 wrapper (docs/a2a-0.3.md).
    let v03 = &card["securitySchemes"]["apiKey"];
    assert_eq!(
        (&v03["type"], &v03["scheme"]),
        (&json!("http"), &json!("Bearer")),
        "{card}"
    );
    assert_eq!(card["security"], json!([{"apiKey": []}]), "{card}");
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"apiKey": {"list": []}}}]),
        "{card}"
    );
    let text = card.to_string();
    assert!(!text.contains(KEY_A) && !text.contains(&sha256_hex(KEY_A)));
}

#[tokio::test]
async fn failures_are_logged_with_the_peer_and_counted_and_keys_never_logged() {
    let metrics = a2a_gateway::ops::install_metrics().expect("recorder installed");
    let server = start().await;
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}});
    let wrong = "wrong-key-that-must-not-be-logged";
    assert_unauthorized(&server.post(Some(wrong), &get).await);
    assert_unauthorized(&server.post(None, &get).await);
    server.send(KEY_A, "hello", None).await;
    server.send(KEY_B, "hello", None).await;

    let rendered = metrics.render();
    assert!(
        rendered.contains(r#"a2a_auth_failures_total{reason="invalid"}"#),
        "{rendered}"
    );
    assert!(
        rendered.contains(r#"a2a_auth_failures_total{reason="missing"}"#),
        "{rendered}"
    );

    let logs = logged();
    assert!(logs.contains("authentication failed"), "{logs}");
    assert!(logs.contains("peer=127.0.0.1:"), "{logs}");
    for secret in [wrong, KEY_A, KEY_B, &sha256_hex(KEY_A), &sha256_hex(KEY_B)] {
        assert!(!logs.contains(secret), "{secret} was logged:\n{logs}");
    }
}
