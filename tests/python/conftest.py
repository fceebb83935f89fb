"""Fixtures for the interop tests: our binaries on free 127.0.0.1 ports, killed at the
end of each fixture; every test is bounded in time (``TEST_TIMEOUT_SECS``)."""

import signal

import pytest

from interop import TEST_TIMEOUT_SECS, sdk_client, start_example


@pytest.fixture(scope="module")
def hello_world_url():
    proc, base = start_example("hello_world")
    yield base
    proc.stop()


@pytest.fixture(scope="module")
def release_review_url():
    """release_review whose review is instant."""
    proc, base = start_example("release_review")
    yield base
    proc.stop()


@pytest.fixture(scope="module")
def slow_release_review_url():
    """release_review whose review takes 3 s, so it can be watched and canceled."""
    proc, base = start_example("release_review", "--review-delay-ms", "3000")
    yield base
    proc.stop()


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


@pytest.fixture
def binding():
    """The binding the SDK client uses; a module parametrizes it to run on several."""
    return "JSONRPC"


@pytest.fixture
async def make_client(binding):
    """make_client(url, streaming=...) -> the SDK's Client on `binding`; all closed at
    the end."""
    opened = []

    async def make(base_url: str, *, streaming: bool = False):
        client, http = await sdk_client(base_url, streaming=streaming, binding=binding)
        opened.append((client, http))
        return client

    yield make
    for client, http in opened:
        await client.close()
        await http.aclose()




def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Under CI=true, list every skipped interop test in its own section, so a skip is
    seen in the log and never passes for a success."""
    import os

    skipped = terminalreporter.stats.get("skipped", [])
    if skipped and os.environ.get("CI") == "true":
        terminalreporter.section("interop tests SKIPPED under CI=true", sep="!")
        for report in skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
            terminalreporter.line(f"{report.nodeid}: {reason}")
