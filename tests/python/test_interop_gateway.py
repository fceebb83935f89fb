"""The official A2A Python SDK client (a2a-sdk 1.3.0) drives `a2a-gateway serve`, which
forwards to a real AgentCore runtime app: tests/python/upstream_agent.py, a
`BedrockAgentCoreApp` from PyPI `bedrock-agentcore` on 127.0.0.1 (auth none, memory store).

Every test runs twice: on the SDK's JSON-RPC transport and on its HTTP+JSON (REST)
transport, both picked by the SDK from the card's supportedInterfaces.

The prompt picks the upstream's reply shape (see upstream_agent.py): a dict, a string, a
sync generator, an async generator, a generator raising mid-stream, a control object
asking for input, a control object answering with a direct Message.

Skipped (with the reason in pytest's summary) only while the built `a2a-gateway` binary has
no `serve` subcommand; a binary that is missing altogether fails the run.
"""

import re
import asyncio

import pytest

from a2a.client import A2ACardResolver
from a2a.helpers.proto_helpers import get_message_text
from a2a.types.a2a_pb2 import GetTaskRequest, StreamResponse, Task, TaskState

from interop import gateway_serve_missing, send_request, start_gateway, start_upstream_agent

REPLIES = {
    "dict": "from a dict",
    "string": "The answer is 42",
    "sync": "Hello, w\u00f6rld \U0001F600",
    "async": "one two three",
}
STREAMED = {"sync", "async"}
RAISE_REASON = "the agent failed: ValueError: boom mid-stream"
# A failure reason a caller sees: the category, then the id its details are logged under.
RAISE_REASON_RE = re.compile(re.escape(RAISE_REASON) + r" \[correlation id [0-9a-f]{12}\]")


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


def kind(event: StreamResponse) -> str:
    return event.WhichOneof("payload")


def text_of(parts) -> str:
    return "".join(p.text for p in parts if p.WhichOneof("content") == "text")


def state_name(state: int) -> str:
    return TaskState.Name(state)


async def blocking_send(client, request) -> Task:
    replies = [r async for r in client.send_message(request)]
    assert len(replies) == 1 and kind(replies[0]) == "task", replies
    return replies[0].task


async def stream(client, request, timeout: float = 30) -> list[StreamResponse]:
    async def run():
        return [e async for e in client.send_message(request)]

    return await asyncio.wait_for(run(), timeout)


def check_chunks(events: list[StreamResponse], *, clean_end: bool) -> str:
    """The artifact chunks of one streamed reply: one artifact, the first chunk replaces
    (append false), the others append, lastChunk only on the last one and only at a clean
    end. Returns the concatenated text."""
    chunks = [e.artifact_update for e in events if kind(e) == "artifact_update"]
    assert chunks, events
    assert len({c.artifact.artifact_id for c in chunks}) == 1, chunks
    assert not chunks[0].append
    assert all(c.append for c in chunks[1:]), chunks
    assert not any(c.last_chunk for c in chunks[:-1]), chunks
    assert chunks[-1].last_chunk == clean_end
    return "".join(text_of(c.artifact.parts) for c in chunks)


@pytest.fixture(params=["JSONRPC", "HTTP+JSON"])
def binding(request):
    """Every test of this module runs on the SDK's JSON-RPC and on its REST transport."""
    return request.param


async def test_sdk_resolves_the_gateway_card(gateway_url):
    import httpx

    async with httpx.AsyncClient(timeout=10) as http:
        card = await A2ACardResolver(http, gateway_url).get_agent_card()
    assert card.capabilities.streaming
    got = [(i.protocol_binding, i.protocol_version, i.url) for i in card.supported_interfaces]
    host = gateway_url.removeprefix("http://").rstrip("/")
    assert got == [
        ("JSONRPC", "1.0", gateway_url + "/"),
        ("HTTP+JSON", "1.0", gateway_url + "/a2a/rest"),
        ("GRPC", "1.0", host),
        ("JSONRPC", "0.3", gateway_url + "/"),
    ]


@pytest.mark.parametrize("prompt", list(REPLIES))
async def test_blocking_send(gateway_url, make_client, prompt):
    client = await make_client(gateway_url)
    task = await blocking_send(client, send_request(prompt))
    reason = get_message_text(task.status.message, "")
    assert state_name(task.status.state) == "TASK_STATE_COMPLETED", reason
    assert len(task.artifacts) == 1, task.artifacts
    assert text_of(task.artifacts[0].parts) == REPLIES[prompt]

    stored = await client.get_task(GetTaskRequest(id=task.id))
    assert state_name(stored.status.state) == "TASK_STATE_COMPLETED"
    assert [text_of(a.parts) for a in stored.artifacts] == [REPLIES[prompt]]


@pytest.mark.parametrize("prompt", list(REPLIES))
async def test_streaming_send(gateway_url, make_client, prompt):
    client = await make_client(gateway_url, streaming=True)
    events = await stream(client, send_request(prompt))
    assert kind(events[0]) == "task"
    task_id = events[0].task.id
    assert all(
        getattr(e, kind(e)).task_id == task_id for e in events[1:]
    ), "an event of another task"
    states = [state_name(e.status_update.status.state) for e in events if kind(e) == "status_update"]
    assert states[0] == "TASK_STATE_WORKING", states
    assert states[-1] == "TASK_STATE_COMPLETED", states
    assert kind(events[-1]) == "status_update"
    # Artifact chunks come between WORKING and COMPLETED, and concatenate exactly.
    assert check_chunks(events, clean_end=True) == REPLIES[prompt]
    if prompt in STREAMED:
        # A generator's pieces arrive as separate chunks, not as one block at the end.
        chunk_count = sum(1 for e in events if kind(e) == "artifact_update")
        assert chunk_count >= 3, chunk_count

    # The stored task holds the same, whole text.
    stored = await client.get_task(GetTaskRequest(id=task_id))
    assert state_name(stored.status.state) == "TASK_STATE_COMPLETED"
    assert [text_of(a.parts) for a in stored.artifacts] == [REPLIES[prompt]]


async def test_raising_mid_stream_fails_the_task_blocking(gateway_url, make_client):
    client = await make_client(gateway_url)
    task = await blocking_send(client, send_request("raise"))
    assert state_name(task.status.state) == "TASK_STATE_FAILED"
    assert RAISE_REASON_RE.fullmatch(get_message_text(task.status.message, "")), task.status
    # What came before the failure is kept, but never reported as a finished artifact.
    assert [text_of(a.parts) for a in task.artifacts] in ([], ["partial "])


async def test_raising_mid_stream_fails_the_task_streaming(gateway_url, make_client):
    client = await make_client(gateway_url, streaming=True)
    events = await stream(client, send_request("raise"))
    assert kind(events[0]) == "task"
    last = events[-1]
    assert kind(last) == "status_update"
    assert state_name(last.status_update.status.state) == "TASK_STATE_FAILED"
    assert RAISE_REASON_RE.fullmatch(get_message_text(last.status_update.status.message, ""))
    assert check_chunks(events, clean_end=False) == "partial "
    states = [state_name(e.status_update.status.state) for e in events if kind(e) == "status_update"]
    assert "TASK_STATE_COMPLETED" not in states


async def test_upstream_asks_for_input_then_follow_up(gateway_url, make_client):
    client = await make_client(gateway_url)
    asked = await blocking_send(client, send_request("input"))
    assert state_name(asked.status.state) == "TASK_STATE_INPUT_REQUIRED"
    assert get_message_text(asked.status.message, "") == "Which city?"
    done = await blocking_send(
        client, send_request("string", task_id=asked.id, context_id=asked.context_id)
    )
    assert done.id == asked.id
    assert state_name(done.status.state) == "TASK_STATE_COMPLETED"
    assert [text_of(a.parts) for a in done.artifacts] == [REPLIES["string"]]


@pytest.mark.parametrize(
    "prompt, text",
    [("message", "Hello, no task needed."), ("message-stream", "Streamed hello, no task.")],
)
async def test_upstream_answers_with_a_direct_message(gateway_url, make_client, prompt, text):
    """The upstream's `message` control object: SendMessage answers {"message": ...},
    SendStreamingMessage is that single Message, and no task is created."""
    client = await make_client(gateway_url)
    replies = [r async for r in client.send_message(send_request(prompt))]
    assert [kind(r) for r in replies] == ["message"], replies
    message = replies[0].message
    assert get_message_text(message, "") == text
    assert not message.task_id

    streaming = await make_client(gateway_url, streaming=True)
    events = await stream(streaming, send_request(prompt))
    assert [kind(e) for e in events] == ["message"], events
    assert get_message_text(events[0].message, "") == text


async def test_cancel_mid_stream(gateway_url, make_client):
    """CancelTask while the upstream is still streaming: the open stream ends CANCELED,
    the task stays CANCELED, and later upstream output changes nothing."""
    from a2a.types.a2a_pb2 import CancelTaskRequest

    streaming = await make_client(gateway_url, streaming=True)
    control = await make_client(gateway_url)
    events: list[StreamResponse] = []

    async def watch():
        async for event in streaming.send_message(send_request("slow")):
            events.append(event)

    watcher = asyncio.create_task(asyncio.wait_for(watch(), 20))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while sum(kind(e) == "artifact_update" for e in events) < 2:
        assert loop.time() < deadline and not watcher.done(), events
        await asyncio.sleep(0.02)
    task_id = events[0].task.id

    canceled = await control.cancel_task(CancelTaskRequest(id=task_id))
    assert state_name(canceled.status.state) == "TASK_STATE_CANCELED"
    await watcher
    assert kind(events[-1]) == "status_update"
    assert state_name(events[-1].status_update.status.state) == "TASK_STATE_CANCELED"
    assert not any(
        e.artifact_update.last_chunk for e in events if kind(e) == "artifact_update"
    )

    await asyncio.sleep(0.5)  # the upstream would have sent two more ticks by now
    stored = await control.get_task(GetTaskRequest(id=task_id))
    assert state_name(stored.status.state) == "TASK_STATE_CANCELED"
    # A second cancel is idempotent: the CANCELED task again.
    again = await control.cancel_task(CancelTaskRequest(id=task_id))
    assert state_name(again.status.state) == "TASK_STATE_CANCELED"
