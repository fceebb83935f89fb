"""Helpers for the interop tests: our binaries on free 127.0.0.1 ports, SDK clients.

The binaries come from ``A2A_GATEWAY_BIN_DIR`` (default ``$CARGO_TARGET_DIR/debug``
or ``target/debug`` in the repository root); build them first with
``cargo build --examples --bins``. The fixtures in conftest.py kill every process
started here at their end.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from pathlib import Path

import httpx
import pytest

# The SDK (1.x) is imported where it is used, so that the A2A 0.3 client tests
# (tests/python03, a2a-sdk 0.3 in .venv03) can reuse the process helpers here.

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# The Python with the upstream peer (bedrock-agentcore): scripts/test.sh names .venv's.
PYTHON = os.environ.get("A2A_GATEWAY_TEST_PYTHON") or sys.executable

# Upper bound for a single test (SIGALRM), for starting a process, and for one HTTP call.
TEST_TIMEOUT_SECS = 60
START_TIMEOUT_SECS = 30
HTTP_TIMEOUT_SECS = 20


def bin_dir() -> Path:
    explicit = os.environ.get("A2A_GATEWAY_BIN_DIR")
    if explicit:
        return Path(explicit)
    target = os.environ.get("CARGO_TARGET_DIR")
    return (Path(target) if target else ROOT / "target") / "debug"


def example_bin(name: str) -> Path:
    path = bin_dir() / "examples" / name
    if not path.is_file():
        pytest.fail(
            f"{path} does not exist: run `cargo build --examples --bins` "
            "(or set A2A_GATEWAY_BIN_DIR to the directory holding examples/)"
        )
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_LIVE: set["Proc"] = set()


@atexit.register
def _stop_leftovers() -> None:
    """Last resort (an interrupted run): stop every process a fixture did not stop."""
    for proc in list(_LIVE):
        proc.stop()


class Proc:
    """A child process with its output in a temporary log file."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        replace_env: bool = False,
        cwd: str | None = None,
    ):
        self.name = name
        self.log = tempfile.NamedTemporaryFile(
            prefix=f"a2a-interop-{name}-", suffix=".log", delete=False
        )
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=dict(env or {}) if replace_env else {**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
        _LIVE.add(self)

    def output(self) -> str:
        try:
            return Path(self.log.name).read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def wait_ready(self, url: str, ok=lambda r: r.status_code == 200) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECS
        while True:
            if self.popen.poll() is not None:
                self.stop()
                pytest.fail(
                    f"{self.name} exited with {self.popen.returncode} before it was "
                    f"ready:\n{self.output()}"
                )
            try:
                if ok(httpx.get(url, timeout=2)):
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(
                    f"{self.name} did not answer {url} within {START_TIMEOUT_SECS} s:\n"
                    f"{self.output()}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        _LIVE.discard(self)
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


def start_example(name: str, *extra: str) -> tuple[Proc, str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = Proc(name, [str(example_bin(name)), "--listen", f"127.0.0.1:{port}", *extra])
    proc.wait_ready(f"{base}/.well-known/agent-card.json")
    return proc, base


TRANSPORT_CLASSES = {
    "JSONRPC": "JsonRpcTransport",
    "HTTP+JSON": "RestTransport",
    "GRPC": "GrpcTransport",
}


async def sdk_client(base_url: str, *, streaming: bool, binding: str = "JSONRPC"):
    """The SDK's client for the agent at base_url (card resolved by the SDK) on the card's
    interface for `binding` ("JSONRPC", "HTTP+JSON" or "GRPC", plaintext on 127.0.0.1):
    the SDK picks it from the card's supportedInterfaces, and the transport it built is
    checked."""
    from a2a.client import ClientConfig, create_client

    grpc_options = {}
    if binding == "GRPC":
        import grpc

        grpc_options = {
            "use_client_preference": True,
            "grpc_channel_factory": lambda target: grpc.aio.insecure_channel(target),
        }
    config = ClientConfig(
        streaming=streaming,
        httpx_client=httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECS),
        supported_protocol_bindings=[binding],
        **grpc_options,
    )
    client = await create_client(base_url, client_config=config)
    transport = type(client._transport).__name__
    assert transport == TRANSPORT_CLASSES[binding], (binding, transport)
    return client, config.httpx_client


def user_message(text: str, *, task_id: str = "", context_id: str = "") -> Message:
    from a2a.types.a2a_pb2 import Message, Part, Role

    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def send_request(text: str, **kwargs) -> SendMessageRequest:
    from a2a.types.a2a_pb2 import SendMessageRequest

    return SendMessageRequest(message=user_message(text, **kwargs))


def gateway_bin() -> Path:
    return bin_dir() / "a2a-gateway"


def gateway_serve_missing() -> str | None:
    """Why `a2a-gateway serve` cannot run here, or None when it can.

    Only a binary that exists but has no `serve` subcommand (the placeholder command
    line) counts as missing; a binary that is not built at all is a failure of the
    test run, not a reason to skip.
    """
    path = gateway_bin()
    if not path.is_file():
        pytest.fail(f"{path} does not exist: run `cargo build --examples --bins`")
    probe = subprocess.run(
        [str(path), "serve", "--help"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
    )
    said = (probe.stdout + probe.stderr).strip()
    if probe.returncode == 0:
        return None
    lacks = ("command line is not built yet", "unrecognized subcommand")
    if any(marker in said for marker in lacks):
        return f"{path} has no `serve` subcommand yet (`serve --help` said: {said[:200]!r})"
    pytest.fail(f"`{path} serve --help` exited {probe.returncode}: {said[:2000]}")


def wait_for_upstream_ping(proc: Proc, base: str) -> None:
    proc.wait_ready(
        f"{base}/ping", ok=lambda r: r.status_code == 200 and r.json().get("status") == "Healthy"
    )


def start_upstream_agent(script: Path = HERE / "upstream_agent.py") -> tuple[Proc, str]:
    """An agent script taking its port as argument (by default tests/python/upstream_agent.py,
    a real BedrockAgentCoreApp) on a free port; returns it and its invocation URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = Proc(script.stem, [PYTHON, str(script), str(port)])
    wait_for_upstream_ping(proc, base)
    return proc, f"{base}/invocations"


def start_gateway(
    upstream_url: str,
    extra_env: dict[str, str] | None = None,
    config_toml: str | None = None,
) -> tuple[Proc, str]:
    """`a2a-gateway serve` in an empty directory, configured by environment (``extra_env``
    adds settings) and, when ``config_toml`` is given, that text as its ``--config`` file
    (the environment overrides it)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    workdir = tempfile.mkdtemp(prefix="a2a-interop-gateway-")
    env = {
        key: value for key, value in os.environ.items() if not key.startswith("A2A_GATEWAY_")
    }
    env.update(
        {
            "A2A_GATEWAY_SERVER__LISTEN": f"127.0.0.1:{port}",
            "A2A_GATEWAY_UPSTREAM__URL": upstream_url,
            "A2A_GATEWAY_UPSTREAM__AUTH__KIND": "none",
            "A2A_GATEWAY_STORE__URL": "memory:",
            **(extra_env or {}),
        }
    )
    argv = [str(gateway_bin()), "serve"]
    if config_toml is not None:
        config_path = Path(workdir) / "a2a-gateway.toml"
        config_path.write_text(config_toml)
        argv += ["--config", str(config_path)]
    proc = Proc("a2a-gateway", argv, env=env, replace_env=True, cwd=workdir)
    proc.wait_ready(f"{base}/.well-known/agent-card.json")
    return proc, base
