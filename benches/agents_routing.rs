//! What serving several agents costs (`[agents.<id>]`, issue 42): blocking JSON-RPC
//! `SendMessage` to one agent of a gateway that serves `BENCH_AGENTS` (default 100)
//! under their prefixes, against a gateway that serves one agent at `/`, both with the
//! hello-world executor on the in-memory store, over real sockets on 127.0.0.1, in one
//! run; then the memory one idle configured agent takes.
//!
//! The two gateways run side by side in this process (one runtime), built by
//! `Gateway::with_agents` as `serve` builds them. The agent measured is the last of the
//! table (`a099`), the one a request finds after every other prefix. The modes alternate
//! (`single`, `agents`, `single`, ...) for `BENCH_ROUNDS` rounds of `BENCH_SECS` each, so
//! drifts of the shared machine hit both; each row gives the throughput and the CPU time
//! of this process per request (load generator included).
//!
//! Memory (measured first, before any load): the RSS of this process before and after
//! building a gateway of
//! `BENCH_IDLE_AGENTS` (default 1,000) agents that nobody calls, divided by their number:
//! once on the hello-world executor (what the gateway itself keeps per agent: card,
//! handler, routes), once on the AgentCore executor `serve` builds (its HTTP client,
//! token cache and settings too; the upstream is never called).
//!
//! Run: `cargo bench --bench agents_routing` (`BENCH_SECS`, default 5; `BENCH_ROUNDS`,
//! default 3; `BENCH_CLIENTS`, default 16; `BENCH_AGENTS`; `BENCH_IDLE_AGENTS`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::agents::hello_world::HelloWorldAgentExecutor;
use a2a_gateway::app::Gateway;
use a2a_gateway::app::gateway::AgentParts;
use a2a_gateway::config::{AgentEntryConfig, Config};
use a2a_gateway::store::open_store;

mod common;

/// The process's CPU time so far (user + system), from `/proc/self/stat` (USER_HZ 100).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// A config serving `n` agents `a000`... (no agent at `/`), or the default one agent
/// at `/` when `n` is 0.
fn config(n: usize) -> Config {
    let mut config = Config::default();
    for i in 0..n {
        config
            .agents
            .insert(format!("a{i:03}"), AgentEntryConfig::default());
    }
    config.no_root_agent = n > 0;
    config
}

/// The gateway `config` describes, every agent on the hello-world executor, or with
/// `agentcore` on the AgentCore executor `serve` builds for it.
async fn build_with(config: &Config, agentcore: bool) -> Gateway {
    let store = open_store("memory:", 10).await.unwrap();
    let executor =
        || -> Arc<dyn a2a_gateway::AgentExecutor> { Arc::new(HelloWorldAgentExecutor::new()) };
    let parts = config
        .agents
        .iter()
        .map(|(id, entry)| AgentParts {
            id: id.clone(),
            executor: if agentcore {
                let agent = a2a_gateway::app::gateway::agent_config(config, id, entry);
                a2a_gateway::app::build_executor(&agent).unwrap().0
            } else {
                executor()
            },
            ready: None,
        })
        .collect();
    let root = config.serves_root_agent().then(|| (executor(), None));
    Gateway::with_agents(config, root, parts, store, None)
}

/// [`build_with`] on the hello-world executor.
async fn build(config: &Config) -> Gateway {
    build_with(config, false).await
}

/// Serves `config`'s gateway on 127.0.0.1:0; its URL.
async fn serve(config: Config) -> String {
    let gateway = build(&config).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(a2a_gateway::server::serve(
        listener,
        gateway.router,
        std::future::pending(),
    ));
    url
}

/// `clients` clients sending blocking SendMessage to `url` for `secs`; requests done
/// and requests per second.
async fn run(url: &str, clients: usize, secs: u64) -> (usize, f64) {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut joins = Vec::new();
    for c in 0..clients {
        let http = http.clone();
        let url = url.to_owned();
        joins.push(tokio::spawn(async move {
            let mut n = 0usize;
            while Instant::now() < deadline {
                let i = c * 1_000_000 + n;
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{i},"method":"SendMessage","params":{{"message":{{"messageId":"m{i}","role":"ROLE_USER","parts":[{{"text":"hello {i}"}}]}}}}}}"#
                );
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
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for j in joins {
        total += j.await.unwrap();
    }
    (total, total as f64 / started.elapsed().as_secs_f64())
}

/// Every agent's upstream: an AgentCore invocation URL nobody listens on (never called).
fn set_upstream(config: &mut Config) {
    for entry in config.agents.values_mut() {
        entry.upstream = toml::from_str("url = \"http://127.0.0.1:9/invocations\"").unwrap();
    }
}

/// This process's resident set, in KiB (`/proc/self/statm`, 4 KiB pages).
fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(0)
        * 4
}

fn main() {
    let secs = common::env_u64("BENCH_SECS", 5);
    let rounds = common::env_u64("BENCH_ROUNDS", 3);
    let agents = common::env_u64("BENCH_AGENTS", 100) as usize;
    let idle = common::env_u64("BENCH_IDLE_AGENTS", 1000) as usize;
    let clients = common::clients("16");
    let server_rt = common::runtime();
    let client_rt = common::runtime();

    // Memory of idle configured agents, first: before the load fills the memory stores.
    // Each gateway is kept until the end, so the next one cannot reuse its memory.
    let mut kept = Vec::new();
    for (name, agentcore) in [
        ("hello-world executor", false),
        ("AgentCore executor", true),
    ] {
        let (per_agent, before, after, gateway) = server_rt.block_on(async {
            let mut c = config(10);
            set_upstream(&mut c);
            drop(build_with(&c, agentcore).await);
            let mut c = config(idle);
            set_upstream(&mut c);
            let before = rss_kib();
            let gateway = build_with(&c, agentcore).await;
            let after = rss_kib();
            let per = (after.saturating_sub(before)) as f64 / idle as f64;
            (per, before, after, gateway)
        });
        kept.push(gateway);
        println!(
            "{idle} idle agents, {name}: RSS {before} KiB -> {after} KiB, {per_agent:.1} KiB per configured idle agent"
        );
    }
    println!();

    let (single, many) = server_rt.block_on(async {
        let single = serve(config(0)).await;
        let many = serve(config(agents)).await;
        (single, format!("{many}agents/a{:03}/", agents - 1))
    });
    // Warm both (connections, allocator).
    client_rt.block_on(run(&single, 4, 1));
    client_rt.block_on(run(&many, 4, 1));

    println!("| clients | round | gateway | requests/s | CPU per request |");
    println!("|---:|---:|---|---:|---:|");
    for &c in &clients {
        let mut totals = [(0.0f64, Duration::ZERO, 0usize); 2];
        for round in 1..=rounds {
            for (m, (name, url)) in [("single agent at /", &single), ("agent 100 of 100", &many)]
                .into_iter()
                .enumerate()
            {
                let cpu0 = cpu_time();
                let (n, rps) = client_rt.block_on(run(url, c, secs));
                let cpu = cpu_time().saturating_sub(cpu0);
                totals[m].0 += rps;
                totals[m].1 += cpu;
                totals[m].2 += n;
                println!(
                    "| {c} | {round} | {name} | {rps:.0} | {:.0} µs |",
                    cpu.as_secs_f64() * 1e6 / n.max(1) as f64
                );
            }
        }
        let per_req = |t: &(f64, Duration, usize)| t.1.as_secs_f64() * 1e6 / t.2.max(1) as f64;
        println!(
            "| {c} | mean | {agents} agents vs single | {:.1}% | {:+.1} µs |",
            100.0 * totals[1].0 / totals[0].0.max(f64::MIN_POSITIVE),
            per_req(&totals[1]) - per_req(&totals[0])
        );
    }
    drop(kept);
}
