//! Push notifications end to end over real sockets: a gateway on 127.0.0.1:0 (memory
//! store) POSTs every task event to a receiver written here, which answers as each case
//! scripts it. Every case ends with each stored event delivered to the receiver, in
//! order, once deduplicated by `webhook-id`, each signature verified with the key of
//! the gateway's JWKS; or, for the SSRF and deletion cases, with nothing sent.

mod bindings_common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use a2a_gateway::store::{MemoryTaskStore, TaskStore};
use a2a_gateway::test_util::get_json;
use a2a_gateway::test_util::user_message as message;
use a2a_gateway::transport::TransportConfig;
use base64::Engine as _;
use bindings_common::client::{Operation, Opts};
use bindings_common::server::{Hook, Receiver, Reply, Server, start_push, test_push_config};
use serde_json::{Value, json};
use std::sync::Arc;

async fn start(push: a2a_gateway::config::PushConfig) -> (Server, Arc<dyn TaskStore>) {
    let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::new());
    let s = start_push(store.clone(), TransportConfig::default(), push).await;
    (s, store)
}

/// SendMessage on HTTP+JSON with an inline config posting to `url`.
async fn send(s: &Server, text: &str, url: &str, immediate: bool) -> Value {
    let resp = s
        .http
        .post(format!("{}/message:send", s.rest_url()))
        .header("a2a-version", "1.0")
        .json(&json!({"message": message(text), "configuration": {
            "returnImmediately": immediate,
            "taskPushNotificationConfig": {"id": "hook", "url": url, "token": "tok",
                "authentication": {"scheme": "Bearer", "credentials": "cred"}}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.json::<Value>().await.unwrap()["task"].clone()
}

/// The JWKS key of the gateway.
async fn public_key(s: &Server) -> Vec<u8> {
    let jwks: Value = get_json(&s.http, &format!("{}.well-known/jwks.json", s.url)).await;
    let x = jwks["keys"][0]["x"].as_str().unwrap();
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(x)
        .unwrap()
}

/// Verifies a call as a Standard Webhooks v1a receiver does.
fn verify(h: &Hook, key: &[u8]) {
    let id = h.headers["webhook-id"].to_str().unwrap();
    let ts = h.headers["webhook-timestamp"].to_str().unwrap();
    let mut signed = format!("{id}.{ts}.").into_bytes();
    signed.extend_from_slice(&h.body);
    let sigs = h.headers["webhook-signature"].to_str().unwrap();
    let ok = sigs.split(' ').any(|s| {
        let Some(b64) = s.strip_prefix("v1a,") else {
            return false;
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, key)
            .verify(&signed, &raw)
            .is_ok()
    });
    assert!(ok, "signature does not verify: {sigs}");
    let age = chrono::Utc::now().timestamp() - ts.parse::<i64>().unwrap();
    assert!((-5..60).contains(&age), "timestamp {ts} is {age} s old");
    assert_eq!(h.headers["content-type"], "application/json");
    assert_eq!(h.headers["x-a2a-notification-token"], "tok");
    assert_eq!(h.headers["a2a-notification-token"], "tok");
    assert_eq!(h.headers["authorization"], "Bearer cred");
}

/// The delivered events (answered 2xx), deduplicated by `webhook-id`, as (kind, state).
fn delivered(calls: &[Hook]) -> Vec<(String, String)> {
    let mut seen = HashSet::new();
    calls
        .iter()
        .filter(|h| (200..300).contains(&h.answered))
        .filter(|h| seen.insert(h.headers["webhook-id"].clone()))
        .map(|h| {
            let v: Value = serde_json::from_slice(&h.body).unwrap();
            let (kind, body) = v.as_object().unwrap().iter().next().unwrap();
            let state = body["status"]["state"].as_str().unwrap_or("").to_owned();
            (kind.clone(), state)
        })
        .collect()
}

fn echo_events() -> Vec<(String, String)> {
    [
        ("task", "TASK_STATE_SUBMITTED"),
        ("statusUpdate", "TASK_STATE_WORKING"),
        ("artifactUpdate", ""),
        ("statusUpdate", "TASK_STATE_COMPLETED"),
    ]
    .into_iter()
    .map(|(k, s)| (k.to_owned(), s.to_owned()))
    .collect()
}

/// Calls in arrival order never go back to an older event once a newer one was sent.
fn assert_in_order(calls: &[Hook]) {
    let mut started: Vec<String> = vec![];
    for h in calls {
        let id = h.headers["webhook-id"].to_str().unwrap().to_owned();
        match started.iter().position(|d| *d == id) {
            Some(pos) => assert_eq!(pos, started.len() - 1, "an older event after a newer one"),
            None => started.push(id),
        }
    }
}

async fn wait_all(r: &Receiver, path: &str, n: usize) -> Vec<Hook> {
    r.wait_for(path, |c| delivered(c).len() >= n).await
}

#[tokio::test]
async fn events_are_delivered_in_order_signed_and_retried_through_500_and_429() {
    let (s, _) = start(test_push_config()).await;
    s.hooks.replies.lock().unwrap().extend([
        Reply {
            status: 500,
            ..Reply::default()
        },
        Reply {
            status: 429,
            headers: vec![("retry-after", "1".into())],
            ..Reply::default()
        },
    ]);
    let task = send(&s, "echo hi", &format!("{}/r", s.hooks.url), false).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let calls = wait_all(&s.hooks, "/r", 4).await;
    assert_eq!(delivered(&calls), echo_events());
    assert_in_order(&calls);
    let key = public_key(&s).await;
    for h in &calls {
        verify(h, &key);
    }
    // The first event: 500, 429, then 200, all with one webhook-id, the third at least
    // the Retry-After second after the second.
    let first = calls[0].headers["webhook-id"].clone();
    let tries: Vec<&Hook> = calls
        .iter()
        .filter(|h| h.headers["webhook-id"] == first)
        .collect();
    assert_eq!(
        tries.iter().map(|h| h.answered).collect::<Vec<_>>(),
        [500, 429, 200]
    );
    let ids: HashSet<_> = calls
        .iter()
        .map(|h| h.headers["webhook-id"].clone())
        .collect();
    assert_eq!(ids.len(), 4, "one webhook-id per event");
}

/// The sender on a SQLite file (claims kept in memory, the outbox rows the durable
/// record): many tasks at once, a 500 on the way, and every event of every task
/// arrives in order, each answered 2xx exactly once (no event is read as due again
/// while it is in flight or after it was delivered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_every_event_of_many_tasks_is_delivered_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn TaskStore> = Arc::new(
        a2a_gateway::store::SqliteTaskStore::open_path(&dir.path().join("push.db"), 4)
            .await
            .unwrap(),
    );
    let s = start_push(store, TransportConfig::default(), test_push_config()).await;
    s.hooks.replies.lock().unwrap().push_back(Reply {
        status: 500,
        ..Reply::default()
    });
    const TASKS: usize = 16;
    let urls: Vec<String> = (0..TASKS)
        .map(|i| format!("{}/t{i}", s.hooks.url))
        .collect();
    let sends = urls.iter().map(|u| send(&s, "echo hi", u, false));
    for task in futures::future::join_all(sends).await {
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    }
    let key = public_key(&s).await;
    for i in 0..TASKS {
        let path = format!("/t{i}");
        let calls = wait_all(&s.hooks, &path, 4).await;
        assert_eq!(delivered(&calls), echo_events(), "{path}");
        assert_in_order(&calls);
        let ok = calls.iter().filter(|h| (200..300).contains(&h.answered));
        assert_eq!(ok.count(), 4, "{path}: each event answered 2xx once");
        for h in &calls {
            verify(h, &key);
        }
    }
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let (s, _) = start(test_push_config()).await;
    s.hooks.replies.lock().unwrap().push_back(Reply {
        status: 429,
        headers: vec![("retry-after", "2".into())],
        ..Reply::default()
    });
    let start = Instant::now();
    send(&s, "echo hi", &format!("{}/ra", s.hooks.url), false).await;
    let calls = wait_all(&s.hooks, "/ra", 1).await;
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "retried before Retry-After: {:?}",
        start.elapsed()
    );
    assert_eq!(calls[0].answered, 429);
    wait_all(&s.hooks, "/ra", 4).await;
}

#[tokio::test]
async fn a_receiver_that_hangs_past_the_timeout_is_retried() {
    let mut cfg = test_push_config();
    cfg.timeout_secs = 1;
    cfg.lease_secs = 5;
    let (s, _) = start(cfg).await;
    s.hooks.replies.lock().unwrap().push_back(Reply {
        delay: Duration::from_secs(3),
        ..Reply::default()
    });
    send(&s, "echo hi", &format!("{}/hang", s.hooks.url), false).await;
    let calls = wait_all(&s.hooks, "/hang", 4).await;
    assert_eq!(delivered(&calls), echo_events());
}

#[tokio::test]
async fn a_receiver_down_for_a_while_gets_everything_when_back() {
    let (s, store) = start(test_push_config()).await;
    // The port stays taken while the receiver is down (bound, not listening, so every
    // connection is refused): no other test's listener can be given it meanwhile.
    let parked = tokio::net::TcpSocket::new_v4().unwrap();
    parked.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = parked.local_addr().unwrap();
    send(&s, "echo hi", &format!("http://{addr}/down"), false).await;
    // Failing meanwhile, with the reason kept.
    let push = store.push_store().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = push.status(None, 10).await.unwrap();
        if st.pending.first().is_some_and(|p| {
            p.attempts >= 2
                && p.last_error
                    .as_deref()
                    .is_some_and(|e| e.contains("connection failed"))
        }) {
            assert_eq!(st.pending_total, 4, "every event still pending");
            break;
        }
        assert!(Instant::now() < deadline, "{st:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(parked);
    let back = Receiver::start_on(tokio::net::TcpListener::bind(addr).await.unwrap()).await;
    let calls = wait_all(&back, "/down", 4).await;
    assert_eq!(delivered(&calls), echo_events());
}

#[tokio::test]
async fn nothing_is_sent_for_a_config_after_its_delete_returns() {
    let (s, _) = start(test_push_config()).await;
    let task = send(&s, "gated", &format!("{}/del", s.hooks.url), true).await;
    let id = task["id"].as_str().unwrap();
    // task, working, part 1.
    wait_all(&s.hooks, "/del", 3).await;
    let resp = s
        .http
        .delete(format!(
            "{}/tasks/{id}/pushNotificationConfigs/hook",
            s.rest_url()
        ))
        .header("a2a-version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let before = s.hooks.calls_to("/del").len();
    s.gate.notify_one();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t: Value = s
            .http
            .get(format!("{}/tasks/{id}", s.rest_url()))
            .header("a2a-version", "1.0")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if t["status"]["state"] == "TASK_STATE_COMPLETED" {
            break;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Several poll intervals (50 ms) later, still nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(s.hooks.calls_to("/del").len(), before);
}

#[tokio::test]
async fn an_unknown_config_of_a_known_task_is_named_in_the_error() {
    let (s, _) = start(test_push_config()).await;
    let task = send(&s, "echo hi", &format!("{}/named", s.hooks.url), false).await;
    let id = task["id"].as_str().unwrap();
    let get = |task: &str, config: &str| {
        s.http
            .get(format!(
                "{}/tasks/{task}/pushNotificationConfigs/{config}",
                s.rest_url()
            ))
            .header("a2a-version", "1.0")
            .send()
    };
    // The config that exists is found; one that does not is TaskNotFound's code
    // (spec 3.1.8), with a message and ErrorInfo naming the config, not the task.
    assert_eq!(get(id, "hook").await.unwrap().status(), 200);
    let resp = get(id, "nope").await.unwrap();
    assert_eq!(resp.status(), 404);
    let body: Value = resp.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        format!("Push notification config not found: task {id} has no config nope")
    );
    let info = &body["error"]["details"][0];
    assert_eq!(info["reason"], "TASK_NOT_FOUND");
    assert_eq!(info["metadata"]["taskId"], id);
    assert_eq!(info["metadata"]["configId"], "nope");
    // An empty config id is not an id: InvalidParams for Get and Delete, on the bindings
    // that can send one (REST's path has no empty segment to send).
    let others: Vec<_> = s
        .bindings()
        .into_iter()
        .filter(|b| b.name() != "HTTP+JSON")
        .collect();
    assert!(!others.is_empty(), "JSON-RPC at least");
    for b in &others {
        for op in [
            Operation::GetTaskPushNotificationConfig,
            Operation::DeleteTaskPushNotificationConfig,
        ] {
            let got = b
                .unary(op, json!({"taskId": id, "id": ""}), &Opts::default())
                .await
                .expect_err("an empty config id is refused");
            assert_eq!(got.reason, "INVALID_PARAMS", "{}: {op:?}", b.name());
        }
    }
    assert_eq!(
        get(id, "hook").await.unwrap().status(),
        200,
        "nothing was deleted"
    );
    // An unknown task is still reported as the task.
    let resp = get("no-such-task", "hook").await.unwrap();
    assert_eq!(resp.status(), 404);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["message"], "Task not found: no-such-task");
}

#[tokio::test]
async fn gone_disables_the_config() {
    let (s, store) = start(test_push_config()).await;
    s.hooks.replies.lock().unwrap().push_back(Reply {
        status: 410,
        ..Reply::default()
    });
    send(&s, "echo hi", &format!("{}/gone", s.hooks.url), false).await;
    let push = store.push_store().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = push.status(None, 10).await.unwrap();
        if st.troubled.iter().any(|(_, c)| !c.enabled) {
            assert_eq!(st.pending_total, 0, "its deliveries are dropped");
            break;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.hooks.calls_to("/gone").len(), 1);
}

/// Waits until the config of the only task is given up on, and returns its last error.
async fn given_up(store: &Arc<dyn TaskStore>) -> String {
    let push = store.push_store().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = push.status(None, 10).await.unwrap();
        if let Some((_, c)) = st.troubled.first()
            && let Some(e) = &c.last_error
        {
            return e.clone();
        }
        assert!(Instant::now() < deadline, "{st:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_without_a_connection() {
    // 127.0.0.1 is not opened here: the receiver there must never be reached.
    let mut cfg = test_push_config();
    cfg.allow_cidrs.clear();
    let (s, store) = start(cfg).await;
    let port = s.hooks.url.rsplit(':').next().unwrap().to_owned();
    // A test resolver's name, then the system resolver's `localhost`.
    for host in ["resolves-to-loopback.test", "localhost"] {
        send(&s, "echo hi", &format!("http://{host}:{port}/ssrf"), false).await;
        let error = given_up(&store).await;
        assert!(
            error.contains("refused") && error.contains("loopback"),
            "{error}"
        );
        let push = store.push_store().unwrap();
        for (scope, c) in push.status(None, 10).await.unwrap().troubled {
            push.delete_config(&scope, &c.task_id, &c.id).await.unwrap();
        }
    }
    assert!(
        s.hooks.calls_to("/ssrf").is_empty(),
        "no connection was made"
    );
}

#[tokio::test]
async fn a_redirect_to_a_private_address_is_not_followed() {
    let (s, store) = start(test_push_config()).await;
    s.hooks.replies.lock().unwrap().push_back(Reply {
        status: 302,
        headers: vec![("location", "http://10.0.0.1/internal".into())],
        ..Reply::default()
    });
    let mut cfg_url = s.hooks.url.clone();
    cfg_url.push_str("/redir");
    send(&s, "echo hi", &cfg_url, false).await;
    let error = given_up(&store).await;
    assert!(
        error.contains("302") && error.contains("redirects are not followed"),
        "{error}"
    );
    // The next events go on (a failed delivery does not block the queue).
    let calls = wait_all(&s.hooks, "/redir", 3).await;
    assert_eq!(calls[0].answered, 302);
    assert_eq!(delivered(&calls), echo_events()[1..]);
}

/// SendMessage on HTTP+JSON under `tenant`, with an inline config posting to `url`.
async fn send_as(s: &Server, tenant: &str, text: &str, url: &str) {
    let resp = s
        .http
        .post(format!("{}/{tenant}/message:send", s.rest_url()))
        .header("a2a-version", "1.0")
        .json(&json!({"message": message(text), "configuration": {
            "taskPushNotificationConfig": {"id": "hook", "url": url}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
}

/// A delivery the sender read while its host was busy, and holds in memory without
/// a slot, is not sent once its config's delete returns: the host (one attempt at a
/// time) answers the first task's first POST only after 2 s, the second task's config
/// is deleted meanwhile, and when the host frees nothing reaches `/held`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_held_for_a_busy_host_is_not_sent_after_its_configs_delete() {
    let mut cfg = test_push_config();
    cfg.per_host_concurrency = 1;
    let (s, _) = start(cfg).await;
    s.hooks.replies.lock().unwrap().push_back(Reply {
        delay: Duration::from_secs(2),
        ..Default::default()
    });
    send(&s, "echo a", &format!("{}/first", s.hooks.url), true).await;
    // The first POST now waits in the receiver; the second task's head is read with
    // no room on the host (several poll intervals).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let task = send(&s, "echo b", &format!("{}/held", s.hooks.url), true).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let id = task["id"].as_str().unwrap();
    let resp = s
        .http
        .delete(format!(
            "{}/tasks/{id}/pushNotificationConfigs/hook",
            s.rest_url()
        ))
        .header("a2a-version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        s.hooks.calls_to("/first").is_empty(),
        "the host was still busy at the delete"
    );
    wait_all(&s.hooks, "/first", 4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(s.hooks.calls_to("/held").is_empty());
}

/// A host that accepts connections and never answers; counts the connections it holds.
async fn dead_host() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = held.clone();
    tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            open.push(socket);
        }
    });
    (url, held)
}

/// The outside review's reproduction, scaled to the test: one tenant's 24 webhooks on a
/// host that never answers (more than the sender's 16 slots) must not delay another
/// tenant's deliveries. Every event of the other tenant arrives while the dead host's
/// first attempts still hang (none has timed out: their timeout, 60 s, is beyond the
/// receiver's 20 s wait), so none of them waited for a dead attempt to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_dead_webhooks_do_not_delay_another_tenants_deliveries() {
    let mut cfg = test_push_config();
    cfg.concurrency = 16;
    cfg.per_host_concurrency = 8;
    cfg.timeout_secs = 60;
    cfg.lease_secs = 120;
    let (s, store) = start(cfg).await;
    let (dead, held) = dead_host().await;
    for i in 0..24 {
        send_as(
            &s,
            "noisy",
            &format!("echo {i}"),
            &format!("{dead}/hook/{i}"),
        )
        .await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while held.load(std::sync::atomic::Ordering::SeqCst) < 8 {
        assert!(Instant::now() < deadline, "the dead host was never tried");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    send_as(&s, "quiet", "echo hi", &format!("{}/quiet", s.hooks.url)).await;
    let calls = wait_all(&s.hooks, "/quiet", 4).await;
    assert_eq!(delivered(&calls), echo_events());
    let push = store.push_store().unwrap();
    let status = push.status(None, 1000).await.unwrap();
    assert_eq!(
        status.pending_total,
        24 * 4,
        "every noisy event still pending"
    );
    assert!(
        status.pending.iter().all(|p| p.attempts == 0),
        "no dead attempt had ended: {status:?}"
    );
    assert_eq!(
        held.load(std::sync::atomic::Ordering::SeqCst),
        8,
        "the dead host holds its 8 slots, no more"
    );
}
