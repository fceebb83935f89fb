//! A2A 0.3 clients on the JSON-RPC binding, over real sockets: 0.3 method names and
//! shapes in (`kind` parts, lower-case roles, `blocking`), 0.3 shapes out (unwrapped
//! results, `kind`, 0.3 states, `final`), the same `id:` sequence and `Last-Event-ID`
//! resume on 0.3 streams, the version rules, bad 0.3 input, and the card's 0.3 fields.

use std::sync::Arc;
use std::time::Duration;

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

/// Echoes the user's text (and the kinds of its parts) as one artifact, then completes.
struct Echo;

#[async_trait]
impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let kinds: Vec<&str> = ctx
            .message
            .parts
            .iter()
            .map(|p| match p.content {
                a2a_gateway::protocol::PartContent::Text(_) => "text",
                a2a_gateway::protocol::PartContent::Raw(_) => "raw",
                a2a_gateway::protocol::PartContent::Url(_) => "url",
                a2a_gateway::protocol::PartContent::Data(_) => "data",
            })
            .collect();
        let u = TaskUpdater::from_context(&ctx, queue);
        if ctx.current_task.is_none() {
            u.submit().await?;
        }
        u.start_work(None).await?;
        u.add_artifact(
            vec![
                Part::text(format!("echo: {}", ctx.user_input())),
                Part::data(json!({"kinds": kinds})),
            ],
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

/// Asks for input and waits there.
struct AskForInput;

#[async_trait]
impl AgentExecutor for AskForInput {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        u.submit().await?;
        u.requires_input(Some(u.new_agent_text("which one?")))
            .await?;
        Ok(())
    }
}

struct Server {
    url: String,
    client: reqwest::Client,
}

async fn start(executor: Arc<dyn AgentExecutor>) -> Server {
    start_with(executor, TransportConfig::default()).await
}

async fn start_with(executor: Arc<dyn AgentExecutor>, transport: TransportConfig) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("http://{addr}/");
    let handler = RequestHandler::new(
        executor,
        Arc::new(MemoryTaskStore::new()),
        HandlerConfig::default(),
    );
    let card = server::simple_card("echo", "echoes", &url, vec![]);
    let state = AppState::new(handler, card, transport);
    let app = server::router(state, None);
    tokio::spawn(server::serve(listener, app, futures::future::pending()));
    Server {
        url,
        client: reqwest::Client::new(),
    }
}

impl Server {
    fn post(&self, version: Option<&str>, body: Value) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(v) = version {
            req = req.header("A2A-Version", v);
        }
        req
    }

    async fn call(&self, version: Option<&str>, method: &str, params: Value) -> Value {
        let resp = self
            .post(
                version,
                json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        resp.json().await.unwrap()
    }
}

fn message03(text: &str) -> Value {
    json!({"kind": "message", "messageId": uuid(), "role": "user", "parts": [{"kind": "text", "text": text}]})
}

fn uuid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("m-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// `(id, data)` of every event of an SSE body.
fn sse_events(body: &str) -> Vec<(Option<u64>, Value)> {
    body.split("\n\n")
        .filter(|b| b.contains("data:"))
        .map(|block| {
            let mut id = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().parse().unwrap());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim());
                }
            }
            (id, serde_json::from_str(&data).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn blocking_send_get_and_cancel_in_03_shapes() {
    let s = start(Arc::new(Echo)).await;
    let mut msg = message03("hi");
    msg["parts"].as_array_mut().unwrap().extend([
        json!({"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "a.txt"}}),
        json!({"kind": "file", "file": {"uri": "https://example.com/a.pdf"}}),
        json!({"kind": "data", "data": {"x": 1}}),
    ]);
    msg["referenceTaskIds"] = json!(["earlier"]);
    msg["metadata"] = json!({"k": "v"});
    let v = s
        .call(
            None,
            "message/send",
            json!({"message": msg, "configuration": {"blocking": true}}),
        )
        .await;
    let task = &v["result"];
    assert_eq!(task["kind"], "task", "unwrapped: {v}");
    assert_eq!(task["status"]["state"], "completed");
    let parts = &task["artifacts"][0]["parts"];
    assert_eq!(parts[0], json!({"kind": "text", "text": "echo: hi"}));
    assert_eq!(
        parts[1],
        json!({"kind": "data", "data": {"kinds": ["text", "raw", "url", "data"]}})
    );
    let history = task["history"].as_array().unwrap();
    assert_eq!(history[0]["kind"], "message");
    assert_eq!(history[0]["role"], "user");
    assert_eq!(history[0]["referenceTaskIds"], json!(["earlier"]));
    assert_eq!(history[0]["metadata"], json!({"k": "v"}));
    assert_eq!(
        history[0]["parts"][1],
        json!({"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "a.txt"}})
    );
    assert_eq!(
        history[0]["parts"][2],
        json!({"kind": "file", "file": {"uri": "https://example.com/a.pdf"}})
    );
    let id = task["id"].as_str().unwrap();

    let got = s
        .call(None, "tasks/get", json!({"id": id, "historyLength": 0}))
        .await;
    assert_eq!(got["result"]["kind"], "task");
    assert_eq!(got["result"]["status"]["state"], "completed");
    assert!(got["result"].get("history").is_none(), "{got}");

    let cancel = s.call(None, "tasks/cancel", json!({"id": id})).await;
    assert_eq!(cancel["error"]["code"], -32002, "{cancel}");
    let missing = s.call(None, "tasks/get", json!({"id": "nope"})).await;
    assert_eq!(missing["error"]["code"], -32001);
}

#[tokio::test]
async fn cancel_an_interrupted_task_and_non_blocking_send() {
    let s = start(Arc::new(AskForInput)).await;
    let v = s
        .call(
            Some("0.3"),
            "message/send",
            json!({"message": message03("x"), "configuration": {"blocking": false}}),
        )
        .await;
    assert_eq!(v["result"]["kind"], "task", "{v}");
    let id = v["result"]["id"].as_str().unwrap().to_owned();
    // Wait (bounded) until the run has reached input-required.
    let mut state = String::new();
    for _ in 0..100 {
        let got = s.call(None, "tasks/get", json!({"id": id})).await;
        state = got["result"]["status"]["state"].as_str().unwrap().into();
        if state == "input-required" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(state, "input-required");
    let canceled = s.call(None, "tasks/cancel", json!({"id": id})).await;
    assert_eq!(canceled["result"]["kind"], "task", "{canceled}");
    assert_eq!(canceled["result"]["status"]["state"], "canceled");
}

#[tokio::test]
async fn message_stream_is_sse_in_03_shapes_with_ids_and_final() {
    let s = start(Arc::new(Echo)).await;
    let resp = s
        .post(
            None,
            json!({"jsonrpc": "2.0", "id": "s", "method": "message/stream", "params": {"message": message03("yo")}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = sse_events(&resp.text().await.unwrap());
    let ids: Vec<_> = events.iter().map(|(id, _)| id.unwrap()).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    let results: Vec<&Value> = events
        .iter()
        .map(|(_, v)| {
            assert_eq!(v["id"], "s");
            &v["result"]
        })
        .collect();
    let kinds: Vec<_> = results
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["task", "status-update", "artifact-update", "status-update"]
    );
    assert_eq!(results[1]["status"]["state"], "working");
    assert_eq!(results[1]["final"], false);
    assert_eq!(
        results[2]["artifact"]["parts"][0],
        json!({"kind": "text", "text": "echo: yo"})
    );
    assert_eq!(results[3]["status"]["state"], "completed");
    assert_eq!(results[3]["final"], true);
}

#[tokio::test]
async fn resubscribe_resumes_by_last_event_id_in_03_shapes() {
    let s = start(Arc::new(AskForInput)).await;
    let v = s
        .call(None, "message/send", json!({"message": message03("hi")}))
        .await;
    assert_eq!(v["result"]["status"]["state"], "input-required");
    assert_eq!(v["result"]["status"]["message"]["role"], "agent");
    let id = v["result"]["id"].as_str().unwrap();
    let mut resp = s
        .post(
            None,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/resubscribe", "params": {"id": id}}),
        )
        .header("last-event-id", "1")
        .send()
        .await
        .unwrap();
    // A resubscription stays open through INPUT_REQUIRED (it ends only at a terminal
    // state): read up to the replayed event, then hang up.
    let mut body = String::new();
    while !(body.ends_with("\n\n") && body.contains("data:")) {
        let chunk = resp.chunk().await.unwrap().expect("the stream stays open");
        body.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    drop(resp);
    let events = sse_events(&body);
    assert_eq!(events.len(), 1, "{body}");
    let (seq, ev) = &events[0];
    assert_eq!(*seq, Some(2));
    assert_eq!(ev["result"]["kind"], "status-update");
    assert_eq!(ev["result"]["status"]["state"], "input-required");
    let bad = s
        .post(
            None,
            json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/resubscribe", "params": {"id": id}}),
        )
        .header("last-event-id", "x")
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(bad["error"]["code"], -32602);
}

#[tokio::test]
async fn the_method_name_decides_and_an_explicit_1_0_refuses_03_names() {
    let s = start(Arc::new(Echo)).await;
    let params = json!({"message": message03("v")});
    let v = s.call(Some("0.3.0"), "message/send", params.clone()).await;
    assert_eq!(v["result"]["kind"], "task");
    let v = s.call(Some("1.0"), "message/send", params.clone()).await;
    assert_eq!(v["error"]["code"], -32601, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("SendMessage"),
        "{v}"
    );
    // A 1.0 name under A2A-Version: 0.3 is served as 1.0.
    let v = s
        .call(
            Some("0.3"),
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]}}),
        )
        .await;
    assert_eq!(
        v["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let v = s.call(Some("0.2"), "message/send", params).await;
    assert_eq!(v["error"]["code"], -32009);
    // Operations the gateway does not offer answer with their own error in 0.3 too.
    let v = s
        .call(
            None,
            "tasks/pushNotificationConfig/set",
            json!({"taskId": "t", "pushNotificationConfig": {"url": "https://h"}}),
        )
        .await;
    assert_eq!(v["error"]["code"], -32003, "{v}");
    let v = s
        .call(None, "agent/getAuthenticatedExtendedCard", Value::Null)
        .await;
    assert!(v["error"]["code"].is_i64(), "{v}");
}

#[tokio::test]
async fn bad_03_input_is_invalid_params_never_500() {
    let s = start(Arc::new(Echo)).await;
    let part = |p: Value| json!({"message": {"kind": "message", "messageId": "m", "role": "user", "parts": [p]}});
    for params in [
        json!([1]),
        json!({"message": "hi"}),
        json!({"message": {"messageId": "m", "role": "ROLE_ADMIN", "parts": []}}),
        part(json!({"kind": "video"})),
        part(json!({"kind": "file", "file": {"bytes": "%%%"}})),
        part(json!({"kind": "file", "file": {"bytes": "aGk=", "uri": "https://x"}})),
        part(json!({"kind": "text", "text": 5})),
        json!({"message": message03("x"), "configuration": {"blocking": "no"}}),
        json!({"message": message03("x"), "configuration": {"historyLength": -1}}),
    ] {
        let resp = s
            .post(
                None,
                json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{params}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], -32602, "{params}: {v}");
    }
    for (method, params) in [
        ("tasks/get", json!({"id": 5})),
        ("tasks/get", json!({})),
        ("tasks/cancel", json!([])),
        ("tasks/resubscribe", json!({"id": []})),
    ] {
        let v = s.call(None, method, params.clone()).await;
        assert_eq!(v["error"]["code"], -32602, "{method} {params}: {v}");
    }
}

#[tokio::test]
async fn the_card_carries_the_03_discovery_fields() {
    let s = start(Arc::new(Echo)).await;
    let card: Value = get_json(&s.client, &format!("{}.well-known/agent-card.json", s.url)).await;
    assert_eq!(card["supportedInterfaces"][0]["url"], s.url);
    assert_eq!(card["url"], s.url);
    assert_eq!(card["preferredTransport"], "JSONRPC");
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(
        card["additionalInterfaces"],
        json!([{"url": s.url, "transport": "JSONRPC"}])
    );
    assert_eq!(card["supportsAuthenticatedExtendedCard"], false);
}

/// The A2A 0.3 fields a 1.0 card must not carry (the 1.0 schema allows no other
/// properties).
const V03_CARD_FIELDS: [&str; 6] = [
    "url",
    "preferredTransport",
    "protocolVersion",
    "additionalInterfaces",
    "supportsAuthenticatedExtendedCard",
    "security",
];

#[tokio::test]
async fn a_card_request_declaring_1_0_gets_the_1_0_card_with_its_own_etag() {
    let s = start(Arc::new(Echo)).await;
    let url = format!("{}.well-known/agent-card.json", s.url);
    let unversioned = s.client.get(&url).send().await.unwrap();
    assert_eq!(unversioned.headers()["vary"], "A2A-Version");
    let both_etag = unversioned.headers()["etag"].to_str().unwrap().to_owned();
    let both: Value = unversioned.json().await.unwrap();
    assert_eq!(both["url"], s.url, "no version: both shapes");

    for req in [
        s.client.get(&url).header("A2A-Version", "1.0"),
        s.client.get(format!("{url}?A2A-Version=1.0")),
    ] {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["vary"], "A2A-Version");
        let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
        assert_ne!(etag, both_etag, "each variant has its own ETag");
        let card: Value = resp.json().await.unwrap();
        for field in V03_CARD_FIELDS {
            assert!(card.get(field).is_none(), "{field} in {card}");
        }
        // The 0.3 interface is declared in supportedInterfaces either way.
        assert_eq!(card["supportedInterfaces"], both["supportedInterfaces"]);
        // Revalidation is per variant.
        let revalidate = |tag: &str| {
            s.client
                .get(&url)
                .header("A2A-Version", "1.0")
                .header("if-none-match", tag.to_owned())
                .send()
        };
        assert_eq!(revalidate(&etag).await.unwrap().status(), 304);
        assert_eq!(revalidate(&both_etag).await.unwrap().status(), 200);
    }
}

#[tokio::test]
async fn the_card_declares_its_03_interface() {
    let s = start(Arc::new(Echo)).await;
    let card: Value = get_json(&s.client, &format!("{}.well-known/agent-card.json", s.url)).await;
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    let v03: Vec<&Value> = interfaces
        .iter()
        .filter(|i| i["protocolVersion"] == "0.3")
        .collect();
    assert_eq!(
        v03,
        [&json!({"url": s.url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"})],
        "{card}"
    );
    assert_eq!(
        interfaces.last(),
        Some(v03[0]),
        "after the 1.0 interfaces, so 1.0 clients pick those"
    );
}

#[tokio::test]
async fn with_v03_card_fields_off_the_card_is_pure_1_0() {
    let s = start_with(
        Arc::new(Echo),
        TransportConfig {
            card_v03_fields: false,
            ..Default::default()
        },
    )
    .await;
    let card: Value = get_json(&s.client, &format!("{}.well-known/agent-card.json", s.url)).await;
    assert_eq!(card["supportedInterfaces"][0]["url"], s.url, "{card}");
    for field in [
        "url",
        "preferredTransport",
        "protocolVersion",
        "additionalInterfaces",
        "supportsAuthenticatedExtendedCard",
    ] {
        assert!(card.get(field).is_none(), "{field} in {card}");
    }
}
