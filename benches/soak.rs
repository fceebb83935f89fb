//! Soak test (issue 14): the release `a2a-gateway serve` as its own process on a SQLite
//! store (`synchronous = full`, the default), in front of a local upstream
//! (benches/support/hold_upstream.rs), under a steady open-loop mix of four
//! operations started in turn at `SOAK_RATE` per second:
//! - `blocking`: SendMessage with a JSON upstream reply, expecting COMPLETED;
//! - `stream`: SendStreamingMessage over a 20-chunk SSE reply (5 ms apart), read to
//!   the end, expecting COMPLETED;
//! - `cancel`: SendMessage with `returnImmediately` over a long reply, CancelTask
//!   200 ms later, expecting CANCELED (the latency is the CancelTask call's);
//! - `subscribe`: SendMessage with `returnImmediately` over a 40-chunk reply 50 ms
//!   apart (2 s, so the task is still running under a loaded machine), then SubscribeToTask read to the end, expecting COMPLETED (the latency is
//!   the subscription's, to the end of the task).
//!
//! Every `SOAK_WINDOW_SECS` (default 60) it prints one Markdown row: operations
//! finished, errors, p50 and p99 latency (all operations and per kind), the gateway's
//! RSS (`VmRSS`) and its CPU share in the window, and the machine's load. An error is
//! any failed request, JSON-RPC error, unexpected final state, or an operation that
//! could not start because `SOAK_MAX_IN_FLIGHT` (default 512) were still running. The
//! run ends after `SOAK_SECS` (default 1800) and exits 1 if there was any error.
//!
//! Run: `cargo bench --bench soak` (`SOAK_SECS=120` for a short one; `BENCH_STORE`
//! for another store URL, `{dir}` standing for a temporary directory).

#[path = "support/hold_upstream.rs"]
mod hold_upstream;

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_gateway::test_util::proc_stat;
use a2a_gateway::test_util::user_message as message;
use futures::StreamExt;
use hold_upstream::HoldUpstream;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// How long one operation may take before it counts as an error.
const OP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long after starting a long task the cancel operation cancels it.
const CANCEL_AFTER: Duration = Duration::from_millis(200);

const KINDS: [&str; 4] = ["blocking", "stream", "cancel", "subscribe"];

/// What the operations report, drained at every window.
#[derive(Default)]
struct Window {
    /// (kind index, latency) of each operation that succeeded.
    lat: Vec<(usize, Duration)>,
    errors: usize,
    first_errors: Vec<String>,
}

type Shared = Arc<Mutex<Window>>;

fn record(shared: &Shared, kind: usize, result: Result<Duration, String>) {
    let mut w = shared.lock().unwrap();
    match result {
        Ok(d) => w.lat.push((kind, d)),
        Err(e) => {
            w.errors += 1;
            if w.first_errors.len() < 3 {
                w.first_errors.push(format!("{}: {e}", KINDS[kind]));
            }
        }
    }
}

/// `e` with its sources (reqwest's own message names only the URL).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

async fn call(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let body: Value = client
        .post(url)
        .header("a2a-version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .map_err(|e| format!("{method}: {}", chain(&e)))?
        .json()
        .await
        .map_err(|e| format!("{method}: {}", chain(&e)))?;
    if let Some(err) = body.get("error") {
        return Err(format!("{method}: {err}"));
    }
    Ok(body["result"].clone())
}

/// Reads an SSE reply to its end; the last `state` it named.
async fn read_stream(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    params: Value,
) -> Result<String, String> {
    let resp = client
        .post(url)
        .header("a2a-version", "1.0")
        .header("accept", "text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .map_err(|e| format!("{method}: {}", chain(&e)))?;
    let is_sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !resp.status().is_success() || !is_sse {
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        return Err(format!("{method}: HTTP {status}, not a stream: {body}"));
    }
    let mut bytes = resp.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut last_state = String::new();
    while let Some(chunk) = bytes.next().await {
        let chunk = chunk.map_err(|e| format!("{method}: {}", chain(&e)))?;
        buf.extend_from_slice(&chunk);
        // Complete SSE events end with a blank line.
        while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buf.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&event);
            for line in text.lines() {
                let Some(data) = line.strip_prefix("data:") else {
                    continue;
                };
                let v: Value = serde_json::from_str(data.trim())
                    .map_err(|e| format!("{method}: {}", chain(&e)))?;
                if let Some(err) = v.get("error") {
                    return Err(format!("{method}: {err}"));
                }
                let r = &v["result"];
                for s in [
                    &r["task"]["status"]["state"],
                    &r["statusUpdate"]["status"]["state"],
                ] {
                    if let Some(s) = s.as_str() {
                        last_state = s.to_owned();
                    }
                }
            }
        }
    }
    Ok(last_state)
}

fn expect_state(what: &str, got: &str, want: &str) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what} ended {got:?}, expected {want}"))
    }
}

async fn operation(kind: usize, client: reqwest::Client, url: String) -> Result<Duration, String> {
    let started = Instant::now();
    match kind {
        0 => {
            let r = call(
                &client,
                &url,
                "SendMessage",
                json!({"message": message("json")}),
            )
            .await?;
            let state = r["task"]["status"]["state"].as_str().unwrap_or("");
            expect_state("SendMessage", state, "TASK_STATE_COMPLETED")?;
            Ok(started.elapsed())
        }
        1 => {
            let state = read_stream(
                &client,
                &url,
                "SendStreamingMessage",
                json!({"message": message("stream 20 5")}),
            )
            .await?;
            expect_state("SendStreamingMessage", &state, "TASK_STATE_COMPLETED")?;
            Ok(started.elapsed())
        }
        2 => {
            let r = call(
                &client,
                &url,
                "SendMessage",
                json!({"message": message("slow"), "configuration": {"returnImmediately": true}}),
            )
            .await?;
            let id = r["task"]["id"].as_str().ok_or("no task id")?.to_owned();
            tokio::time::sleep(CANCEL_AFTER).await;
            let cancel_started = Instant::now();
            let r = call(&client, &url, "CancelTask", json!({"id": id})).await?;
            let state = r["status"]["state"].as_str().unwrap_or("");
            expect_state("CancelTask", state, "TASK_STATE_CANCELED")?;
            Ok(cancel_started.elapsed())
        }
        _ => {
            let r = call(
                &client,
                &url,
                "SendMessage",
                json!({"message": message("stream 40 50"), "configuration": {"returnImmediately": true}}),
            )
            .await?;
            let id = r["task"]["id"].as_str().ok_or("no task id")?.to_owned();
            let sub_started = Instant::now();
            let state = read_stream(&client, &url, "SubscribeToTask", json!({"id": id})).await?;
            expect_state("SubscribeToTask", &state, "TASK_STATE_COMPLETED")?;
            Ok(sub_started.elapsed())
        }
    }
}

fn ms(sorted: &[Duration], p: f64) -> f64 {
    common::percentile(sorted, p).as_secs_f64() * 1e3
}

struct Summary {
    rss_mib: f64,
    p99: f64,
    errors: usize,
}

async fn soak(
    secs: u64,
    rate: u64,
    window: u64,
    max_in_flight: usize,
    store: String,
) -> Vec<Summary> {
    let upstream = HoldUpstream::start().await;
    upstream.release();
    let dir = tempfile::tempdir().unwrap();
    let store_url = store.replace("{dir}", &dir.path().display().to_string());
    let env = [
        ("A2A_GATEWAY_UPSTREAM__URL", upstream.url.clone()),
        ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "none".into()),
        (
            "A2A_GATEWAY_UPSTREAM__STOP_SESSION_ON_CANCEL",
            "false".into(),
        ),
        ("A2A_GATEWAY_STORE__URL", store_url.clone()),
        // Warnings only, and the line naming the address.
        (
            "A2A_GATEWAY_LOG__LEVEL",
            "warn,a2a_gateway::cli::serve=info".into(),
        ),
    ];
    let gw = common::serve(common::BIN, dir.path(), &env);
    let url = gw.url.clone();
    println!(
        "store {store_url}, {rate} operations/s in turn ({}), {secs} s, windows of {window} s, gateway pid {}",
        KINDS.join(", "),
        gw.pid()
    );
    println!(
        "| minute | ops | errors | p50 ms | p99 ms | p99 blocking | p99 stream | p99 cancel | p99 subscribe | RSS MiB | gateway CPU % | load |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .http1_only()
        .build()
        .unwrap();
    let shared: Shared = Arc::default();
    let in_flight = Arc::new(Semaphore::new(max_in_flight));
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let mut next_window = start + Duration::from_secs(window);
    let mut cpu_before = gw.cpu();
    let mut window_started = Instant::now();
    let mut i = 0usize;
    let mut rows = Vec::new();
    let mut minute = 0u64;
    loop {
        tick.tick().await;
        let now = Instant::now();
        if now >= next_window || now >= end {
            // Operations still running are counted in the window they finish in.
            let w = std::mem::take(&mut *shared.lock().unwrap());
            let cpu = gw.cpu();
            let cpu_share =
                (cpu - cpu_before).as_secs_f64() / window_started.elapsed().as_secs_f64() * 100.0;
            cpu_before = cpu;
            window_started = Instant::now();
            let mut all: Vec<Duration> = w.lat.iter().map(|(_, d)| *d).collect();
            all.sort();
            let mut per_kind = Vec::new();
            for k in 0..KINDS.len() {
                let mut v: Vec<Duration> = w
                    .lat
                    .iter()
                    .filter(|(kk, _)| *kk == k)
                    .map(|(_, d)| *d)
                    .collect();
                v.sort();
                per_kind.push(format!("{:.1}", ms(&v, 0.99)));
            }
            minute += window;
            let rss = gw.rss_kib() as f64 / 1024.0;
            let p99 = ms(&all, 0.99);
            println!(
                "| {:.1} | {} | {} | {:.1} | {:.1} | {} | {:.1} | {:.0} | {} |",
                minute as f64 / 60.0,
                all.len(),
                w.errors,
                ms(&all, 0.5),
                p99,
                per_kind.join(" | "),
                rss,
                cpu_share,
                proc_stat::loadavg(),
            );
            for e in &w.first_errors {
                eprintln!("  error: {e}");
            }
            rows.push(Summary {
                rss_mib: rss,
                p99,
                errors: w.errors,
            });
            next_window += Duration::from_secs(window);
            if now >= end {
                break;
            }
        }
        let kind = i % KINDS.len();
        i += 1;
        let Ok(permit) = in_flight.clone().try_acquire_owned() else {
            record(
                &shared,
                kind,
                Err(format!("{max_in_flight} operations still in flight")),
            );
            continue;
        };
        let (client, url, shared) = (client.clone(), url.clone(), shared.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let r = match tokio::time::timeout(OP_TIMEOUT, operation(kind, client, url)).await {
                Ok(r) => r,
                Err(_) => Err(format!("no end within {OP_TIMEOUT:?}")),
            };
            record(&shared, kind, r);
        });
    }
    // Let the last operations finish (bounded) so nothing is cut off.
    let _ = tokio::time::timeout(OP_TIMEOUT, in_flight.acquire_many(max_in_flight as u32)).await;
    let late = std::mem::take(&mut *shared.lock().unwrap());
    if late.errors > 0 {
        eprintln!(
            "errors after the last window: {} ({:?})",
            late.errors, late.first_errors
        );
        rows.push(Summary {
            rss_mib: gw.rss_kib() as f64 / 1024.0,
            p99: 0.0,
            errors: late.errors,
        });
    }
    for p in gw.problems().iter().take(10) {
        eprintln!("gateway: {p}");
    }
    println!(
        "gateway peak RSS {:.1} MiB",
        gw.peak_rss_kib() as f64 / 1024.0
    );
    rows
}

fn main() {
    let secs = common::env_u64("SOAK_SECS", 1800);
    let rate = common::env_u64("SOAK_RATE", 20);
    let window = common::env_u64("SOAK_WINDOW_SECS", 60).max(1);
    let max_in_flight = common::env_u64("SOAK_MAX_IN_FLIGHT", 512) as usize;
    let store = std::env::var("BENCH_STORE").unwrap_or_else(|_| "sqlite://{dir}/soak.db".into());
    println!(
        "machine: {} cores; load before: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        proc_stat::loadavg()
    );
    let rows = common::runtime().block_on(soak(secs, rate, window, max_in_flight, store));
    let errors: usize = rows.iter().map(|r| r.errors).sum();
    // Flatness: the RSS after the first fifth of the run (warm-up) against the end.
    let warm = rows.len() / 5;
    if let (Some(w), Some(last)) = (rows.get(warm), rows.last()) {
        let p99_max = rows.iter().skip(warm).map(|r| r.p99).fold(0.0, f64::max);
        println!(
            "RSS after warm-up (window {}) {:.1} MiB, at the end {:.1} MiB ({:+.1} MiB); highest p99 after warm-up {:.1} ms; errors {}",
            warm + 1,
            w.rss_mib,
            last.rss_mib,
            last.rss_mib - w.rss_mib,
            p99_max,
            errors
        );
    }
    println!("load after: {}", proc_stat::loadavg());
    if errors > 0 {
        std::process::exit(1);
    }
}
