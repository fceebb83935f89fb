//! Load benchmark of the JSON-RPC binding: blocking `SendMessage` and streaming
//! `SendStreamingMessage` against the hello-world executor on the in-memory store,
//! at 1, 16 and 64 concurrent clients, over real sockets on 127.0.0.1. The load
//! generator runs in the same process (its own runtime), so the figures include its
//! cost, as on a 2-core machine they must.
//!
//! Run: `cargo bench --bench send_message` (env `BENCH_SECS` per point, default 5;
//! `BENCH_CLIENTS` e.g. `1,16,64`; `BENCH_STORE` = `memory` | `sqlite` | `postgres`
//! where those backends exist).

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::agents::hello_world::HelloWorldAgentExecutor;
use a2a_gateway::server;
use a2a_gateway::store::{MemoryTaskStore, TaskStore};
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::{HandlerConfig, RequestHandler};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

async fn open_store(kind: &str) -> Arc<dyn TaskStore> {
    match kind {
        "memory" => Arc::new(MemoryTaskStore::new()),
        other => panic!("store {other} not available in this benchmark build"),
    }
}

fn body(i: usize, stream: bool) -> String {
    let method = if stream {
        "SendStreamingMessage"
    } else {
        "SendMessage"
    };
    format!(
        r#"{{"jsonrpc":"2.0","id":{i},"method":"{method}","params":{{"message":{{"messageId":"m{i}","role":"ROLE_USER","parts":[{{"text":"hello {i}"}}]}}}}}}"#
    )
}

async fn run_point(
    url: &str,
    clients: usize,
    secs: u64,
    stream: bool,
) -> (f64, Duration, Duration, Option<Duration>) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut joins = Vec::new();
    for c in 0..clients {
        let client = client.clone();
        let url = url.to_owned();
        joins.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut first = Vec::new();
            let mut i = c * 1_000_000;
            while Instant::now() < deadline {
                i += 1;
                let t0 = Instant::now();
                let resp = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("a2a-version", "1.0")
                    .body(body(i, stream))
                    .send()
                    .await
                    .expect("request");
                assert!(resp.status().is_success());
                if stream {
                    let mut resp = resp;
                    let mut got_first = false;
                    let mut text = Vec::new();
                    while let Some(chunk) = resp.chunk().await.expect("chunk") {
                        if !got_first {
                            first.push(t0.elapsed());
                            got_first = true;
                        }
                        text.extend_from_slice(&chunk);
                    }
                    assert!(
                        std::str::from_utf8(&text)
                            .unwrap()
                            .contains("TASK_STATE_COMPLETED")
                    );
                } else {
                    let text = resp.text().await.expect("body");
                    assert!(text.contains("TASK_STATE_COMPLETED"), "{text}");
                }
                lat.push(t0.elapsed());
            }
            (lat, first)
        }));
    }
    let started = Instant::now();
    let mut all = Vec::new();
    let mut firsts = Vec::new();
    for j in joins {
        let (l, f) = j.await.unwrap();
        all.extend(l);
        firsts.extend(f);
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    firsts.sort();
    let rps = all.len() as f64 / elapsed;
    let first = (!firsts.is_empty()).then(|| percentile(&firsts, 0.5));
    (rps, percentile(&all, 0.5), percentile(&all, 0.99), first)
}

fn main() {
    let secs: u64 = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let clients: Vec<usize> = std::env::var("BENCH_CLIENTS")
        .unwrap_or_else(|_| "1,16,64".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let stores: Vec<String> = std::env::var("BENCH_STORE")
        .unwrap_or_else(|_| "memory".into())
        .split(',')
        .map(|s| s.trim().to_owned())
        .collect();
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("| store | method | clients | requests/s | p50 | p99 | p50 first event |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for store_kind in &stores {
        let url = server_rt.block_on(async {
            let store = open_store(store_kind).await;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/", listener.local_addr().unwrap());
            let handler = RequestHandler::new(
                Arc::new(HelloWorldAgentExecutor::new()),
                store,
                HandlerConfig::default(),
            );
            let card = server::simple_card("hello", "hello world", &url, vec![]);
            let app = server::router(
                AppState::new(handler, card, TransportConfig::default()),
                None,
            );
            tokio::spawn(server::serve(listener, app, futures::future::pending()));
            url
        });
        for stream in [false, true] {
            for &c in &clients {
                let (rps, p50, p99, first) = client_rt.block_on(run_point(&url, c, secs, stream));
                let method = if stream {
                    "SendStreamingMessage"
                } else {
                    "SendMessage"
                };
                let first = first
                    .map(|d| format!("{:.2} ms", d.as_secs_f64() * 1e3))
                    .unwrap_or_else(|| "-".into());
                println!(
                    "| {store_kind} | {method} | {c} | {rps:.0} | {:.2} ms | {:.2} ms | {first} |",
                    p50.as_secs_f64() * 1e3,
                    p99.as_secs_f64() * 1e3
                );
            }
        }
    }
}
