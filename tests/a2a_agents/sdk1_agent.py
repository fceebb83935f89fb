"""An upstream A2A 1.0 agent on the official Python SDK, a2a-sdk 1.x.

JSON-RPC at /, HTTP+JSON under / (/message:send, /tasks/{id}, ...), gRPC on a second
port (its address is the card's GRPC interface), the card at
/.well-known/agent-card.json, the call log at GET /calls. With --compat03 the SDK's
0.3 layer also answers 0.3 methods on JSON-RPC and the 0.3 REST paths.

    python sdk1_agent.py [PORT] [--no-streaming] [--break-after K] [--break-mode abort|eof]
                         [--calls-file PATH] [--compat03] [--no-grpc]

The bound HTTP port is printed alone on the first line of stdout.
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler  # noqa: E402
from a2a.server.routes import (  # noqa: E402
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore  # noqa: E402
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill  # noqa: E402
from starlette.applications import Starlette  # noqa: E402

from executor import ScenarioExecutor  # noqa: E402
from peer_common import CallLog, announce, bind, parse_options, serve  # noqa: E402


def card(port: int, grpc_port: int | None, streaming: bool, compat03: bool) -> AgentCard:
    base = f"http://127.0.0.1:{port}"
    interfaces = [
        AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=f"{base}/"),
        AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=base),
    ]
    if grpc_port:
        interfaces.append(
            AgentInterface(
                protocol_binding="GRPC", protocol_version="1.0", url=f"127.0.0.1:{grpc_port}"
            )
        )
    if compat03:
        interfaces += [
            AgentInterface(protocol_binding="JSONRPC", protocol_version="0.3", url=f"{base}/"),
            AgentInterface(protocol_binding="HTTP+JSON", protocol_version="0.3", url=base),
        ]
    return AgentCard(
        name="a2a-peer-sdk1",
        description="Test upstream agent on a2a-sdk 1.x: stream N, ask, fail, crash, slow, "
        "message, echo.",
        version="1.0.0",
        supported_interfaces=interfaces,
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
    opts = parse_options(__doc__.splitlines()[0])
    sock = bind(opts)
    port = sock.getsockname()[1]

    grpc_server = grpc_port = None
    if opts.grpc:
        import grpc.aio

        grpc_server = grpc.aio.server()
        grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")

    calls = CallLog(opts.calls_file)
    agent_card = card(port, grpc_port, opts.streaming, opts.compat03)
    handler = DefaultRequestHandler(
        agent_executor=ScenarioExecutor(calls, "sdk1"),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card,
    )
    routes = [
        calls.route(),
        *create_agent_card_routes(agent_card),
        *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=opts.compat03),
        *create_rest_routes(handler, enable_v0_3_compat=opts.compat03),
    ]
    app = Starlette(routes=routes)

    if grpc_server is not None:
        from a2a.types import a2a_pb2_grpc

        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
        await grpc_server.start()

    announce(port)
    try:
        await serve(app, sock, opts)
    finally:
        if grpc_server is not None:
            await grpc_server.stop(0.5)


if __name__ == "__main__":
    asyncio.run(main())
