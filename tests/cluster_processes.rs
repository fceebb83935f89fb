//! Several instances with real processes (issue 12): three `a2a-gateway serve` on one
//! PostgreSQL schema behind HAProxy (round-robin, no stickiness; it tags each answer
//! with `x-backend`), in front of the real `BedrockAgentCoreApp`
//! (`tests/python/upstream_agent.py`) through a small recording shim written here
//! (it forwards `/invocations`, notes when an invocation's reply is dropped before its
//! end, and answers `/stopruntimesession`, which the Python app does not serve).
//!
//! - `A2A_GATEWAY_CLUSTER_TASKS` tasks (default 60, 32 at a time) sent through the
//!   balancer, each
//!   streamed, then resumed from `Last-Event-ID: 0` and read back with GetTask through
//!   whichever instance the balancer picks: every client sees every event of its task
//!   once and in order, and the store agrees;
//! - CancelTask through the balancer reaching another instance than the one running
//!   the task: the upstream reply is dropped within 1 s, StopRuntimeSession is
//!   called, the answer and every instance say CANCELED;
//! - SIGKILL of the instance running a task: a subscriber on another instance gets
//!   FAILED within the lease (3 s) plus a margin, the reason names the lost instance,
//!   another instance's running task is untouched, and restarting the killed one
//!   fails nothing it does not own.
//!
//! Needs `haproxy` (Debian package, installed by `.ci/run`), the Python venv
//! (`scripts/test.sh`) and `A2A_GATEWAY_TEST_POSTGRES_URL`; without one of them the
//! test is skipped with a note, except with `CI=true`, where it fails. Every process
//! listens on 127.0.0.1 and is killed on drop; every wait is bounded.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_gateway::test_util::{
    ChildGuard, GatewayProcess, PgSchema, free_port, python_with, rpc_body, rpc_stream_with, skip,
    user_message,
};
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");
const WAIT: Duration = Duration::from_secs(30);
const LEASE_SECS: u64 = 3;

fn haproxy() -> Option<PathBuf> {
    [
        "/usr/sbin/haproxy",
        "/usr/bin/haproxy",
        "/usr/local/sbin/haproxy",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

async fn wait_http(url: &str) {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + WAIT;
    while !client
        .get(url)
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(
            Instant::now() < deadline,
            "{url} did not answer within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------- recording shim

#[derive(Default)]
struct Record {
    /// When an invocation's reply was dropped before its end (the gateway aborted it).
    aborted: Vec<Instant>,
    /// Session ids of StopRuntimeSession calls.
    stopped: Vec<String>,
}

#[derive(Clone)]
struct Shim {
    target: String,
    client: reqwest::Client,
    record: Arc<Mutex<Record>>,
}

/// Notes the drop of a reply body that did not reach its end.
struct DropGuard {
    record: Arc<Mutex<Record>>,
    done: bool,
}
impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.done {
            self.record.lock().unwrap().aborted.push(Instant::now());
        }
    }
}

async fn forward(State(s): State<Shim>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let mut req = s.client.post(&s.target).body(body);
    for (k, v) in &headers {
        if k != "host" && k != "content-length" {
            req = req.header(k, v);
        }
    }
    let resp = req.send().await.expect("the Python app answers");
    let mut out = Response::builder().status(resp.status().as_u16());
    for (k, v) in resp.headers() {
        if k != "content-length" && k != "transfer-encoding" {
            out = out.header(k, v);
        }
    }
    let guard = DropGuard {
        record: s.record.clone(),
        done: false,
    };
    let mut upstream = resp.bytes_stream();
    let body = async_stream(move |tx| async move {
        let mut guard = guard; // the whole guard, not just its field
        while let Some(chunk) = upstream.next().await {
            if tx.send(chunk.map_err(std::io::Error::other)).await.is_err() {
                return;
            }
        }
        guard.done = true;
    });
    out.body(body).unwrap()
}

/// A body fed by `f` through a channel; dropping the body drops the feeder.
fn async_stream<F, Fut>(f: F) -> Body
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<axum::body::Bytes, std::io::Error>>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let feeder = tokio::spawn(f(tx));
    let stream = futures::stream::unfold((rx, Some(AbortOnDrop(feeder))), |(mut rx, g)| async {
        rx.recv().await.map(|item| (item, (rx, g)))
    });
    Body::from_stream(stream)
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);
impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn stop_session(State(s): State<Shim>, headers: HeaderMap) -> Response {
    let session = headers
        .get("x-amzn-bedrock-agentcore-runtime-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    s.record.lock().unwrap().stopped.push(session);
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from("{}"))
        .unwrap()
}

async fn start_shim(target: String) -> (String, Arc<Mutex<Record>>) {
    let record = Arc::new(Mutex::new(Record::default()));
    let shim = Shim {
        target,
        client: reqwest::Client::new(),
        record: record.clone(),
    };
    let app = Router::new()
        .route("/invocations", post(forward))
        .route("/stopruntimesession", post(stop_session))
        .with_state(shim);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/invocations"), record)
}

// ---------------------------------------------------------------- gateways

struct Gateway {
    proc: GatewayProcess,
    name: String,
    port: u16,
}

fn start_gateway(
    dir: &std::path::Path,
    name: &str,
    port: u16,
    env: &[(String, String)],
) -> Gateway {
    let proc = GatewayProcess::init(BIN)
        .current_dir(dir)
        .listen(format!("127.0.0.1:{port}"))
        .env("A2A_GATEWAY_STORE__INSTANCE_NAME", name)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .arg("serve")
        .timeout(WAIT)
        .start();
    Gateway {
        proc,
        name: name.to_owned(),
        port,
    }
}

fn start_haproxy(
    bin: &PathBuf,
    dir: &std::path::Path,
    port: u16,
    backends: &[(String, u16)],
) -> ChildGuard {
    let mut cfg = format!(
        "global\n  maxconn 2000\ndefaults\n  mode http\n  timeout connect 5s\n  timeout client 120s\n  \
         timeout server 120s\n  timeout check 2s\n  option http-server-close\n  \
         retries 2\n  option redispatch 1\nfrontend fe\n  bind 127.0.0.1:{port}\n  \
         default_backend gw\nbackend gw\n  balance roundrobin\n  option httpchk GET /healthz\n  \
         http-response set-header x-backend %[srv_name]\n"
    );
    for (name, p) in backends {
        cfg.push_str(&format!(
            "  server {name} 127.0.0.1:{p} check inter 500ms fall 1 rise 1\n"
        ));
    }
    let path = dir.join("haproxy.cfg");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(cfg.as_bytes())
        .unwrap();
    ChildGuard(
        Command::new(bin)
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start haproxy"),
    )
}

// ---------------------------------------------------------------- client

struct Lb {
    url: String,
    client: reqwest::Client,
}

fn message(text: &str, task_id: Option<&str>) -> Value {
    let mut m = user_message(text);
    if let Some(id) = task_id {
        m["taskId"] = json!(id);
    }
    m
}

impl Lb {
    /// A JSON-RPC call; its result and the instance that served it.
    async fn rpc(&self, method: &str, params: Value) -> (Value, String) {
        let resp = self
            .client
            .post(&self.url)
            .header("a2a-version", "1.0")
            .json(&rpc_body(method, params))
            .timeout(WAIT)
            .send()
            .await
            .unwrap();
        let backend = backend(resp.headers());
        let body: Value = resp.json().await.unwrap();
        assert!(body.get("error").is_none(), "{method}: {body}");
        (body["result"].clone(), backend)
    }

    /// A streaming call read to its end: (seq, result) pairs and the serving instance.
    async fn stream(
        &self,
        method: &str,
        params: Value,
        last: Option<u64>,
    ) -> (Vec<(u64, Value)>, String) {
        let mut req = self.client.post(&self.url);
        if let Some(n) = last {
            req = req.header("last-event-id", n.to_string());
        }
        let (headers, events) = rpc_stream_with(req, method, params).await;
        let events = tokio::time::timeout(
            WAIT,
            events
                .map(|e| (e.id.expect("an id"), e.result))
                .collect::<Vec<_>>(),
        )
        .await
        .expect("the stream ends within the bound");
        (events, backend(&headers))
    }

    async fn get(&self, id: &str) -> Value {
        self.rpc("GetTask", json!({"id": id})).await.0
    }

    async fn wait_state(&self, id: &str, state: &str, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let t = self.get(id).await;
            if t["status"]["state"] == state {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "not {state} within {within:?}: {t}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn backend(h: &reqwest::header::HeaderMap) -> String {
    h.get("x-backend")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

fn state_of(result: &Value) -> Option<&str> {
    result["statusUpdate"]["status"]["state"]
        .as_str()
        .or_else(|| result["task"]["status"]["state"].as_str())
}

fn text_of(events: &[(u64, Value)]) -> String {
    events
        .iter()
        .filter_map(|(_, r)| r["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect()
}

fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

fn contiguous(events: &[(u64, Value)], from: u64) {
    let seqs: Vec<u64> = events.iter().map(|(s, _)| *s).collect();
    let want: Vec<u64> = (from..from + seqs.len() as u64).collect();
    assert_eq!(seqs, want, "every event once, in order");
}

// ---------------------------------------------------------------- the test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_behind_haproxy_with_the_real_agentcore_app() {
    const TEST: &str = "cluster_processes";
    let Some(py) = python_with("bedrock_agentcore.runtime") else {
        return skip(
            TEST,
            "no python with bedrock_agentcore (.venv, see scripts/test.sh)",
        );
    };
    let Some(haproxy) = haproxy() else {
        return skip(
            TEST,
            "haproxy is not installed (apt-get install haproxy; .ci/run does)",
        );
    };
    let tasks: usize = std::env::var("A2A_GATEWAY_CLUSTER_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    PgSchema::run(TEST, async move |schema| {
        scenario(schema.url(), py, haproxy, tasks).await
    })
    .await;
}

async fn scenario(store_url: String, py: PathBuf, haproxy: PathBuf, tasks: usize) {
    let dir = tempfile::tempdir().unwrap();
    // The real runtime app, and the shim in front of it.
    let app_port = free_port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/upstream_agent.py");
    let _app = ChildGuard(
        Command::new(&py)
            .arg(script)
            .arg(app_port.to_string())
            .stdin(Stdio::null())
            .spawn()
            .expect("start the Python agent"),
    );
    wait_http(&format!("http://127.0.0.1:{app_port}/ping")).await;
    let (upstream, record) = start_shim(format!("http://127.0.0.1:{app_port}/invocations")).await;

    let env: Vec<(String, String)> = [
        ("A2A_GATEWAY_UPSTREAM__URL", upstream.as_str()),
        ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "none"),
        ("A2A_GATEWAY_STORE__URL", store_url.as_str()),
        ("A2A_GATEWAY_STORE__LEASE_SECS", &LEASE_SECS.to_string()),
        ("A2A_GATEWAY_STORE__MAX_CONNECTIONS", "4"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let mut gws: Vec<Gateway> = (0..3)
        .map(|i| start_gateway(dir.path(), &format!("gw{i}"), free_port(), &env))
        .collect();
    let lb_port = free_port();
    let backends: Vec<(String, u16)> = gws.iter().map(|g| (g.name.clone(), g.port)).collect();
    let _lb = start_haproxy(&haproxy, dir.path(), lb_port, &backends);
    let lb = Lb {
        url: format!("http://127.0.0.1:{lb_port}/"),
        client: reqwest::Client::new(),
    };
    wait_http(&format!("{}.well-known/agent-card.json", lb.url)).await;

    // 1. Tasks streamed, resumed and read back through whichever instance serves.
    let mut served = std::collections::HashSet::new();
    let lb = Arc::new(lb);
    let mut joins = Vec::new();
    let in_flight = Arc::new(tokio::sync::Semaphore::new(32));
    for _ in 0..tasks {
        let lb = lb.clone();
        let in_flight = in_flight.clone();
        joins.push(tokio::spawn(async move {
            let _slot = in_flight.acquire_owned().await.unwrap();
            let (events, sent_to) = lb
                .stream(
                    "SendStreamingMessage",
                    json!({"message": message("async", None)}),
                    None,
                )
                .await;
            contiguous(&events, 1);
            let id = events[0].1["task"]["id"].as_str().unwrap().to_owned();
            assert_eq!(
                state_of(&events.last().unwrap().1),
                Some("TASK_STATE_COMPLETED")
            );
            assert_eq!(text_of(&events), "one two three");
            let (replay, resumed_on) = lb
                .stream("SubscribeToTask", json!({"id": id}), Some(0))
                .await;
            contiguous(&replay, 1);
            assert_eq!(replay.last().unwrap().0, events.last().unwrap().0);
            let (task, read_on) = lb.rpc("GetTask", json!({"id": id})).await;
            assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
            [sent_to, resumed_on, read_on]
        }));
    }
    for j in joins {
        served.extend(j.await.unwrap());
    }
    assert_eq!(
        served.len(),
        3,
        "the balancer used every instance: {served:?}"
    );

    // A live subscription on another instance than the one running the task.
    let (task, runs_on) = lb
        .rpc(
            "SendMessage",
            json!({"message": message("slow", None), "configuration": {"returnImmediately": true}}),
        )
        .await;
    let slow_id = task["task"]["id"].as_str().unwrap().to_owned();
    let sub = {
        let lb = lb.clone();
        let id = slow_id.clone();
        tokio::spawn(async move { lb.stream("SubscribeToTask", json!({"id": id}), None).await })
    };
    lb.wait_state(&slow_id, "TASK_STATE_WORKING", WAIT).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // 2. Cancel through the balancer, served by another instance: round-robin sends
    // the request after one served by the running instance elsewhere.
    while lb.rpc("GetTask", json!({"id": slow_id})).await.1 != runs_on {}
    let (canceled, cancel_on) = lb.rpc("CancelTask", json!({"id": slow_id})).await;
    let answered = Instant::now();
    assert_ne!(cancel_on, runs_on, "round-robin sent the cancel elsewhere");
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let (events, sub_on) = sub.await.unwrap();
    assert_eq!(
        state_of(&events.last().unwrap().1),
        Some("TASK_STATE_CANCELED")
    );
    let ticks = text_of(&events);
    assert!(
        ticks.starts_with("tick "),
        "live events on {sub_on}: {ticks:?}"
    );
    {
        let r = record.lock().unwrap();
        assert_eq!(r.stopped.len(), 1, "StopRuntimeSession called once");
        let aborted = *r.aborted.last().expect("the upstream reply was dropped");
        assert!(
            aborted <= answered + Duration::from_secs(1),
            "the upstream request was aborted within 1 s of the cancel"
        );
    }
    for _ in 0..3 {
        assert_eq!(
            lb.get(&slow_id).await["status"]["state"],
            "TASK_STATE_CANCELED"
        );
    }

    // 3. SIGKILL the instance running a task; another instance's task is untouched.
    let (victim_task, victim) = lb
        .rpc(
            "SendMessage",
            json!({"message": message("slow", None), "configuration": {"returnImmediately": true}}),
        )
        .await;
    let (other_task, other) = lb
        .rpc(
            "SendMessage",
            json!({"message": message("slow", None), "configuration": {"returnImmediately": true}}),
        )
        .await;
    assert_ne!(victim, other);
    let (victim_id, other_id) = (
        victim_task["task"]["id"].as_str().unwrap().to_owned(),
        other_task["task"]["id"].as_str().unwrap().to_owned(),
    );
    lb.wait_state(&victim_id, "TASK_STATE_WORKING", WAIT).await;
    // The subscription goes to the instance after the victim.
    while lb.rpc("GetTask", json!({"id": victim_id})).await.1 != victim {}
    let sub = {
        let lb = lb.clone();
        let id = victim_id.clone();
        tokio::spawn(async move { lb.stream("SubscribeToTask", json!({"id": id}), None).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let k = gws.iter().position(|g| g.name == victim).unwrap();
    let killed = Instant::now();
    gws[k].proc.kill();
    let failed = lb
        .wait_state(
            &victim_id,
            "TASK_STATE_FAILED",
            Duration::from_secs(LEASE_SECS * 3),
        )
        .await;
    let took = killed.elapsed();
    let reason = status_text(&failed);
    assert!(reason.contains(&format!("instance {victim}-")), "{reason}");
    let (events, _) = sub.await.unwrap();
    assert_eq!(
        state_of(&events.last().unwrap().1),
        Some("TASK_STATE_FAILED")
    );
    eprintln!("killed instance's task FAILED after {took:?} (lease {LEASE_SECS} s)");
    assert_eq!(
        lb.get(&other_id).await["status"]["state"],
        "TASK_STATE_WORKING"
    );

    // Restart it: it fails nothing it does not own.
    let name = gws[k].name.clone();
    gws[k] = start_gateway(dir.path(), &name, gws[k].port, &env);
    tokio::time::sleep(Duration::from_secs(LEASE_SECS + 1)).await;
    assert_eq!(
        lb.get(&other_id).await["status"]["state"],
        "TASK_STATE_WORKING"
    );
    let (c, _) = lb.rpc("CancelTask", json!({"id": other_id})).await;
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED");
    for g in &gws {
        let logs = g.proc.logs();
        assert!(!logs.contains("panicked"), "{}: {logs}", g.name);
    }
}
