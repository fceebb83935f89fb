#!/usr/bin/env bash
# Memory per open stream (issue 14): benches/stream_memory.rs with the open-file limit
# it needs (up to two files per task here and in the gateway; a case that does not fit runs with fewer tasks).
#   bash bench/stream_memory.sh                     # 10,000 tasks, every case
#   BENCH_TASKS=2000 BENCH_CASES=h2,subscribe bash bench/stream_memory.sh
# Cases: h2, h1 (the upstream's HTTP version), subscribe (idle SubscribeToTask
# subscribers of one task); with -mux the clients share HTTP/2 connections.
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n "$(ulimit -Hn)"
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(uname -r)"
echo "commit: $(git rev-parse --short HEAD), open-file limit $(ulimit -n)"
cargo bench --bench stream_memory --no-run
cargo bench --bench stream_memory
