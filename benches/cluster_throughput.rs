//! Throughput of two gateway instances against one on one PostgreSQL (issue 12), with
//! real `a2a-gateway serve` processes. A fake AgentCore runtime in this process
//! answers every invocation at once (a one-word JSON reply), so the figures are the
//! gateway's and the store's cost per task, not an agent's.
//!
//! Each phase starts 1 or 2 `serve` processes (`[store] cluster = true`, a fresh
//! schema of the database at `A2A_GATEWAY_TEST_POSTGRES_URL`, the default pool of 10)
//! and drives them for `BENCH_SECS` (default 10) with `BENCH_CLIENTS` (default 32)
//! clients, each sending blocking JSON-RPC `SendMessage` (a new task and context
//! each, so no task waits for a runtime session) to instance `client % n` over its
//! own keep-alive connection. Per phase it prints tasks/s and CPU time per task
//! (utime + stime from `/proc/PID/stat`, which do not depend on other load): of the
//! gateway processes, of the PostgreSQL backends serving them (found by
//! `application_name`; the server's shared WAL writer and checkpointer are not
//! counted), and of this process (load generator and fake runtime). The phases
//! alternate `1, 2, 1, 2, …` for `BENCH_ROUNDS` rounds (default 2), so compare the
//! ratio within one run.
//!
//! Run: `A2A_GATEWAY_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test
//! cargo bench --bench cluster_throughput`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use a2a_gateway::test_util::{GatewayProcess, PgSchema, proc_stat};
use a2a_gateway::upstream::mock::{MockReply, MockRuntime};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");
const APP_NAME: &str = "a2a-bench-throughput";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// utime + stime of `pid` in seconds.
fn cpu_secs(pid: u32) -> Option<f64> {
    proc_stat::cpu_time(pid).map(|t| t.as_secs_f64())
}

/// This process's CPU time (user + system), in seconds.
fn self_cpu() -> f64 {
    cpu_secs(std::process::id()).unwrap_or(0.0)
}

/// `a2a-gateway serve` named `name` on the store at `store_url`, in front of `upstream`;
/// it logs warnings and its start line only.
fn start_gateway(name: &str, upstream: &str, store_url: &str) -> GatewayProcess {
    GatewayProcess::init(BIN)
        .listen("127.0.0.1:0")
        .env("RUST_LOG", "warn,a2a_gateway::cli=info")
        .env("A2A_GATEWAY_STORE__INSTANCE_NAME", name)
        .env("A2A_GATEWAY_STORE__URL", store_url)
        .env("A2A_GATEWAY_UPSTREAM__URL", upstream)
        .env("A2A_GATEWAY_UPSTREAM__AUTH__KIND", "none")
        .arg("serve")
        .start()
}

/// The PostgreSQL backends serving the gateways, with their CPU seconds.
async fn backends(admin: &sqlx::PgPool) -> HashMap<u32, f64> {
    let pids: Vec<i32> =
        sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE application_name = $1")
            .bind(APP_NAME)
            .fetch_all(admin)
            .await
            .unwrap();
    pids.into_iter()
        .filter_map(|p| Some((p as u32, cpu_secs(p as u32)?)))
        .collect()
}

struct Phase {
    instances: usize,
    tasks: u64,
    secs: f64,
    gateway_cpu: f64,
    pg_cpu: f64,
    self_cpu: f64,
}

async fn phase(
    instances: usize,
    clients: usize,
    secs: u64,
    upstream: &str,
    store_url: &str,
    admin: &sqlx::PgPool,
) -> Phase {
    let gateways: Vec<GatewayProcess> = (0..instances)
        .map(|i| start_gateway(&format!("gw{i}"), upstream, store_url))
        .collect();
    let urls: Vec<String> = gateways.iter().map(|g| g.url.clone()).collect();
    // Warm-up: one task per client, not counted.
    let http: Vec<reqwest::Client> = (0..clients)
        .map(|_| {
            reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .build()
                .unwrap()
        })
        .collect();
    for (i, c) in http.iter().enumerate() {
        send(c, &urls[i % instances]).await;
    }
    let gw_before: f64 = gateways.iter().filter_map(|g| cpu_secs(g.pid())).sum();
    let pg_before = backends(admin).await;
    let me_before = self_cpu();
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let workers: Vec<_> = http
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let (url, done, stop) = (urls[i % instances].clone(), done.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    send(&c, &url).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let took = started.elapsed().as_secs_f64();
    let gw_after: f64 = gateways.iter().filter_map(|g| cpu_secs(g.pid())).sum();
    let pg_after = backends(admin).await;
    let me_after = self_cpu();
    let pg_cpu = pg_after
        .iter()
        .map(|(pid, t)| t - pg_before.get(pid).copied().unwrap_or(0.0))
        .sum();
    for line in gateways.iter().flat_map(|g| g.problems()) {
        eprintln!("gateway: {line}");
    }
    drop(gateways);
    Phase {
        instances,
        tasks: done.load(Ordering::Relaxed),
        secs: took,
        gateway_cpu: gw_after - gw_before,
        pg_cpu,
        self_cpu: me_after - me_before,
    }
}

/// One blocking SendMessage; panics unless the task COMPLETED.
async fn send(c: &reqwest::Client, url: &str) {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {
            "messageId": uuid::Uuid::new_v4().to_string(),
            "role": "ROLE_USER",
            "parts": [{"text": "hello"}],
        }},
    });
    let r: Value = c
        .post(url)
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let state = &r["result"]["task"]["status"]["state"];
    assert_eq!(state, "TASK_STATE_COMPLETED", "{r}");
}

/// The runtime: the crate's scripted one, unrecorded, answering every invocation at once
/// with the JSON string `"hi"`.
async fn fake_runtime() -> MockRuntime {
    let runtime = MockRuntime::start_unrecorded().await;
    runtime.answer_with(|_| MockReply::Json(json!("hi")));
    runtime
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(url) = std::env::var("A2A_GATEWAY_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("set A2A_GATEWAY_TEST_POSTGRES_URL");
        return;
    };
    let secs = env_u64("BENCH_SECS", 10);
    let clients = env_u64("BENCH_CLIENTS", 32) as usize;
    let rounds = env_u64("BENCH_ROUNDS", 2);
    let admin = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let runtime = fake_runtime().await;
    let upstream = runtime.url();
    let mut rows = vec![];
    for _ in 0..rounds {
        for instances in [1, 2] {
            let Some(schema) = PgSchema::create("bench_cluster_throughput").await else {
                return;
            };
            let store_url = format!("{}&application_name={APP_NAME}", schema.url());
            let load = proc_stat::loadavg();
            let p = phase(instances, clients, secs, &upstream, &store_url, &admin).await;
            schema.close().await;
            let per = |cpu: f64| cpu / p.tasks as f64 * 1000.0;
            println!(
                "instances={} tasks={} tasks/s={:.1} gateway_cpu_ms/task={:.2} postgres_cpu_ms/task={:.2} bench_cpu_ms/task={:.2} load_before={}",
                p.instances,
                p.tasks,
                p.tasks as f64 / p.secs,
                per(p.gateway_cpu),
                per(p.pg_cpu),
                per(p.self_cpu),
                load
            );
            rows.push(p);
        }
    }
    for pair in rows.chunks(2) {
        if let [one, two] = pair {
            println!(
                "round: two/one throughput ratio = {:.2}",
                (two.tasks as f64 / two.secs) / (one.tasks as f64 / one.secs)
            );
        }
    }
}
