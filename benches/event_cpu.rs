//! Gateway CPU per relayed chunk event: `a2a-gateway serve` (the release binary, a
//! process of its own) in front of a local upstream (the crate's `MockRuntime`, not
//! recording) whose `/invocations` answers every prompt with an SSE reply of `BENCH_CHUNKS` `data:` frames; `BENCH_CLIENTS`
//! clients send `SendStreamingMessage` (JSON-RPC) until `BENCH_TASKS` tasks have been
//! relayed, each client reading its whole stream. The figure is the gateway process's
//! own CPU time (user + system, from `/proc/<pid>/stat`, so it does not depend on what
//! else shares the cores; the upstream and the clients run in this bench process)
//! divided by the artifact-chunk events the clients received. Each row also gives the
//! gateway's peak resident memory during the round (`VmHWM`, reset before the round
//! by writing 5 to `/proc/<pid>/clear_refs`) and its growth over the resident memory at
//! the round's start, in MiB: what the replies in flight cost at their peak.
//!
//! Every event is still stored before any client sees it (the gateway's normal path;
//! nothing here changes it). The gateway runs with its defaults (push sender on,
//! `sqlite_synchronous = "full"`) except `log.level = "warn"` (no per-request log
//! line; the start line is kept) and the store.
//!
//! Run: `cargo bench --bench event_cpu` with, in the environment:
//!
//! - `BENCH_STORE`: a comma-separated list of `memory`, `sqlite`, `sqlite-normal`,
//!   `postgres` (default `memory,sqlite`); each gets a fresh gateway process and a
//!   fresh store (a SQLite file in a temporary directory; a PostgreSQL schema at
//!   `A2A_GATEWAY_TEST_POSTGRES_URL`, dropped afterwards, skipped when unset);
//! - `BENCH_TASKS` (default 80), `BENCH_CLIENTS` (default 8), `BENCH_CHUNKS` (default
//!   1000), `BENCH_ROUNDS` (default 3: measured rounds per store, after one warm-up
//!   round of `BENCH_CLIENTS` tasks);
//! - `BENCH_FRAME_BYTES`: the length of each frame's JSON string, in bytes (default 0:
//!   the short text of about 35 characters); e.g. `BENCH_TASKS=1 BENCH_CLIENTS=1
//!   BENCH_CHUNKS=30000 BENCH_FRAME_BYTES=2000` is one reply of 60 MB, for the
//!   peak-memory column;
//! - `BENCH_SETTLE_SECS` (default 1): how long after a round and a `GetTask` of one of
//!   its tasks the gateway's RSS is read for the last column (what stays resident
//!   while it is idle);
//! - `BENCH_UPSTREAM_HTTP`: the gateway's `upstream.http_version` (default `auto`, that
//!   is HTTP/1.1 on plain http; `http2` for h2c as with AgentCore);
//! - `BENCH_UPSTREAM`: a comma-separated list of upstream kinds (default `agentcore`):
//!   `agentcore`, the SSE reply above on the AgentCore contract, and `a2a`, the same
//!   chunks from a fake A2A 1.0 agent (its card at `/.well-known/agent-card.json`,
//!   JSON-RPC `SendStreamingMessage` at `/` answered by an SSE stream of a task, one
//!   `artifactUpdate` per chunk and a COMPLETED `statusUpdate`, each echoing the request's
//!   id) run by the gateway's `kind = "a2a"`: the two rows compare the gateway's CPU per
//!   relayed chunk event by upstream kind;
//! - `BENCH_GATEWAYS`: other gateway binaries to run side by side with this build's, as
//!   comma-separated `label=path` entries (`this=` names this build's binary), e.g.
//!   `before=/tmp/a2a-gateway-before,this=`; default: this build's only;
//! - `BENCH_LIST=1`: after the rounds, one more row: every task listed with its
//!   artifacts (`ListTasks`, `includeArtifacts`, `pageSize` 100, page after page), with
//!   the pages, the bytes received and the gateway's peak RSS while it answered (a page
//!   is bounded by `server.max_list_page_bytes`, 4 MiB by default);
//! - `BENCH_RESUME=N`: after the rounds, one more row: `N` concurrent `SubscribeToTask`
//!   resumes of the round's last task from its start (`Last-Event-ID: 0`), each reading
//!   the whole replay, with the events and bytes received and the gateway's peak RSS
//!   while it replayed (what the subscribers' reads from the store hold at once);
//! - `BENCH_PERF=DIR`: also record the gateway with `perf record -F 999 -g` during the
//!   measured rounds into `DIR/event_cpu-<store>.data` (see BENCHMARKS.md for the
//!   report command); `BENCH_PERF_ARGS` replaces `-F 999 -g` (e.g. `-F 999 --call-graph
//!   dwarf,16384` for whole stacks of a build without frame pointers).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use a2a_gateway::test_util::{GatewayProcess, PgSchema, proc_stat};
use a2a_gateway::upstream::mock::{MockReply, MockRuntime};
use serde_json::json;

mod common;

/// The upstream's reply: `chunks` SSE frames, each a JSON string of about 35
/// characters (a few words of streamed text) or, when `frame_bytes` is larger, of
/// `frame_bytes` characters (padded with `x`), rendered once and shared by every reply.
fn reply_frames(chunks: usize, frame_bytes: usize) -> Arc<[axum::body::Bytes]> {
    MockReply::frames((0..chunks).map(|i| {
        let mut text = format!("chunk {i:05} of the streamed reply, ");
        if text.len() < frame_bytes {
            text.extend(std::iter::repeat_n('x', frame_bytes - text.len()));
        }
        json!(text)
    }))
}

/// The crate's scripted runtime, unrecorded, answering every invocation with
/// [`reply_frames`] and then the end of the body.
async fn start_upstream(chunks: usize, frame_bytes: usize) -> MockRuntime {
    let frames = reply_frames(chunks, frame_bytes);
    let runtime = MockRuntime::start_unrecorded().await;
    runtime.answer_with(move |_| MockReply::SseFrames(frames.clone()));
    runtime
}

/// The process's user and system CPU time so far (`/proc/<pid>/stat` fields 14 and
/// 15, which include its ended threads), in seconds.
fn cpu_secs(pid: u32, tick: f64) -> (f64, f64) {
    let (user, system) = proc_stat::cpu_ticks(pid).expect("/proc/pid/stat");
    (user as f64 / tick, system as f64 / tick)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux).
fn clock_tick() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// What one round relayed.
#[derive(Default)]
struct Relayed {
    tasks: usize,
    /// `artifactUpdate` events received.
    chunks: usize,
    /// The id of a task of the round.
    task_id: String,
}

/// Runs `tasks` streaming tasks through the gateway with `clients` concurrent
/// clients; checks that each ends COMPLETED with every chunk.
async fn round(url: &str, tasks: usize, clients: usize, chunks: usize) -> Relayed {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let next = Arc::new(AtomicUsize::new(0));
    let mut joins = Vec::new();
    for c in 0..clients {
        let (client, url, next) = (client.clone(), url.to_owned(), next.clone());
        joins.push(tokio::spawn(async move {
            let mut got = Relayed::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= tasks {
                    return got;
                }
                let body = json!({"jsonrpc": "2.0", "id": i, "method": "SendStreamingMessage",
                    "params": {"message": {"messageId": format!("m{c}-{i}-{}", a2a_gateway::executor::new_id()),
                        "role": "ROLE_USER", "parts": [{"text": format!("stream {c}-{i}")}]}}});
                let mut resp = client.post(&url).json(&body).send().await.expect("request");
                assert!(resp.status().is_success(), "{}", resp.status());
                let mut text = Vec::new();
                while let Some(chunk) = resp.chunk().await.expect("chunk") {
                    text.extend_from_slice(&chunk);
                }
                let text = String::from_utf8(text).expect("UTF-8");
                let relayed = text.matches("\"artifactUpdate\"").count();
                // The reply's chunks (plus, from an AgentCore reply, the final empty
                // `lastChunk` one).
                assert!(relayed == chunks || relayed == chunks + 1, "{relayed}: {}", &text[text.len().saturating_sub(600)..]);
                assert!(text.contains("TASK_STATE_COMPLETED"), "{}", &text[text.len().saturating_sub(600)..]);
                got.tasks += 1;
                got.chunks += relayed;
                let at = text.find("\"taskId\":\"").expect("a taskId") + 10;
                got.task_id = text[at..at + text[at..].find('"').expect("its end")].to_owned();
            }
        }));
    }
    let mut all = Relayed::default();
    for j in joins {
        let r = j.await.unwrap();
        all.tasks += r.tasks;
        all.chunks += r.chunks;
        if !r.task_id.is_empty() {
            all.task_id = r.task_id;
        }
    }
    all
}

/// Lists every task with its artifacts, page after page: (pages, tasks, body bytes).
async fn list_all(url: &str) -> (usize, usize, usize) {
    let client = reqwest::Client::new();
    let (mut pages, mut tasks, mut bytes, mut token) = (0, 0, 0, String::new());
    loop {
        let params = json!({"includeArtifacts": true, "pageSize": 100, "pageToken": token});
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params});
        let text = client
            .post(url)
            .json(&body)
            .send()
            .await
            .expect("ListTasks")
            .text()
            .await
            .expect("ListTasks body");
        let page: serde_json::Value = serde_json::from_str(&text).expect("ListTasks JSON");
        let result = &page["result"];
        pages += 1;
        bytes += text.len();
        tasks += result["tasks"].as_array().map_or(0, Vec::len);
        token = result["nextPageToken"].as_str().expect("a page").to_owned();
        if token.is_empty() {
            return (pages, tasks, bytes);
        }
    }
}

/// `n` concurrent resumes of task `id` from its start (`SubscribeToTask` with
/// `Last-Event-ID: 0`), each read to its end: (events, body bytes) over all of them.
async fn resume_all(url: &str, id: &str, n: usize) -> (usize, usize) {
    let client = reqwest::Client::new();
    let joins: Vec<_> = (0..n)
        .map(|i| {
            let (client, url) = (client.clone(), url.to_owned());
            let body = json!({"jsonrpc": "2.0", "id": i, "method": "SubscribeToTask", "params": {"id": id}});
            tokio::spawn(async move {
                let mut resp = client
                    .post(&url)
                    .header("last-event-id", "0")
                    .json(&body)
                    .send()
                    .await
                    .expect("SubscribeToTask");
                assert!(resp.status().is_success(), "{}", resp.status());
                let mut text = Vec::new();
                while let Some(chunk) = resp.chunk().await.expect("chunk") {
                    text.extend_from_slice(&chunk);
                }
                let text = String::from_utf8(text).expect("UTF-8");
                assert!(text.contains("TASK_STATE_COMPLETED"), "{}", &text[text.len().saturating_sub(600)..]);
                (text.matches("\n\n").count(), text.len())
            })
        })
        .collect();
    let (mut events, mut bytes) = (0, 0);
    for j in joins {
        let (e, b) = j.await.unwrap();
        events += e;
        bytes += b;
    }
    (events, bytes)
}

/// Runs `f` with the gateway's peak resident memory reset first (`VmHWM`), and gives its
/// result and a function making the rest of its table row from the bytes received: the
/// wall time, the megabytes received, and the peak RSS with its growth over the RSS
/// before, in MiB.
fn peak_during<T>(gw: &GatewayProcess, f: impl FnOnce() -> T) -> (T, impl Fn(usize) -> String) {
    gw.reset_peak_rss();
    let rss0 = gw.rss_kib();
    let t0 = Instant::now();
    let out = f();
    let wall = t0.elapsed().as_secs_f64();
    let peak = gw.peak_rss_kib();
    let line = move |bytes: usize| {
        format!(
            "{wall:.2} s | {:.1} MB received | | | {:.1} MiB (+{:.1}) |",
            bytes as f64 / 1e6,
            peak as f64 / 1024.0,
            peak.saturating_sub(rss0) as f64 / 1024.0,
        )
    };
    (out, line)
}

/// Reads task `id` back with `GetTask` and checks that it COMPLETED.
async fn get_task(url: &str, id: &str) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}});
    let resp = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("GetTask");
    let text = resp.text().await.expect("GetTask body");
    assert!(
        text.contains("TASK_STATE_COMPLETED"),
        "{}",
        &text[..text.len().min(600)]
    );
}

/// The environment of a gateway on store `kind`, or `None` (after a note).
fn store_env(
    kind: &str,
    dir: &std::path::Path,
    pg: Option<&PgSchema>,
) -> Option<Vec<(&'static str, String)>> {
    let db = dir.join("gateway.db").display().to_string();
    Some(match kind {
        "memory" => vec![("A2A_GATEWAY_STORE__URL", "memory:".into())],
        "sqlite" => vec![("A2A_GATEWAY_STORE__URL", format!("sqlite://{db}"))],
        "sqlite-normal" => vec![
            ("A2A_GATEWAY_STORE__URL", format!("sqlite://{db}")),
            ("A2A_GATEWAY_STORE__SQLITE_SYNCHRONOUS", "normal".into()),
        ],
        "postgres" => vec![
            ("A2A_GATEWAY_STORE__URL", pg?.url()),
            ("A2A_GATEWAY_STORE__CLUSTER", "false".into()),
        ],
        other => {
            eprintln!("unknown BENCH_STORE entry {other:?} skipped");
            return None;
        }
    })
}

fn main() {
    let stores = common::env_list("BENCH_STORE", "memory,sqlite");
    let tasks = common::env_u64("BENCH_TASKS", 80) as usize;
    let clients = common::env_u64("BENCH_CLIENTS", 8) as usize;
    let chunks = common::env_u64("BENCH_CHUNKS", 1000) as usize;
    let frame_bytes = common::env_u64("BENCH_FRAME_BYTES", 0) as usize;
    let rounds = common::env_u64("BENCH_ROUNDS", 3).max(1);
    let settle_secs = common::env_u64("BENCH_SETTLE_SECS", 1);
    let http = std::env::var("BENCH_UPSTREAM_HTTP").unwrap_or_else(|_| "auto".into());
    let perf = std::env::var("BENCH_PERF").ok();
    let gateways: Vec<(String, String)> = common::env_list("BENCH_GATEWAYS", "this=")
        .iter()
        .map(|e| {
            let (label, path) = e.split_once('=').unwrap_or((e, ""));
            let path = if path.is_empty() { common::BIN } else { path };
            (label.to_owned(), path.to_owned())
        })
        .collect();
    let tick = clock_tick();
    let rt = common::runtime();
    let kinds = common::env_list("BENCH_UPSTREAM", "agentcore");
    let runtime = rt.block_on(start_upstream(chunks, frame_bytes));
    let agentcore = runtime.url();
    let a2a = rt.block_on(common::a2a_agent::start(chunks, frame_bytes));
    println!(
        "{tasks} tasks x {chunks} chunks per round (frames of {} bytes), {clients} clients, \
         upstream http_version {http}; gateway CPU = utime + stime of its process",
        reply_frames(1, frame_bytes)[0].len()
    );
    println!(
        "| store | gateway | round | chunk events | wall | gateway CPU (user + sys) | CPU per chunk event | chunk events/s | peak RSS (growth) | RSS {settle_secs} s after a GetTask |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let gateways = &gateways;
    let points = kinds.iter().flat_map(|u| {
        stores
            .iter()
            .flat_map(move |k| gateways.iter().map(move |g| (u, k, g)))
    });
    for (upstream_kind, kind, (label, bin)) in points {
        {
            let upstream = match upstream_kind.as_str() {
                "a2a" => &a2a,
                "agentcore" => &agentcore,
                other => panic!("BENCH_UPSTREAM: unknown kind {other:?} (agentcore, a2a)"),
            };
            let label = if kinds.len() > 1 {
                format!("{label}, {upstream_kind}")
            } else {
                label.clone()
            };
            run_store(
                &rt,
                kind,
                &label,
                bin,
                (upstream_kind, upstream),
                &http,
                perf.as_deref(),
                tick,
                Shape {
                    tasks,
                    clients,
                    chunks,
                    rounds,
                    settle: Duration::from_secs(settle_secs),
                },
            );
        }
    }
}

/// The load of one measurement.
#[derive(Clone, Copy)]
struct Shape {
    tasks: usize,
    clients: usize,
    chunks: usize,
    rounds: u64,
    /// How long after a round the idle RSS is read.
    settle: Duration,
}

/// Measures gateway `bin` on store `kind`: a fresh process and store, a warm-up
/// round, then the measured rounds, one table row each.
#[allow(clippy::too_many_arguments)]
fn run_store(
    rt: &tokio::runtime::Runtime,
    kind: &str,
    label: &str,
    bin: &str,
    (upstream_kind, upstream): (&str, &str),
    http: &str,
    perf: Option<&str>,
    tick: f64,
    shape: Shape,
) {
    let Shape {
        tasks,
        clients,
        chunks,
        rounds,
        settle,
    } = shape;
    {
        let dir = tempfile::tempdir().unwrap();
        let pg = if kind == "postgres" {
            let pg = rt.block_on(PgSchema::create("bench_event_cpu"));
            if pg.is_none() {
                println!(
                    "| {kind} | skipped: A2A_GATEWAY_TEST_POSTGRES_URL unset | | | | | | | | |"
                );
                return;
            }
            pg
        } else {
            None
        };
        let Some(mut env) = store_env(kind, dir.path(), pg.as_ref()) else {
            return;
        };
        env.extend([
            ("A2A_GATEWAY_SERVER__LISTEN", "127.0.0.1:0".to_owned()),
            ("A2A_GATEWAY_UPSTREAM__KIND", upstream_kind.to_owned()),
            ("A2A_GATEWAY_UPSTREAM__URL", upstream.to_owned()),
            ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "none".into()),
            ("A2A_GATEWAY_UPSTREAM__HTTP_VERSION", http.to_owned()),
            // The start line ("listening on") is the one info line kept.
            (
                "A2A_GATEWAY_LOG__LEVEL",
                "warn,a2a_gateway::cli::serve=info".into(),
            ),
        ]);
        let gw = common::serve(bin, dir.path(), &env);
        // Warm-up: connections, the token-free upstream client, prepared statements.
        rt.block_on(round(&gw.url, clients, clients, chunks));
        let recorder = perf.map(|d| {
            let out = format!("{d}/event_cpu-{kind}-{label}.data");
            let args = std::env::var("BENCH_PERF_ARGS").unwrap_or_else(|_| "-F 999 -g".into());
            let child = Command::new("perf")
                .arg("record")
                .args(args.split_whitespace())
                .args(["-o", &out, "-p"])
                .arg(gw.pid().to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("perf record");
            std::thread::sleep(Duration::from_millis(500));
            child
        });
        let mut per_event = Vec::new();
        let mut last_task = String::new();
        for r in 1..=rounds {
            // Resets the peak resident memory (`VmHWM`) to the current one.
            gw.reset_peak_rss();
            let rss0 = gw.rss_kib();
            let (u0, s0) = cpu_secs(gw.pid(), tick);
            let t0 = Instant::now();
            let got = rt.block_on(round(&gw.url, tasks, clients, chunks));
            let wall = t0.elapsed().as_secs_f64();
            let (u1, s1) = cpu_secs(gw.pid(), tick);
            let (user, sys) = (u1 - u0, s1 - s0);
            let us = (user + sys) * 1e6 / got.chunks as f64;
            per_event.push(us);
            let peak = gw.peak_rss_kib();
            // What stays resident once the round's replies are done and one of its
            // tasks was read back whole (allocator caches and connection buffers
            // included): read `BENCH_SETTLE_SECS` after that GetTask.
            rt.block_on(get_task(&gw.url, &got.task_id));
            last_task.clone_from(&got.task_id);
            std::thread::sleep(settle);
            let after = gw.rss_kib();
            println!(
                "| {kind} | {label} | {r} | {} | {wall:.2} s | {:.2} s ({user:.2} + {sys:.2}) | **{us:.2} µs** | {:.0} | {:.1} MiB (+{:.1}) | {:.1} MiB |",
                got.chunks,
                user + sys,
                got.chunks as f64 / wall,
                peak as f64 / 1024.0,
                peak.saturating_sub(rss0) as f64 / 1024.0,
                after as f64 / 1024.0
            );
            assert_eq!(got.tasks, tasks);
        }
        if let Some(mut rec) = recorder {
            let _ = Command::new("kill")
                .args(["-INT", &rec.id().to_string()])
                .status();
            let _ = rec.wait();
        }
        if common::env_u64("BENCH_LIST", 0) == 1 {
            let ((pages, listed, bytes), line) =
                peak_during(&gw, || rt.block_on(list_all(&gw.url)));
            println!(
                "| {kind} | {label} | ListTasks with artifacts | {listed} tasks in {pages} pages | {} |",
                line(bytes)
            );
        }
        let resumes = common::env_u64("BENCH_RESUME", 0) as usize;
        if resumes > 0 {
            let ((events, bytes), line) = peak_during(&gw, || {
                rt.block_on(resume_all(&gw.url, &last_task, resumes))
            });
            println!(
                "| {kind} | {label} | {resumes} resumes from Last-Event-ID 0 | {events} events | {} |",
                line(bytes)
            );
        }
        per_event.sort_by(f64::total_cmp);
        println!(
            "| {kind} | {label} | median | | | | **{:.2} µs** | | | |",
            per_event[per_event.len() / 2]
        );
        drop(gw);
        if let Some(pg) = pg {
            rt.block_on(pg.close());
        }
    }
}
