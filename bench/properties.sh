#!/usr/bin/env bash
# Runs the property (fuzz) tests far longer than `cargo test` does: every property's
# case count times SCALE (default 100). The properties: the JSON-RPC envelope, the
# Last-Event-ID, page-token and config parsers (tests/properties.rs), and the upstream
# SSE/JSON reply translator with control objects (tests/upstream_reply_props.rs), and the
# SigV4 signer's fast path against the aws-sigv4 crate's sign (tests/sigv4_signer_props.rs).
# A failure prints the shrunk input; proptest records it under tests/*.proptest-regressions,
# and it becomes a regression test when that file is committed.
#   bash bench/properties.sh [SCALE]
set -euo pipefail
cd "$(dirname "$0")/.."
scale="${1:-100}"
export A2A_GATEWAY_PROPTEST_SCALE="$scale" PROPTEST_CASES=$((256 * scale))
cargo test --all-features --test properties --test upstream_reply_props --test sigv4_signer_props --no-run
start=$(date +%s)
cargo test --all-features --test properties --test upstream_reply_props --test sigv4_signer_props -- --test-threads=2
echo "cases x$scale in $(( $(date +%s) - start )) s"
