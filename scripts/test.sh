#!/usr/bin/env bash
# Runs every check and test of a2a-gateway on a fresh machine:
#   - a Python venv (.venv) with the real peers: the official A2A SDK client and the
#     bedrock-agentcore runtime app (tests/python/requirements.txt);
#   - formatting and clippy;
#   - the Rust unit and integration tests, PostgreSQL ones against
#     $A2A_GATEWAY_TEST_POSTGRES_URL (default: the local server at 127.0.0.1:5432);
#   - the interop tests (tests/python, pytest): the official a2a-sdk client (JSON-RPC and
#     REST transports; push notifications verified with `standardwebhooks` and
#     `cryptography`) and the official JavaScript client (@a2a-js/sdk, tests/js, installed
#     with `npm ci`) drive the example binaries and `a2a-gateway serve` over real sockets;
#     a real OpenID provider (oidc-provider, tests/oidc, `npm ci`) issues the JWTs the
#     a2a-sdk client sends to a JWT-authenticated `serve`.
#   - tests/observability.rs runs the PromQL queries of docs/operations.md on a real
#     Prometheus (`prometheus` on PATH, or A2A_GATEWAY_TEST_PROMETHEUS; .ci/run installs the
#     Debian package; without it that part is skipped with a note unless CI=true).
#   - tests/cluster_processes.rs runs three `a2a-gateway serve` on one PostgreSQL behind
#     HAProxy (`haproxy`, the Debian package .ci/run installs; skipped with a note
#     without it unless CI=true) in front of the bedrock-agentcore app of the venv.
#   - the A2A 0.3 client tests (tests/python03, pytest): the last a2a-sdk 0.3.x release,
#     in its own venv (.venv03, tests/python/requirements-03.txt), drives `a2a-gateway serve`.
#   - tests/python/test_a2a_agents.py proves the upstream A2A agents of tests/a2a_agents
#     (a2a-sdk 1.x from .venv, a2a-sdk 0.3 and bedrock-agentcore on it from .venv03) and
#     tests/js/a2a_agent.mjs (@a2a-js/sdk on Express) with the official client.
set -euo pipefail
cd "$(dirname "$0")/.."

# .venv is (re)installed when it lacks a peer or tests/python/requirements.txt changed
# since it was installed (its hash is kept in .venv/requirements.sha256), so a new or
# re-pinned package reaches an existing .venv too.
requirements_hash=$(sha256sum tests/python/requirements.txt | cut -d' ' -f1)
if [ "$(cat .venv/requirements.sha256 2>/dev/null)" != "$requirements_hash" ] \
  || ! .venv/bin/python -c 'import a2a, bedrock_agentcore, grpc, pytest, pytest_asyncio, opentelemetry.proto, standardwebhooks, cryptography, moto, flask_cors' 2>/dev/null; then
  echo "== installing .venv with the Python test peers (tests/python/requirements.txt)"
  python3 -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -r tests/python/requirements.txt
  echo "$requirements_hash" > .venv/requirements.sha256
fi
# (uvicorn and bedrock_agentcore: the 0.3 upstream agents of tests/a2a_agents run from .venv03.)
if ! .venv03/bin/python -c 'import a2a.types, pytest, pytest_asyncio, uvicorn, bedrock_agentcore; from importlib.metadata import version; assert version("a2a-sdk").startswith("0.3.")' 2>/dev/null; then
  echo "== creating .venv03 with the A2A 0.3 client (a2a-sdk 0.3.x)"
  python3 -m venv .venv03
  .venv03/bin/pip install --quiet --upgrade pip
  .venv03/bin/pip install --quiet -r tests/python/requirements-03.txt
fi
export A2A_GATEWAY_TEST_PYTHON="$PWD/.venv/bin/python"
# The official JavaScript SDK (@a2a-js/sdk, pinned in tests/js/package-lock.json): its
# client, and its server on Express (the upstream agent tests/js/a2a_agent.mjs).
if [ ! -d tests/js/node_modules/@a2a-js/sdk ] || [ ! -d tests/js/node_modules/express ]; then
  echo "== npm ci in tests/js (the JavaScript A2A client and server)"
  (cd tests/js && npm ci --no-audit --no-fund --silent)
fi
# A real OpenID provider (oidc-provider, pinned in tests/oidc/package-lock.json) issuing the
# client-credentials JWTs of tests/python/test_interop_oidc.py.
if [ ! -d tests/oidc/node_modules/oidc-provider ]; then
  echo "== npm ci in tests/oidc (the OpenID provider)"
  (cd tests/oidc && npm ci --no-audit --no-fund --silent)
fi
# PostgreSQL tests use the local server when one answers; without one they are
# skipped with a note (under CI=true they fail instead: .ci/run starts the server).
if [ -z "${A2A_GATEWAY_TEST_POSTGRES_URL:-}" ]; then
  if [ "${CI:-}" = "true" ] || pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    export A2A_GATEWAY_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:5432/test"
  else
    echo "note: no PostgreSQL at 127.0.0.1:5432; its tests will be skipped"
  fi
fi

# Every test skipped for a missing peer appends a line here (test_util::skip); the
# summary at the end prints them, whatever the outcome, since cargo hides a passing
# test's notes.
skips_file="$(mktemp "${TMPDIR:-/tmp}/a2a-gateway-skips.XXXXXX")"
export A2A_GATEWAY_TEST_SKIPS="$skips_file"
summary() {
  status=$?
  echo "== summary"
  if [ -s "$skips_file" ]; then
    echo "SKIPPED for a missing peer ($(wc -l <"$skips_file") tests; CI=true makes them fail):"
    sed 's/^/  - /' "$skips_file"
  else
    echo "no test skipped for a missing peer"
  fi
  rm -f "$skips_file"
  if [ "$status" -eq 0 ]; then echo "all checks passed"; else echo "FAILED (exit $status)"; fi
}
trap summary EXIT

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets --all-features -- -D warnings
echo "== cargo test"
cargo test --all-features --no-fail-fast
echo "== cargo build --examples --bins (binaries for the interop tests)"
cargo build --all-features --examples --bins
echo "== pytest tests/python (official a2a-sdk client against our binaries)"
.venv/bin/python -m pytest -q tests/python
echo "== pytest tests/python03 (the A2A 0.3 a2a-sdk client against a2a-gateway serve)"
.venv03/bin/python -m pytest -q tests/python03
