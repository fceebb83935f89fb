"""The last A2A 0.3 release of the official Python SDK (a2a-sdk 0.3.x, pinned in
tests/python/requirements-03.txt) drives `a2a-gateway serve` in front of a real
`BedrockAgentCoreApp` (tests/python/upstream_agent.py): it discovers the gateway from its
card (0.3 fields `url`, `preferredTransport`, `protocolVersion`), and uses the 0.3
JSON-RPC methods `message/send` (blocking and not), `message/stream`, `tasks/get`,
`tasks/cancel` and `tasks/resubscribe`, without an `A2A-Version` header, as 0.3
clients do."""

import asyncio
import uuid

import httpx
import pytest

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
)

HTTP_TIMEOUT_SECS = 20


@pytest.fixture
async def make_client():
    """make_client(url, streaming=..., polling=...) -> the 0.3 SDK's Client."""
    opened = []

    async def make(base_url: str, *, streaming: bool = False, polling: bool = False):
        http = httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECS)
        config = ClientConfig(streaming=streaming, polling=polling, httpx_client=http)
        client = await ClientFactory.connect(base_url, client_config=config)
        opened.append((client, http))
        return client

    yield make
    for client, http in opened:
        await client.close()
        await http.aclose()


def user_message(text: str, *, task_id: str | None = None, context_id: str | None = None):
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.user,
        parts=[Part(root=TextPart(text=text))],
        task_id=task_id,
        context_id=context_id,
    )


def text_of(parts) -> str:
    return "".join(p.root.text for p in parts if isinstance(p.root, TextPart))


async def only_task(client, message) -> Task:
    replies = [r async for r in client.send_message(message)]
    assert len(replies) == 1, replies
    task, update = replies[0]
    assert isinstance(task, Task) and update is None, replies
    return task


async def test_the_03_sdk_discovers_the_gateway(gateway_url):
    async with httpx.AsyncClient(timeout=10) as http:
        card = await A2ACardResolver(http, gateway_url).get_agent_card()
    assert card.url.rstrip("/") == gateway_url
    assert card.preferred_transport == "JSONRPC"
    assert card.protocol_version == "0.3.0"
    assert [(i.transport, i.url) for i in card.additional_interfaces] == [("JSONRPC", card.url)]
    assert card.capabilities.streaming


async def test_blocking_send_then_get(gateway_url, make_client):
    client = await make_client(gateway_url)
    task = await only_task(client, user_message("string"))
    assert task.status.state == TaskState.completed, task.status
    assert [text_of(a.parts) for a in task.artifacts] == ["The answer is 42"]
    assert task.history and task.history[0].role == Role.user

    stored = await client.get_task(TaskQueryParams(id=task.id, history_length=1))
    assert stored.status.state == TaskState.completed
    assert [text_of(a.parts) for a in stored.artifacts] == ["The answer is 42"]
    assert len(stored.history) == 1


async def test_input_required_then_follow_up(gateway_url, make_client):
    client = await make_client(gateway_url)
    task = await only_task(client, user_message("input"))
    assert task.status.state == TaskState.input_required, task.status
    assert task.status.message.role == Role.agent
    assert text_of(task.status.message.parts) == "Which city?"

    done = await only_task(
        client, user_message("string", task_id=task.id, context_id=task.context_id)
    )
    assert done.id == task.id
    assert done.status.state == TaskState.completed


async def test_streaming_send(gateway_url, make_client):
    client = await make_client(gateway_url, streaming=True)

    async def run():
        return [e async for e in client.send_message(user_message("async"))]

    events = await asyncio.wait_for(run(), 30)
    updates = [u for _, u in events if u is not None]
    chunks = [u for u in updates if isinstance(u, TaskArtifactUpdateEvent)]
    assert len(chunks) >= 3 and not chunks[0].append, chunks
    assert all(c.append for c in chunks[1:]) and chunks[-1].last_chunk, chunks
    last = updates[-1]
    assert isinstance(last, TaskStatusUpdateEvent), updates
    assert last.status.state == TaskState.completed and last.final
    assert not any(u.final for u in updates[:-1] if isinstance(u, TaskStatusUpdateEvent))
    # The SDK's own task tracker folded the chunks into the finished task (it appends
    # in place, so the chunk events themselves are not read for the text).
    task, _ = events[-1]
    assert task.status.state == TaskState.completed
    assert [text_of(a.parts) for a in task.artifacts] == ["one two three"]


async def test_cancel_mid_stream(gateway_url, make_client):
    streaming = await make_client(gateway_url, streaming=True)
    control = await make_client(gateway_url)
    updates = []
    task_ids = []

    async def watch():
        async for task, update in streaming.send_message(user_message("slow")):
            task_ids.append(task.id)
            if update is not None:
                updates.append(update)

    watcher = asyncio.create_task(asyncio.wait_for(watch(), 20))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while sum(isinstance(u, TaskArtifactUpdateEvent) for u in updates) < 2:
        assert loop.time() < deadline and not watcher.done(), updates
        await asyncio.sleep(0.02)

    canceled = await control.cancel_task(TaskIdParams(id=task_ids[0]))
    assert canceled.status.state == TaskState.canceled
    await watcher
    assert isinstance(updates[-1], TaskStatusUpdateEvent)
    assert updates[-1].status.state == TaskState.canceled and updates[-1].final

    stored = await control.get_task(TaskQueryParams(id=task_ids[0]))
    assert stored.status.state == TaskState.canceled


async def test_resubscribe_to_a_running_task(gateway_url, make_client):
    """A non-blocking send returns at once; resubscribe follows the running task until
    it is canceled."""
    poller = await make_client(gateway_url, polling=True)
    watcher_client = await make_client(gateway_url, streaming=True)
    task = await only_task(poller, user_message("slow"))
    assert task.status.state in (TaskState.submitted, TaskState.working), task.status

    updates = []

    async def watch():
        async for _, update in watcher_client.resubscribe(TaskIdParams(id=task.id)):
            if update is not None:
                updates.append(update)

    watcher = asyncio.create_task(asyncio.wait_for(watch(), 20))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while sum(isinstance(u, TaskArtifactUpdateEvent) for u in updates) < 2:
        assert loop.time() < deadline and not watcher.done(), updates
        await asyncio.sleep(0.02)
    assert all(u.task_id == task.id for u in updates)

    canceled = await poller.cancel_task(TaskIdParams(id=task.id))
    assert canceled.status.state == TaskState.canceled
    await watcher
    assert isinstance(updates[-1], TaskStatusUpdateEvent)
    assert updates[-1].status.state == TaskState.canceled and updates[-1].final
