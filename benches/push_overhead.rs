//! What push notifications cost (issue 10): blocking SendMessage throughput on SQLite
//! (`synchronous = FULL`, the default) at `BENCH_CLIENTS` clients (default 64) with no
//! webhook, then with one webhook per task (the inline
//! `configuration.taskPushNotificationConfig`), against one gateway whose push sender
//! runs in both phases; and the delivery latency from a status event's own timestamp
//! (set when the event is made, just before it is stored; milliseconds) to its arrival
//! at a local receiver, p50 and p99, plus the time the sender needed after the load to
//! drain what was still pending.
//!
//! The gateway, the receiver and the load generator run on their own runtimes (2
//! workers each, threads named `gateway`, `receiver`, `client`; the gateway's SQLite
//! connection threads count as the gateway's), and a second table gives each one's CPU
//! time per SendMessage in each phase (user + system, from `/proc/self/task`), so what a
//! webhook per task costs the gateway, and what the 2-core machine can bound at best
//! with the receiver beside it, is read from the same run.
//!
//! `BENCH_SECS=5 BENCH_CLIENTS=64 cargo bench --bench push_overhead` (loopback only).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_gateway::agents::hello_world::HelloWorldAgentExecutor;
use a2a_gateway::config::PushConfig;
use a2a_gateway::push::PushService;
use a2a_gateway::server;
use a2a_gateway::store::{SqliteTaskStore, Synchronous, TaskStore};
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::{HandlerConfig, RequestHandler};
use serde_json::Value;

mod common;
use common::percentile;
use common::thread_cpu::Cpu;

/// A 2-worker runtime whose threads (and blocking threads) are named `name`.
fn runtime(name: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// What the receiver saw: per `webhook-id`, the first arrival's delay after the event's
/// own timestamp (status updates only: artifact updates carry none).
type Seen = Arc<Mutex<HashMap<String, Option<Duration>>>>;

async fn start_receiver() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let s = s.clone();
                async move {
                    let now = chrono::Utc::now();
                    let id = headers["webhook-id"].to_str().unwrap_or("").to_owned();
                    let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let delay = v["statusUpdate"]["status"]["timestamp"]
                        .as_str()
                        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                        .and_then(|t| (now - t.with_timezone(&chrono::Utc)).to_std().ok());
                    s.lock().unwrap().entry(id).or_insert(delay);
                    "ok"
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

/// Blocking SendMessage from `clients` clients for `secs`: requests per second.
async fn load(url: &str, hook: Option<&str>, clients: usize, secs: u64) -> (f64, usize) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut joins = Vec::new();
    for c in 0..clients {
        let (client, url) = (client.clone(), url.to_owned());
        let push = hook
            .map(|h| format!(r#","configuration":{{"taskPushNotificationConfig":{{"id":"hook","url":"{h}"}}}}"#))
            .unwrap_or_default();
        joins.push(tokio::spawn(async move {
            let mut n = 0usize;
            while Instant::now() < deadline {
                let i = c * 1_000_000 + n;
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{i},"method":"SendMessage","params":{{"message":{{"messageId":"m{i}","role":"ROLE_USER","parts":[{{"text":"hello {i}"}}]}}{push}}}}}"#
                );
                let text = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("a2a-version", "1.0")
                    .body(body)
                    .send()
                    .await
                    .expect("request")
                    .text()
                    .await
                    .expect("body");
                assert!(text.contains("TASK_STATE_COMPLETED"), "{text}");
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for j in joins {
        total += j.await.unwrap();
    }
    (total as f64 / started.elapsed().as_secs_f64(), total)
}

fn main() {
    let secs = common::env_u64("BENCH_SECS", 5);
    let clients = common::clients("64");
    let server_rt = runtime("gateway");
    let receiver_rt = runtime("receiver");
    let client_rt = runtime("client");
    let dir = tempfile::tempdir().unwrap();
    let url = server_rt.block_on(async {
        let store: Arc<dyn TaskStore> = Arc::new(
            SqliteTaskStore::open_path_with(&dir.path().join("bench.db"), 10, Synchronous::Full)
                .await
                .unwrap(),
        );
        let config = PushConfig {
            allow_http: true,
            allow_cidrs: vec!["127.0.0.1/32".into()],
            ..PushConfig::default()
        };
        let push = PushService::open(&config, store.clone()).await.unwrap();
        push.spawn(tokio_util::sync::CancellationToken::new());
        let handler = RequestHandler::new(
            Arc::new(HelloWorldAgentExecutor::new()),
            store,
            HandlerConfig {
                push: Some(push),
                ..HandlerConfig::default()
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let card = server::simple_card("hello", "hello world", &url, vec![]);
        let app = server::router(
            AppState::new(handler, card, TransportConfig::default()),
            None,
        );
        tokio::spawn(server::serve(listener, app, futures::future::pending()));
        url
    });
    let (hook, seen) = receiver_rt.block_on(start_receiver());
    println!(
        "| clients | webhook per task | requests/s | vs none | deliveries | drain after load | delivery p50 | delivery p99 |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    let us = |secs: f64, n: usize| format!("{:.0} µs", secs * 1e6 / n.max(1) as f64);
    let mut cpu_rows = Vec::new();
    for &c in &clients {
        let before = Cpu::now();
        let (none, plain) = client_rt.block_on(load(&url, None, c, secs));
        let cpu_none = Cpu::now().since(before);
        println!("| {c} | no | {none:.0} | 100% | - | - | - | - |");
        seen.lock().unwrap().clear();
        let before = Cpu::now();
        let (with, tasks) = client_rt.block_on(load(&url, Some(&hook), c, secs));
        let cpu_load = Cpu::now().since(before);
        // hello_world stores 4 events per task (Task, WORKING, artifact, COMPLETED).
        let want = tasks * 4;
        let t0 = Instant::now();
        while seen.lock().unwrap().len() < want && t0.elapsed() < Duration::from_secs(300) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let drain = t0.elapsed();
        let cpu_with = Cpu::now().since(before);
        let got = seen.lock().unwrap().len();
        let mut delays: Vec<Duration> = seen.lock().unwrap().values().flatten().copied().collect();
        delays.sort();
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        println!(
            "| {c} | yes | {with:.0} | {:.0}% | {got} of {want} | {:.2} s | {} | {} |",
            100.0 * with / none,
            drain.as_secs_f64(),
            delays
                .first()
                .map(|_| ms(percentile(&delays, 0.5)))
                .unwrap_or("-".into()),
            delays
                .first()
                .map(|_| ms(percentile(&delays, 0.99)))
                .unwrap_or("-".into()),
        );
        cpu_rows.push(format!(
            "| {c} | no | {plain} | {} | - | {} | {:.2} s |",
            us(cpu_none.gateway, plain),
            us(cpu_none.client, plain),
            cpu_none.gateway + cpu_none.client + cpu_none.receiver,
        ));
        cpu_rows.push(format!(
            "| {c} | yes, during the load | {tasks} | {} | {} | {} | {:.2} s |",
            us(cpu_load.gateway, tasks),
            us(cpu_load.receiver, tasks),
            us(cpu_load.client, tasks),
            cpu_load.gateway + cpu_load.client + cpu_load.receiver,
        ));
        cpu_rows.push(format!(
            "| {c} | yes, load and drain | {tasks} | {} | {} | {} | {:.2} s |",
            us(cpu_with.gateway, tasks),
            us(cpu_with.receiver, tasks),
            us(cpu_with.client, tasks),
            cpu_with.gateway + cpu_with.client + cpu_with.receiver,
        ));
    }
    println!();
    println!(
        "| clients | webhook per task | tasks | gateway CPU per task | receiver CPU per task | client CPU per task | CPU total |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for row in cpu_rows {
        println!("{row}");
    }
}
