#!/usr/bin/env bash
# Blocking SendMessage at 64 connections: the gateway against its floor, side by side
# in one run, with an external load generator (wrk).
#
#   bash bench/floor.sh                       # 3 rounds of 10 s per side
#   FLOOR_ROUNDS=5 FLOOR_SECS=5 FLOOR_CONNECTIONS=64 bash bench/floor.sh
#   FLOOR_PROFILE=debug FLOOR_SECS=1 bash bench/floor.sh   # only checks the script works
#   FLOOR_BIN=/tmp/before bash bench/floor.sh  # another build's `floor` and `serve_hello_world`
#                                              # (copied from its target/release/examples), no build
#
# The floor is examples/floor.rs (bare axum: parse the JSON-RPC SendMessage body into
# the gateway's types, answer a fixed Task); the gateway is examples/serve_hello_world.rs
# (`a2a-gateway serve` as assembled from the default configuration, memory store, with
# the hello-world agent instead of an upstream). Both are release builds, started once;
# wrk (one thread) then loads them alternately, floor first, round after round, so the
# two sides see the same machine. For each side it prints requests/s, p50 and p99 (from
# wrk --latency), and the server process's own CPU time per request (utime+stime from
# /proc/PID/stat, which does not depend on what else runs), then the ratios.
#
# Needs wrk (Debian: apt-get install wrk). The gateway's log (one info line per
# request, as `serve` writes it) goes to a file in a temporary directory.
set -euo pipefail
if [ -n "${FLOOR_BIN:-}" ]; then
    FLOOR_BIN="$(realpath "$FLOOR_BIN")"
fi
cd "$(dirname "$0")/.."

ROUNDS="${FLOOR_ROUNDS:-3}"
SECS="${FLOOR_SECS:-10}"
CONNS="${FLOOR_CONNECTIONS:-64}"
FLOOR_PORT="${FLOOR_PORT:-19990}"
GATEWAY_PORT="${FLOOR_GATEWAY_PORT:-19991}"

if ! command -v wrk >/dev/null; then
    echo "bench/floor.sh needs wrk (Debian: apt-get install wrk)" >&2
    exit 1
fi
PROFILE="${FLOOR_PROFILE:-release}"
if [ -n "${FLOOR_BIN:-}" ]; then
    bin="$FLOOR_BIN"
    for b in floor serve_hello_world; do
        [ -x "$bin/$b" ] || { echo "FLOOR_BIN: no executable $bin/$b" >&2; exit 1; }
    done
elif [ "$PROFILE" = release ]; then
    cargo build --release --example floor --example serve_hello_world >&2
    bin="target/$PROFILE/examples"
else
    cargo build --example floor --example serve_hello_world >&2
    bin="target/$PROFILE/examples"
fi

tmp="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

cat >"$tmp/send.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}'
LUA

"$bin/floor" --listen "127.0.0.1:$FLOOR_PORT" >"$tmp/floor.log" 2>&1 &
pids+=($!)
floor_pid=$!
A2A_GATEWAY_STORE__URL=memory: "$bin/serve_hello_world" --listen "127.0.0.1:$GATEWAY_PORT" \
    >"$tmp/gateway.log" 2>&1 &
pids+=($!)
gateway_pid=$!

body="$(sed -n "s/^wrk.body = '\(.*\)'$/\1/p" "$tmp/send.lua")"
for port in "$FLOOR_PORT" "$GATEWAY_PORT"; do
    for _ in $(seq 100); do
        if curl -sf -o /dev/null "http://127.0.0.1:$port/" -H 'content-type: application/json' -d "$body"; then
            break
        fi
        sleep 0.1
    done
    answer="$(curl -sf "http://127.0.0.1:$port/" -H 'content-type: application/json' -d "$body")"
    case "$answer" in
    *TASK_STATE_COMPLETED*) ;;
    *) echo "127.0.0.1:$port does not answer a COMPLETED task: $answer" >&2; exit 1 ;;
    esac
done

# utime + stime of a process, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz="$(getconf CLK_TCK)"

# A wrk latency figure (e.g. 812.00us, 3.21ms, 1.02s) in milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n *= 1; else if (v ~ /s$/) n *= 1000
        printf "%.3f", n
    }'
}

# Runs wrk for SECS against port $1 (server pid $2); prints "rps p50_ms p99_ms cpu_us_per_req".
load() {
    local port="$1" pid="$2" before after out rps p50 p99 n
    before="$(cpu_ticks "$pid")"
    out="$(wrk -t1 -c"$CONNS" -d"${SECS}s" --latency -s "$tmp/send.lua" "http://127.0.0.1:$port/")"
    after="$(cpu_ticks "$pid")"
    if grep -q 'Non-2xx' <<<"$out" || grep -q 'Socket errors' <<<"$out"; then
        echo "wrk saw errors against 127.0.0.1:$port:" >&2
        echo "$out" >&2
        exit 1
    fi
    rps="$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")"
    n="$(awk '/requests in/ {print $1}' <<<"$out")"
    p50="$(to_ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")"
    p99="$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")"
    awk -v r="$rps" -v a="$p50" -v b="$p99" -v t=$((after - before)) -v hz="$hz" -v n="$n" \
        'BEGIN { printf "%.0f %s %s %.1f\n", r, a, b, t * 1e6 / hz / n }'
}

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(uname -r)"
if [ -n "${FLOOR_BIN:-}" ]; then
    echo "binaries: $FLOOR_BIN (not this checkout's build)"
else
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src examples Cargo.toml Cargo.lock || echo ' (with local changes)')"
fi
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "${FLOOR_BIN:-}" ] || echo "build: $PROFILE"
echo "wrk -t1 -c$CONNS -d${SECS}s, $ROUNDS rounds, floor then gateway in each"
# Warm-up: connections, allocator, the gateway's store.
wrk -t1 -c"$CONNS" -d2s -s "$tmp/send.lua" "http://127.0.0.1:$FLOOR_PORT/" >/dev/null
wrk -t1 -c"$CONNS" -d2s -s "$tmp/send.lua" "http://127.0.0.1:$GATEWAY_PORT/" >/dev/null

echo
echo "| round | floor req/s | gateway req/s | gateway / floor | floor p50 | gateway p50 | floor p99 | gateway p99 | gateway p99 / floor p99 | floor CPU/req | gateway CPU/req |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
ratios=()
p99s=()
for round in $(seq "$ROUNDS"); do
    read -r f_rps f_p50 f_p99 f_cpu < <(load "$FLOOR_PORT" "$floor_pid")
    read -r g_rps g_p50 g_p99 g_cpu < <(load "$GATEWAY_PORT" "$gateway_pid")
    ratio="$(awk -v g="$g_rps" -v f="$f_rps" 'BEGIN {printf "%.2f", g / f}')"
    p99r="$(awk -v g="$g_p99" -v f="$f_p99" 'BEGIN {printf "%.1f", g / f}')"
    ratios+=("$ratio")
    p99s+=("$p99r")
    echo "| $round | $f_rps | $g_rps | **$ratio** | $f_p50 ms | $g_p50 ms | $f_p99 ms | $g_p99 ms | **$p99r** | $f_cpu µs | $g_cpu µs |"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
echo
echo "median gateway / floor throughput: $(median "${ratios[@]}") (target at least 0.5)"
echo "median gateway p99 / floor p99: $(median "${p99s[@]}") (target at most 2)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
