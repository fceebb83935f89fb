"""The upstream A2A agents of tests/a2a_agents and tests/js/a2a_agent.mjs, proven with
the official a2a-sdk 1.x client before the gateway relies on them (issue 41).

Each agent (a2a-sdk 1.x, a2a-sdk 0.3, bedrock-agentcore's A2A app, @a2a-js/sdk) runs in
several variants (plain, no streaming in its card, its first stream broken mid-task),
all started at once on ports chosen by the OS. The client reaches the 0.3 agent through
its 0.3 compatibility transport; a few checks speak JSON-RPC by hand where the wire
itself is the point.

    .venv/bin/python -m pytest -q tests/python/test_a2a_agents.py
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENTS_DIR = ROOT / "tests" / "a2a_agents"
JS_DIR = ROOT / "tests" / "js"
PYTHON1 = os.environ.get("A2A_GATEWAY_TEST_PYTHON") or sys.executable
PYTHON03 = os.environ.get("A2A_GATEWAY_TEST_PYTHON03") or str(ROOT / ".venv03" / "bin" / "python")
START_TIMEOUT_SECS = 45
STEP_TIMEOUT_SECS = 15

# kind -> (argv, the A2A version its card declares first)
KINDS = {
    "sdk1": ([PYTHON1, str(AGENTS_DIR / "sdk1_agent.py")], "1.0"),
    "sdk03": ([PYTHON03, str(AGENTS_DIR / "sdk03_agent.py")], "0.3"),
    "agentcore": ([PYTHON1, str(AGENTS_DIR / "agentcore_agent.py")], "1.0"),
    # The same script on bedrock-agentcore's `a2a` extra (a2a-sdk 0.3), as most AgentCore
    # A2A containers run today.
    "agentcore03": ([PYTHON03, str(AGENTS_DIR / "agentcore_agent.py")], "0.3"),
    "js": (["node", str(JS_DIR / "a2a_agent.mjs")], "1.0"),
}
VARIANTS = {
    "plain": [],
    "nostream": ["--no-streaming"],
    "break": ["--break-after", "2"],
}
EXTRA = {  # (kind, variant) -> argv, beyond the VARIANTS of every kind
    ("sdk1", "eof"): ["--break-after", "2", "--break-mode", "eof"],
    ("js", "eof"): ["--break-after", "2", "--break-mode", "eof"],
    ("sdk1", "compat03"): ["--compat03"],
    ("js", "compat03"): ["--compat03"],
}

# (kind, binding) pairs every scenario runs on.
TARGETS = [
    ("sdk1", "JSONRPC"),
    ("sdk1", "HTTP+JSON"),
    ("sdk1", "GRPC"),
    ("sdk03", "JSONRPC"),
    ("agentcore", "JSONRPC"),
    ("agentcore03", "JSONRPC"),
    ("js", "JSONRPC"),
    ("js", "HTTP+JSON"),
]
TARGET_IDS = [f"{kind}-{binding}" for kind, binding in TARGETS]


@dataclass
class Agent:
    kind: str
    variant: str
    popen: subprocess.Popen
    err: Path
    calls_file: Path
    base: str = ""
    card: dict = field(default_factory=dict)

    def stderr(self) -> str:
        try:
            return self.err.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def calls(self) -> list[dict]:
        return httpx.get(f"{self.base}/calls", timeout=5).json()["calls"]

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
        if self.popen.poll() is None:
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)


def _launch(kind: str, variant: str, argv_extra: list[str], workdir: Path) -> Agent:
    argv, _ = KINDS[kind]
    err = workdir / f"{kind}-{variant}.err"
    calls_file = workdir / f"{kind}-{variant}.calls"
    popen = subprocess.Popen(
        [*argv, *argv_extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=err.open("w"),
        env={**os.environ, "A2A_PEER_CALLS_FILE": str(calls_file)},
        cwd=str(workdir),
        text=True,
        start_new_session=True,
    )
    return Agent(kind, variant, popen, err, calls_file)


def _read_port(agent: Agent, deadline: float) -> None:
    """The first stdout line is the port; the rest of stdout is drained in the background."""
    line: list[str] = []
    reader = threading.Thread(
        target=lambda: line.append(agent.popen.stdout.readline()), daemon=True
    )
    reader.start()
    reader.join(max(0.1, deadline - time.monotonic()))
    if not line or not line[0].strip().isdigit():
        agent.stop()
        pytest.fail(
            f"{agent.kind}/{agent.variant} printed no port within {START_TIMEOUT_SECS} s "
            f"(exit {agent.popen.poll()}):\n{agent.stderr()}"
        )
    threading.Thread(target=agent.popen.stdout.read, daemon=True).start()
    agent.base = f"http://127.0.0.1:{int(line[0])}"
    agent.card = httpx.get(f"{agent.base}/.well-known/agent-card.json", timeout=10).json()


@pytest.fixture(scope="module")
def agents():
    """Every agent variant, started together; {(kind, variant): Agent}."""
    if not Path(PYTHON03).exists():
        pytest.fail(f"{PYTHON03} does not exist: the 0.3 agent needs .venv03 (scripts/test.sh)")
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: the @a2a-js/sdk agent needs it")
    if not (JS_DIR / "node_modules" / "express").is_dir():
        pytest.fail("tests/js/node_modules has no express: run `npm ci` in tests/js")
    workdir = Path(tempfile.mkdtemp(prefix="a2a-agents-"))
    wanted = {(k, v): a for k in KINDS for v, a in VARIANTS.items()} | EXTRA
    started = {key: _launch(*key, argv, workdir) for key, argv in wanted.items()}
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECS
        for agent in started.values():
            _read_port(agent, deadline)
        yield started
    finally:
        for agent in started.values():
            if agent.popen.poll() is None:
                agent.popen.terminate()
        for agent in started.values():
            agent.stop()
        shutil.rmtree(workdir, ignore_errors=True)


# --- The official client ----------------------------------------------------------------


async def make_client(agent: Agent, binding: str = "JSONRPC", *, streaming: bool = True):
    import grpc

    from a2a.client import ClientConfig, ClientFactory
    from a2a.client.card_resolver import A2ACardResolver

    http = httpx.AsyncClient(timeout=STEP_TIMEOUT_SECS)
    config = ClientConfig(
        streaming=streaming,
        httpx_client=http,
        supported_protocol_bindings=[binding],
        use_client_preference=True,
        grpc_channel_factory=lambda target: grpc.aio.insecure_channel(target),
    )
    card = await A2ACardResolver(http, agent.base).get_agent_card()
    return ClientFactory(config).create(card), http


@pytest.fixture
async def clients():
    """clients(agent, binding, streaming=...) -> an SDK client; all closed at the end."""
    opened = []

    async def make(agent: Agent, binding: str = "JSONRPC", *, streaming: bool = True):
        client, http = await make_client(agent, binding, streaming=streaming)
        opened.append((client, http))
        return client

    yield make
    for client, http in opened:
        await client.close()
        await http.aclose()


def message(text: str, *, task_id: str = "", context_id: str = "", message_id: str = ""):
    from a2a.types import Message, Part, Role

    return Message(
        message_id=message_id or str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def send_request(text: str, **kwargs):
    from a2a.types import SendMessageRequest

    return SendMessageRequest(message=message(text, **kwargs))


async def collect(stream, limit: float = STEP_TIMEOUT_SECS) -> list:
    async def run():
        return [event async for event in stream]

    return await asyncio.wait_for(run(), limit)


def text_of(parts) -> str:
    return "".join(part.text for part in parts)


def state_name(state) -> str:
    from a2a.types import TaskState

    return TaskState.Name(state)


def final_task(events):
    """The last Task a send answered with, or the task carried by its last event."""
    tasks = [e.task for e in events if e.HasField("task")]
    return tasks[-1] if tasks else None


def last_state(events) -> str:
    for event in reversed(events):
        if event.HasField("status_update"):
            return state_name(event.status_update.status.state)
        if event.HasField("task"):
            return state_name(event.task.status.state)
    return ""


def artifact_updates(events):
    return [e.artifact_update for e in events if e.HasField("artifact_update")]


def task_id_of(events) -> str:
    for event in events:
        for name in ("task", "status_update", "artifact_update"):
            if event.HasField(name):
                payload = getattr(event, name)
                return payload.id if name == "task" else payload.task_id
    return ""


async def get_task(client, task_id: str):
    from a2a.types import GetTaskRequest

    return await asyncio.wait_for(client.get_task(GetTaskRequest(id=task_id)), STEP_TIMEOUT_SECS)


async def wait_for_state(client, task_id: str, states: set[str], limit: float = 10.0):
    deadline = time.monotonic() + limit
    while True:
        task = await get_task(client, task_id)
        if state_name(task.status.state) in states or time.monotonic() > deadline:
            return task
        await asyncio.sleep(0.05)


def chunk_texts(n: int) -> list[str]:
    return [f"chunk {i}/{n}\n" for i in range(1, n + 1)]


# --- Scenarios on every agent and binding ---------------------------------------------------


def test_cards_declare_what_the_options_say(agents):
    for (kind, variant), agent in agents.items():
        card = agent.card
        streaming = card["capabilities"].get("streaming", False)
        assert streaming is (variant != "nostream"), (kind, variant, card)
        if KINDS[kind][1] == "0.3":
            assert card["url"] == f"{agent.base}/" and card["protocolVersion"] == "0.3.0", card
        else:
            jsonrpc = [i for i in card["supportedInterfaces"] if i["protocolBinding"] == "JSONRPC"]
            assert jsonrpc[0]["url"] == f"{agent.base}/" and jsonrpc[0]["protocolVersion"] == "1.0"
    bindings = {i["protocolBinding"] for i in agents["sdk1", "plain"].card["supportedInterfaces"]}
    assert bindings == {"JSONRPC", "HTTP+JSON", "GRPC"}


@pytest.mark.parametrize("kind,binding", TARGETS, ids=TARGET_IDS)
async def test_echo_blocking(agents, clients, kind, binding):
    client = await clients(agents[kind, "plain"], binding, streaming=False)
    events = await collect(client.send_message(send_request("hello there")))
    task = final_task(events)
    assert state_name(task.status.state) == "TASK_STATE_COMPLETED", task
    assert [text_of(a.parts) for a in task.artifacts] == ["echo: hello there"]


@pytest.mark.parametrize("kind,binding", TARGETS, ids=TARGET_IDS)
async def test_stream_chunks_arrive_in_order(agents, clients, kind, binding):
    client = await clients(agents[kind, "plain"], binding)
    events = await collect(client.send_message(send_request("stream 5 20")))
    chunks = artifact_updates(events)
    assert [text_of(c.artifact.parts) for c in chunks] == chunk_texts(5)
    assert {c.artifact.artifact_id for c in chunks} == {"stream"}
    assert [c.append for c in chunks] == [False, True, True, True, True]
    assert [c.last_chunk for c in chunks] == [False, False, False, False, True]
    assert last_state(events) == "TASK_STATE_COMPLETED"
    task = await get_task(client, task_id_of(events))
    assert state_name(task.status.state) == "TASK_STATE_COMPLETED"
    assert "".join(text_of(a.parts) for a in task.artifacts) == "".join(chunk_texts(5))


@pytest.mark.parametrize("kind,binding", TARGETS, ids=TARGET_IDS)
async def test_message_id_prefix_selects_the_scenario(agents, clients, kind, binding):
    client = await clients(agents[kind, "plain"], binding)
    request = send_request("no keyword here", message_id=f"stream-2-10-{uuid.uuid4()}")
    events = await collect(client.send_message(request))
    assert [text_of(c.artifact.parts) for c in artifact_updates(events)] == chunk_texts(2)


@pytest.mark.parametrize("kind,binding", TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "blocking"])
async def test_ask_then_follow_up_reaches_the_same_task(agents, clients, kind, binding, streaming):
    agent = agents[kind, "plain"]
    client = await clients(agent, binding, streaming=streaming)
    first = await collect(client.send_message(send_request("ask")))
    assert last_state(first) == "TASK_STATE_INPUT_REQUIRED", first
    task = await get_task(client, task_id_of(first))
    assert state_name(task.status.state) == "TASK_STATE_INPUT_REQUIRED"
    assert task.id in text_of(task.status.message.parts)

    second = await collect(
        client.send_message(
            send_request("forty-two", task_id=task.id, context_id=task.context_id)
        )
    )
    assert last_state(second) == "TASK_STATE_COMPLETED", second
    done = await get_task(client, task.id)
    answer = json.loads(text_of(done.artifacts[-1].parts))
    assert answer == {
        "answer": "forty-two",
        "task_id": task.id,
        "context_id": task.context_id,
        "first_turn": {"task_id": task.id, "context_id": task.context_id},
    }
    seen = [c for c in agent.calls() if c["op"] == "execute" and c["task_id"] == task.id]
    assert [(c["scenario"], c["context_id"]) for c in seen] == [
        ("ask", task.context_id),
        ("ask-answer", task.context_id),
    ]


@pytest.mark.parametrize("kind,binding", TARGETS, ids=TARGET_IDS)
async def test_fail_fails_with_a_readable_message(agents, clients, kind, binding):
    client = await clients(agents[kind, "plain"], binding)
    events = await collect(client.send_message(send_request("fail please")))
    assert last_state(events) == "TASK_STATE_FAILED"
    task = await get_task(client, task_id_of(events))
    assert state_name(task.status.state) == "TASK_STATE_FAILED"
    assert text_of(task.status.message.parts) == "failed on purpose: fail please"


@pytest.mark.parametrize("kind,binding", TARGETS, ids=TARGET_IDS)
async def test_message_answers_without_a_task(agents, clients, kind, binding):
    client = await clients(agents[kind, "plain"], binding)
    events = await collect(client.send_message(send_request("message hi")))
    assert len(events) == 1 and events[0].HasField("message"), events
    assert text_of(events[0].message.parts) == "message: message hi"


@pytest.mark.parametrize("kind,binding", TARGETS, ids=TARGET_IDS)
async def test_slow_is_canceled_and_the_cancel_recorded(agents, clients, kind, binding):
    from a2a.types import CancelTaskRequest

    agent = agents[kind, "plain"]
    client = await clients(agent, binding)
    stream = client.send_message(send_request("slow"))
    seen = []
    async for event in stream:
        seen.append(event)
        if artifact_updates(seen):
            break
    task_id = task_id_of(seen)
    canceled = await asyncio.wait_for(
        client.cancel_task(CancelTaskRequest(id=task_id)), STEP_TIMEOUT_SECS
    )
    await stream.aclose()
    assert canceled.id == task_id
    assert state_name(canceled.status.state) == "TASK_STATE_CANCELED", canceled
    task = await get_task(client, task_id)
    assert state_name(task.status.state) == "TASK_STATE_CANCELED"
    cancels = [c for c in agent.calls() if c["op"] == "cancel" and c["task_id"] == task_id]
    assert len(cancels) == 1, agent.calls()
    logged = [json.loads(line) for line in agent.calls_file.read_text().splitlines()]
    assert any(c["op"] == "cancel" and c["task_id"] == task_id for c in logged)
    ticks = len(task.artifacts[0].parts) if task.artifacts else 0
    await asyncio.sleep(0.3)
    later = await get_task(client, task_id)
    assert len(later.artifacts[0].parts) == ticks, "the agent went on after CANCELED"


# --- Options ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
async def test_without_streaming_the_client_sends_blocking(agents, clients, kind):
    agent = agents[kind, "nostream"]
    client = await clients(agent, "JSONRPC", streaming=True)
    events = await collect(client.send_message(send_request("stream 3 10")))
    assert len(events) == 1 and events[0].HasField("task")
    task = events[0].task
    assert state_name(task.status.state) == "TASK_STATE_COMPLETED"
    assert "".join(text_of(a.parts) for a in task.artifacts) == "".join(chunk_texts(3))


# The broken stream: its agents cut it after 2 chunks; the rest comes within about 1.5 s,
# time enough for GetTask and a resubscription even on a busy machine.
BROKEN_CHUNKS = 6
BROKEN_INTERVAL_MS = 300
BREAK_TARGETS = [
    ("sdk1", "JSONRPC", "break"),
    ("sdk1", "HTTP+JSON", "break"),
    ("sdk1", "JSONRPC", "eof"),
    ("sdk03", "JSONRPC", "break"),
    ("agentcore", "JSONRPC", "break"),
    ("agentcore03", "JSONRPC", "break"),
    ("js", "JSONRPC", "break"),
    ("js", "HTTP+JSON", "break"),
    ("js", "JSONRPC", "eof"),
]


@pytest.mark.parametrize(
    "kind,binding,variant", BREAK_TARGETS, ids=["-".join(t) for t in BREAK_TARGETS]
)
async def test_broken_stream_task_goes_on_and_can_be_resubscribed(
    agents, clients, kind, binding, variant
):
    from a2a.client.errors import A2AClientError
    from a2a.types import SubscribeToTaskRequest

    client = await clients(agents[kind, variant], binding)
    seen = []
    # abort: the client reports the incomplete body; eof: the stream simply ends.
    cut = pytest.raises(A2AClientError, match="incomplete chunked read")
    with cut if variant == "break" else contextlib.nullcontext():
        request = send_request(f"stream {BROKEN_CHUNKS} {BROKEN_INTERVAL_MS}")
        async for event in client.send_message(request):
            seen.append(event)
    chunks = artifact_updates(seen)
    assert [text_of(c.artifact.parts) for c in chunks] == chunk_texts(BROKEN_CHUNKS)[:2]
    assert last_state(seen) == "TASK_STATE_WORKING"
    task_id = task_id_of(seen)

    task = await get_task(client, task_id)
    assert state_name(task.status.state) == "TASK_STATE_WORKING"
    first_two = "".join(chunk_texts(BROKEN_CHUNKS)[:2])
    assert text_of(task.artifacts[0].parts).startswith(first_two)

    resumed = await collect(client.subscribe(SubscribeToTaskRequest(id=task_id)))
    assert last_state(resumed) == "TASK_STATE_COMPLETED"
    assert artifact_updates(resumed)[-1].last_chunk
    done = await get_task(client, task_id)
    assert state_name(done.status.state) == "TASK_STATE_COMPLETED"
    parts = [part.text for part in done.artifacts[0].parts]
    if KINDS[kind][1] == "0.3":
        # a2a-sdk 0.3.26: a tasks/resubscribe beside another consumer of the task's events
        # (here the background consumer left by the dropped stream) applies every later
        # appended chunk to the stored task twice.
        parts = [p for i, p in enumerate(parts) if i == 0 or p != parts[i - 1]]
    assert parts == chunk_texts(BROKEN_CHUNKS)


# --- Errors and the wire -----------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
async def test_unknown_task_and_finished_task_errors(agents, clients, kind):
    from a2a.types import CancelTaskRequest, GetTaskRequest
    from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

    client = await clients(agents[kind, "plain"], "JSONRPC")
    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task(CancelTaskRequest(id=str(uuid.uuid4())))
    events = await collect(client.send_message(send_request("echo done")))
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(CancelTaskRequest(id=task_id_of(events)))


def rpc(base: str, method: str, params: dict, headers: dict | None = None) -> dict:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    response = httpx.post(f"{base}/", json=body, headers=headers or {}, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


MESSAGE_10 = {"messageId": "m-10", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
MESSAGE_03 = {
    "kind": "message",
    "messageId": "m-03",
    "role": "user",
    "parts": [{"kind": "text", "text": "hi"}],
}


# What each server answers to a 1.0 and a 0.3 method name, without and with A2A-Version:
# "ok" or the JSON-RPC error code (every answer is HTTP 200).
CALLS = [
    ("SendMessage", None),
    ("SendMessage", "1.0"),
    ("SendMessage", "0.3"),
    ("message/send", None),
    ("message/send", "1.0"),
    ("message/send", "0.3"),
]
VERSION_MATRIX = {
    ("sdk1", "plain"): ["-32009", "ok", "-32009", "-32601", "-32601", "-32601"],
    ("sdk1", "compat03"): ["-32009", "ok", "-32009", "ok", "-32603", "ok"],
    ("agentcore", "plain"): ["-32009", "ok", "-32009", "ok", "-32603", "ok"],
    ("js", "plain"): ["-32009", "ok", "-32009", "-32009", "-32601", "-32009"],
    ("js", "compat03"): ["-32601", "ok", "-32601", "ok", "-32601", "ok"],
    ("sdk03", "plain"): ["-32601", "-32601", "-32601", "ok", "ok", "ok"],
    ("agentcore03", "plain"): ["-32601", "-32601", "-32601", "ok", "ok", "ok"],
}


@pytest.mark.parametrize("key", list(VERSION_MATRIX), ids=["-".join(k) for k in VERSION_MATRIX])
def test_method_names_and_the_a2a_version_header(agents, key):
    base = agents[key].base
    seen = []
    for method, version in CALLS:
        template = MESSAGE_10 if method == "SendMessage" else MESSAGE_03
        params = {"message": {**template, "messageId": str(uuid.uuid4())}}
        answer = rpc(base, method, params, {"A2A-Version": version} if version else {})
        seen.append(str(answer["error"]["code"]) if "error" in answer else "ok")
    assert seen == VERSION_MATRIX[key]


@pytest.mark.parametrize("kind", ["agentcore", "agentcore03"])
def test_agentcore_app_health_and_session_header(agents, kind):
    agent = agents[kind, "plain"]
    assert httpx.get(f"{agent.base}/ping", timeout=5).json() == {"status": "Healthy"}
    session = "s" * 40
    answer = rpc(
        agent.base,
        "message/send",
        {"message": {**MESSAGE_03, "messageId": f"m-session-{kind}"}},
        {"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": session, "A2A-Version": "0.3"},
    )
    assert answer["result"]["status"]["state"] == "completed", answer
    call = [c for c in agent.calls() if c.get("message_id") == f"m-session-{kind}"][0]
    assert call["headers"]["x-amzn-bedrock-agentcore-runtime-session-id"] == session


def test_sdk03_speaks_0_3_json_rpc(agents):
    base = agents["sdk03", "plain"].base
    sent = rpc(base, "message/send", {"message": MESSAGE_03})
    task = sent["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "echo: hi"}]
    got = rpc(base, "tasks/get", {"id": task["id"]})
    assert got["result"]["id"] == task["id"]
    current = rpc(base, "SendMessage", {"message": MESSAGE_10}, {"A2A-Version": "1.0"})
    assert current["error"]["code"] == -32601, current


# What each SDK makes of an executor that raises, on a blocking send: the answer, then the
# task's state in GetTask.
CRASH = {
    "sdk1": ("-32603", "TASK_STATE_FAILED"),
    "agentcore": ("-32603", "TASK_STATE_FAILED"),
    "js": ("TASK_STATE_FAILED", "TASK_STATE_FAILED"),
    # a2a-sdk 0.3.26 answers the error but leaves the task `submitted` for good.
    "sdk03": ("-32603", "submitted"),
    "agentcore03": ("-32603", "submitted"),
}


@pytest.mark.parametrize("kind", list(CRASH))
def test_what_a_crashing_executor_leaves(agents, kind):
    agent = agents[kind, "plain"]
    legacy = KINDS[kind][1] == "0.3"
    message_id = f"m-crash-{uuid.uuid4()}"
    if legacy:
        parts = [{"kind": "text", "text": "crash now"}]
        answer = rpc(
            agent.base,
            "message/send",
            {"message": {**MESSAGE_03, "messageId": message_id, "parts": parts}},
        )
    else:
        answer = rpc(
            agent.base,
            "SendMessage",
            {"message": {**MESSAGE_10, "messageId": message_id, "parts": [{"text": "crash now"}]}},
            {"A2A-Version": "1.0"},
        )
    if "error" in answer:
        said = str(answer["error"]["code"])
        assert "crashed on purpose" in answer["error"]["message"]
    else:
        said = answer["result"]["task"]["status"]["state"]
    task_id = [c for c in agent.calls() if c.get("message_id") == message_id][0]["task_id"]
    time.sleep(0.2)
    if legacy:
        got = rpc(agent.base, "tasks/get", {"id": task_id})["result"]
    else:
        got = rpc(agent.base, "GetTask", {"id": task_id}, {"A2A-Version": "1.0"})["result"]
    assert (said, got["status"]["state"]) == CRASH[kind]
