"""The official A2A Python client against one agent of a gateway serving several
(tests/agents.rs): it resolves the agent's card from the agent's own URL, picks the
card's interface for the binding asked, sends one message, reads the task back, and
prints one JSON line with what it saw.

    python agents_client.py '{"sdk": "1" | "03", "url": BASE, "binding": "JSONRPC" |
                              "HTTP+JSON", "key": API_KEY or null, "text": PROMPT}'

Prints {"card": name, "interface": url the client uses, "task": id, "state": name,
"text": artifact text, "got": state read back} or {"error": type, "message": text}.
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
    config = ClientConfig(
        streaming=False,
        httpx_client=http,
        supported_protocol_bindings=[spec["binding"]],
        **grpc_options,
    )
    try:
        client = await create_client(spec["url"], client_config=config)
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
