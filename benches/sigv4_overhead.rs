//! What SigV4 upstream authentication (`[upstream.auth] kind = "sigv4"`) costs against a
//! static bearer token: blocking JSON-RPC `SendMessage` at 64 clients through the
//! AgentCore executor to a local runtime, over real sockets on 127.0.0.1, the two modes
//! alternating in one run.
//!
//! The runtime is the crate's `MockRuntime` (an AgentCore-style `/invocations` on
//! 127.0.0.1 answering a JSON string), not the botocore-verifying double of `tests/aws/`:
//! that Python process would be the bottleneck and hide the gateway's cost. The mock
//! checks no signature; that every request was signed (`AWS4-HMAC-SHA256`) or carried
//! the bearer is checked after each point on what it received. The SigV4 credentials
//! come from a fixed provider (temporary keys with a session token, no expiry) through
//! the gateway's own credential cache, as the chain's would after the first fetch.
//!
//! Two gateways run side by side in this process (one runtime), each with its own
//! executor and in-memory store; the load generator has a runtime of its own. The modes
//! alternate (`bearer`, `sigv4`, `bearer`, …) for `BENCH_ROUNDS` rounds so that drifts
//! of the shared machine hit both; each row gives throughput and the process's CPU time
//! per request (`/proc/self/stat`).
//!
//! Run: `cargo bench --bench sigv4_overhead` with `BENCH_SECS` (per round and mode,
//! default 5), `BENCH_CLIENTS` (default `64`), `BENCH_ROUNDS` (default 3).
//!
//! For instruction counts (`valgrind --tool=callgrind`, repeatable on a busy machine):
//! `BENCH_REQUESTS=n` makes each point exactly `n` requests instead of `BENCH_SECS`
//! seconds (and the warm-up exactly 256 per mode), and `BENCH_MODES` (`bearer`,
//! `sigv4` or both, comma-separated) picks the modes run. Two runs of one mode with
//! different `n` give its instructions per request: the difference of their totals over
//! the difference of their requests (`bench/sigv4_callgrind.sh`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use a2a_gateway::server;
use a2a_gateway::store::open_store;
use a2a_gateway::transport::{AppState, TransportConfig};
use a2a_gateway::upstream::auth::{Credentials, SigV4, SigV4Settings, StaticBearer};
use a2a_gateway::upstream::mock::MockRuntime;
use a2a_gateway::upstream::{AgentCoreExecutor, AgentCoreSettings};
use a2a_gateway::{HandlerConfig, RequestHandler};
use aws_credential_types::provider::SharedCredentialsProvider;
use secrecy::SecretString;

mod common;
use common::percentile;

/// This process's CPU time so far (all its threads).
fn process_cpu() -> Duration {
    a2a_gateway::test_util::proc_stat::cpu_time(std::process::id()).unwrap_or_default()
}

/// The modes measured, in the order they alternate.
const MODES: [&str; 2] = ["bearer", "sigv4"];

fn credentials(mode: &str) -> Arc<dyn Credentials> {
    match mode {
        "bearer" => Arc::new(StaticBearer::new(SecretString::from(
            "eyJhbGciOiJSUzI1NiJ9.bench-token-of-a-realistic-length-0123456789abcdef.sig",
        ))),
        _ => Arc::new(SigV4::with_provider(
            SigV4Settings {
                region: "us-east-1".into(),
                assume_role: None,
                refresh_before_expiry: Duration::from_secs(300),
            },
            SharedCredentialsProvider::new(aws_credential_types::Credentials::new(
                "ASIABENCHEXAMPLE0001",
                "bench/Secret+Access/Key0123456789EXAMPLE",
                Some(
                    "IQoJb3JpZ2luX2VjEBench-session-token-of-a-realistic-length-0123456789"
                        .repeat(8),
                ),
                None,
                "bench",
            )),
        )),
    }
}

async fn gateway(runtime: &MockRuntime, mode: &str) -> String {
    let mut s = AgentCoreSettings::for_url(runtime.url());
    s.max_retries = 0;
    let executor = AgentCoreExecutor::with_credentials(s, credentials(mode)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let handler = RequestHandler::new(
        Arc::new(executor),
        open_store("memory:", 10).await.unwrap(),
        HandlerConfig::default(),
    );
    let card = server::simple_card("bench", "sigv4 bench", &url, vec![]);
    let app = server::router(
        AppState::new(handler, card, TransportConfig::default()),
        None,
    );
    tokio::spawn(server::serve(listener, app, std::future::pending()));
    url
}

struct Point {
    requests: usize,
    rps: f64,
    p50: Duration,
    p99: Duration,
}

/// How long a point runs: for a time, or for exactly a number of requests.
#[derive(Clone, Copy)]
enum Length {
    Secs(u64),
    Requests(usize),
}

async fn run_point(url: &str, clients: usize, length: Length) -> Point {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let (deadline, budget) = match length {
        Length::Secs(secs) => (Instant::now() + Duration::from_secs(secs), usize::MAX),
        // Far enough: the request count ends the point.
        Length::Requests(n) => (Instant::now() + Duration::from_secs(86_400), n),
    };
    let left = Arc::new(AtomicUsize::new(budget));
    let started = Instant::now();
    let mut joins = Vec::new();
    for c in 0..clients {
        let http = http.clone();
        let url = url.to_owned();
        let left = left.clone();
        joins.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = c * 1_000_000;
            let take = || {
                left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
            };
            while Instant::now() < deadline && take() {
                i += 1;
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{i},"method":"SendMessage","params":{{"message":{{"messageId":"m{i}","role":"ROLE_USER","parts":[{{"text":"hello {i}"}}]}}}}}}"#
                );
                let t0 = Instant::now();
                let resp = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("a2a-version", "1.0")
                    .body(body)
                    .send()
                    .await
                    .expect("request");
                assert!(resp.status().is_success(), "HTTP {}", resp.status());
                let text = resp.text().await.expect("body");
                assert!(text.contains("TASK_STATE_COMPLETED"), "{text}");
                lat.push(t0.elapsed());
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for j in joins {
        all.extend(j.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    Point {
        requests: all.len(),
        rps: all.len() as f64 / elapsed,
        p50: percentile(&all, 0.5),
        p99: percentile(&all, 0.99),
    }
}

/// What the runtime of `mode` received last carries the mode's authentication.
fn check_signed(runtime: &MockRuntime, mode: &str) {
    let last = runtime.invocations().pop().expect("an invocation");
    let auth = last.header("authorization").unwrap_or_default().to_owned();
    let expected = if mode == "sigv4" {
        "AWS4-HMAC-SHA256 Credential=ASIABENCHEXAMPLE0001/"
    } else {
        "Bearer "
    };
    assert!(auth.starts_with(expected), "{mode}: {auth}");
}

fn main() {
    let length = match common::env_u64("BENCH_REQUESTS", 0) {
        0 => Length::Secs(common::env_u64("BENCH_SECS", 5)),
        n => Length::Requests(usize::try_from(n).expect("BENCH_REQUESTS fits a usize")),
    };
    let warm_up = match length {
        Length::Secs(_) => Length::Secs(1),
        Length::Requests(_) => Length::Requests(256),
    };
    let modes = common::env_list("BENCH_MODES", "bearer,sigv4");
    assert!(
        modes.iter().all(|m| MODES.contains(&m.as_str())),
        "BENCH_MODES: {modes:?}, expected some of {MODES:?}"
    );
    let run = |mode: &str| modes.iter().any(|m| m == mode);
    let rounds = common::env_u64("BENCH_ROUNDS", 3);
    let clients = common::clients("64");
    let server_rt = common::runtime();
    let client_rt = common::runtime();
    let (runtimes, urls) = server_rt.block_on(async {
        let runtimes = [MockRuntime::start().await, MockRuntime::start().await];
        let urls = [
            gateway(&runtimes[0], MODES[0]).await,
            gateway(&runtimes[1], MODES[1]).await,
        ];
        (runtimes, urls)
    });
    for (m, url) in urls.iter().enumerate() {
        if run(MODES[m]) {
            client_rt.block_on(run_point(url, 4, warm_up));
        }
    }
    println!("| clients | round | auth | requests/s | CPU per request | p50 | p99 |");
    println!("|---:|---:|---|---:|---:|---:|---:|");
    for &c in &clients {
        let mut totals = [(0.0f64, Duration::ZERO, 0usize); 2];
        for round in 1..=rounds {
            for (m, mode) in MODES.into_iter().enumerate() {
                if !run(mode) {
                    continue;
                }
                let cpu0 = process_cpu();
                let p = client_rt.block_on(run_point(&urls[m], c, length));
                let cpu = process_cpu().saturating_sub(cpu0);
                check_signed(&runtimes[m], mode);
                totals[m].0 += p.rps;
                totals[m].1 += cpu;
                totals[m].2 += p.requests;
                println!(
                    "| {c} | {round} | {mode} | {:.0} | {:.0} µs | {:.2} ms | {:.2} ms |",
                    p.rps,
                    cpu.as_secs_f64() * 1e6 / p.requests.max(1) as f64,
                    p.p50.as_secs_f64() * 1e3,
                    p.p99.as_secs_f64() * 1e3
                );
            }
        }
        let per_req = |t: &(f64, Duration, usize)| t.1.as_secs_f64() * 1e6 / t.2.max(1) as f64;
        if !MODES.iter().all(|m| run(m)) {
            continue;
        }
        println!(
            "| {c} | mean | sigv4 vs bearer | {:.1}% | {:+.0} µs | | |",
            100.0 * totals[1].0 / totals[0].0.max(f64::MIN_POSITIVE),
            per_req(&totals[1]) - per_req(&totals[0])
        );
    }
}
