#!/usr/bin/env bash
# Puts a2a-gateway in front of the TCK agent (tests/tck/agent.py, a real
# BedrockAgentCoreApp) on loopback ports and, given a conformance kit checkout, runs it.
#
#   tests/tck/run.sh                          # start both, print the SUT URL, wait for Ctrl-C
#   TCK_DIR=/path/to/kit tests/tck/run.sh [run_tck.py options...]
#                                             # ... and run the kit's run_tck.py against it
#
# Environment:
#   TCK_DIR       a checkout of the kit (its run_tck.py is started from there); this
#                 script never installs or fetches anything
#   TCK_PYTHON    Python that has the kit's dependencies (default: $TCK_DIR/.venv/bin/python,
#                 else python3)
#   AGENT_PYTHON  Python with bedrock-agentcore (default: .venv/bin/python, as made by
#                 scripts/test.sh)
#   GATEWAY_BIN   the gateway binary (default: target/release/a2a-gateway, else target/debug)
#   GATEWAY_PORT, AGENT_PORT   loopback ports (default: 9999 and 9998)
#   TCK_STREAMING_TIMEOUT      passed to both the agent and the kit (default 2.0)
#   TCK_V03_CARD_FIELDS        agent.v03_card_fields for the run (default true, the
#                              gateway's default; false leaves the A2A 0.3 card fields out
#                              of the unversioned card too)
# The gateway's log is written to $WORK/gateway.log, the agent's to $WORK/agent.log; $WORK
# is a fresh temporary directory, printed at the start and removed at the end unless
# KEEP_WORK=1.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"

agent_python="${AGENT_PYTHON:-$repo/.venv/bin/python}"
if [ -z "${GATEWAY_BIN:-}" ]; then
  if [ -x "$repo/target/release/a2a-gateway" ]; then
    GATEWAY_BIN="$repo/target/release/a2a-gateway"
  else
    GATEWAY_BIN="$repo/target/debug/a2a-gateway"
  fi
fi
gateway_port="${GATEWAY_PORT:-9999}"
agent_port="${AGENT_PORT:-9998}"
export TCK_STREAMING_TIMEOUT="${TCK_STREAMING_TIMEOUT:-2.0}"

[ -x "$GATEWAY_BIN" ] || { echo "no gateway binary at $GATEWAY_BIN (cargo build --release)" >&2; exit 2; }
"$agent_python" -c 'import bedrock_agentcore' 2>/dev/null \
  || { echo "$agent_python has no bedrock_agentcore (bash scripts/test.sh makes .venv)" >&2; exit 2; }
if [ -n "${TCK_DIR:-}" ]; then
  [ -f "$TCK_DIR/run_tck.py" ] || { echo "TCK_DIR=$TCK_DIR has no run_tck.py" >&2; exit 2; }
  if [ -z "${TCK_PYTHON:-}" ]; then
    if [ -x "$TCK_DIR/.venv/bin/python" ]; then TCK_PYTHON="$TCK_DIR/.venv/bin/python"; else TCK_PYTHON=python3; fi
  fi
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/a2a-gateway-tck.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "${KEEP_WORK:-}" = 1 ]; then echo "logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() { # URL NAME LOG
  for _ in $(seq 1 300); do
    if curl -fsS -o /dev/null "$1" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "$2 did not come up at $1; its log:" >&2
  cat "$3" >&2
  exit 1
}

echo "work directory: $work"
"$agent_python" "$repo/tests/tck/agent.py" "$agent_port" >"$work/agent.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$agent_port/ping" agent "$work/agent.log"

cat >"$work/gateway.toml" <<TOML
[server]
listen = "127.0.0.1:$gateway_port"

[agent]
name = "a2a-gateway TCK agent"
description = "The TCK agent (tests/tck/agent.py) behind a2a-gateway."
version = "1.0.0"
# The gateway's default unless TCK_V03_CARD_FIELDS says otherwise.
v03_card_fields = ${TCK_V03_CARD_FIELDS:-true}

[[agent.skills]]
id = "tck"
name = "TCK conformance"
description = "Answers the conformance kit's scenarios, chosen by messageId prefix."
tags = ["tck"]

[store]
url = "memory:"

[upstream]
url = "http://127.0.0.1:$agent_port/invocations"
include_message = true

[upstream.auth]
kind = "none"

[push]
# The kit's webhook receiver listens on plain HTTP on loopback, which the gateway
# refuses by default (https only; loopback behind the SSRF guard).
allow_http = true
allow_cidrs = ["127.0.0.0/8", "::1/128"]

[log]
level = "info"
TOML
"$GATEWAY_BIN" serve --config "$work/gateway.toml" >"$work/gateway.log" 2>&1 &
pids+=($!)
sut="http://127.0.0.1:$gateway_port"
wait_for "$sut/.well-known/agent-card.json" gateway "$work/gateway.log"
echo "SUT URL: $sut"

if [ -z "${TCK_DIR:-}" ]; then
  echo "gateway and agent are up; Ctrl-C stops them"
  wait "${pids[@]}"
  exit 0
fi

cd "$TCK_DIR"
status=0
# tck_raw_results (ours, tests/tck) also writes reports/raw-results.json for summarize.py.
PYTHONPATH="$repo/tests/tck${PYTHONPATH:+:$PYTHONPATH}" PYTEST_ADDOPTS="-p tck_raw_results ${PYTEST_ADDOPTS:-}" \
  "$TCK_PYTHON" run_tck.py --sut-host "$sut" "$@" || status=$?
echo "kit exit status: $status; reports in $TCK_DIR/reports"
"$TCK_PYTHON" "$repo/tests/tck/summarize.py" "$TCK_DIR"
exit "$status"
