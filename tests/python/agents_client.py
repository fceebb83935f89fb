"""The official A2A Python client against an agent of the gateway (tests/agents.rs,
tests/upstream_a2a.rs): it resolves the agent's card from the agent's own URL, picks the
card's interface for the binding asked, runs a scenario, and prints one JSON line with
what it saw.

    python agents_client.py '{"sdk": "1" | "03", "url": BASE, "binding": "JSONRPC" |
                              "HTTP+JSON" | "GRPC", "key": API_KEY or null, "text": PROMPT,
                              "scenario": "send" | "stream" | "ask" | "cancel"}'

Scenarios (the 1.x client; the 0.3 client runs `send` only):

- `send` (the default): one blocking message, then the task read back. Prints
  {"card": name, "interface": url the client uses, "transport": class, "task": id,
  "state": name, "text": artifact text, "got": state read back}.
- `stream`: the message sent streamed. Prints {"transport", "task", "chunks": the
  text of each artifact update in order, "states": each status update's state,
  "got": state read back}.
- `ask`: the message (`ask`), then a follow-up `42` in the task and context it
  answered. Prints {"transport", "task", "first": its state, "second": the follow-up's
  state, "second_task": the follow-up's task id, "answer": its artifact `answer`}.
- `cancel`: the message (`slow`) sent streamed; at its first artifact update the task
  is canceled. Prints {"transport", "task", "canceled": CancelTask's state, "got":
  state read back}.

On any error: {"error": type, "message": text}.
"""

import asyncio
import json
import sys
import uuid

import httpx


async def with_sdk1(spec: dict) -> dict:
    from a2a.client import A2ACardResolver, ClientConfig, create_client
    from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

    headers = {"Authorization": f"Bearer {spec['key']}"} if spec.get("key") else {}
    http = httpx.AsyncClient(timeout=20, headers=headers)
    grpc_options = {}
    if spec["binding"] == "GRPC":
        import grpc

        metadata = [("authorization", headers["Authorization"])] if headers else []

        class WithKey(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
            """Sends the API key as `authorization` metadata on every call."""

            def _with_key(self, details):
                return details._replace(metadata=list(details.metadata or []) + metadata)

            async def intercept_unary_unary(self, continuation, details, request):
                return await continuation(self._with_key(details), request)

            async def intercept_unary_stream(self, continuation, details, request):
                return await continuation(self._with_key(details), request)

        grpc_options = {
            "use_client_preference": True,
            "grpc_channel_factory": lambda target: grpc.aio.insecure_channel(
                target, interceptors=[WithKey()]
            ),
        }
    scenario = spec.get("scenario", "send")
    config = ClientConfig(
        streaming=scenario in ("stream", "cancel"),
        httpx_client=http,
        supported_protocol_bindings=[spec["binding"]],
        **grpc_options,
    )
    try:
        client = await create_client(spec["url"], client_config=config)
        transport = type(client._transport).__name__
        if scenario != "send":
            return await SCENARIOS[scenario](client, spec["text"]) | {"transport": transport}
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=spec["text"])],
        )
        replies = [r async for r in client.send_message(SendMessageRequest(message=message))]
        task = replies[0].task
        got = await client.get_task(GetTaskRequest(id=task.id))
        card = await A2ACardResolver(http, spec["url"]).get_agent_card()
        return {
            "card": card.name,
            "interface": getattr(client._transport, "url", None)
            or getattr(client._transport, "target", None),
            "transport": type(client._transport).__name__,
            "task": task.id,
            "state": TaskState.Name(task.status.state),
            "text": "".join(p.text for a in task.artifacts for p in a.parts),
            "got": TaskState.Name(got.status.state),
        }
    finally:
        await http.aclose()


def user(text: str, task_id: str = "", context_id: str = ""):
    from a2a.types.a2a_pb2 import Message, Part, Role

    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


async def stream1(client, text: str) -> dict:
    from a2a.types.a2a_pb2 import GetTaskRequest, SendMessageRequest, TaskState

    chunks, states, task = [], [], None
    async for r in client.send_message(SendMessageRequest(message=user(text))):
        if r.HasField("task"):
            task = r.task.id
        if r.HasField("artifact_update"):
            task = r.artifact_update.task_id
            chunks.append("".join(p.text for p in r.artifact_update.artifact.parts))
        if r.HasField("status_update"):
            task = r.status_update.task_id
            states.append(TaskState.Name(r.status_update.status.state))
    got = await client.get_task(GetTaskRequest(id=task))
    return {"task": task, "chunks": chunks, "states": states, "got": TaskState.Name(got.status.state)}


async def ask1(client, text: str) -> dict:
    from a2a.types.a2a_pb2 import SendMessageRequest, TaskState

    first = [r async for r in client.send_message(SendMessageRequest(message=user(text)))][0].task
    follow = user("42", task_id=first.id, context_id=first.context_id)
    second = [r async for r in client.send_message(SendMessageRequest(message=follow))][0].task
    return {
        "task": first.id,
        "first": TaskState.Name(first.status.state),
        "second": TaskState.Name(second.status.state),
        "second_task": second.id,
        "answer": "".join(p.text for a in second.artifacts if a.artifact_id == "answer" for p in a.parts),
    }


async def cancel1(client, text: str) -> dict:
    from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, SendMessageRequest, TaskState

    events = client.send_message(SendMessageRequest(message=user(text)))
    task = None
    try:
        async for r in events:
            if r.HasField("artifact_update"):
                task = r.artifact_update.task_id
                break
    finally:
        await events.aclose()
    canceled = await client.cancel_task(CancelTaskRequest(id=task))
    got = await client.get_task(GetTaskRequest(id=task))
    return {
        "task": task,
        "canceled": TaskState.Name(canceled.status.state),
        "got": TaskState.Name(got.status.state),
    }


SCENARIOS = {"stream": stream1, "ask": ask1, "cancel": cancel1}


async def with_sdk03(spec: dict) -> dict:
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, Task, TaskQueryParams, TextPart

    headers = {"Authorization": f"Bearer {spec['key']}"} if spec.get("key") else {}
    http = httpx.AsyncClient(timeout=20, headers=headers)
    try:
        card = await A2ACardResolver(http, spec["url"]).get_agent_card()
        client = await ClientFactory.connect(spec["url"], client_config=ClientConfig(httpx_client=http))
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.user,
            parts=[Part(root=TextPart(text=spec["text"]))],
        )
        replies = [r async for r in client.send_message(message)]
        task, _ = replies[0]
        assert isinstance(task, Task), replies
        got = await client.get_task(TaskQueryParams(id=task.id))
        return {
            "card": card.name,
            "interface": card.url,
            "task": task.id,
            "state": task.status.state.value,
            "text": "".join(
                p.root.text for a in task.artifacts or [] for p in a.parts if isinstance(p.root, TextPart)
            ),
            "got": got.status.state.value,
        }
    finally:
        await http.aclose()


async def main() -> None:
    spec = json.loads(sys.argv[1])
    run = with_sdk1 if spec.get("sdk", "1") == "1" else with_sdk03
    try:
        out = await asyncio.wait_for(run(spec), 60)
    except Exception as e:  # reported to the Rust test, which asserts on it
        out = {"error": type(e).__name__, "message": str(e)[:500]}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
