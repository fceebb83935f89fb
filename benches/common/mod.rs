//! What the load benchmarks share: their environment knobs, the 2-worker runtimes
//! (one for the servers, one for the load generator), percentiles, and the gateway as a
//! child process.
#![allow(dead_code)]

pub mod a2a_agent;
pub mod thread_cpu;

use std::path::Path;
use std::time::Duration;

use a2a_gateway::test_util::GatewayProcess;

/// This build's gateway binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");

/// The process allocator: mimalloc as in the `a2a-gateway` binary (feature `mimalloc`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `name` as a number, or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// `name` as a comma-separated list, or `default` (same form).
pub fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// `BENCH_CLIENTS` (or `default`) as client counts.
pub fn clients(default: &str) -> Vec<usize> {
    env_list("BENCH_CLIENTS", default)
        .iter()
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// A multi-thread runtime with 2 workers (the machines have 2 cores).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The `p` quantile (0..=1) of sorted durations; zero when there are none.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// `a2a-gateway serve` (the binary at `bin`: [`BIN`], or another build measured side by
/// side) as a child process in `dir`, on `127.0.0.1:0`, with exactly `env` (plus `PATH`;
/// an entry of `env` overrides the listen address), once it listens. `BENCH_WRAP` (e.g.
/// `heaptrack -o /tmp/gw`) runs it under that command for profiling; its figures (RSS,
/// CPU) are then the wrapper's, not the gateway's. Killed on drop.
pub fn serve(bin: &str, dir: &Path, env: &[(&str, String)]) -> GatewayProcess {
    GatewayProcess::init(bin)
        .wrapper(&std::env::var("BENCH_WRAP").unwrap_or_default())
        .current_dir(dir)
        .listen("127.0.0.1:0")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .arg("serve")
        .start()
}
