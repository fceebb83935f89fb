//! What push notifications cost (issue 10): blocking SendMessage throughput on SQLite
//! (`synchronous = FULL`, the default) at `BENCH_CLIENTS` clients (default 64) with no
//! webhook, then with one webhook per task (the inline
//! `configuration.taskPushNotificationConfig`), against one gateway whose push sender
//! runs in both phases; and the delivery latency from a status event's own timestamp
//! (set when the event is made, just before it is stored; milliseconds) to its arrival
//! at a local receiver, p50 and p99, plus the time the sender needed after the load to
//! drain what was still pending.
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
    let server_rt = common::runtime();
    let client_rt = common::runtime();
    let dir = tempfile::tempdir().unwrap();
    let (url, hook, seen) = server_rt.block_on(async {
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
        let (hook, seen) = start_receiver().await;
        (url, hook, seen)
    });
    println!(
        "| clients | webhook per task | requests/s | vs none | deliveries | drain after load | delivery p50 | delivery p99 |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for &c in &clients {
        let (none, _) = client_rt.block_on(load(&url, None, c, secs));
        println!("| {c} | no | {none:.0} | 100% | - | - | - | - |");
        seen.lock().unwrap().clear();
        let (with, tasks) = client_rt.block_on(load(&url, Some(&hook), c, secs));
        // hello_world stores 4 events per task (Task, WORKING, artifact, COMPLETED).
        let want = tasks * 4;
        let t0 = Instant::now();
        while seen.lock().unwrap().len() < want && t0.elapsed() < Duration::from_secs(300) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let drain = t0.elapsed();
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
    }
}
