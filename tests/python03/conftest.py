"""Fixtures for the A2A 0.3 client tests: the process helpers of tests/python/interop.py
(which imports no SDK at module level), a real BedrockAgentCoreApp upstream run by the
Python of .venv (``A2A_GATEWAY_TEST_PYTHON``), and `a2a-gateway serve` in front of it."""

import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from interop import (  # noqa: E402
    TEST_TIMEOUT_SECS,
    gateway_serve_missing,
    start_gateway,
    start_upstream_agent,
)


@pytest.fixture(scope="module")
def gateway_url():
    missing = gateway_serve_missing()
    if missing:
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


@pytest.fixture(autouse=True)
def _bounded_in_time():
    """Fail (instead of hanging) any test that runs longer than TEST_TIMEOUT_SECS."""

    def on_alarm(signum, frame):
        raise TimeoutError(f"test exceeded {TEST_TIMEOUT_SECS} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TEST_TIMEOUT_SECS)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
