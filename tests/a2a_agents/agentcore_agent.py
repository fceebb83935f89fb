"""An upstream A2A agent as a container of an AgentCore A2A runtime runs it:
bedrock-agentcore's `build_a2a_app` (what `serve_a2a` serves on port 9000), JSON-RPC at
/, the card at /.well-known/agent-card.json, health at GET /ping, plus the call log at
GET /calls.

On a2a-sdk 1.x (bedrock-agentcore's `a2a-v1` extra, the tests' .venv) the app answers
A2A 1.0 methods (with `A2A-Version: 1.0`) and 0.3 methods on the same path, and its card
is the 1.0 shape; on a2a-sdk 0.3 (the `a2a` extra) it is a 0.3 agent.

    python agentcore_agent.py [PORT] [--no-streaming] [--break-after K]
                              [--break-mode abort|eof] [--calls-file PATH]

By default the card is the one the app builds itself (streaming declared); with
--no-streaming the card is this script's. The card advertises AGENTCORE_RUNTIME_URL
when set (as in a runtime), else http://127.0.0.1:PORT/. The bound port is printed alone
on the first line of stdout.
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bedrock_agentcore.runtime import build_a2a_app  # noqa: E402

from executor import SDK_GENERATION, ScenarioExecutor  # noqa: E402
from peer_common import CallLog, announce, bind, parse_options, serve  # noqa: E402


def card_without_streaming(url: str):
    from a2a.types import AgentCapabilities, AgentCard, AgentSkill

    common = dict(
        name="a2a-peer-agentcore",
        description="Test upstream agent in bedrock-agentcore's A2A app.",
        version="0.1.0",
        capabilities=AgentCapabilities(streaming=False),
        skills=[
            AgentSkill(
                id="scenarios",
                name="Test scenarios",
                description="The first word of the message picks the scenario.",
                tags=["test"],
            )
        ],
        default_input_modes=["text"],
        default_output_modes=["text"],
    )
    if SDK_GENERATION == "0.3":
        return AgentCard(url=url, **common)
    from a2a.types import AgentInterface

    return AgentCard(
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url)
        ],
        **common,
    )


async def main() -> None:
    opts = parse_options(__doc__.splitlines()[0])
    sock = bind(opts)
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"

    calls = CallLog(opts.calls_file)
    app = build_a2a_app(
        ScenarioExecutor(calls, "agentcore"),
        None if opts.streaming else card_without_streaming(url),
        runtime_url=url,
    )
    app.router.routes.insert(0, calls.route())

    announce(port)
    await serve(app, sock, opts)


if __name__ == "__main__":
    asyncio.run(main())
