//! The JSON-RPC binding over real sockets: the malformed-request table with exact
//! error codes (and no HTTP 500 or panic for any of them), id echoing,
//! notifications, versions, content types, body limits, streams and the card.

use std::sync::Arc;

use a2a_gateway::executor::{
    AgentExecutor, EventQueue, ExecutorError, RequestContext, TaskUpdater,
};
use a2a_gateway::protocol::Part;
use a2a_gateway::server;
use a2a_gateway::store::MemoryTaskStore;
use a2a_gateway::test_util::get_json;
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::{HandlerConfig, RequestHandler};
use async_trait::async_trait;
use serde_json::{Value, json};

/// Echoes the user's text as one artifact, then completes.
struct Echo;

#[async_trait]
impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        if ctx.current_task.is_none() {
            u.submit().await?;
        }
        u.start_work(None).await?;
        u.add_artifact(
            vec![Part::text(format!("echo: {}", ctx.user_input()))],
            None,
            Some("result".into()),
            false,
            true,
        )
        .await?;
        u.complete(None).await?;
        Ok(())
    }
}

struct Server {
    url: String,
    client: reqwest::Client,
}

async fn start(max_body_bytes: usize) -> Server {
    start_with(Arc::new(Echo), max_body_bytes).await
}

async fn start_with(executor: Arc<dyn AgentExecutor>, max_body_bytes: usize) -> Server {
    start_with_config(executor, max_body_bytes, HandlerConfig::default()).await
}

async fn start_with_config(
    executor: Arc<dyn AgentExecutor>,
    max_body_bytes: usize,
    config: HandlerConfig,
) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("http://{addr}/");
    let handler = RequestHandler::new(executor, Arc::new(MemoryTaskStore::new()), config);
    let card = server::simple_card("echo", "echoes", &url, vec![]);
    let state = AppState::new(
        handler,
        card,
        TransportConfig {
            max_body_bytes,
            ..Default::default()
        },
    );
    let app = server::router(state, None);
    tokio::spawn(server::serve(listener, app, futures::future::pending()));
    Server {
        url,
        client: reqwest::Client::new(),
    }
}

impl Server {
    async fn raw(
        &self,
        body: impl Into<reqwest::Body>,
        content_type: Option<&str>,
    ) -> (u16, String) {
        let mut req = self.client.post(&self.url).body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap())
    }

    async fn call(&self, body: Value) -> Value {
        let (status, text) = self.raw(body.to_string(), Some("application/json")).await;
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }
}

fn message(text: &str) -> Value {
    json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]})
}

#[tokio::test]
async fn malformed_requests_get_exact_codes_and_never_500() {
    let s = start(1 << 20).await;
    let send = |params: Value| json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": params});
    let table: Vec<(&str, String, i64)> = vec![
        ("not json", "{".into(), -32700),
        ("empty body", "".into(), -32700),
        ("batch", json!([{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]).to_string(), -32600),
        ("empty batch", "[]".into(), -32600),
        ("scalar", "42".into(), -32600),
        ("no jsonrpc", json!({"id": 1, "method": "GetTask"}).to_string(), -32600),
        ("jsonrpc 1.0", json!({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}).to_string(), -32600),
        ("method not string", json!({"jsonrpc": "2.0", "id": 1, "method": 5}).to_string(), -32600),
        ("id object", json!({"jsonrpc": "2.0", "id": {}, "method": "GetTask"}).to_string(), -32600),
        ("params scalar", json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": 1}).to_string(), -32600),
        ("id repeated", r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","id":2}"#.into(), -32600),
        ("method repeated", r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"ListTasks"}"#.into(), -32600),
        ("id over 1024 bytes", json!({"jsonrpc": "2.0", "id": "i".repeat(1025), "method": "GetTask"}).to_string(), -32600),
        ("unknown method", json!({"jsonrpc": "2.0", "id": 1, "method": "Nope"}).to_string(), -32601),
        ("0.3 method without params", json!({"jsonrpc": "2.0", "id": 1, "method": "message/send"}).to_string(), -32602),
        ("0.3 method with garbage params", json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"kind": "task"}}}).to_string(), -32602),
        ("no params", json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}).to_string(), -32602),
        ("params array", json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": []}).to_string(), -32602),
        ("missing messageId", send(json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}})).to_string(), -32602),
        ("empty messageId", send(json!({"message": {"messageId": "", "role": "ROLE_USER", "parts": [{"text": "x"}]}})).to_string(), -32602),
        ("missing role", send(json!({"message": {"messageId": "m", "parts": [{"text": "x"}]}})).to_string(), -32602),
        ("agent role", send(json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}})).to_string(), -32602),
        ("bad role", send(json!({"message": {"messageId": "m", "role": "ROLE_BOSS", "parts": [{"text": "x"}]}})).to_string(), -32602),
        ("missing parts", send(json!({"message": {"messageId": "m", "role": "ROLE_USER"}})).to_string(), -32602),
        ("empty parts", send(json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}})).to_string(), -32602),
        ("part with two kinds", send(json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "url": "y"}]}})).to_string(), -32602),
        ("parts wrong type", send(json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": "x"}})).to_string(), -32602),
        ("negative historyLength", send(json!({"message": message("x"), "configuration": {"historyLength": -1}})).to_string(), -32602),
        ("unknown taskId", send(json!({"message": {"messageId": "m", "role": "ROLE_USER", "taskId": "nope", "parts": [{"text": "x"}]}})).to_string(), -32001),
        ("inline push config", send(json!({"message": message("x"), "configuration": {"taskPushNotificationConfig": {"url": "https://x"}}})).to_string(), -32003),
        ("GetTask no id", json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}}).to_string(), -32602),
        ("GetTask id number", json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": 5}}).to_string(), -32602),
        ("GetTask huge id", json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x".repeat(5000)}}).to_string(), -32602),
        ("huge contextId", send(json!({"message": {"messageId": "m", "role": "ROLE_USER", "contextId": "c".repeat(5000), "parts": [{"text": "x"}]}})).to_string(), -32602),
        ("ListTasks pageSize string 101", json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": "101"}}).to_string(), -32602),
        ("ListTasks pageSize not a number", json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": "ten"}}).to_string(), -32602),
        ("huge tenant", json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"tenant": "t".repeat(5000)}}).to_string(), -32602),
        ("GetTask unknown", json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}).to_string(), -32001),
        ("GetTask negative history", json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x", "historyLength": -2}}).to_string(), -32602),
        ("ListTasks pageSize 0", json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": 0}}).to_string(), -32602),
        ("ListTasks pageSize 101", json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": 101}}).to_string(), -32602),
        ("ListTasks bad token", json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageToken": "garbage"}}).to_string(), -32602),
        ("ListTasks bad status", json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"status": "DONE"}}).to_string(), -32602),
        ("ListTasks bad timestamp", json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"statusTimestampAfter": "yesterday"}}).to_string(), -32602),
        ("CancelTask unknown", json!({"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "nope"}}).to_string(), -32001),
        ("Subscribe unknown", json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "nope"}}).to_string(), -32001),
        ("push config create", json!({"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "t", "url": "https://x"}}).to_string(), -32003),
        ("push config list", json!({"jsonrpc": "2.0", "id": 1, "method": "ListTaskPushNotificationConfigs", "params": {"taskId": "t"}}).to_string(), -32003),
        ("extended card", json!({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}).to_string(), -32004),
    ];
    for (name, body, code) in table {
        let (status, text) = s.raw(body, Some("application/json")).await;
        assert_eq!(status, 200, "{name}: HTTP {status} {text}");
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {text}"));
        assert_eq!(v["jsonrpc"], "2.0", "{name}");
        assert_eq!(v["error"]["code"], code, "{name}: {text}");
        assert!(v.get("result").is_none(), "{name}");
        let info = &v["error"]["data"][0];
        assert_eq!(info["domain"], "a2a-protocol.org", "{name}");
        assert!(info["reason"].is_string(), "{name}");
    }
    // The server is still healthy after all of that.
    let ok = s
        .call(send(json!({"message": message("still here")})))
        .await;
    assert_eq!(
        ok["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test]
async fn id_comes_back_with_its_exact_type() {
    let s = start(1 << 20).await;
    for id in [json!(1), json!("abc"), json!(null), json!(-3), json!(1.5)] {
        let v = s
            .call(json!({"jsonrpc": "2.0", "id": id, "method": "GetTask", "params": {"id": "x"}}))
            .await;
        assert_eq!(v["id"], id);
        assert!(v.as_object().unwrap().contains_key("id"));
    }
    // A parse error has no readable id: null.
    let (_, text) = s.raw("{", Some("application/json")).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["id"].is_null() && v.as_object().unwrap().contains_key("id"));
}

#[tokio::test]
async fn notification_gets_no_body() {
    let s = start(1 << 20).await;
    let (status, text) = s
        .raw(
            json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}}).to_string(),
            Some("application/json"),
        )
        .await;
    assert_eq!(status, 204);
    assert!(text.is_empty());
    // A notification with an unsupported version: still no body.
    let resp = s
        .client
        .post(&s.url)
        .header("content-type", "application/json")
        .header("A2A-Version", "2.0")
        .body(json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
}

#[tokio::test]
async fn version_header_and_content_type_and_body_limit() {
    let s = start(4096).await;
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}).to_string();
    for (v, code) in [
        ("1.0", -32001),
        // A 1.0 method name is served as 1.0 under 0.3 too (see compat03::dialect).
        ("0.3", -32001),
        ("0.2", -32009),
        ("2.0", -32009),
        ("1.1", -32009),
        ("1.0.x", -32009),
        // Major.Minor (spec §3.6): a patch component is ignored.
        ("1.0.1", -32001),
        ("1.0.7", -32001),
    ] {
        let resp = s
            .client
            .post(&s.url)
            .header("content-type", "application/json")
            .header("A2A-Version", v)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], code);
    }
    let resp = s
        .client
        .post(format!("{}?A2A-Version=2.0", s.url))
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.json::<Value>().await.unwrap()["error"]["code"], -32009);

    let (status, text) = s.raw(body.clone(), Some("text/plain")).await;
    assert_eq!(status, 415, "{text}");
    assert!(text.contains("Content-Type"));
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["code"], -32005, "{text}");
    // No Content-Type at all is what a browser's cross-origin form post may send
    // without a preflight: refused the same way (issue 43, item 5).
    let (status, text) = s.raw(body.clone(), None).await;
    assert_eq!(status, 415, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["code"], -32005, "{text}");
    assert!(text.contains("no Content-Type"), "{text}");
    let (status, _) = s
        .raw(body.clone(), Some("application/json; charset=utf-8"))
        .await;
    assert_eq!(status, 200);

    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{{"id":"{}"}}}}"#,
        "x".repeat(5000)
    );
    let (status, text) = s.raw(big, Some("application/json")).await;
    assert_eq!(status, 413, "{text}");
    // Chunked (no Content-Length) oversized body is refused too.
    let chunks = futures::stream::iter((0..10).map(|_| Ok::<_, std::io::Error>(vec![b' '; 1000])));
    let (status, _) = s
        .raw(reqwest::Body::wrap_stream(chunks), Some("application/json"))
        .await;
    assert_eq!(status, 413);
}

#[tokio::test]
async fn blocking_send_then_get_and_list() {
    let s = start(1 << 20).await;
    let v = s.call(json!({"jsonrpc": "2.0", "id": "a", "method": "SendMessage", "params": {"message": message("hi")}})).await;
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "echo: hi");
    assert!(task["status"]["timestamp"].as_str().unwrap().ends_with('Z'));
    let id = task["id"].as_str().unwrap();
    let got = s.call(json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": id, "historyLength": 0}})).await;
    assert!(got["result"].get("history").is_none());
    // ProtoJSON int32 may come as a string.
    let got = s
        .call(json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": id, "historyLength": "1"}}))
        .await;
    assert_eq!(
        got["result"]["history"].as_array().map(Vec::len),
        Some(1),
        "{got}"
    );
    let cancel = s
        .call(json!({"jsonrpc": "2.0", "id": 4, "method": "CancelTask", "params": {"id": id}}))
        .await;
    assert_eq!(cancel["error"]["code"], -32002);
    assert_eq!(cancel["error"]["data"][0]["reason"], "TASK_NOT_CANCELABLE");
    assert_eq!(cancel["error"]["data"][0]["metadata"]["taskId"], id);
    let list = s
        .call(json!({"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {}}))
        .await;
    let r = &list["result"];
    assert_eq!(r["nextPageToken"], "");
    assert_eq!(r["pageSize"], 50);
    assert_eq!(r["totalSize"], 1);
    assert!(
        r["tasks"][0].get("artifacts").is_none(),
        "artifacts absent unless includeArtifacts"
    );
}

#[tokio::test]
async fn streaming_send_is_sse_with_ids_and_ends_after_terminal() {
    let s = start(1 << 20).await;
    let resp = s
        .client
        .post(&s.url)
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 9, "method": "SendStreamingMessage", "params": {"message": message("yo")}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = resp.text().await.unwrap();
    let mut ids = Vec::new();
    let mut kinds = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut data = None;
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id:") {
                ids.push(v.trim().parse::<u64>().unwrap());
            } else if let Some(v) = line.strip_prefix("data:") {
                data = Some(v.trim().to_owned());
            }
        }
        let v: Value = serde_json::from_str(&data.unwrap()).unwrap();
        assert_eq!(v["id"], 9);
        kinds.push(
            v["result"]
                .as_object()
                .unwrap()
                .keys()
                .next()
                .unwrap()
                .clone(),
        );
    }
    assert_eq!(
        kinds,
        ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    );
    assert_eq!(ids, [1, 2, 3, 4]);
}

#[tokio::test]
async fn agent_card_has_etag_and_honours_if_none_match() {
    let s = start(1 << 20).await;
    let url = format!("{}.well-known/agent-card.json", s.url);
    let resp = s.client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
    assert!(
        resp.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("max-age")
    );
    let card: Value = resp.json().await.unwrap();
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
    assert_eq!(card["supportedInterfaces"][0]["url"], s.url);
    assert_eq!(card["capabilities"]["streaming"], true);
    let resp = s
        .client
        .get(&url)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 304);
    let resp = s
        .client
        .get(&url)
        .header("if-none-match", "\"other\"")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn agent_card_has_last_modified_and_honours_if_modified_since() {
    let s = start(1 << 20).await;
    let url = format!("{}.well-known/agent-card.json", s.url);
    let resp = s.client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let lm = resp.headers()["last-modified"].to_str().unwrap().to_owned();
    let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
    // IMF-fixdate: `Tue, 01 Dec 2026 13:31:22 GMT`.
    assert!(lm.ends_with(" GMT") && lm.len() == 29, "{lm}");
    let modified = httpdate::parse_http_date(&lm).unwrap();
    let age = std::time::SystemTime::now()
        .duration_since(modified)
        .unwrap_or_default();
    assert!(
        age < std::time::Duration::from_secs(60),
        "built at start: {lm}"
    );
    let get = |headers: Vec<(&'static str, String)>| {
        let mut req = s.client.get(&url);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        req.send()
    };
    let resp = get(vec![("if-modified-since", lm.clone())]).await.unwrap();
    assert_eq!(resp.status(), 304);
    assert_eq!(resp.headers()["last-modified"], lm.as_str());
    assert_eq!(resp.headers()["etag"], etag.as_str());
    assert!(resp.headers().contains_key("cache-control"));
    let later = httpdate::fmt_http_date(modified + std::time::Duration::from_secs(3600));
    assert_eq!(
        get(vec![("if-modified-since", later)])
            .await
            .unwrap()
            .status(),
        304
    );
    let earlier = httpdate::fmt_http_date(modified - std::time::Duration::from_secs(1));
    assert_eq!(
        get(vec![("if-modified-since", earlier)])
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        get(vec![("if-modified-since", "yesterday".into())])
            .await
            .unwrap()
            .status(),
        200
    );
    // If-None-Match decides when both are sent (RFC 9110 §13.1.3).
    let both = vec![
        ("if-none-match", "\"other\"".to_owned()),
        ("if-modified-since", lm.clone()),
    ];
    assert_eq!(get(both).await.unwrap().status(), 200);
}

/// Counts its runs; completes each with the text echoed.
#[derive(Default)]
struct Counting {
    runs: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl AgentExecutor for Counting {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Echo.execute(ctx, queue).await
    }
}

const TRACE_EXT: &str = "https://example.com/a2a/ext/trace/v1";

/// A gateway built from `toml` the way `serve` builds it (card and handler from one
/// config), over `executor`.
async fn start_from_config(toml: &str, executor: Arc<dyn AgentExecutor>) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gw.toml");
    std::fs::write(&file, toml).unwrap();
    let config = a2a_gateway::config::Config::load(a2a_gateway::config::ConfigSources {
        file: Some(file),
        env: vec![],
        overrides: vec![("store.url".into(), "memory:".into())],
    })
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let gateway =
        a2a_gateway::app::Gateway::new(&config, executor, Arc::new(MemoryTaskStore::new()), None);
    tokio::spawn(gateway.serve(
        listener,
        std::time::Duration::from_secs(1),
        futures::future::pending(),
    ));
    Server {
        url,
        client: reqwest::Client::new(),
    }
}

impl Server {
    async fn call_with(&self, extensions: Option<&str>, method: &str, params: Value) -> Value {
        let mut req = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0");
        if let Some(e) = extensions {
            req = req.header("a2a-extensions", e);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let resp = req.body(body.to_string()).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
        let text = resp.text().await.unwrap();
        if ct.starts_with("text/event-stream") {
            return json!({"stream": text});
        }
        serde_json::from_str(&text).unwrap()
    }
}

#[tokio::test]
async fn card_capabilities_from_config_are_enforced_on_the_wire() {
    let exec = Arc::new(Counting::default());
    let toml = format!(
        r#"
[agent]
streaming = false
default_input_modes = ["text/plain"]

[[agent.skills]]
id = "look"
name = "Look"
description = "Describes a picture."
input_modes = ["image/*"]

[[agent.extensions]]
uri = "{TRACE_EXT}"
description = "Carries a trace id in message metadata."
required = true
params = {{ header = "x-trace" }}

[[agent.extensions]]
uri = "https://example.com/a2a/ext/optional/v1"
"#
    );
    let s = start_from_config(&toml, exec.clone()).await;
    let card: Value = get_json(&s.client, &format!("{}.well-known/agent-card.json", s.url)).await;
    assert_eq!(card["capabilities"]["streaming"], false);
    assert_eq!(
        card["capabilities"]["extensions"],
        json!([
            {"uri": TRACE_EXT, "description": "Carries a trace id in message metadata.", "required": true, "params": {"header": "x-trace"}},
            {"uri": "https://example.com/a2a/ext/optional/v1"}
        ])
    );
    assert_eq!(card["skills"][0]["inputModes"], json!(["image/*"]));

    let send =
        |parts: Value| json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": parts}});
    let text = json!([{"text": "hi"}]);
    // A required extension not activated: every task operation refuses.
    for (method, params) in [
        ("SendMessage", send(text.clone())),
        ("GetTask", json!({"id": "t"})),
        ("ListTasks", json!({})),
        ("CancelTask", json!({"id": "t"})),
    ] {
        for ext in [None, Some("https://example.com/a2a/ext/optional/v1")] {
            let v = s.call_with(ext, method, params.clone()).await;
            assert_eq!(v["error"]["code"], -32008, "{method} {ext:?}: {v}");
            assert_eq!(
                v["error"]["data"][0]["reason"], "EXTENSION_SUPPORT_REQUIRED",
                "{v}"
            );
            assert!(
                v["error"]["message"].as_str().unwrap().contains(TRACE_EXT),
                "{v}"
            );
        }
    }
    // Discovery still answers without it.
    let v = s.call_with(None, "GetExtendedAgentCard", json!({})).await;
    assert_eq!(v["error"]["code"], -32004, "{v}");
    assert_eq!(exec.runs.load(std::sync::atomic::Ordering::SeqCst), 0);

    // Activated (among others): served.
    let ext = Some("urn:other, https://example.com/a2a/ext/trace/v1");
    let v = s.call_with(ext, "SendMessage", send(text.clone())).await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    let id = v["result"]["task"]["id"].as_str().unwrap().to_owned();
    let v = s.call_with(ext, "GetTask", json!({"id": id})).await;
    assert_eq!(v["result"]["id"], id.as_str(), "{v}");

    // Input modes: text/plain (default) and image/* (skill) are accepted.
    let png = json!([{"raw": "iVBORw0KGgo=", "mediaType": "image/png"}, {"text": "what is this?"}]);
    let v = s.call_with(ext, "SendMessage", send(png)).await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    let runs = exec.runs.load(std::sync::atomic::Ordering::SeqCst);
    for parts in [
        json!([{"text": "see file"}, {"url": "https://x/a.pdf", "mediaType": "application/pdf"}]),
        json!([{"data": {"k": 1}}]),
        json!([{"url": "https://x/blob"}]),
        json!([{"text": "# md", "mediaType": "text/markdown"}]),
    ] {
        let v = s.call_with(ext, "SendMessage", send(parts.clone())).await;
        assert_eq!(v["error"]["code"], -32005, "{parts}: {v}");
        assert_eq!(
            v["error"]["data"][0]["reason"], "CONTENT_TYPE_NOT_SUPPORTED",
            "{v}"
        );
    }
    assert_eq!(
        exec.runs.load(std::sync::atomic::Ordering::SeqCst),
        runs,
        "a refused part never reaches the executor"
    );

    // streaming = false: both streaming operations are unsupported.
    let v = s.call_with(ext, "SendStreamingMessage", send(text)).await;
    assert_eq!(v["error"]["code"], -32004, "{v}");
    let v = s.call_with(ext, "SubscribeToTask", json!({"id": id})).await;
    assert_eq!(v["error"]["code"], -32004, "{v}");
}

/// Asks for input on a new task and waits there; completes a follow-up.
struct AskForInput;

#[async_trait]
impl AgentExecutor for AskForInput {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        if ctx.current_task.is_some() {
            u.complete(None).await?;
            return Ok(());
        }
        u.submit().await?;
        u.requires_input(Some(u.new_agent_text("which one?")))
            .await?;
        Ok(())
    }
}

#[tokio::test]
async fn resume_at_the_last_event_opens_at_once_and_follows_the_task_to_its_end() {
    let s = start_with(Arc::new(AskForInput), 1 << 20).await;
    let v = s
        .call(json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message("hi")}}))
        .await;
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let id = task["id"].as_str().unwrap();
    let subscribe = |last: &'static str| {
        s.client
            .post(&s.url)
            .header("content-type", "application/json")
            .header("last-event-id", last)
            .body(json!({"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": id}}).to_string())
            .send()
    };
    for bad in ["+2", "-1", "x", "1.5", "99"] {
        let v: Value = subscribe(bad).await.unwrap().json().await.unwrap();
        assert_eq!(v["error"]["code"], -32602, "{bad}: {v}");
    }
    // The client saw event 2, the INPUT_REQUIRED that ended its stream: the resumed
    // stream's headers come at once, and it stays open for the rest of the task.
    let at_end = tokio::time::timeout(std::time::Duration::from_secs(5), subscribe("2"))
        .await
        .expect("headers without waiting for the next event")
        .unwrap();
    assert_eq!(at_end.status(), 200);
    assert_eq!(at_end.headers()["content-type"], "text/event-stream");
    // A resume from event 1 replays the INPUT_REQUIRED status first.
    let before = subscribe("1").await.unwrap();
    let follow_up = json!({"messageId": "m2", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "the blue one"}]});
    let v = s
        .call(json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": follow_up}}))
        .await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    let read = |r: reqwest::Response| async move {
        tokio::time::timeout(std::time::Duration::from_secs(5), r.text())
            .await
            .expect("the stream ends at the terminal state")
            .unwrap()
    };
    let body = read(at_end).await;
    assert!(
        !body.contains("INPUT_REQUIRED") && body.contains("TASK_STATE_COMPLETED"),
        "{body}"
    );
    let body = read(before).await;
    let (input, done) = (
        body.find("TASK_STATE_INPUT_REQUIRED").expect("replayed"),
        body.find("TASK_STATE_COMPLETED").expect("followed"),
    );
    assert!(input < done && body.contains("id: 2"), "{body}");
}

/// Reads until the server closes the connection; returns what it sent.
async fn read_to_close(sock: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let _ = sock.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(start_paused = true)]
async fn slow_clients_are_cut_off_after_the_read_timeouts() {
    use tokio::io::AsyncWriteExt;
    let s = start(1 << 20).await;
    let addr = s
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    // Half the headers, then nothing: the connection is closed after 30 s.
    let started = tokio::time::Instant::now();
    let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    sock.write_all(b"POST / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let _ = read_to_close(&mut sock).await;
    let waited = started.elapsed();
    assert!(
        waited >= a2a_gateway::server::HEADER_READ_TIMEOUT
            && waited < std::time::Duration::from_secs(60),
        "{waited:?}"
    );
    // Headers but half the body: 408 after 30 s.
    let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
    sock.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    let reply = read_to_close(&mut sock).await;
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
}

/// Works until the test lets it finish.
struct Stall(Arc<tokio::sync::Notify>);

#[async_trait]
impl AgentExecutor for Stall {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        u.start_work(None).await?;
        self.0.notified().await;
        u.complete(None).await?;
        Ok(())
    }
}

#[tokio::test]
async fn a_refusal_for_capacity_is_503_with_retry_after_and_the_jsonrpc_body() {
    let release = Arc::new(tokio::sync::Notify::new());
    let s = start_with_config(
        Arc::new(Stall(release.clone())),
        4096,
        HandlerConfig {
            max_concurrent_tasks: 1,
            ..Default::default()
        },
    )
    .await;
    let send = |id: u32| {
        json!({"jsonrpc": "2.0", "id": id, "method": "SendMessage", "params": {
            "message": message("hold"), "configuration": {"returnImmediately": true}}})
    };
    let first = s.call(send(1)).await;
    assert!(first["result"]["task"]["id"].is_string(), "{first}");
    let resp = s
        .client
        .post(&s.url)
        .header("content-type", "application/json")
        .body(send(2).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["id"], 2, "{body}");
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert_eq!(body["error"]["data"][0]["reason"], "UNAVAILABLE", "{body}");
    release.notify_waiters();
}

/// Works until the gate opens (one permit per turn), then echoes and completes.
struct Gated(Arc<tokio::sync::Semaphore>);

#[async_trait]
impl AgentExecutor for Gated {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        if ctx.current_task.is_none() {
            u.submit().await?;
        }
        u.start_work(None).await?;
        self.0.acquire().await.expect("gate").forget();
        u.complete(Some(
            u.new_agent_text(format!("done: {}", ctx.user_input())),
        ))
        .await?;
        Ok(())
    }
}

/// Issue 15 over the wire: a SendMessage with the taskId of a WORKING task (no
/// contextId) and returnImmediately answers at once with the task, the message in
/// its history under the task's contextId; it runs as the next turn and the task
/// completes with it. CancelTask twice answers the CANCELED task both times.
#[tokio::test]
async fn a_message_to_a_working_task_is_accepted_at_once_and_cancel_is_idempotent() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let s = start_with(Arc::new(Gated(gate.clone())), 1 << 20).await;
    let v = s
        .call(
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": message("one"), "configuration": {"returnImmediately": true}}}),
        )
        .await;
    let task = &v["result"]["task"];
    let (id, ctx) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );
    let second = json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {
        "message": {"messageId": "m2", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "two"}]},
        "configuration": {"returnImmediately": true}}});
    let v = tokio::time::timeout(std::time::Duration::from_secs(5), s.call(second))
        .await
        .expect("answered without waiting for the running turn");
    let t = &v["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_WORKING", "{v}");
    let last = t["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["messageId"], "m2");
    assert_eq!(last["contextId"], ctx);
    gate.add_permits(2);
    let done = loop {
        let got = s
            .call(json!({"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": id}}))
            .await;
        if got["result"]["status"]["state"] != "TASK_STATE_WORKING" {
            break got;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(
        done["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
    assert_eq!(
        done["result"]["status"]["message"]["parts"][0]["text"],
        "done: two"
    );

    // Cancel is idempotent on a canceled task.
    let v = s
        .call(
            json!({"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": {
            "message": {"messageId": "m3", "role": "ROLE_USER", "parts": [{"text": "three"}]},
            "configuration": {"returnImmediately": true}}}),
        )
        .await;
    let id = v["result"]["task"]["id"].as_str().unwrap().to_owned();
    for n in 0..2 {
        let c = s
            .call(json!({"jsonrpc": "2.0", "id": 5, "method": "CancelTask", "params": {"id": id}}))
            .await;
        assert_eq!(
            c["result"]["status"]["state"], "TASK_STATE_CANCELED",
            "{n}: {c}"
        );
        assert_eq!(c["result"]["id"], id.as_str());
    }
}
