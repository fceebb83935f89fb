"""An upstream A2A 0.3 agent on the official Python SDK's last 0.3 release (a2a-sdk 0.3.x).

JSON-RPC 0.3 (message/send, message/stream, tasks/get, tasks/cancel, tasks/resubscribe)
at /, the card at /.well-known/agent-card.json, the call log at GET /calls.

    python sdk03_agent.py [PORT] [--no-streaming] [--break-after K] [--break-mode abort|eof]
                          [--calls-file PATH]

The bound port is printed alone on the first line of stdout.
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from a2a.server.apps import A2AStarletteApplication  # noqa: E402
from a2a.server.request_handlers import DefaultRequestHandler  # noqa: E402
from a2a.server.tasks import InMemoryTaskStore  # noqa: E402
from a2a.types import AgentCapabilities, AgentCard, AgentSkill  # noqa: E402
from starlette.applications import Starlette  # noqa: E402

from executor import SDK_GENERATION, ScenarioExecutor  # noqa: E402
from peer_common import CallLog, announce, bind, parse_options, serve  # noqa: E402


def card(port: int, streaming: bool) -> AgentCard:
    return AgentCard(
        name="a2a-peer-sdk03",
        description="Test upstream agent on a2a-sdk 0.3: stream N, ask, fail, crash, slow, "
        "message, echo.",
        url=f"http://127.0.0.1:{port}/",
        preferred_transport="JSONRPC",
        protocol_version="0.3.0",
        version="0.3.0",
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="scenarios",
                name="Test scenarios",
                description="The first word of the message picks the scenario.",
                tags=["test"],
            )
        ],
    )


async def main() -> None:
    if SDK_GENERATION != "0.3":
        sys.exit("sdk03_agent.py needs a2a-sdk 0.3.x (the .venv03 of the tests)")
    opts = parse_options(__doc__.splitlines()[0])
    sock = bind(opts)
    port = sock.getsockname()[1]

    calls = CallLog(opts.calls_file)
    agent_card = card(port, opts.streaming)
    handler = DefaultRequestHandler(
        agent_executor=ScenarioExecutor(calls, "sdk03"),
        task_store=InMemoryTaskStore(),
    )
    app = Starlette(routes=[calls.route()])
    A2AStarletteApplication(agent_card=agent_card, http_handler=handler).add_routes_to_app(app)

    announce(port)
    await serve(app, sock, opts)


if __name__ == "__main__":
    asyncio.run(main())
