//! Fair shares of the run slots (issue 43, item 9): `a2a-gateway serve` as its own
//! process with API-key callers, over a [`MockRuntime`] that holds every invocation (so
//! each task keeps its slot). One caller (or one tenant) at its limit is refused with the
//! retryable error naming the limit on every binding (JSON-RPC and HTTP+JSON: HTTP 503
//! with `Retry-After`; gRPC `UNAVAILABLE`), while another caller still starts a task.
//! The same for the bytes of messages a caller writes per minute.

use std::time::Duration;

use a2a_gateway::config::sha256_hex;
use a2a_gateway::test_util::{GatewayProcess, rpc_with, user_message};
use a2a_gateway::transport::grpc::proto::{self, a2a_service_client::A2aServiceClient};
use a2a_gateway::upstream::mock::MockRuntime;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");

/// `[server]` keys, then API keys `key-<caller>-0123456789` for each `(caller, tenant)`.
fn start(server: &str, callers: &[(&str, Option<&str>)], upstream: &str) -> GatewayProcess {
    let mut keys = String::new();
    for (caller, tenant) in callers {
        keys.push_str(&format!(
            "[[server.auth.keys]]\ncaller = \"{caller}\"\nsha256 = \"{}\"\n",
            sha256_hex(&key(caller))
        ));
        if let Some(t) = tenant {
            keys.push_str(&format!("tenant = \"{t}\"\n"));
        }
    }
    GatewayProcess::init(BIN)
        .arg("serve")
        .listen("127.0.0.1:0")
        .config(format!(
            "[server]\n{server}\n[server.auth]\nkind = \"api_key\"\n{keys}\
             [store]\nurl = \"memory:\"\n[upstream]\nurl = \"{upstream}\"\n"
        ))
        .start()
}

fn key(caller: &str) -> String {
    format!("key-{caller}-0123456789")
}

/// A SendMessage of `caller` over JSON-RPC that returns at once; the reply.
async fn start_task(gw: &GatewayProcess, caller: &str) -> Value {
    rpc_with(
        reqwest::Client::new()
            .post(&gw.url)
            .bearer_auth(key(caller)),
        "SendMessage",
        json!({"message": user_message("hold"), "configuration": {"returnImmediately": true}}),
    )
    .await
}

/// A SendMessage of `caller` is refused on every binding with the retryable error
/// whose message names `limit`.
async fn refused_everywhere(gw: &GatewayProcess, caller: &str, limit: &str, text: &str) {
    let client = reqwest::Client::new();
    // JSON-RPC.
    let resp = client
        .post(&gw.url)
        .bearer_auth(key(caller))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                      "params": {"message": user_message(text)}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 503, "JSON-RPC");
    assert_eq!(resp.headers()["retry-after"], "1", "JSON-RPC");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32000, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(limit), "JSON-RPC names {limit}: {body}");
    // HTTP+JSON.
    let resp = client
        .post(format!("{}a2a/rest/message:send", gw.url))
        .bearer_auth(key(caller))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": user_message(text)}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 503, "HTTP+JSON");
    assert_eq!(resp.headers()["retry-after"], "1", "HTTP+JSON");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["status"], "UNAVAILABLE", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(limit), "HTTP+JSON names {limit}: {body}");
    // gRPC, on the same listener.
    let channel = tonic::transport::Endpoint::from_shared(gw.url.trim_end_matches('/').to_owned())
        .unwrap()
        .timeout(Duration::from_secs(20))
        .connect()
        .await
        .unwrap();
    let mut req = tonic::Request::new(proto::SendMessageRequest {
        message: Some(proto::Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            role: proto::Role::User as i32,
            parts: vec![proto::Part {
                content: Some(proto::part::Content::Text(text.into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    });
    let md = req.metadata_mut();
    md.insert("a2a-version", "1.0".parse().unwrap());
    md.insert(
        "authorization",
        format!("Bearer {}", key(caller)).parse().unwrap(),
    );
    let err = A2aServiceClient::new(channel)
        .send_message(req)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "gRPC: {err:?}");
    assert!(err.message().contains(limit), "gRPC names {limit}: {err:?}");
}

/// With the defaults (`max_concurrent_tasks = 4`: three quarters, 3, per caller), a
/// caller that keeps starting tasks is refused at its share, and another caller still
/// starts one. Without the shares the first caller took all four slots and the second
/// got the 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_caller_saturating_cannot_stop_another_from_starting_a_task() {
    let up = MockRuntime::start().await;
    up.hold();
    let gw = start(
        "max_concurrent_tasks = 4",
        &[("noisy", None), ("quiet", None)],
        &up.url(),
    );
    let mut started = 0;
    for _ in 0..4 {
        let r = start_task(&gw, "noisy").await;
        if r.get("result").is_none() {
            let message = r["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("max_tasks_per_caller"), "{r}");
            break;
        }
        started += 1;
    }
    assert_eq!(started, 3, "the noisy caller's share of 4 slots");
    up.wait_invocations(3).await;
    refused_everywhere(&gw, "noisy", "max_tasks_per_caller", "one more").await;
    let quiet = start_task(&gw, "quiet").await;
    assert!(
        quiet.get("result").is_some(),
        "the other caller starts: {quiet}"
    );
    up.release(100);
}

/// `max_tasks_per_caller` and `max_tasks_per_tenant` set: a caller at its own limit,
/// then a second caller of the same tenant at the tenant's, are refused on every binding
/// naming their limit; a caller of another tenant still starts a task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_and_tenant_limits_are_named_on_every_binding() {
    let up = MockRuntime::start().await;
    up.hold();
    let gw = start(
        "max_concurrent_tasks = 16\nmax_tasks_per_caller = 2\nmax_tasks_per_tenant = 3",
        &[("a", Some("t1")), ("b", Some("t1")), ("c", Some("t2"))],
        &up.url(),
    );
    for _ in 0..2 {
        let r = start_task(&gw, "a").await;
        assert!(r.get("result").is_some(), "{r}");
    }
    refused_everywhere(&gw, "a", "max_tasks_per_caller = 2", "one more").await;
    let r = start_task(&gw, "b").await;
    assert!(r.get("result").is_some(), "{r}");
    refused_everywhere(&gw, "b", "max_tasks_per_tenant = 3", "one more").await;
    let r = start_task(&gw, "c").await;
    assert!(r.get("result").is_some(), "another tenant starts: {r}");
    up.release(100);
}

/// `max_message_bytes_per_caller_per_minute`: a caller that wrote its minute's budget
/// is refused on every binding naming the key, before anything is stored; another
/// caller writes as much at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_over_its_write_budget_is_refused_and_another_writes() {
    let up = MockRuntime::start().await;
    let gw = start(
        "max_message_bytes_per_caller_per_minute = 100000",
        &[("heavy", None), ("light", None)],
        &up.url(),
    );
    let big = "x".repeat(90_000);
    let send = |caller: &'static str| {
        let big = big.clone();
        let url = gw.url.clone();
        async move {
            rpc_with(
                reqwest::Client::new().post(url).bearer_auth(key(caller)),
                "SendMessage",
                json!({"message": user_message(&big)}),
            )
            .await
        }
    };
    let first = send("heavy").await;
    assert!(first.get("result").is_some(), "{first}");
    refused_everywhere(
        &gw,
        "heavy",
        "max_message_bytes_per_caller_per_minute = 100000",
        &big,
    )
    .await;
    let other = send("light").await;
    assert!(
        other.get("result").is_some(),
        "another caller writes: {other}"
    );
    assert_eq!(
        up.invocations().len(),
        2,
        "the refused messages reached nothing"
    );
}

/// A caller naming a new tenant per request gains nothing: with tenants not bound to
/// keys, it is one caller for `max_tasks_per_caller` and for its write budget whatever
/// `tenant` it sends. And messages refused for want of a run slot give their bytes back:
/// a client retrying on 503 does not spend its budget on refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_tenant_per_request_gains_nothing_and_busy_refusals_cost_no_budget() {
    let up = MockRuntime::start().await;
    up.hold();
    let gw = start(
        "max_concurrent_tasks = 4\nmax_tasks_per_caller = 1\n\
         max_message_bytes_per_caller_per_minute = 30000",
        &[("dodger", None), ("patient", None)],
        &up.url(),
    );
    let send = |caller: &'static str, tenant: Option<&'static str>, text: String| {
        let url = gw.url.clone();
        async move {
            let mut params = json!({"message": user_message(&text), "configuration": {"returnImmediately": true}});
            if let Some(t) = tenant {
                params["tenant"] = json!(t);
            }
            rpc_with(
                reqwest::Client::new().post(url).bearer_auth(key(caller)),
                "SendMessage",
                params,
            )
            .await
        }
    };
    let first = send("dodger", None, "hold".into()).await;
    assert!(first.get("result").is_some(), "{first}");
    for tenant in ["x1", "x2", "x3"] {
        let r = send("dodger", Some(tenant), "hold".into()).await;
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("max_tasks_per_caller = 1"),
            "tenant {tenant}: {r}"
        );
    }
    // The patient caller's first message runs; its 9 kB messages are then refused as
    // busy (its one run slot is taken) four times: 36 kB, more than its 30 kB budget.
    let r = send("patient", None, "hold".into()).await;
    assert!(r.get("result").is_some(), "{r}");
    let nine_kb = "y".repeat(9_000);
    for _ in 0..4 {
        let r = send("patient", None, nine_kb.clone()).await;
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("max_tasks_per_caller"), "{r}");
    }
    // Once its run ends, the message goes through: the refusals cost nothing.
    up.release(100);
    let mut through = Value::Null;
    for _ in 0..50 {
        through = send("patient", None, nine_kb.clone()).await;
        if through.get("result").is_some() {
            break;
        }
        let message = through["error"]["message"].as_str().unwrap_or_default();
        assert!(
            !message.contains("max_message_bytes_per_caller_per_minute"),
            "the busy refusals spent the budget: {through}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(through.get("result").is_some(), "{through}");
}
