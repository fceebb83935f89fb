"""The official A2A JavaScript client (@a2a-js/sdk, pinned in tests/js/package-lock.json and
installed by scripts/test.sh with `npm ci`) drives `a2a-gateway serve` in front of the real
`BedrockAgentCoreApp` (tests/python/upstream_agent.py), once on JSON-RPC and once on
HTTP+JSON: tests/js/client.mjs resolves the card, lets the SDK pick the interface, and runs a
blocking send, GetTask, ListTasks, a streamed send and two typed errors.

Without node or the installed package the tests are skipped locally and fail under CI=true.
"""

import json
import os
import shutil
import subprocess

import pytest

from interop import ROOT, gateway_serve_missing, start_gateway, start_upstream_agent

JS_DIR = ROOT / "tests" / "js"
PROMPT, REPLY = "string", "The answer is 42"


def js_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (JS_DIR / "node_modules" / "@a2a-js" / "sdk").is_dir():
        return "tests/js/node_modules is missing: run `npm ci` in tests/js (scripts/test.sh does)"
    return None


@pytest.fixture(scope="module")
def gateway_url():
    missing = js_missing() or gateway_serve_missing()
    if missing:
        assert os.environ.get("CI") != "true", missing
        pytest.skip(missing)
    upstream, invocations = start_upstream_agent()
    try:
        gateway, base = start_gateway(invocations)
    except BaseException:
        upstream.stop()
        raise
    yield base
    gateway.stop()
    upstream.stop()


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_js_client(gateway_url, binding):
    done = subprocess.run(
        ["node", "client.mjs", gateway_url, binding, PROMPT, REPLY],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, (done.stdout, done.stderr)
    report = json.loads(lines[-1])
    assert report["ok"] and report["binding"] == binding, report
    assert report["streamed"][0] == "task" and report["streamed"][-1] == "statusUpdate", report
    assert report["errors"] == ["TaskNotCancelableError", "TaskNotFoundError"]
