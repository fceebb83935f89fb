"""The official a2a-sdk 1.x client driving the gateway in front of an upstream A2A agent
(tests/upstream_a2a.rs runs it; issue 41).

    python tests/python/a2a_upstream_client.py GATEWAY_URL BINDING

BINDING is JSONRPC or HTTP+JSON. Runs a streamed task and an ask / follow-up through
the gateway and prints one JSON line: the chunk texts and final state of the stream,
the final state and the agent's answer of the follow-up, the gateway's task id.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid

import httpx

TIMEOUT_SECS = 30


def message(text: str, *, task_id: str = "", context_id: str = ""):
    from a2a.types import Message, Part, Role

    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def state_name(state) -> str:
    from a2a.types import TaskState

    return TaskState.Name(state)


async def collect(stream) -> list:
    async def run():
        return [event async for event in stream]

    return await asyncio.wait_for(run(), TIMEOUT_SECS)


def last_state(events) -> str:
    for event in reversed(events):
        if event.HasField("status_update"):
            return state_name(event.status_update.status.state)
        if event.HasField("task"):
            return state_name(event.task.status.state)
    return ""


def ids_of(events) -> tuple[str, str]:
    for event in events:
        if event.HasField("task"):
            return event.task.id, event.task.context_id
        if event.HasField("status_update"):
            return event.status_update.task_id, event.status_update.context_id
    return "", ""


async def main(url: str, binding: str) -> None:
    from a2a.client import ClientConfig, ClientFactory
    from a2a.client.card_resolver import A2ACardResolver
    from a2a.types import GetTaskRequest, SendMessageRequest

    async with httpx.AsyncClient(timeout=TIMEOUT_SECS) as http:
        config = ClientConfig(
            streaming=True,
            httpx_client=http,
            supported_protocol_bindings=[binding],
            use_client_preference=True,
        )
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(config).create(card)
        out: dict = {"card_name": card.name}

        events = await collect(client.send_message(SendMessageRequest(message=message("stream 4 20"))))
        out["chunks"] = [
            "".join(p.text for p in e.artifact_update.artifact.parts)
            for e in events
            if e.HasField("artifact_update")
        ]
        out["stream_state"] = last_state(events)

        first = await collect(client.send_message(SendMessageRequest(message=message("ask"))))
        out["ask_state"] = last_state(first)
        task_id, context_id = ids_of(first)
        out["task_id"] = task_id
        second = await collect(
            client.send_message(
                SendMessageRequest(message=message("yes", task_id=task_id, context_id=context_id))
            )
        )
        out["follow_state"] = last_state(second)
        task = await asyncio.wait_for(client.get_task(GetTaskRequest(id=task_id)), TIMEOUT_SECS)
        answer = [
            "".join(p.text for p in a.parts) for a in task.artifacts if a.artifact_id == "answer"
        ]
        out["answer"] = json.loads(answer[0]) if answer else None
        await client.close()
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
