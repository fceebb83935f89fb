"""A real AgentCore runtime peer for the gateway's upstream tests.

BedrockAgentCoreApp (PyPI `bedrock-agentcore`) serves /invocations and /ping exactly
as a hosted agent does. The prompt selects the reply shape:

  dict       -> JSON object            string  -> JSON string literal
  sync       -> sync generator (SSE)   async   -> async generator (SSE)
  raise      -> async generator raising mid-stream (trailing error frame)
  raise-now  -> exception before any output (HTTP 500)
  input      -> control object asking for input
  message    -> control object answering with a direct Message (no task)
  message-stream -> async generator whose first frame is that Message control object
  session    -> the runtime session id the app saw (from the session header)
  identity   -> JSON text of what the app's request context says about the caller: the
                custom caller and tenant headers, and the SHA-256 of its Authorization
                header (never the token itself)
  slow       -> async generator: "tick " every 0.2 s for 20 s (to cancel mid-stream)

Usage: python upstream_agent.py PORT
"""

import asyncio
import hashlib
import json
import logging
import sys

from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()
# The failures below are on purpose: keep the app's tracebacks out of the test output.
logging.getLogger("bedrock_agentcore.app").setLevel(logging.CRITICAL)


def sync_gen():
    yield "Hel"
    yield "lo, "
    yield {"event": {"contentBlockDelta": {"delta": {"text": "w\u00f6rld \U0001F600"}}}}


async def async_gen():
    for piece in ["one ", "two ", "three"]:
        await asyncio.sleep(0.01)
        yield piece


async def raising():
    yield "partial "
    await asyncio.sleep(0.01)
    raise ValueError("boom mid-stream")


async def message_gen():
    yield {"a2a_control": "message", "text": "Streamed hello, no task."}
    yield "never read"


async def slow_gen():
    for _ in range(100):
        yield "tick "
        await asyncio.sleep(0.2)


CUSTOM = "x-amzn-bedrock-agentcore-runtime-custom-"


def identity_of(context) -> str:
    """The custom headers and a digest of Authorization, as the app's RequestContext has
    them (the app keeps only headers the runtime would forward)."""
    headers = {k.lower(): v for k, v in (context.request_headers or {}).items()}
    auth = headers.get("authorization")
    return json.dumps(
        {
            "caller": headers.get(CUSTOM + "caller"),
            "tenant": headers.get(CUSTOM + "tenant"),
            "authorization_sha256": auth and hashlib.sha256(auth.encode()).hexdigest(),
        }
    )


@app.entrypoint
def invoke(payload, context):
    prompt = payload.get("prompt", "")
    if prompt == "dict":
        return {"response": "from a dict", "actor": payload.get("actor_id")}
    if prompt == "string":
        return "The answer is 42"
    if prompt == "sync":
        return sync_gen()
    if prompt == "async":
        return async_gen()
    if prompt == "raise":
        return raising()
    if prompt == "raise-now":
        raise RuntimeError("refused before any output")
    if prompt == "input":
        return {"a2a_control": "input_required", "text": "Which city?"}
    if prompt == "message":
        return {"a2a_control": "message", "text": "Hello, no task needed."}
    if prompt == "message-stream":
        return message_gen()
    if prompt == "slow":
        return slow_gen()
    if prompt == "session":
        return context.session_id
    if prompt == "identity":
        return identity_of(context)
    if prompt.startswith("zeros "):
        # A JSON reply the gateway keeps as one data part: {"v": [0, 0, ...]}.
        return {"v": [0] * int(prompt.split()[1])}
    return {"echo": payload}


if __name__ == "__main__":
    app.run(port=int(sys.argv[1]), host="127.0.0.1")
