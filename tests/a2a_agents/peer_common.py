"""What the Python upstream A2A agents share, whatever their SDK generation.

Only the standard library, Starlette and uvicorn are imported here (both a2a-sdk
generations bring Starlette; uvicorn is pinned beside each), so the 1.x agents and the
0.3 agent use the same scenario parsing, options, call log, stream breaker and server
start. Nothing here speaks A2A: each agent's executor does, with its own SDK.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import socket
import sys
import threading
import time

from dataclasses import dataclass, field
from typing import Any

SCENARIOS = ("stream", "ask", "fail", "crash", "slow", "message", "echo")

# Defaults of the scenarios (a message can override the stream ones, see parse_scenario).
STREAM_CHUNKS = 3
STREAM_INTERVAL_MS = 50
SLOW_TICK_SECS = 0.2
SLOW_TOTAL_SECS = 60.0

# The request headers an executor records in the call log (lower case).
RECORDED_HEADERS = (
    "a2a-version",
    "a2a-extensions",
    "x-a2a-extensions",
    "x-amzn-bedrock-agentcore-runtime-session-id",
    "x-amzn-bedrock-agentcore-runtime-request-id",
)


@dataclass
class Scenario:
    """What the agent does with one message: a scenario name, and for `stream` the
    number of chunks and the pause between them."""

    name: str
    chunks: int = STREAM_CHUNKS
    interval_ms: int = STREAM_INTERVAL_MS


_ID_PREFIX = re.compile(r"^(%s)(?:-(\d+))?(?:-(\d+))?(?:-|$)" % "|".join(SCENARIOS))


def parse_scenario(text: str, message_id: str = "") -> Scenario:
    """The scenario a message selects.

    The first word of the text names it (`stream 5 100` is five chunks 100 ms apart);
    when it names none, a messageId such as `stream-5-100-<anything>` or `slow-<uuid>`
    does; otherwise the message is echoed.
    """
    words = text.split()
    if words and words[0].lower() in SCENARIOS:
        name, numbers = words[0].lower(), words[1:3]
    else:
        match = _ID_PREFIX.match(message_id or "")
        if not match:
            return Scenario("echo")
        name, numbers = match.group(1), [n for n in match.groups()[1:] if n]
    scenario = Scenario(name)
    if name == "stream":
        if len(numbers) > 0 and numbers[0].isdigit():
            scenario.chunks = max(1, int(numbers[0]))
        if len(numbers) > 1 and numbers[1].isdigit():
            scenario.interval_ms = int(numbers[1])
    return scenario


def chunk_text(index: int, total: int) -> str:
    """The text of stream chunk `index` (1-based) of `total`."""
    return f"chunk {index}/{total}\n"


@dataclass
class Options:
    """Command line and environment of an agent (the command line wins)."""

    port: int = 0
    host: str = "127.0.0.1"
    streaming: bool = True
    break_after: int | None = None
    break_mode: str = "abort"
    calls_file: str | None = None
    compat03: bool = False
    grpc: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def parse_options(description: str, argv: list[str] | None = None) -> Options:
    env = os.environ
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "port",
        nargs="?",
        type=int,
        default=int(env.get("A2A_PEER_PORT", "0")),
        help="port on 127.0.0.1 (default A2A_PEER_PORT or 0: any free port); the bound "
        "port is printed alone on the first line of stdout",
    )
    parser.add_argument(
        "--no-streaming",
        action="store_true",
        default=env.get("A2A_PEER_NO_STREAMING", "") not in ("", "0"),
        help="declare capabilities.streaming=false (A2A_PEER_NO_STREAMING=1)",
    )
    parser.add_argument(
        "--break-after",
        type=int,
        default=int(env["A2A_PEER_BREAK_AFTER"]) if env.get("A2A_PEER_BREAK_AFTER") else None,
        metavar="K",
        help="break the first SSE stream of each task right after its K-th artifact "
        "update; the task goes on (A2A_PEER_BREAK_AFTER)",
    )
    parser.add_argument(
        "--break-mode",
        choices=("abort", "eof"),
        default=env.get("A2A_PEER_BREAK_MODE", "abort"),
        help="abort: the connection is dropped mid-body (no final chunk); eof: the body "
        "ends cleanly without a terminal event (A2A_PEER_BREAK_MODE)",
    )
    parser.add_argument(
        "--calls-file",
        default=env.get("A2A_PEER_CALLS_FILE") or None,
        help="append one JSON line per execute/cancel call to this file "
        "(A2A_PEER_CALLS_FILE); GET /calls lists them too",
    )
    parser.add_argument(
        "--compat03",
        action="store_true",
        default=env.get("A2A_PEER_COMPAT03", "") not in ("", "0"),
        help="(a2a-sdk 1.x agent) also serve A2A 0.3 on JSON-RPC and HTTP+JSON",
    )
    parser.add_argument(
        "--no-grpc",
        action="store_true",
        default=env.get("A2A_PEER_NO_GRPC", "") not in ("", "0"),
        help="(a2a-sdk 1.x agent) no gRPC interface",
    )
    args = parser.parse_args(argv)
    return Options(
        port=args.port,
        streaming=not args.no_streaming,
        break_after=args.break_after,
        break_mode=args.break_mode,
        calls_file=args.calls_file,
        compat03=args.compat03,
        grpc=not args.no_grpc,
    )


class CallLog:
    """The calls an executor saw, in memory (GET /calls) and, when configured, as JSON
    lines appended to a file, so a test can prove what reached the upstream."""

    def __init__(self, path: str | None):
        self.path = path
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, op: str, **fields: Any) -> None:
        entry = {"op": op, "at": round(time.time(), 3), **fields}
        line = json.dumps(entry, sort_keys=True)
        with self._lock:
            self.calls.append(entry)
            if self.path:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(line + "\n")

    def route(self):
        """A Starlette route answering GET /calls with {"calls": [...]}."""
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def calls(_request):
            with self._lock:
                return JSONResponse({"calls": list(self.calls)})

        return Route("/calls", calls, methods=["GET"])


def recorded_headers(headers: Any) -> dict[str, str]:
    """The RECORDED_HEADERS present in a header mapping (any case)."""
    if not headers:
        return {}
    lower = {str(k).lower(): v for k, v in dict(headers).items()}
    return {name: str(lower[name]) for name in RECORDED_HEADERS if name in lower}


# --- Breaking a stream on purpose -------------------------------------------------------

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_TASK_ID = re.compile(rb'"taskId"\s*:\s*"([^"]+)"')


class StreamBroken(Exception):
    """Raised to the ASGI server after a stream was broken on purpose, so that it drops
    the connection without finishing the chunked body."""


class BreakStreams:
    """ASGI middleware: the first SSE response carrying artifact updates of a task is
    cut right after its K-th artifact update (an `artifactUpdate` member in 1.0, a
    `"kind": "artifact-update"` object in 0.3), whatever the binding or method.

    From then on the SDK's app sees exactly what a vanished client looks like (its
    `receive` says http.disconnect, its `send` raises OSError), so the SDK decides by
    itself whether the task goes on; later streams of the same task (a resubscription)
    are left alone. `abort` drops the connection without the final chunk; `eof` ends the
    body cleanly."""

    def __init__(self, app, after: int, mode: str = "abort"):
        self.app = app
        self.after = after
        self.mode = mode
        self.broken_tasks: set[bytes] = set()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        state = {"sse": False, "pending": b"", "count": 0, "broken": False}
        broke = asyncio.Event()

        async def guarded_receive():
            if state["broken"]:
                return {"type": "http.disconnect"}
            receive_task = asyncio.ensure_future(receive())
            broke_task = asyncio.ensure_future(broke.wait())
            try:
                await asyncio.wait({receive_task, broke_task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (receive_task, broke_task):
                    if not task.done():
                        task.cancel()
            if receive_task.done() and not receive_task.cancelled():
                return receive_task.result()
            return {"type": "http.disconnect"}

        async def guarded_send(message):
            if state["broken"]:
                raise OSError("stream broken on purpose (peer option --break-after)")
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                state["sse"] = headers.get(b"content-type", b"").startswith(b"text/event-stream")
                return await send(message)
            if message["type"] != "http.response.body" or not state["sse"]:
                return await send(message)
            data = state["pending"] + message.get("body", b"")
            out, rest, cut = self._scan(data, state)
            state["pending"] = rest
            if not cut:
                if out or not message.get("more_body", False):
                    await send({**message, "body": out})
                return None
            await send({"type": "http.response.body", "body": out, "more_body": True})
            state["broken"] = True
            if self.mode == "eof":
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            broke.set()
            raise OSError("stream broken on purpose (peer option --break-after)")

        app_task = asyncio.ensure_future(self.app(scope, guarded_receive, guarded_send))
        broke_task = asyncio.ensure_future(broke.wait())
        try:
            await asyncio.wait({app_task, broke_task}, return_when=asyncio.FIRST_COMPLETED)
            if not app_task.done():
                # Broken: give the app a moment to notice the "client" is gone.
                await asyncio.wait({app_task}, timeout=1.0)
        finally:
            broke_task.cancel()
            if not app_task.done():
                app_task.cancel()
                await asyncio.gather(app_task, return_exceptions=True)
        if not state["broken"]:
            return app_task.result()
        if not app_task.cancelled():
            app_task.exception()  # seen: the app's reaction to the break is expected
        if self.mode == "abort":
            raise StreamBroken("stream broken on purpose")
        return None

    def _scan(self, data: bytes, state: dict) -> tuple[bytes, bytes, bool]:
        """Splits complete SSE events off `data`; returns (bytes to send, incomplete
        rest, whether the stream must be cut after the bytes to send)."""
        out = b""
        pos = 0
        while True:
            match = _EVENT_END.search(data, pos)
            if not match:
                return out, data[pos:], False
            event = data[pos : match.end()]
            pos = match.end()
            out += event
            if b'"artifactUpdate"' in event or b'"artifact-update"' in event:
                task = _TASK_ID.search(event)
                task_id = task.group(1) if task else b""
                if task_id in self.broken_tasks:
                    continue
                state["count"] += 1
                if state["count"] >= self.after:
                    self.broken_tasks.add(task_id)
                    return out, b"", True


class _QuietBreaks(logging.Filter):
    """Keeps uvicorn's traceback for a stream broken on purpose out of the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, StreamBroken)


# --- Starting -----------------------------------------------------------------------------


def bind(opts: Options) -> socket.socket:
    """The listening socket of the agent, bound before the app is built so the card can
    carry the real port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((opts.host, opts.port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def announce(port: int) -> None:
    """The first line of stdout: the bound port, alone."""
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()


def wrap(app, opts: Options):
    """The app with the stream breaker when --break-after is set."""
    if opts.break_after:
        return BreakStreams(app, opts.break_after, opts.break_mode)
    return app


async def serve(app, sock: socket.socket, opts: Options) -> None:
    """Runs `app` with uvicorn on the bound socket until SIGTERM/SIGINT."""
    import uvicorn

    logging.getLogger("uvicorn.error").addFilter(_QuietBreaks())
    config = uvicorn.Config(
        wrap(app, opts),
        log_level=os.environ.get("A2A_PEER_LOG_LEVEL", "warning"),
        timeout_graceful_shutdown=1,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    await server.serve(sockets=[sock])
