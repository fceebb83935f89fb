"""The official A2A Python SDK client (a2a-sdk 1.3.0, `[grpc]` extra) on its gRPC
transport drives `a2a-gateway serve` in front of a real AgentCore runtime app
(tests/python/upstream_agent.py). The SDK finds the gRPC interface in the gateway's
card (`protocolBinding: "GRPC"`, `host:port`) on the same port as JSON-RPC; errors
arrive as `google.rpc.Status` with `ErrorInfo`, which the SDK maps to its own error
types. The raw stubs shipped with the SDK check the `a2a-version` metadata.

Skipped (with the reason in pytest's summary) only while the built `a2a-gateway` binary
has no `serve` subcommand.
"""

import asyncio
import uuid

import grpc
import httpx
import pytest

from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from google.rpc import error_details_pb2, status_pb2

from interop import (
    HTTP_TIMEOUT_SECS,
    gateway_serve_missing,
    send_request,
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


@pytest.fixture
async def grpc_client(gateway_url):
    """make(streaming) -> the SDK's client, on gRPC chosen from the gateway's card."""
    opened = []

    async def make(*, streaming: bool = False):
        http = httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECS)
        config = ClientConfig(
            streaming=streaming,
            httpx_client=http,
            supported_protocol_bindings=["GRPC"],
            use_client_preference=True,
            grpc_channel_factory=lambda target: grpc.aio.insecure_channel(target),
        )
        client = await create_client(gateway_url, client_config=config)
        opened.append((client, http))
        return client

    yield make
    for client, http in opened:
        await client.close()
        await http.aclose()


def kind(event) -> str:
    return event.WhichOneof("payload")


def text_of(parts) -> str:
    return "".join(p.text for p in parts if p.WhichOneof("content") == "text")


def state_name(state: int) -> str:
    return TaskState.Name(state)


async def test_card_names_the_grpc_address(gateway_url):
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECS) as http:
        card = (await http.get(f"{gateway_url}/.well-known/agent-card.json")).json()
    grpc_interfaces = [
        i for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"
    ]
    assert grpc_interfaces, card
    assert grpc_interfaces[0]["url"] == gateway_url.removeprefix("http://")
    assert grpc_interfaces[0]["protocolVersion"] == "1.0"


async def test_blocking_send_get_and_list(grpc_client):
    client = await grpc_client()
    replies = [r async for r in client.send_message(send_request("dict"))]
    assert len(replies) == 1 and kind(replies[0]) == "task", replies
    task = replies[0].task
    assert state_name(task.status.state) == "TASK_STATE_COMPLETED"
    assert [text_of(a.parts) for a in task.artifacts] == ["from a dict"]

    got = await client.get_task(GetTaskRequest(id=task.id, history_length=0))
    assert got.id == task.id
    assert len(got.history) == 0
    listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
    assert [t.id for t in listed.tasks] == [task.id]
    assert listed.total_size == 1

    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id="no-such-task"))
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(CancelTaskRequest(id=task.id))


async def test_list_pages_of_large_data_parts_arrive_whole(grpc_client):
    """Five replies of 100,000 zeros, each a data part of about 200 KB as JSON and
    1.1 MB as protobuf: one ListTasks page as JSON, past the 4 MiB messages this
    client takes as protobuf. The gateway keeps gRPC pages within its page bound in
    protobuf bytes too; paging on returns every task once, whole."""
    client = await grpc_client()
    context_id = str(uuid.uuid4())
    ids = set()
    for _ in range(5):
        request = send_request("zeros 100000", context_id=context_id)
        replies = [r async for r in client.send_message(request)]
        assert kind(replies[0]) == "task", replies
        ids.add(replies[0].task.id)
    seen, pages, token = [], 0, ""
    while True:
        page = await client.list_tasks(
            ListTasksRequest(
                context_id=context_id, include_artifacts=True, page_token=token
            )
        )
        pages += 1
        assert page.total_size == 5
        for t in page.tasks:
            value = t.artifacts[0].parts[0].data.struct_value.fields["v"]
            assert len(value.list_value.values) == 100_000
            seen.append(t.id)
        token = page.next_page_token
        if not token:
            break
        assert pages < 10
    assert sorted(seen) == sorted(ids)
    assert pages > 1


async def test_streaming_send(grpc_client):
    client = await grpc_client(streaming=True)
    events = await asyncio.wait_for(
        _collect(client.send_message(send_request("async"))), 30
    )
    assert kind(events[0]) == "task", events
    chunks = [e.artifact_update for e in events if kind(e) == "artifact_update"]
    assert "".join(text_of(c.artifact.parts) for c in chunks) == "one two three"
    assert kind(events[-1]) == "status_update"
    assert state_name(events[-1].status_update.status.state) == "TASK_STATE_COMPLETED"


async def _collect(stream):
    return [e async for e in stream]


async def test_subscribe_then_cancel(grpc_client):
    """SubscribeToTask on a running task; CancelTask ends that stream CANCELED."""
    streaming = await grpc_client(streaming=True)
    control = await grpc_client()
    events = []

    async def watch():
        async for event in streaming.send_message(send_request("slow")):
            events.append(event)
            if kind(event) == "artifact_update":
                return

    await asyncio.wait_for(watch(), 20)
    task_id = events[0].task.id
    subscribed = []

    async def follow():
        async for event in streaming.subscribe(SubscribeToTaskRequest(id=task_id)):
            subscribed.append(event)

    follower = asyncio.create_task(asyncio.wait_for(follow(), 20))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not subscribed:
        assert loop.time() < deadline and not follower.done(), subscribed
        await asyncio.sleep(0.02)
    canceled = await control.cancel_task(CancelTaskRequest(id=task_id))
    assert state_name(canceled.status.state) == "TASK_STATE_CANCELED"
    await follower
    last = subscribed[-1]
    assert kind(last) == "status_update", subscribed
    assert state_name(last.status_update.status.state) == "TASK_STATE_CANCELED"


def _error_info(err: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    raw = dict(err.trailing_metadata() or ()).get("grpc-status-details-bin")
    assert raw, err
    status = status_pb2.Status.FromString(raw)
    assert status.code == err.code().value[0]
    info = error_details_pb2.ErrorInfo()
    assert status.details and status.details[0].Unpack(info), status
    return info


async def test_raw_stubs_see_version_and_error_details(gateway_url):
    target = gateway_url.removeprefix("http://")
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetTask(
                GetTaskRequest(id="whatever"), metadata=[("a2a-version", "2.0")]
            )
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        info = _error_info(caught.value)
        assert info.reason == "VERSION_NOT_SUPPORTED"
        assert info.domain == "a2a-protocol.org"

        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetTask(
                GetTaskRequest(id="missing"), metadata=[("a2a-version", "1.0")]
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        info = _error_info(caught.value)
        assert info.reason == "TASK_NOT_FOUND"
        assert info.metadata["taskId"] == "missing"

        # Bytes that are no GetTaskRequest: INVALID_ARGUMENT, never INTERNAL.
        raw = channel.unary_unary(
            "/lf.a2a.v1.A2AService/GetTask",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await raw(b"\xff\xff\xff")
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
