//! Push at the scale of streamed replies (issue 44): `BENCH_TASKS` tasks (default 20)
//! each streaming `BENCH_CHUNKS` chunks of one artifact (default 1,000; chunk i is the
//! text `i;`), one webhook each, all to one local receiver that takes
//! `BENCH_RECEIVER_MS` (default 50) per POST, on SQLite (`synchronous = FULL`), with
//! `[push] coalesce` on and then off (`BENCH_COALESCE`, default `on,off`).
//!
//! The receiver drops duplicates by `webhook-id` and appends parts as the spec's append
//! rule says; the run checks that every task's artifact is the streamed one, in order
//! and byte-exact. Per mode it prints the POSTs the receiver got, the time from the
//! end of the last task to the last delivery (each task's COMPLETED status), and the
//! gateway's CPU time (every thread but the `client` and `receiver` runtimes', from
//! `/proc/self/task`) per POST and per streamed chunk.
//!
//! `cargo bench --bench push_streamed` (loopback only).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_gateway::config::PushConfig;
use a2a_gateway::executor::{
    AgentExecutor, EventQueue, ExecutorError, RequestContext, TaskUpdater,
};
use a2a_gateway::protocol::Part;
use a2a_gateway::push::PushService;
use a2a_gateway::server;
use a2a_gateway::store::{SqliteTaskStore, Synchronous, TaskStore};
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::{HandlerConfig, RequestHandler};
use async_trait::async_trait;
use serde_json::Value;

mod common;
use common::thread_cpu::Cpu;

/// Streams `chunks` chunks of one artifact (chunk i the text `i;`), then COMPLETED.
struct Streamer {
    chunks: usize,
}

#[async_trait]
impl AgentExecutor for Streamer {
    async fn execute(&self, ctx: RequestContext, queue: EventQueue) -> Result<(), ExecutorError> {
        let u = TaskUpdater::from_context(&ctx, queue);
        u.submit().await?;
        u.start_work(None).await?;
        for i in 0..self.chunks {
            let part = Part::text(format!("{i};"));
            let last = i + 1 == self.chunks;
            u.add_artifact(vec![part], Some("reply".into()), None, i > 0, last)
                .await?;
        }
        u.complete(None).await?;
        Ok(())
    }
}

/// What the receiver holds per path: the webhook-ids seen, the artifact text so far,
/// and when the COMPLETED status arrived.
#[derive(Default)]
struct Webhook {
    seen: HashSet<String>,
    text: String,
    completed: Option<Instant>,
}

#[derive(Default)]
struct Received {
    posts: usize,
    hooks: HashMap<String, Webhook>,
}

async fn start_receiver(delay: Duration) -> (String, Arc<Mutex<Received>>) {
    let got: Arc<Mutex<Received>> = Arc::default();
    let g = got.clone();
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let g = g.clone();
            async move {
                tokio::time::sleep(delay).await;
                let id = headers["webhook-id"].to_str().unwrap_or("").to_owned();
                let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                let mut g = g.lock().unwrap();
                g.posts += 1;
                let hook = g.hooks.entry(uri.path().to_owned()).or_default();
                if !hook.seen.insert(id) {
                    return "duplicate";
                }
                if let Some(u) = v.get("artifactUpdate") {
                    if u["append"] != true {
                        hook.text.clear();
                    }
                    for p in u["artifact"]["parts"].as_array().into_iter().flatten() {
                        hook.text.push_str(p["text"].as_str().unwrap_or_default());
                    }
                } else if v["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED" {
                    hook.completed = Some(Instant::now());
                }
                "ok"
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, got)
}

/// A gateway over a fresh SQLite file in `dir`, its push sender running: its URL.
async fn start_gateway(dir: &std::path::Path, chunks: usize, coalesce: bool) -> String {
    let store: Arc<dyn TaskStore> = Arc::new(
        SqliteTaskStore::open_path_with(&dir.join("bench.db"), 10, Synchronous::Full)
            .await
            .unwrap(),
    );
    let config = PushConfig {
        allow_http: true,
        allow_cidrs: vec!["127.0.0.1/32".into()],
        coalesce,
        ..PushConfig::default()
    };
    let push = PushService::open(&config, store.clone()).await.unwrap();
    push.spawn(tokio_util::sync::CancellationToken::new());
    let handler = RequestHandler::new(
        Arc::new(Streamer { chunks }),
        store,
        HandlerConfig {
            push: Some(push),
            ..HandlerConfig::default()
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let card = server::simple_card("streamer", "streams chunks", &url, vec![]);
    let app = server::router(
        AppState::new(handler, card, TransportConfig::default()),
        None,
    );
    tokio::spawn(server::serve(listener, app, futures::future::pending()));
    url
}

/// Sends the `tasks` tasks at once, each with its webhook at `{hooks}/t{i}`.
async fn send_all(url: &str, hooks: &str, tasks: usize) {
    let client = reqwest::Client::new();
    let sends = (0..tasks).map(|i| {
        let (client, url) = (client.clone(), url.to_owned());
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{i},"method":"SendMessage","params":{{"message":{{"messageId":"m{i}","role":"ROLE_USER","parts":[{{"text":"stream"}}]}},"configuration":{{"taskPushNotificationConfig":{{"id":"hook","url":"{hooks}/t{i}"}}}}}}}}"#
        );
        async move {
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
        }
    });
    futures::future::join_all(sends).await;
}

fn main() {
    let tasks = common::env_u64("BENCH_TASKS", 20) as usize;
    let chunks = common::env_u64("BENCH_CHUNKS", 1_000) as usize;
    let delay = Duration::from_millis(common::env_u64("BENCH_RECEIVER_MS", 50));
    let modes = common::env_list("BENCH_COALESCE", "on,off");
    let expected: String = (0..chunks).map(|i| format!("{i};")).collect();
    println!(
        "| coalesce | tasks x chunks | POSTs | POSTs per task | last delivery after the last task's end | gateway CPU | per POST | per chunk |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for mode in modes {
        let coalesce = mode == "on";
        let gateway_rt = common::runtime();
        let receiver_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("receiver")
            .enable_all()
            .build()
            .unwrap();
        let client_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("client")
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let url = gateway_rt.block_on(start_gateway(dir.path(), chunks, coalesce));
        let (hooks, got) = receiver_rt.block_on(start_receiver(delay));
        let before = Cpu::now();
        client_rt.block_on(send_all(&url, &hooks, tasks));
        let ended = Instant::now();
        let limit = Duration::from_secs(common::env_u64("BENCH_LIMIT_SECS", 900));
        loop {
            let done = got
                .lock()
                .unwrap()
                .hooks
                .values()
                .filter(|h| h.completed.is_some())
                .count();
            if done == tasks || ended.elapsed() > limit {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let cpu = Cpu::now().since(before);
        let got = got.lock().unwrap();
        for i in 0..tasks {
            let hook = &got.hooks[&format!("/t{i}")];
            assert!(hook.text == expected, "task {i}: the artifact differs");
        }
        let last = got
            .hooks
            .values()
            .filter_map(|h| h.completed)
            .max()
            .map(|t| t.saturating_duration_since(ended));
        println!(
            "| {mode} | {tasks} x {chunks} | {} | {:.1} | {} | {:.2} s | {:.0} µs | {:.1} µs |",
            got.posts,
            got.posts as f64 / tasks as f64,
            last.map_or("-".into(), |d| format!("{:.2} s", d.as_secs_f64())),
            cpu.gateway,
            cpu.gateway * 1e6 / got.posts.max(1) as f64,
            cpu.gateway * 1e6 / (tasks * chunks) as f64,
        );
        drop(got);
        gateway_rt.shutdown_timeout(Duration::from_secs(1));
        receiver_rt.shutdown_timeout(Duration::from_secs(1));
    }
}
