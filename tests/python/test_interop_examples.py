"""The official A2A Python SDK client (a2a-sdk 1.3.0) drives our two example agents,
hello_world and release_review, over real sockets (A2A 1.0, JSON-RPC + SSE).

Every call goes through the SDK's public client API: the card is fetched and parsed by
the SDK (`create_client` -> `A2ACardResolver`), requests are built from the SDK's
protobuf types and serialised by its JSON-RPC transport, replies and SSE events are
parsed by it, and JSON-RPC errors come back as the SDK's typed exceptions.
"""

import asyncio
import uuid

import httpx
import pytest

from a2a.client import A2ACardResolver
from a2a.helpers.proto_helpers import get_artifact_text, get_message_text
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from interop import send_request

HELLO = "Hello, World! I have received your request ({})"
ASK = "State the release as service@1.2.3."
REVIEWED = "Release {} reviewed: no blocking issues found."

S = TaskState
TERMINAL = {S.TASK_STATE_COMPLETED, S.TASK_STATE_FAILED, S.TASK_STATE_CANCELED, S.TASK_STATE_REJECTED}


def kind(event: StreamResponse) -> str:
    return event.WhichOneof("payload")


def state_name(state: int) -> str:
    return TaskState.Name(state)


async def blocking_send(client, request) -> Task:
    """SendMessage (non-streaming client): exactly one reply, a Task."""
    replies = [r async for r in client.send_message(request)]
    assert len(replies) == 1, replies
    assert kind(replies[0]) == "task", replies[0]
    return replies[0].task


async def collect(stream, timeout: float = 20) -> list[StreamResponse]:
    """All events of an SSE stream, which must end by itself within `timeout`."""

    async def run():
        return [event async for event in stream]

    return await asyncio.wait_for(run(), timeout)


async def wait_for_state(client, task_id: str, wanted: set[int], timeout: float = 15) -> Task:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        if task.status.state in wanted:
            return task
        assert asyncio.get_running_loop().time() < deadline, (
            f"task {task_id} still {state_name(task.status.state)} after {timeout} s"
        )
        await asyncio.sleep(0.05)


# ---------------------------------------------------------------- agent card


async def test_sdk_resolves_the_card(hello_world_url):
    async with httpx.AsyncClient(timeout=10) as http:
        card = await A2ACardResolver(http, hello_world_url).get_agent_card()
    assert card.name == "Hello World Agent"
    assert card.capabilities.streaming
    assert not card.capabilities.push_notifications
    [rpc, rest, grpc, rpc03] = card.supported_interfaces
    assert (rpc.protocol_binding, rpc.protocol_version) == ("JSONRPC", "1.0")
    assert rpc.url.rstrip("/") == hello_world_url
    assert (rest.protocol_binding, rest.protocol_version) == ("HTTP+JSON", "1.0")
    assert rest.url == hello_world_url + "/a2a/rest"
    assert (grpc.protocol_binding, grpc.protocol_version) == ("GRPC", "1.0")
    assert grpc.url == hello_world_url.removeprefix("http://")
    assert (rpc03.protocol_binding, rpc03.protocol_version) == ("JSONRPC", "0.3")
    assert rpc03.url == rpc.url
    assert [s.id for s in card.skills] == ["hello_world"]


# ---------------------------------------------------------------- blocking send


async def test_blocking_send_returns_the_completed_task(hello_world_url, make_client):
    client = await make_client(hello_world_url)
    request = send_request("hi there")
    task = await blocking_send(client, request)
    assert state_name(task.status.state) == "TASK_STATE_COMPLETED"
    assert task.id and task.context_id
    [artifact] = task.artifacts
    assert artifact.name == "result"
    assert get_artifact_text(artifact) == HELLO.format("hi there")
    # The user's message is in the history, with the ids the server assigned.
    user = [m for m in task.history if m.message_id == request.message.message_id]
    assert len(user) == 1
    assert user[0].task_id == task.id and user[0].context_id == task.context_id

    # GetTask sees the same task.
    again = await client.get_task(GetTaskRequest(id=task.id))
    assert again.id == task.id
    assert state_name(again.status.state) == "TASK_STATE_COMPLETED"
    assert [get_artifact_text(a) for a in again.artifacts] == [HELLO.format("hi there")]


async def test_client_context_id_is_kept(hello_world_url, make_client):
    client = await make_client(hello_world_url)
    context_id = str(uuid.uuid4())
    task = await blocking_send(client, send_request("ctx", context_id=context_id))
    assert task.context_id == context_id


async def test_get_unknown_task_raises_task_not_found(hello_world_url, make_client):
    client = await make_client(hello_world_url)
    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))


# ---------------------------------------------------------------- returnImmediately


async def test_return_immediately_then_get_task(hello_world_url, make_client):
    client = await make_client(hello_world_url)
    request = send_request("later")
    request.configuration.return_immediately = True
    task = await blocking_send(client, request)
    assert state_name(task.status.state) in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
    done = await wait_for_state(client, task.id, TERMINAL)
    assert state_name(done.status.state) == "TASK_STATE_COMPLETED"
    assert [get_artifact_text(a) for a in done.artifacts] == [HELLO.format("later")]


async def test_return_immediately_on_a_slow_review(slow_release_review_url, make_client):
    client = await make_client(slow_release_review_url)
    request = send_request("Review checkout@2.4.1")
    request.configuration.return_immediately = True
    loop = asyncio.get_running_loop()
    started = loop.time()
    task = await blocking_send(client, request)
    assert loop.time() - started < 2, "returnImmediately waited for the 3 s review"
    assert state_name(task.status.state) in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
    assert not task.artifacts

    running = await client.get_task(GetTaskRequest(id=task.id))
    assert state_name(running.status.state) in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}

    done = await wait_for_state(client, task.id, TERMINAL)
    assert state_name(done.status.state) == "TASK_STATE_COMPLETED"
    assert [get_artifact_text(a) for a in done.artifacts] == [REVIEWED.format("checkout@2.4.1")]


# ---------------------------------------------------------------- streaming


async def test_streaming_event_order_hello_world(hello_world_url, make_client):
    client = await make_client(hello_world_url, streaming=True)
    events = await collect(client.send_message(send_request("stream me")))
    assert [kind(e) for e in events] == ["task", "status_update", "artifact_update", "status_update"]
    task, working, artifact, completed = events

    assert state_name(task.task.status.state) == "TASK_STATE_SUBMITTED"
    task_id, context_id = task.task.id, task.task.context_id
    for e in (working.status_update, artifact.artifact_update, completed.status_update):
        assert (e.task_id, e.context_id) == (task_id, context_id)

    assert state_name(working.status_update.status.state) == "TASK_STATE_WORKING"
    assert get_message_text(working.status_update.status.message) == "Processing request..."

    update = artifact.artifact_update
    assert update.artifact.name == "result"
    assert get_artifact_text(update.artifact) == HELLO.format("stream me")
    assert update.last_chunk and not update.append

    assert state_name(completed.status_update.status.state) == "TASK_STATE_COMPLETED"

    stored = await client.get_task(GetTaskRequest(id=task_id))
    assert state_name(stored.status.state) == "TASK_STATE_COMPLETED"
    assert [a.artifact_id for a in stored.artifacts] == [update.artifact.artifact_id]


async def test_streaming_event_order_release_review(release_review_url, make_client):
    client = await make_client(release_review_url, streaming=True)
    events = await collect(client.send_message(send_request("Please review billing-api@2.10.3")))
    assert [kind(e) for e in events] == ["task", "status_update", "artifact_update", "status_update"]
    _, working, artifact, completed = events
    assert state_name(working.status_update.status.state) == "TASK_STATE_WORKING"
    assert get_message_text(working.status_update.status.message) == "Reviewing billing-api@2.10.3."
    assert artifact.artifact_update.artifact.name == "review"
    assert get_artifact_text(artifact.artifact_update.artifact) == REVIEWED.format("billing-api@2.10.3")
    assert state_name(completed.status_update.status.state) == "TASK_STATE_COMPLETED"
    assert get_message_text(completed.status_update.status.message) == "Review of billing-api@2.10.3 complete."


# ---------------------------------------------------------------- SubscribeToTask


async def test_subscribe_to_a_running_review(slow_release_review_url, make_client):
    client = await make_client(slow_release_review_url, streaming=True)
    request = send_request("Review payments@3.0.0")
    request.configuration.return_immediately = True
    blocking = await make_client(slow_release_review_url)
    task = await blocking_send(blocking, request)

    # Two subscribers at once: both get the snapshot first, then the same live events.
    first, second = await asyncio.gather(
        collect(client.subscribe(SubscribeToTaskRequest(id=task.id))),
        collect(client.subscribe(SubscribeToTaskRequest(id=task.id))),
    )
    for events in (first, second):
        assert kind(events[0]) == "task"
        assert events[0].task.id == task.id
        assert state_name(events[0].task.status.state) in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
        live = [kind(e) for e in events[1:]]
        assert live[-2:] == ["artifact_update", "status_update"], live
        assert set(live[:-2]) <= {"status_update"}, live
        assert get_artifact_text(events[-2].artifact_update.artifact) == REVIEWED.format("payments@3.0.0")
        assert state_name(events[-1].status_update.status.state) == "TASK_STATE_COMPLETED"
    assert first[-2:] == second[-2:]

    # Subscribing to a finished task is refused; an unknown one is not found.
    with pytest.raises(UnsupportedOperationError):
        await collect(client.subscribe(SubscribeToTaskRequest(id=task.id)))
    with pytest.raises(TaskNotFoundError):
        await collect(client.subscribe(SubscribeToTaskRequest(id=str(uuid.uuid4()))))


# ---------------------------------------------------------------- CancelTask


async def test_cancel_a_running_review(slow_release_review_url, make_client):
    client = await make_client(slow_release_review_url)
    request = send_request("Review search@1.0.0")
    request.configuration.return_immediately = True
    task = await blocking_send(client, request)
    await wait_for_state(client, task.id, {S.TASK_STATE_WORKING})

    canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
    assert canceled.id == task.id
    assert state_name(canceled.status.state) == "TASK_STATE_CANCELED"

    stored = await client.get_task(GetTaskRequest(id=task.id))
    assert state_name(stored.status.state) == "TASK_STATE_CANCELED"
    assert not stored.artifacts

    # Cancelling again is idempotent: the CANCELED task, the same way each time.
    for _ in range(2):
        again = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert again.id == task.id
        assert state_name(again.status.state) == "TASK_STATE_CANCELED"

    # The review never completes behind our back.
    await asyncio.sleep(0.2)
    stored = await client.get_task(GetTaskRequest(id=task.id))
    assert state_name(stored.status.state) == "TASK_STATE_CANCELED"


async def test_cancel_ends_an_open_stream(slow_release_review_url, make_client):
    streaming = await make_client(slow_release_review_url, streaming=True)
    control = await make_client(slow_release_review_url)
    events: list[StreamResponse] = []

    async def watch():
        async for event in streaming.send_message(send_request("Review ledger@0.9.1")):
            events.append(event)

    watcher = asyncio.create_task(asyncio.wait_for(watch(), 20))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not any(kind(e) == "status_update" and e.status_update.status.state == S.TASK_STATE_WORKING for e in events):
        assert loop.time() < deadline and not watcher.done(), events
        await asyncio.sleep(0.02)
    task_id = events[0].task.id
    canceled = await control.cancel_task(CancelTaskRequest(id=task_id))
    assert state_name(canceled.status.state) == "TASK_STATE_CANCELED"
    await watcher

    assert [kind(e) for e in events] == ["task", "status_update", "status_update"]
    assert state_name(events[-1].status_update.status.state) == "TASK_STATE_CANCELED"


async def test_cancel_a_completed_or_unknown_task(hello_world_url, make_client):
    client = await make_client(hello_world_url)
    task = await blocking_send(client, send_request("done"))
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(CancelTaskRequest(id=task.id))
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task(CancelTaskRequest(id=str(uuid.uuid4())))


# ---------------------------------------------------------------- ListTasks


async def test_list_tasks_paging(hello_world_url, make_client):
    client = await make_client(hello_world_url)
    context_id = str(uuid.uuid4())
    created = [
        (await blocking_send(client, send_request(f"task {i}", context_id=context_id))).id
        for i in range(7)
    ]
    assert len(set(created)) == 7

    seen: list[Task] = []
    token = ""
    pages = []
    for _ in range(10):
        page = await client.list_tasks(
            ListTasksRequest(context_id=context_id, page_size=3, page_token=token)
        )
        assert page.total_size == 7
        assert page.page_size == 3
        pages.append(len(page.tasks))
        seen.extend(page.tasks)
        token = page.next_page_token
        if not token:
            break
    assert pages == [3, 3, 1]
    ids = [t.id for t in seen]
    assert len(ids) == len(set(ids)), "a task appeared on two pages"
    assert set(ids) == set(created)
    # Newest status first.
    stamps = [t.status.timestamp.ToDatetime() for t in seen]
    assert stamps == sorted(stamps, reverse=True)
    # Artifacts only when asked for.
    assert all(len(t.artifacts) == 0 for t in seen)
    assert all(t.context_id == context_id for t in seen)

    with_artifacts = await client.list_tasks(
        ListTasksRequest(context_id=context_id, page_size=100, include_artifacts=True)
    )
    assert len(with_artifacts.tasks) == 7 and not with_artifacts.next_page_token
    assert {get_artifact_text(t.artifacts[0]) for t in with_artifacts.tasks} == {
        HELLO.format(f"task {i}") for i in range(7)
    }

    by_status = await client.list_tasks(
        ListTasksRequest(context_id=context_id, status=S.TASK_STATE_CANCELED)
    )
    assert by_status.total_size == 0 and not by_status.tasks

    with pytest.raises(InvalidParamsError):
        await client.list_tasks(ListTasksRequest(page_size=101))


async def test_list_all_tasks_follows_tokens_without_duplicates(hello_world_url, make_client):
    client = await make_client(hello_world_url)
    for i in range(5):
        await blocking_send(client, send_request(f"more {i}"))
    first = await client.list_tasks(ListTasksRequest(page_size=2))
    total = first.total_size
    assert total >= 5
    ids = [t.id for t in first.tasks]
    token = first.next_page_token
    while token:
        page = await client.list_tasks(ListTasksRequest(page_size=2, page_token=token))
        assert page.total_size == total
        ids.extend(t.id for t in page.tasks)
        token = page.next_page_token
        assert len(ids) <= total
    assert len(ids) == total == len(set(ids))


# ---------------------------------------------------------------- input-required follow-up


async def test_input_required_then_follow_up(release_review_url, make_client):
    client = await make_client(release_review_url)
    asked = await blocking_send(client, send_request("Please review my release"))
    assert state_name(asked.status.state) == "TASK_STATE_INPUT_REQUIRED"
    assert get_message_text(asked.status.message) == ASK
    assert not asked.artifacts

    follow_up = send_request("checkout@2.4.1", task_id=asked.id, context_id=asked.context_id)
    done = await blocking_send(client, follow_up)
    assert done.id == asked.id and done.context_id == asked.context_id
    assert state_name(done.status.state) == "TASK_STATE_COMPLETED"
    [artifact] = done.artifacts
    assert artifact.name == "review"
    assert get_artifact_text(artifact) == REVIEWED.format("checkout@2.4.1")
    user_texts = [get_message_text(m) for m in done.history if m.role == 1]
    assert user_texts == ["Please review my release", "checkout@2.4.1"]

    # The task is finished: another message on it is refused.
    with pytest.raises(UnsupportedOperationError):
        await blocking_send(client, send_request("again", task_id=done.id, context_id=done.context_id))


async def test_input_required_follow_up_streaming(release_review_url, make_client):
    client = await make_client(release_review_url, streaming=True)
    first = await collect(client.send_message(send_request("Review it, please")))
    # The stream closes after INPUT_REQUIRED.
    assert [kind(e) for e in first] == ["task", "status_update"]
    task = first[0].task
    asked = first[1].status_update.status
    assert state_name(asked.state) == "TASK_STATE_INPUT_REQUIRED"
    assert get_message_text(asked.message) == ASK

    second = await collect(
        client.send_message(send_request("checkout@2.4.1", task_id=task.id, context_id=task.context_id))
    )
    kinds = [kind(e) for e in second]
    assert kinds == ["task", "status_update", "artifact_update", "status_update"], kinds
    assert second[0].task.id == task.id
    assert state_name(second[1].status_update.status.state) == "TASK_STATE_WORKING"
    assert get_artifact_text(second[2].artifact_update.artifact) == REVIEWED.format("checkout@2.4.1")
    assert state_name(second[3].status_update.status.state) == "TASK_STATE_COMPLETED"


async def test_follow_up_with_a_different_context_is_invalid(release_review_url, make_client):
    client = await make_client(release_review_url)
    asked = await blocking_send(client, send_request("review please"))
    assert state_name(asked.status.state) == "TASK_STATE_INPUT_REQUIRED"
    with pytest.raises(InvalidParamsError):
        await blocking_send(
            client, send_request("checkout@2.4.1", task_id=asked.id, context_id=str(uuid.uuid4()))
        )


# ---------------------------------------------------------------- wire shapes the SDK produces


async def test_sdk_part_kinds_and_metadata_round_trip(hello_world_url, make_client):
    """data, raw (base64), url parts and metadata, as the SDK serialises them, come back
    unchanged in the task history; only the text parts reach the agent."""
    from google.protobuf import struct_pb2
    from a2a.types.a2a_pb2 import Part

    client = await make_client(hello_world_url)
    request = send_request("mixed")
    data = struct_pb2.Value()
    data.struct_value.update({"k": [1, "x"], "nested": {"ok": True}})
    request.message.parts.append(Part(data=data))
    request.message.parts.append(
        Part(raw=b"\x00\x01\xffbinary", media_type="application/octet-stream", filename="b.bin")
    )
    request.message.parts.append(Part(url="https://example.com/x.png", media_type="image/png"))
    request.message.metadata.update({"trace": "abc", "n": 2})
    task = await blocking_send(client, request)
    assert state_name(task.status.state) == "TASK_STATE_COMPLETED"
    assert get_artifact_text(task.artifacts[0]) == HELLO.format("mixed")

    [echoed] = [m for m in task.history if m.message_id == request.message.message_id]
    assert list(echoed.parts) == list(request.message.parts)
    assert echoed.metadata == request.message.metadata


async def test_history_length(hello_world_url, make_client):
    client = await make_client(hello_world_url)
    request = send_request("short history")
    request.configuration.history_length = 0
    task = await blocking_send(client, request)
    assert state_name(task.status.state) == "TASK_STATE_COMPLETED"
    assert len(task.history) == 0

    full = await client.get_task(GetTaskRequest(id=task.id))
    assert len(full.history) >= 2  # the user's message and the agent's WORKING message
    last = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
    assert list(last.history) == list(full.history[-1:])

    with pytest.raises(InvalidParamsError):
        await client.get_task(GetTaskRequest(id=task.id, history_length=-1))


async def test_list_tasks_status_timestamp_after(hello_world_url, make_client):
    """The SDK writes Timestamps with micro- or nanosecond fractions."""
    import datetime

    from google.protobuf import timestamp_pb2

    client = await make_client(hello_world_url)
    context_id = str(uuid.uuid4())
    task = await blocking_send(client, send_request("stamped", context_id=context_id))

    def stamp(delta: datetime.timedelta):
        ts = timestamp_pb2.Timestamp()
        ts.FromDatetime(task.status.timestamp.ToDatetime() + delta)
        return ts

    before = await client.list_tasks(
        ListTasksRequest(context_id=context_id, status_timestamp_after=stamp(-datetime.timedelta(seconds=5, microseconds=123457)))
    )
    assert [t.id for t in before.tasks] == [task.id] and before.total_size == 1
    after = await client.list_tasks(
        ListTasksRequest(context_id=context_id, status_timestamp_after=stamp(datetime.timedelta(seconds=5, microseconds=1)))
    )
    assert not after.tasks and after.total_size == 0


async def test_push_notification_config_is_not_supported(hello_world_url, make_client):
    from a2a.types.a2a_pb2 import TaskPushNotificationConfig
    from a2a.utils.errors import PushNotificationNotSupportedError

    client = await make_client(hello_world_url)
    task = await blocking_send(client, send_request("push?"))
    with pytest.raises(PushNotificationNotSupportedError):
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url="https://example.com/hook")
        )
