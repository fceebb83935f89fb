"""The conformance kit's agent (tests/tck/agent.py, a real BedrockAgentCoreApp) behind
`a2a-gateway serve` with `include_message = true`, driven by the official A2A Python SDK
client with the kit's messageId prefixes.

The kit itself is not run here (it is not ours; docs/conformance.md says how to run it).
These tests pin what each scenario must produce through the gateway, so a change of the
gateway or the agent that would break a kit run shows up in CI.
"""

import asyncio
import uuid

import pytest

from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, StreamResponse, TaskState
from google.protobuf.json_format import MessageToDict

from interop import ROOT, gateway_serve_missing, start_gateway, start_upstream_agent


@pytest.fixture(scope="module")
def gateway_url():
    missing = gateway_serve_missing()
    if missing:
        pytest.skip(missing)
    upstream, invocations = start_upstream_agent(ROOT / "tests" / "tck" / "agent.py")
    try:
        gateway, base = start_gateway(
            invocations, {"A2A_GATEWAY_UPSTREAM__INCLUDE_MESSAGE": "true"}
        )
    except BaseException:
        upstream.stop()
        raise
    yield base
    gateway.stop()
    upstream.stop()


@pytest.fixture(params=["JSONRPC", "HTTP+JSON"])
def binding(request):
    """Every scenario runs on the SDK's JSON-RPC and on its REST transport, as the kit does."""
    return request.param


def request(prefix: str, *, task_id: str = "") -> SendMessageRequest:
    """A message whose id starts with the kit's scenario prefix, as the kit's ids do."""
    return SendMessageRequest(
        message=Message(
            message_id=f"{prefix}-{uuid.uuid4()}",
            role=Role.ROLE_USER,
            parts=[Part(text="TCK scenario")],
            task_id=task_id,
        )
    )


def kind(event: StreamResponse) -> str:
    return event.WhichOneof("payload")


async def replies(client, prefix: str, **kwargs) -> list[StreamResponse]:
    async def run():
        return [r async for r in client.send_message(request(prefix, **kwargs))]

    return await asyncio.wait_for(run(), 30)


async def task_of(client, prefix: str, **kwargs):
    got = await replies(client, prefix, **kwargs)
    assert len(got) == 1 and kind(got[0]) == "task", got
    return got[0].task


def state(task) -> str:
    return TaskState.Name(task.status.state)


def only_part(task) -> dict:
    assert len(task.artifacts) == 1, task.artifacts
    assert len(task.artifacts[0].parts) == 1, task.artifacts[0]
    return MessageToDict(task.artifacts[0].parts[0])


async def test_complete_task(gateway_url, make_client):
    task = await task_of(await make_client(gateway_url), "tck-complete-task")
    assert state(task) == "TASK_STATE_COMPLETED"
    assert only_part(task) == {"text": "Hello from TCK"}


async def test_artifacts_of_each_part_kind(gateway_url, make_client):
    client = await make_client(gateway_url)
    expected = {
        "tck-artifact-text": {"text": "Generated text content"},
        "tck-artifact-file": {"raw": "dGNr", "filename": "output.txt", "mediaType": "text/plain"},
        "tck-artifact-file-url": {
            "url": "https://example.com/output.txt",
            "filename": "output.txt",
            "mediaType": "text/plain",
        },
        "tck-artifact-data": {
            "data": {"key": "value", "count": 42.0},
            "mediaType": "application/json",
        },
    }
    for prefix, part in expected.items():
        task = await task_of(client, prefix)
        assert state(task) == "TASK_STATE_COMPLETED", (prefix, task)
        assert only_part(task) == part, prefix


async def test_input_required_then_follow_up_completes(gateway_url, make_client):
    client = await make_client(gateway_url)
    asked = await task_of(client, "tck-input-required")
    assert state(asked) == "TASK_STATE_INPUT_REQUIRED"
    done = await task_of(client, "tck-complete-task", task_id=asked.id)
    assert done.id == asked.id
    assert state(done) == "TASK_STATE_COMPLETED"


async def test_reject(gateway_url, make_client):
    task = await task_of(await make_client(gateway_url), "tck-reject-task")
    assert state(task) == "TASK_STATE_REJECTED"


async def test_unknown_prefix_echoes_the_id(gateway_url, make_client):
    task = await task_of(await make_client(gateway_url), "something-else")
    assert state(task) == "TASK_STATE_COMPLETED"
    assert only_part(task)["text"].startswith("Unhandled messageId prefix: something-else-")


async def test_message_response(gateway_url, make_client):
    got = await replies(await make_client(gateway_url), "tck-message-response")
    assert [kind(r) for r in got] == ["message"], got
    assert got[0].message.parts[0].text == "Direct message response"


async def test_stream_lifecycle(gateway_url, make_client):
    events = await replies(await make_client(gateway_url, streaming=True), "tck-stream-001")
    kinds = [kind(e) for e in events]
    assert kinds[0] == "task", kinds
    updates = [e.status_update for e in events if kind(e) == "status_update"]
    states = [TaskState.Name(u.status.state) for u in updates]
    assert "TASK_STATE_WORKING" in states and states[-1] == "TASK_STATE_COMPLETED", states
    chunks = [e.artifact_update for e in events if kind(e) == "artifact_update"]
    texts = [p.text for c in chunks for p in c.artifact.parts]
    assert "Stream hello from TCK" in texts, events


async def test_stream_without_output(gateway_url, make_client):
    events = await replies(await make_client(gateway_url, streaming=True), "tck-stream-002")
    assert not [e for e in events if kind(e) == "artifact_update"], events
    assert TaskState.Name(events[-1].status_update.status.state) == "TASK_STATE_COMPLETED", events


async def test_stream_chunked_artifact(gateway_url, make_client):
    events = await replies(
        await make_client(gateway_url, streaming=True), "tck-stream-artifact-chunked"
    )
    chunks = [e.artifact_update for e in events if kind(e) == "artifact_update"]
    assert [c.artifact.artifact_id for c in chunks] == ["chunked", "chunked"], chunks
    assert [c.artifact.parts[0].text for c in chunks] == ["chunk-1 ", "chunk-2"]
    assert [(c.append, c.last_chunk) for c in chunks] == [(False, False), (True, True)]
