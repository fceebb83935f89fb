//! Memory per open stream (issue 14): the release `a2a-gateway serve` as its own
//! process, in front of a local upstream (benches/support/hold_upstream.rs) that sends
//! one chunk of every reply and then holds it open. N SSE clients each start a
//! streaming task (SendStreamingMessage) and wait until they saw that chunk; the
//! gateway's resident memory (`VmRSS`) before and while the N tasks are open gives
//! the growth per task. Then the upstream lets every reply finish, every client must
//! see its task end, and the RSS is read again.
//!
//! Cases (`BENCH_CASES`, comma-separated; default all):
//! - `h2`: the upstream over HTTP/2 (h2c), every reply a stream of few connections;
//! - `h1`: the upstream over HTTP/1.1, one upstream connection per task;
//! - `subscribe`: one open task and N idle SubscribeToTask subscribers of it;
//!
//! and with the suffix `-mux` (`h2-mux`, `h1-mux`, `subscribe-mux`) the clients
//! multiplex their streams over HTTP/2 connections to the gateway (at most 150 each)
//! instead of one HTTP/1.1 connection per client, which separates what a task or
//! subscriber costs from what a client connection costs.
//!
//! `BENCH_TASKS` is N (default 10000); `BENCH_STORE` the task store URL (default
//! `memory:`). A case runs with fewer tasks when the open-file limit (`ulimit -n`,
//! inherited by the gateway) does not allow N: `h1` needs two files per task in the
//! gateway (client and upstream connection) and in this process (client and upstream
//! side), `h2`, `subscribe` and `h1-mux` one, the other `-mux` cases next to none.
//! Only loopback is used.
//!
//! Run: `bash bench/stream_memory.sh` (it raises the soft open-file limit to the hard one).

#[path = "support/hold_upstream.rs"]
mod hold_upstream;

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use a2a_gateway::test_util::proc_stat;
use a2a_gateway::test_util::user_message as message;
use futures::StreamExt;
use hold_upstream::{HELD_TEXT, HoldUpstream};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// Tasks or subscribers opened and held before the baseline is read, so pools,
/// allocator arenas and lazily built state are already there.
const WARM_UP: usize = 200;
/// Streams being opened at once (the rest wait), so the accept queue never overflows.
const OPENING: usize = 256;
/// Streams per HTTP/2 client connection in the `-mux` cases (the gateway's HTTP/2
/// default allows 200 at once).
const PER_H2_CONNECTION: usize = 150;
/// How long opening or finishing N streams may take.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// Pause before reading the RSS, so in-flight work settles.
const SETTLE: Duration = Duration::from_secs(3);

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Stream,
    Subscribe,
}

struct Case {
    name: String,
    kind: Kind,
    upstream_http: &'static str,
    mux: bool,
}

fn parse_case(name: &str) -> Option<Case> {
    let (base, mux) = match name.strip_suffix("-mux") {
        Some(b) => (b, true),
        None => (name, false),
    };
    let (kind, upstream_http) = match base {
        "h2" => (Kind::Stream, "http2"),
        "h1" => (Kind::Stream, "http1"),
        "subscribe" => (Kind::Subscribe, "http2"),
        _ => return None,
    };
    Some(Case {
        name: name.to_owned(),
        kind,
        upstream_http,
        mux,
    })
}

impl Case {
    /// The most tasks the open-file `limit` allows (see the module doc), warm-up and
    /// a margin left aside.
    fn max_tasks(&self, limit: usize) -> usize {
        let per_task = match (self.kind, self.upstream_http, self.mux) {
            (Kind::Stream, "http1", false) => 2,
            (_, _, false) | (Kind::Stream, "http1", true) => 1,
            _ => return usize::MAX,
        };
        (limit.saturating_sub(1000) / per_task).saturating_sub(WARM_UP)
    }
}

/// The clients: one HTTP/1.1 client (a connection per open stream), or HTTP/2
/// clients with prior knowledge, each used for at most [`PER_H2_CONNECTION`] streams.
struct Clients {
    all: Vec<reqwest::Client>,
    mux: bool,
}

impl Clients {
    fn new(mux: bool, n: usize) -> Clients {
        let count = if mux {
            n.div_ceil(PER_H2_CONNECTION).max(1)
        } else {
            1
        };
        let all = (0..count)
            .map(|_| {
                let b = reqwest::Client::builder()
                    .tcp_nodelay(true)
                    .pool_idle_timeout(Duration::from_secs(5));
                if mux {
                    b.http2_prior_knowledge()
                } else {
                    b.http1_only()
                }
                .build()
                .unwrap()
            })
            .collect();
        Clients { all, mux }
    }

    fn get(&self, i: usize) -> &reqwest::Client {
        if self.mux {
            &self.all[i / PER_H2_CONNECTION]
        } else {
            &self.all[0]
        }
    }
}

fn rpc_body(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// Counters shared by the client tasks of one phase.
#[derive(Default)]
struct Progress {
    ready: AtomicUsize,
    done: AtomicUsize,
    errors: AtomicUsize,
}

/// Opens one SSE stream (`body` to the gateway), reports it ready once `marker`
/// arrived (releasing `permit`), then reads it to its end.
async fn hold_stream(
    client: reqwest::Client,
    url: String,
    body: Value,
    marker: &'static [u8],
    permit: tokio::sync::OwnedSemaphorePermit,
    progress: Arc<Progress>,
) {
    let mut permit = Some(permit);
    let resp = client
        .post(&url)
        .header("a2a-version", "1.0")
        .header("accept", "text/event-stream")
        .json(&body)
        .send()
        .await;
    let resp = match resp {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            let status = r.status();
            let text = r.text().await.unwrap_or_default();
            if progress.errors.fetch_add(1, Ordering::Relaxed) < 3 {
                eprintln!("stream refused: {status} {text}");
            }
            return;
        }
        Err(e) => {
            if progress.errors.fetch_add(1, Ordering::Relaxed) < 3 {
                eprintln!("stream failed: {e}");
            }
            return;
        }
    };
    let mut bytes = resp.bytes_stream();
    let mut seen: Vec<u8> = Vec::new();
    let mut failed = false;
    while let Some(chunk) = bytes.next().await {
        let Ok(chunk) = chunk else {
            failed = true;
            break;
        };
        if permit.is_some() {
            seen.extend_from_slice(&chunk);
            if seen.windows(marker.len()).any(|w| w == marker) {
                progress.ready.fetch_add(1, Ordering::Relaxed);
                permit = None;
                seen = Vec::new();
            }
        }
        if chunk.windows(8).any(|w| w == b"\"error\"") {
            failed = true;
        }
    }
    if failed || permit.is_some() {
        progress.errors.fetch_add(1, Ordering::Relaxed);
    }
    progress.done.fetch_add(1, Ordering::Relaxed);
}

/// Waits until `count()` reaches `n` (or errors make that impossible), printing
/// progress every 10 s. Returns false on timeout.
async fn wait_for(
    what: &str,
    n: usize,
    progress: &Progress,
    count: impl Fn(&Progress) -> usize,
) -> bool {
    let start = Instant::now();
    let mut last_print = Instant::now();
    loop {
        let c = count(progress);
        let errors = progress.errors.load(Ordering::Relaxed);
        if c + errors >= n {
            return true;
        }
        if start.elapsed() > PHASE_TIMEOUT {
            eprintln!("{what}: timed out at {c}/{n} ({errors} errors)");
            return false;
        }
        if last_print.elapsed() > Duration::from_secs(10) {
            eprintln!("  {what}: {c}/{n} ({errors} errors)");
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Opens `n` streams of `case` (stream indexes `first..first + n` into `clients`) and
/// waits until each is ready.
async fn open_streams(
    case: &Case,
    clients: &Clients,
    url: &str,
    task_id: Option<&str>,
    first: usize,
    n: usize,
) -> (Arc<Progress>, Vec<tokio::task::JoinHandle<()>>, bool) {
    let progress = Arc::new(Progress::default());
    let opening = Arc::new(Semaphore::new(OPENING));
    let mut joins = Vec::with_capacity(n);
    for i in first..first + n {
        let permit = opening.clone().acquire_owned().await.unwrap();
        let (body, marker): (Value, &'static [u8]) = match case.kind {
            Kind::Stream => (
                rpc_body("SendStreamingMessage", json!({"message": message("hold")})),
                HELD_TEXT.as_bytes(),
            ),
            // The first event of a subscription is the task's snapshot.
            Kind::Subscribe => (
                rpc_body("SubscribeToTask", json!({"id": task_id.unwrap()})),
                b"\n\n",
            ),
        };
        joins.push(tokio::spawn(hold_stream(
            clients.get(i).clone(),
            url.to_owned(),
            body,
            marker,
            permit,
            progress.clone(),
        )));
    }
    let ok = wait_for("open", n, &progress, |p| p.ready.load(Ordering::Relaxed)).await;
    (progress, joins, ok)
}

/// One row of the report.
struct Row {
    case: String,
    n: usize,
    base_kib: u64,
    held_kib: u64,
    after_kib: u64,
    fds: usize,
    upstream_conns: usize,
    upstream_open: usize,
    errors: usize,
    open_secs: f64,
}

async fn run_case(case: &Case, n: usize, store: &str) -> Row {
    let upstream = HoldUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store_url = store.replace("{dir}", &dir.path().display().to_string());
    let env = [
        ("A2A_GATEWAY_UPSTREAM__URL", upstream.url.clone()),
        ("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "none".into()),
        (
            "A2A_GATEWAY_UPSTREAM__HTTP_VERSION",
            case.upstream_http.into(),
        ),
        ("A2A_GATEWAY_UPSTREAM__MAX_RETRIES", "0".into()),
        (
            "A2A_GATEWAY_UPSTREAM__STOP_SESSION_ON_CANCEL",
            "false".into(),
        ),
        ("A2A_GATEWAY_STORE__URL", store_url),
        (
            "A2A_GATEWAY_SERVER__MAX_CONCURRENT_TASKS",
            (n + WARM_UP + 100).to_string(),
        ),
        // One caller runs every task: its share is the whole.
        (
            "A2A_GATEWAY_SERVER__MAX_TASKS_PER_CALLER",
            (n + WARM_UP + 100).to_string(),
        ),
        (
            "A2A_GATEWAY_SERVER__MAX_CONNECTIONS",
            (n + WARM_UP + 1000).to_string(),
        ),
        // Warnings only, and the line naming the address.
        (
            "A2A_GATEWAY_LOG__LEVEL",
            "warn,a2a_gateway::cli::serve=info".into(),
        ),
    ];
    let gw = common::serve(common::BIN, dir.path(), &env);
    let url = gw.url.clone();
    let clients = Clients::new(case.mux, n + WARM_UP);

    // The one task the subscribers follow, held open by the upstream.
    let mut task_id = None;
    if case.kind == Kind::Subscribe {
        let resp: Value = clients
            .get(0)
            .post(&url)
            .header("a2a-version", "1.0")
            .json(&rpc_body(
                "SendMessage",
                json!({"message": message("hold"), "configuration": {"returnImmediately": true}}),
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = resp["result"]["task"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no task: {resp}"));
        task_id = Some(id.to_owned());
        let start = Instant::now();
        while upstream.open_replies() == 0 && start.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    // Warm-up: the same kind of stream, held and then dropped.
    let (warm, warm_joins, _) =
        open_streams(case, &clients, &url, task_id.as_deref(), n, WARM_UP).await;
    if case.kind == Kind::Stream {
        upstream.release();
        wait_for("warm-up end", WARM_UP, &warm, |p| {
            p.done.load(Ordering::Relaxed)
        })
        .await;
        upstream.hold();
    } else {
        for j in &warm_joins {
            j.abort();
        }
    }
    for j in warm_joins {
        let _ = j.await;
    }
    tokio::time::sleep(SETTLE).await;
    let base_kib = gw.rss_kib();

    let started = Instant::now();
    let (progress, joins, _) = open_streams(case, &clients, &url, task_id.as_deref(), 0, n).await;
    let open_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let held_kib = gw.rss_kib();
    let fds = gw.open_fds();
    let upstream_conns = upstream.connections();
    let upstream_open = upstream.open_replies();

    upstream.release();
    wait_for("end", n, &progress, |p| p.done.load(Ordering::Relaxed)).await;
    for j in joins {
        let _ = j.await;
    }
    drop(clients);
    tokio::time::sleep(SETTLE).await;
    let after_kib = gw.rss_kib();
    let problems = gw.problems();
    for p in problems.iter().take(5) {
        eprintln!("gateway: {p}");
    }
    Row {
        case: case.name.clone(),
        n,
        base_kib,
        held_kib,
        after_kib,
        fds,
        upstream_conns,
        upstream_open,
        errors: progress.errors.load(Ordering::Relaxed),
        open_secs,
    }
}

fn main() {
    let n = common::env_u64("BENCH_TASKS", 10_000) as usize;
    let store = std::env::var("BENCH_STORE").unwrap_or_else(|_| "memory:".into());
    let cases: Vec<Case> = common::env_list("BENCH_CASES", "h2,h1,subscribe,h2-mux,subscribe-mux")
        .iter()
        .map(|c| parse_case(c).unwrap_or_else(|| panic!("unknown case {c}")))
        .collect();
    let limit = proc_stat::open_file_limit() as usize;
    println!(
        "load before: {}, open-file limit {limit}",
        proc_stat::loadavg()
    );
    println!(
        "| case | tasks | RSS before (MiB) | RSS open (MiB) | KiB per task | RSS after end (MiB) | gateway fds | upstream conns | upstream replies open | errors | open time (s) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let rt = common::runtime();
    for case in &cases {
        let n = n.min(case.max_tasks(limit));
        if n == 0 {
            println!("| {} | skipped: open-file limit {limit} |", case.name);
            continue;
        }
        let r = rt.block_on(run_case(case, n, &store));
        let per = (r.held_kib as f64 - r.base_kib as f64) / r.n as f64;
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {} | {:.1} |",
            r.case,
            r.n,
            r.base_kib as f64 / 1024.0,
            r.held_kib as f64 / 1024.0,
            per,
            r.after_kib as f64 / 1024.0,
            r.fds,
            r.upstream_conns,
            r.upstream_open,
            r.errors,
            r.open_secs,
        );
    }
    println!("load after: {}", proc_stat::loadavg());
}
