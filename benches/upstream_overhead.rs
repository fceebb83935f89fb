//! Added latency of the gateway: the same local upstream (an AgentCore-style
//! `/invocations` endpoint on 127.0.0.1) called directly, and through the gateway
//! (A2A JSON-RPC → AgentCoreExecutor → upstream), for a JSON reply and for a
//! 100-chunk SSE reply, at 1 and 64 concurrent clients. Reports p50/p99 of the whole
//! exchange and p50 time to the first chunk, and the difference gateway − direct.
//!
//! Run: `cargo bench --bench upstream_overhead` (env `BENCH_SECS` per point,
//! default 4; `BENCH_CLIENTS`, default `1,64`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::store::MemoryTaskStore;
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::upstream::{AgentCoreExecutor, AgentCoreSettings};
use a2a_gateway::{HandlerConfig, RequestHandler, server};
use axum::Json;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

const CHUNKS: usize = 100;

async fn invocations(Json(body): Json<Value>) -> Response {
    let prompt = body["prompt"].as_str().unwrap_or("").to_owned();
    if prompt.starts_with("stream") {
        let events = futures::stream::iter((0..CHUNKS).map(|i| {
            Ok::<_, std::convert::Infallible>(
                Event::default().data(json!(format!("w{i} ")).to_string()),
            )
        }));
        Sse::new(events).into_response()
    } else {
        Json(json!({"response": format!("answer to {prompt}")})).into_response()
    }
}

mod common;

/// The `p` quantile in milliseconds.
fn pct(sorted: &[Duration], p: f64) -> f64 {
    common::percentile(sorted, p).as_secs_f64() * 1e3
}

#[derive(Clone, Copy, PartialEq)]
enum Path {
    Direct,
    Gateway,
}

struct Point {
    p50: f64,
    p99: f64,
    first_p50: f64,
    rps: f64,
}

async fn run(path: Path, url: String, stream: bool, clients: usize, secs: u64) -> Point {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut joins = Vec::new();
    for c in 0..clients {
        let (client, url) = (client.clone(), url.clone());
        joins.push(tokio::spawn(async move {
            let (mut lat, mut first) = (Vec::new(), Vec::new());
            let mut i = 0usize;
            while Instant::now() < deadline {
                i += 1;
                let prompt = if stream { format!("stream {c}-{i}") } else { format!("json {c}-{i}") };
                let body = match path {
                    Path::Direct => json!({"prompt": prompt, "actor_id": "user-bench"}),
                    Path::Gateway => json!({"jsonrpc": "2.0", "id": i,
                        "method": if stream { "SendStreamingMessage" } else { "SendMessage" },
                        "params": {"message": {"messageId": format!("m{c}-{i}"), "role": "ROLE_USER", "parts": [{"text": prompt}]}}}),
                };
                let t0 = Instant::now();
                let mut resp = client.post(&url).json(&body).send().await.expect("request");
                assert!(resp.status().is_success());
                let mut seen = Vec::new();
                let mut got_first = false;
                while let Some(chunk) = resp.chunk().await.expect("chunk") {
                    seen.extend_from_slice(&chunk);
                    if !got_first {
                        // The first chunk of the answer: the first SSE frame directly, the
                        // first artifact update through the gateway.
                        let hit = match path {
                            Path::Direct => seen.windows(5).any(|w| w == b"data:"),
                            Path::Gateway => seen.windows(14).any(|w| w == b"artifactUpdate"),
                        };
                        if hit {
                            first.push(t0.elapsed());
                            got_first = true;
                        }
                    }
                }
                lat.push(t0.elapsed());
                let text = String::from_utf8_lossy(&seen);
                if path == Path::Gateway {
                    assert!(text.contains("TASK_STATE_COMPLETED"), "{text}");
                }
            }
            (lat, first)
        }));
    }
    let (mut lat, mut first) = (Vec::new(), Vec::new());
    for j in joins {
        let (l, f) = j.await.unwrap();
        lat.extend(l);
        first.extend(f);
    }
    let rps = lat.len() as f64 / started.elapsed().as_secs_f64();
    lat.sort();
    first.sort();
    Point {
        p50: pct(&lat, 0.5),
        p99: pct(&lat, 0.99),
        first_p50: pct(&first, 0.5),
        rps,
    }
}

fn main() {
    let secs = common::env_u64("BENCH_SECS", 4);
    let clients = common::clients("1,64");
    let server_rt = common::runtime();
    let client_rt = common::runtime();
    let (upstream_url, gateway_url) = server_rt.block_on(async {
        let up = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream_url = format!("http://{}/invocations", up.local_addr().unwrap());
        let app = axum::Router::new().route("/invocations", post(invocations));
        tokio::spawn(server::serve(up, app, futures::future::pending()));

        let mut settings = AgentCoreSettings::for_url(upstream_url.clone());
        settings.stop_session_on_cancel = false;
        let executor = AgentCoreExecutor::new(settings).expect("executor");
        let gw = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gateway_url = format!("http://{}/", gw.local_addr().unwrap());
        let handler = RequestHandler::new(
            Arc::new(executor),
            Arc::new(MemoryTaskStore::new()),
            HandlerConfig::default(),
        );
        let card = server::simple_card("bench", "bench", &gateway_url, vec![]);
        let app = server::router(
            AppState::new(handler, card, TransportConfig::default()),
            None,
        );
        tokio::spawn(server::serve(gw, app, futures::future::pending()));
        (upstream_url, gateway_url)
    });
    println!(
        "| reply | clients | direct p50 | gateway p50 | added p50 | direct p99 | gateway p99 | direct first chunk p50 | gateway first chunk p50 | added first chunk | gateway req/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for stream in [false, true] {
        for &c in &clients {
            let d = client_rt.block_on(run(Path::Direct, upstream_url.clone(), stream, c, secs));
            let g = client_rt.block_on(run(Path::Gateway, gateway_url.clone(), stream, c, secs));
            let kind = if stream { "SSE, 100 chunks" } else { "JSON" };
            let (df, gf, af) = if stream {
                (
                    format!("{:.2} ms", d.first_p50),
                    format!("{:.2} ms", g.first_p50),
                    format!("{:+.2} ms", g.first_p50 - d.first_p50),
                )
            } else {
                ("-".into(), "-".into(), "-".into())
            };
            println!(
                "| {kind} | {c} | {:.2} ms | {:.2} ms | {:+.2} ms | {:.2} ms | {:.2} ms | {df} | {gf} | {af} | {:.0} |",
                d.p50,
                g.p50,
                g.p50 - d.p50,
                d.p99,
                g.p99,
                g.rps
            );
        }
    }
}
