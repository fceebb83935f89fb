"""The agent behind the gateway when the A2A conformance kit (TCK) is run against it.

A real AgentCore runtime app (``BedrockAgentCoreApp`` from PyPI ``bedrock-agentcore``)
that serves ``/invocations`` and ``/ping`` as a hosted agent does. The gateway must run
with ``[upstream] include_message = true``: the kit signals the behaviour it wants
through the prefix of the A2A ``messageId`` (``tck-<scenario>-<session>``), which only
reaches the agent inside the forwarded message.

Every answer goes through the gateway's upstream contract (docs/upstream-contract.md):
SSE frames of text deltas and ``a2a_control`` objects. The kit's scenarios and what
this agent answers:

  tck-complete-task            the text "Hello from TCK", then COMPLETED
  tck-artifact-text            an artifact with the text "Generated text content"
  tck-artifact-file            an artifact with a file part (bytes "tck", output.txt, text/plain)
  tck-artifact-file-url        an artifact with a file part by URL (output.txt, text/plain)
  tck-artifact-data            an artifact with the data part {"key": "value", "count": 42}
  tck-message-response         a direct Message reply ("message" control object)
  tck-input-required           INPUT_REQUIRED
  tck-reject-task              REJECTED ("rejected")
  tck-stream-001 / -003,
  tck-stream-ordering-001,
  tck-stream-artifact-text     WORKING, one text artifact, COMPLETED
  tck-stream-artifact-file     WORKING, one file artifact, COMPLETED
  tck-stream-artifact-chunked  WORKING, one artifact in two chunks, COMPLETED
  tck-stream-002               COMPLETED without output
  test-resubscribe-message-id  WORKING, then COMPLETED after 2 x TCK_STREAMING_TIMEOUT s
  anything else                the text "Unhandled messageId prefix: <id>", then COMPLETED

The longest prefix is matched first (``tck-artifact-file-url`` before ``tck-artifact-file``).

Usage: python agent.py PORT
"""

import asyncio
import base64
import logging
import os
import sys

from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()
logging.getLogger("bedrock_agentcore.app").setLevel(logging.WARNING)

# How long the kit's resubscribe scenario must stay WORKING: 2 x its streaming timeout.
STREAMING_TIMEOUT_SECS = float(os.environ.get("TCK_STREAMING_TIMEOUT") or 2.0)

FILE_PART = {
    "raw": base64.b64encode(b"tck").decode(),
    "filename": "output.txt",
    "mediaType": "text/plain",
}
FILE_URL_PART = {
    "url": "https://example.com/output.txt",
    "filename": "output.txt",
    "mediaType": "text/plain",
}


def working():
    return {"a2a_control": "status", "text": "Working on it"}


def artifact(**fields):
    return {"a2a_control": "artifact", **fields}


async def complete_task(_):
    yield "Hello from TCK"


async def artifact_text(_):
    yield artifact(name="text", text="Generated text content")


async def artifact_file(_):
    yield artifact(name="file", parts=[FILE_PART])


async def artifact_file_url(_):
    yield artifact(name="file-url", parts=[FILE_URL_PART])


async def artifact_data(_):
    yield {"a2a_control": "data", "name": "data", "data": {"key": "value", "count": 42}}


async def message_response(_):
    yield {"a2a_control": "message", "text": "Direct message response"}


async def input_required(_):
    yield {"a2a_control": "input_required", "text": "The TCK asks for more input"}


async def reject_task(_):
    yield {"a2a_control": "reject", "text": "rejected"}


def stream_text(text):
    async def scenario(_):
        yield working()
        yield artifact(name="stream", text=text)

    return scenario


async def stream_file(_):
    yield working()
    yield artifact(name="file", parts=[FILE_PART])


async def stream_chunked(_):
    yield working()
    yield artifact(artifact_id="chunked", name="chunked", text="chunk-1 ", last_chunk=False)
    yield artifact(artifact_id="chunked", name="chunked", text="chunk-2", append=True, last_chunk=True)


async def stream_completed(_):
    return
    yield  # an async generator that yields nothing: COMPLETED without output


async def long_running(_):
    yield working()
    await asyncio.sleep(2 * STREAMING_TIMEOUT_SECS)


async def unhandled(message_id):
    yield f"Unhandled messageId prefix: {message_id}"


SCENARIOS = {
    "tck-complete-task": complete_task,
    "tck-artifact-text": artifact_text,
    "tck-artifact-file-url": artifact_file_url,
    "tck-artifact-file": artifact_file,
    "tck-artifact-data": artifact_data,
    "tck-message-response": message_response,
    "tck-input-required": input_required,
    "tck-reject-task": reject_task,
    "tck-stream-001": stream_text("Stream hello from TCK"),
    "tck-stream-002": stream_completed,
    "tck-stream-003": stream_text("Stream task lifecycle"),
    "tck-stream-ordering-001": stream_text("Ordered output"),
    "tck-stream-artifact-text": stream_text("Streamed text content"),
    "tck-stream-artifact-file": stream_file,
    "tck-stream-artifact-chunked": stream_chunked,
    "test-resubscribe-message-id": long_running,
}
# Longest prefix first, so that a prefix of another prefix never wins.
PREFIXES = sorted(SCENARIOS, key=len, reverse=True)


def scenario_for(message_id):
    """The scenario whose prefix starts ``message_id``, or the unhandled one."""
    for prefix in PREFIXES:
        if message_id.startswith(prefix):
            return SCENARIOS[prefix]
    return unhandled


@app.entrypoint
def invoke(payload, context):
    message_id = (payload.get("message") or {}).get("messageId", "")
    return scenario_for(message_id)(message_id)


if __name__ == "__main__":
    app.run(port=int(sys.argv[1]), host="127.0.0.1")
