#!/usr/bin/env bash
# Instructions per request of benches/sigv4_overhead.rs, bearer against sigv4, under
# valgrind's callgrind: counts that repeat to a fraction of a percent however busy the
# machine is, unlike wall-clock throughput.
#
#   bash bench/sigv4_callgrind.sh                  # builds the bench (release), 64 clients
#   CG_BIN=/tmp/old-sigv4_overhead bash bench/sigv4_callgrind.sh   # another build, no build
#   CG_SMALL=200 CG_LARGE=2200 CG_CLIENTS=64 CG_OUT=/tmp/cg bash bench/sigv4_callgrind.sh
#
# For each mode the bench runs twice (BENCH_MODES=<mode>, one round, BENCH_REQUESTS=
# CG_SMALL then CG_LARGE); the difference of the two runs' total instructions over the
# difference of their requests is the mode's cost per request, with the start-up, the
# warm-up and the shutdown cancelled out. Whole process: both gateways' runtime, the mock
# runtime and the load generator. The callgrind.out files stay in CG_OUT for
# callgrind_annotate (e.g. `callgrind_annotate --inclusive=yes CG_OUT/sigv4-2200.out`).
set -euo pipefail
cd "$(dirname "$0")/.."

SMALL="${CG_SMALL:-200}"
LARGE="${CG_LARGE:-2200}"
CLIENTS="${CG_CLIENTS:-64}"
OUT="${CG_OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
BIN="${CG_BIN:-}"
if [ -z "$BIN" ]; then
    BIN="$(cargo bench --bench sigv4_overhead --no-run --message-format=json 2>/dev/null \
        | sed -n 's/.*"executable":"\([^"]*sigv4_overhead[^"]*\)".*/\1/p' | tail -1)"
fi
[ -x "$BIN" ] || { echo "no bench binary ($BIN)" >&2; exit 1; }

total() { # the instruction total of a callgrind.out file
    sed -n 's/^totals: *\([0-9]*\).*/\1/p; s/^summary: *\([0-9]*\).*/\1/p' "$1" | head -1
}

echo "binary: $BIN; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| mode | instructions, $SMALL requests | instructions, $LARGE requests | per request |"
echo "|---|---:|---:|---:|"
for mode in bearer sigv4; do
    for n in "$SMALL" "$LARGE"; do
        BENCH_MODES="$mode" BENCH_ROUNDS=1 BENCH_CLIENTS="$CLIENTS" BENCH_REQUESTS="$n" \
            valgrind --tool=callgrind --callgrind-out-file="$OUT/$mode-$n.out" \
            "$BIN" --bench >"$OUT/$mode-$n.log" 2>&1
    done
    a="$(total "$OUT/$mode-$SMALL.out")"
    b="$(total "$OUT/$mode-$LARGE.out")"
    echo "| $mode | $a | $b | $(( (b - a) / (LARGE - SMALL) )) |"
done
echo "callgrind.out files: $OUT"
