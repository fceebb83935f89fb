#!/usr/bin/env bash
# Reruns every benchmark behind BENCHMARKS.md, one after the other (never in
# parallel: the machine has 2 cores), and prints the machine and load first.
#   bash bench/run-all.sh            # all
#   BENCH_SECS=3 bash bench/run-all.sh
# PostgreSQL figures need A2A_GATEWAY_TEST_POSTGRES_URL (default: the local server).
set -euo pipefail
cd "$(dirname "$0")/.."
export A2A_GATEWAY_TEST_POSTGRES_URL="${A2A_GATEWAY_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(uname -r)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
cargo bench --no-run --benches >/dev/null 2>&1 || cargo bench --no-run --benches
echo "== SendMessage / SendStreamingMessage, hello-world executor (issue: core)"
BENCH_BINDING="${BENCH_BINDING:-jsonrpc,rest}" BENCH_STORE="${BENCH_STORE:-memory,sqlite,sqlite-normal,postgres}" cargo bench --bench send_message 2>/dev/null
echo "== gateway added latency over a local upstream (issue: AgentCore executor)"
cargo bench --bench upstream_overhead 2>/dev/null
echo "== gateway CPU per relayed chunk event, the serve binary as its own process (issue 14)"
cargo bench --bench event_cpu 2>/dev/null
echo "== JWT bearer authentication (cached keys) against none (issue 11)"
cargo bench --bench auth_overhead 2>/dev/null
cargo bench --bench sigv4_overhead 2>/dev/null
echo "== store write cost"
cargo bench --bench store_write -- --warm-up-time 1 --measurement-time 3 2>/dev/null | grep -E 'time:|stream profile|^store_write|^\|' || true
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
