//! Added latency and CPU cost of the gateway: the same local upstream (the crate's
//! `MockRuntime`, an AgentCore-style `/invocations` endpoint on 127.0.0.1, not recording) called directly, through a bare reverse proxy
//! (hyper serving, reqwest forwarding the same bytes to the upstream and streaming the
//! reply back, nothing else), and through the gateway (A2A JSON-RPC → AgentCoreExecutor →
//! upstream → task events → A2A reply), for a JSON reply and for a 100-chunk SSE reply,
//! at 1 and 64 concurrent clients.
//!
//! Reports p50/p99 of the whole exchange, p50 time to the first chunk, the difference
//! gateway − direct, and the CPU time the proxy and the gateway each spent per exchange:
//! each runs on a tokio runtime of its own whose threads carry its name (`proxy`,
//! `gateway`), and the bench sums utime + stime of those threads from
//! `/proc/self/task/*/stat` (clock ticks of 10 ms, `USER_HZ` = 100) over the run, so the
//! figure does not depend on what else shares the cores. The upstream and the load
//! generator run on runtimes of their own. The gateway runs as `serve` does: the
//! Prometheus recorder installed and an info-level log formatted (into a sink).
//!
//! Run: `cargo bench --bench upstream_overhead` (env `BENCH_SECS` per point,
//! default 4; `BENCH_CLIENTS`, default `1,64`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::store::MemoryTaskStore;
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::upstream::mock::{MockReply, MockRuntime};
use a2a_gateway::upstream::{AgentCoreExecutor, AgentCoreSettings};
use a2a_gateway::{HandlerConfig, RequestHandler, server};
use serde_json::json;

const CHUNKS: usize = 100;

/// The upstream: the crate's scripted runtime, unrecorded. A prompt starting with
/// `stream` gets `CHUNKS` SSE frames (`"w0 "`, `"w1 "`…, rendered once), any other the
/// JSON `{"response": "answer to <prompt>"}`.
async fn start_upstream() -> MockRuntime {
    let frames = MockReply::frames((0..CHUNKS).map(|i| json!(format!("w{i} "))));
    let runtime = MockRuntime::start_unrecorded().await;
    runtime.answer_with(move |r| {
        let prompt = r.prompt().unwrap_or_default();
        if prompt.starts_with("stream") {
            MockReply::SseFrames(frames.clone())
        } else {
            MockReply::Json(json!({"response": format!("answer to {prompt}")}))
        }
    });
    runtime
}

mod common;

/// The `p` quantile in milliseconds.
fn pct(sorted: &[Duration], p: f64) -> f64 {
    common::percentile(sorted, p).as_secs_f64() * 1e3
}

#[derive(Clone, Copy, PartialEq)]
enum Path {
    Direct,
    Proxy,
    Gateway,
}

struct Point {
    p50: f64,
    p99: f64,
    first_p50: f64,
    rps: f64,
    exchanges: usize,
}

/// utime + stime, in clock ticks, of this process's threads named `name` (a runtime's
/// workers and blocking threads carry its `thread_name`).
fn thread_cpu_ticks(name: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .filter_map(|stat| {
            let (head, rest) = stat.rsplit_once(')')?;
            let comm = head.split_once('(')?.1;
            if comm != name {
                return None;
            }
            // After the command: field 3 (state) first; utime and stime are fields 14, 15.
            let fields: Vec<&str> = rest.split_whitespace().collect();
            Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
        })
        .sum()
}

/// Microseconds per clock tick of `/proc/*/stat` (`USER_HZ` is 100 on Linux).
const TICK_US: f64 = 10_000.0;

/// A 2-worker runtime whose threads are named `name`.
fn named_runtime(name: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The bare reverse proxy: every request is read whole and sent with the same body and
/// content type to `upstream`; the reply's status, content type and body (streamed) go
/// back. One pooled reqwest client, as the gateway's executor has.
async fn bare_proxy(listener: tokio::net::TcpListener, upstream: String) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let upstream: Arc<str> = upstream.into();
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let (client, upstream, builder) = (client.clone(), upstream.clone(), builder.clone());
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (client, upstream) = (client.clone(), upstream.clone());
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = axum::body::to_bytes(axum::body::Body::new(body), usize::MAX)
                            .await
                            .unwrap_or_default();
                        let mut forward = client.post(&*upstream).body(body);
                        if let Some(ct) = parts.headers.get(http::header::CONTENT_TYPE) {
                            forward = forward.header(http::header::CONTENT_TYPE, ct);
                        }
                        let resp = match forward.send().await {
                            Ok(r) => r,
                            Err(_) => {
                                return Ok::<_, std::convert::Infallible>(
                                    http::Response::builder()
                                        .status(502)
                                        .body(axum::body::Body::empty())
                                        .unwrap(),
                                );
                            }
                        };
                        let mut out = http::Response::builder().status(resp.status());
                        if let Some(ct) = resp.headers().get(http::header::CONTENT_TYPE) {
                            out = out.header(http::header::CONTENT_TYPE, ct);
                        }
                        Ok(out
                            .body(axum::body::Body::from_stream(resp.bytes_stream()))
                            .unwrap())
                    }
                });
            let _ = builder.serve_connection(TokioIo::new(tcp), service).await;
        });
    }
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
                    Path::Direct | Path::Proxy => json!({"prompt": prompt, "actor_id": "user-bench"}),
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
                            Path::Direct | Path::Proxy => seen.windows(5).any(|w| w == b"data:"),
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
                match path {
                    Path::Gateway => assert!(text.contains("TASK_STATE_COMPLETED"), "{text}"),
                    Path::Proxy if !stream => assert!(text.contains("answer to"), "{text}"),
                    Path::Proxy => assert_eq!(text.matches("data:").count(), CHUNKS, "{text}"),
                    Path::Direct => {}
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
        exchanges: lat.len(),
    }
}

/// `run`, plus the CPU time the threads named `threads` spent per exchange, in µs.
fn measured(
    rt: &tokio::runtime::Runtime,
    threads: &str,
    run_it: impl std::future::Future<Output = Point>,
) -> (Point, f64) {
    let before = thread_cpu_ticks(threads);
    let point = rt.block_on(run_it);
    let ticks = thread_cpu_ticks(threads) - before;
    let per = ticks as f64 * TICK_US / point.exchanges.max(1) as f64;
    (point, per)
}

fn main() {
    let secs = common::env_u64("BENCH_SECS", 4);
    let clients = common::clients("1,64");
    // As `serve`: the metrics recorder, and the info log formatted (into a sink here).
    let _ = a2a_gateway::ops::install_metrics();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_writer(std::io::sink)
        .try_init();
    let upstream_rt = named_runtime("upstream");
    let proxy_rt = named_runtime("proxy");
    let gateway_rt = named_runtime("gateway");
    let client_rt = common::runtime();
    let upstream = upstream_rt.block_on(start_upstream());
    let upstream_url = upstream.url();
    let proxy_url = proxy_rt.block_on(async {
        let px = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_url = format!("http://{}/invocations", px.local_addr().unwrap());
        tokio::spawn(bare_proxy(px, upstream_url.clone()));
        proxy_url
    });
    let gateway_url = gateway_rt.block_on(async {
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
        gateway_url
    });
    println!(
        "| reply | clients | direct p50 | gateway p50 | added p50 | direct p99 | gateway p99 | direct first chunk p50 | gateway first chunk p50 | added first chunk | gateway req/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut cpu_rows = Vec::new();
    for stream in [false, true] {
        for &c in &clients {
            let d = client_rt.block_on(run(Path::Direct, upstream_url.clone(), stream, c, secs));
            let (p, p_cpu) = measured(
                &client_rt,
                "proxy",
                run(Path::Proxy, proxy_url.clone(), stream, c, secs),
            );
            let (g, g_cpu) = measured(
                &client_rt,
                "gateway",
                run(Path::Gateway, gateway_url.clone(), stream, c, secs),
            );
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
            cpu_rows.push(format!(
                "| {kind} | {c} | {:.0} | {:.0} | {p_cpu:.1} µs | {g_cpu:.1} µs | **{:.2}** | {:.2} ms | {:.2} ms |",
                p.rps,
                g.rps,
                g_cpu / p_cpu.max(f64::MIN_POSITIVE),
                p.p50,
                g.p50,
            ));
        }
    }
    println!();
    println!(
        "| reply | clients | proxy req/s | gateway req/s | proxy CPU per exchange | gateway CPU per exchange | gateway / proxy CPU | proxy p50 | gateway p50 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in cpu_rows {
        println!("{row}");
    }
}
