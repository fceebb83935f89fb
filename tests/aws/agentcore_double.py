"""A loopback double of Amazon Bedrock AgentCore Runtime's data plane, IAM (SigV4) mode.

It serves the two operations of the botocore service model for ``bedrock-agentcore``
that the gateway calls:

  POST /runtimes/{url-encoded ARN}/invocations?qualifier=Q       InvokeAgentRuntime
  POST /runtimes/{url-encoded ARN}/stopruntimesession?qualifier=Q StopRuntimeSession

and verifies every request's SigV4 signature by recomputing it with botocore over the
request as received (sigv4_check.py). A verified invocation goes to a real
``BedrockAgentCoreApp`` (PyPI ``bedrock-agentcore``) at ``/invocations``, so the reply is
shaped exactly as a hosted agent's: JSON for a return value, SSE ``data:`` frames for a
generator, a trailing ``{"error", "error_type", ...}`` frame on a mid-stream failure.
The front door adds what the service adds: the ``X-Amzn-Bedrock-AgentCore-Runtime-Session-Id``
response header (a generated id when the request had none), ``x-amzn-RequestId``, and
424 RuntimeClientError when the agent answers 4xx/5xx.

The prompt (``{"prompt": "..."}``) picks the agent's reply:
  echo TEXT   -> the JSON string "TEXT"
  stream N    -> N SSE frames "chunk-1 " ... "chunk-N " (JSON strings)
  slow [S]    -> SSE "tick " every 0.2 s for S seconds (default 20); ends at once when
                 StopRuntimeSession stops the session
  sleep S     -> waits S seconds, then the JSON object {"slept": S}
  whoami      -> JSON: the session id the agent saw, the workload access token the
                 double minted for the User-Id header ("double-wat-for:<user id>"), and
                 the X-Amzn-Bedrock-AgentCore-Runtime-Custom-* headers it received
  fail        -> the agent raises before any output (the front door answers 424)
  fail-stream -> one frame, then the agent's trailing error frame
  anything else, or no prompt -> {"echo": <payload>}

With --forward-a2a URL it stands for an A2A runtime (serverProtocol A2A) instead: a
verified POST or GET to ``/runtimes/{ARN}/invocations/<rest>`` goes, without its AWS
auth and with the session id, to the A2A agent at ``URL<rest>`` (JSON-RPC at ``/``, the
card at ``/.well-known/agent-card.json``), and its answer streams back.

Failures (a JSON body ``{"message": ...}`` and the ``x-amzn-ErrorType`` header):
  403 MissingAuthenticationTokenException  no Authorization header, or an unknown route
  403 AccessDeniedException                a Bearer token ("Authorization method mismatch");
                                           --deny-key; --deny-user-id with a User-Id header
  403 IncompleteSignatureException         a part of the Authorization header missing
  403 InvalidSignatureException            signature, scope (region, service, date) wrong;
                                           with --strict (default), also a header sent but
                                           not signed among host, x-amz-date, content-type,
                                           x-amz-*, x-amzn-bedrock-agentcore-runtime-*
  400 RequestExpired                       x-amz-date more than --max-skew s off the
                                           double's clock (--clock-offset moves that clock)
  403 UnrecognizedClientException          unknown access key, or not the session token
                                           issued with it
  403 ExpiredTokenException                credentials past the Expiration they were issued
                                           with; --expired-key; --expire-next N
  400 ValidationException                  session id not 33-256 characters, no session id
                                           on StopRuntimeSession
  404 ResourceNotFoundException            --arn given and the path names another runtime;
                                           StopRuntimeSession of a session never invoked
  424 RuntimeClientError                   the agent answered 4xx/5xx

Usage:
  python agentcore_double.py [--port 0] [--region us-east-1] [--key AKID:SECRET[:TOKEN]]...
      [--keys-file FILE] [--arn ARN] [--expire-next N] [--expired-key AKID]...
      [--deny-key AKID]... [--deny-user-id] [--max-skew 900] [--clock-offset 0]
      [--skew-error RequestExpired|InvalidSignatureException] [--no-strict]
      [--error-type-uri]

Prints ``http://127.0.0.1:PORT`` as its first stdout line; stops on SIGTERM.
Control and records (JSON):
  GET  /_calls    every request: method, raw path, query, ARN, qualifier, headers
                  (Authorization and the session token summarised, never echoed),
                  verified, status, error type, access key id, signed and unsigned
                  headers, session id, user id, body (first 4 KB)
  POST /_control  change settings at run time: {"expire_next": 1, "expired_keys": [...],
                  "deny_keys": [...], "deny_user_id": true, "clock_offset": -1200,
                  "max_skew": 900, "skew_error": "...", "strict": false,
                  "error_type_uri": true}
  POST /_keys     learn credentials: {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}
  POST /_reset    forget the records and sessions
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import re
import socket
import sys
import threading
import time
import uuid
from urllib.parse import unquote

import uvicorn
from bedrock_agentcore.runtime import BedrockAgentCoreApp, BedrockAgentCoreContext

from sigv4_check import Known, KeyStore, parse_iso8601, utcnow, verify

SERVICE = "bedrock-agentcore"
SESSION_HEADER = "x-amzn-bedrock-agentcore-runtime-session-id"
USER_HEADER = "x-amzn-bedrock-agentcore-runtime-user-id"
RUNTIME_PREFIX = "x-amzn-bedrock-agentcore-runtime-"
CUSTOM_PREFIX = "x-amzn-bedrock-agentcore-runtime-custom-"
CORAL_SUFFIX = ":http://internal.amazon.com/coral/com.amazon.coral.service/"
ROUTE = re.compile(r"/runtimes/([^/]+)/(invocations(?:/.*)?|stopruntimesession)")
MISMATCH = ("Authorization method mismatch. The agent is configured for a different "
            "authorization method than what was used in your request (OAuth or SigV4).")

# Sessions the double has seen, and the stop signal the slow agent watches.
SESSIONS: dict[str, dict] = {}
STOPPED: dict[str, threading.Event] = {}
LOCK = threading.Lock()


def stop_event(session_id: str | None) -> threading.Event:
    with LOCK:
        return STOPPED.setdefault(session_id or "", threading.Event())


# ---------------------------------------------------------------- the agent (real SDK app)

agent = BedrockAgentCoreApp()
logging.getLogger("bedrock_agentcore.app").setLevel(logging.CRITICAL)


async def _stream(n: int):
    for i in range(1, n + 1):
        yield f"chunk-{i} "
        await asyncio.sleep(0)


async def _slow(seconds: float, session_id: str | None):
    stopped = stop_event(session_id)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stopped.is_set():
        yield "tick "
        await asyncio.sleep(0.2)


async def _fail_stream():
    yield "partial "
    await asyncio.sleep(0)
    raise RuntimeError("the agent failed mid-stream")


@agent.entrypoint
async def invoke(payload, context):
    prompt = payload.get("prompt") if isinstance(payload, dict) else None
    if not isinstance(prompt, str):
        return {"echo": payload}
    word, _, rest = prompt.partition(" ")
    if word == "echo":
        return rest
    if word == "stream":
        return _stream(int(rest or "3"))
    if word == "slow":
        return _slow(float(rest or "20"), context.session_id)
    if word == "sleep":
        await asyncio.sleep(float(rest or "1"))
        return {"slept": float(rest or "1")}
    if word == "whoami":
        headers = {k.lower(): v for k, v in (context.request_headers or {}).items()}
        return {
            "session_id": context.session_id,
            "workload_access_token": BedrockAgentCoreContext.get_workload_access_token(),
            "custom_headers": {k: v for k, v in headers.items() if k.startswith(CUSTOM_PREFIX)},
        }
    if word == "fail":
        raise RuntimeError("the agent failed before any output")
    if word == "fail-stream":
        return _fail_stream()
    return {"echo": payload}


# ---------------------------------------------------------------- the front door


class Settings:
    def __init__(self, args):
        self.region = args.region
        self.arn = args.arn
        self.expire_next = args.expire_next
        self.expired_keys = set(args.expired_key)
        self.deny_keys = set(args.deny_key)
        self.deny_user_id = args.deny_user_id
        self.max_skew = args.max_skew
        self.clock_offset = args.clock_offset
        self.skew_error = args.skew_error
        self.strict = args.strict
        self.error_type_uri = args.error_type_uri
        self.forward_a2a = args.forward_a2a

    def update(self, changes: dict) -> None:
        for key, value in changes.items():
            if not hasattr(self, key):
                raise KeyError(key)
            if key in ("expired_keys", "deny_keys"):
                value = set(value)
            setattr(self, key, value)

    def view(self) -> dict:
        return {k: sorted(v) if isinstance(v, set) else v for k, v in vars(self).items()}


def must_be_signed(name: str) -> bool:
    return (name in ("host", "x-amz-date", "content-type") or name.startswith("x-amz-")
            or name.startswith(RUNTIME_PREFIX))


class FrontDoor:
    def __init__(self, settings: Settings, keys: KeyStore):
        self.settings = settings
        self.keys = keys
        self.calls: list[dict] = []
        self.lock = threading.Lock()

    # -- plumbing

    @staticmethod
    async def body_of(receive) -> bytes:
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        return b"".join(chunks)

    @staticmethod
    async def reply(send, status: int, body: dict | list, headers: list[tuple[str, str]] = ()) -> None:
        data = json.dumps(body).encode()
        raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        raw += [(k.encode(), v.encode()) for k, v in headers]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": data})

    async def error(self, send, record: dict, status: int, error_type: str, message: str) -> None:
        record.update(status=status, error_type=error_type, error_message=message.split("\n")[0])
        shown = error_type + (CORAL_SUFFIX if self.settings.error_type_uri else "")
        await self.reply(send, status, {"message": message},
                         [("x-amzn-ErrorType", shown), ("x-amzn-RequestId", record["request_id"])])

    def record(self, entry: dict) -> dict:
        with self.lock:
            entry["seq"] = len(self.calls) + 1
            self.calls.append(entry)
        return entry

    # -- ASGI

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path.startswith("/_"):
            return await self.control(path, method, receive, send)
        return await self.api(scope, receive, send)

    async def control(self, path, method, receive, send):
        body = await self.body_of(receive)
        if path == "/_calls" and method == "GET":
            with self.lock:
                return await self.reply(send, 200, list(self.calls))
        if path == "/_control" and method == "POST":
            try:
                self.settings.update(json.loads(body or b"{}"))
            except (KeyError, ValueError) as e:
                return await self.reply(send, 400, {"message": f"unknown setting {e}"})
            return await self.reply(send, 200, self.settings.view())
        if path == "/_keys" and method == "POST":
            row = json.loads(body)
            exp = row.get("Expiration")
            self.keys.add(Known(row["AccessKeyId"], row["SecretAccessKey"], row.get("Token"),
                                parse_iso8601(exp) if exp else None, row.get("Source") or "control"))
            return await self.reply(send, 200, {"learned": row["AccessKeyId"]})
        if path == "/_reset" and method == "POST":
            with self.lock:
                self.calls.clear()
            with LOCK:
                SESSIONS.clear()
                STOPPED.clear()
            return await self.reply(send, 200, {"reset": True})
        return await self.reply(send, 404, {"message": "no such control path"})

    async def api(self, scope, receive, send):
        s = self.settings
        raw_path = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        raw_query = scope.get("query_string", b"").decode("latin-1")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        hmap = {}
        for k, v in headers:
            hmap.setdefault(k, v)
        body = await self.body_of(receive)
        route = ROUTE.fullmatch(raw_path)
        query = dict(p.partition("=")[::2] for p in raw_query.split("&") if p)
        record = self.record({
            "time": utcnow().isoformat(),
            "request_id": str(uuid.uuid4()),
            "method": scope["method"],
            "raw_path": raw_path,
            "query": raw_query,
            "operation": None,
            "arn": unquote(route.group(1)) if route else None,
            "qualifier": unquote(query["qualifier"]) if "qualifier" in query else None,
            "headers": {k: self.shown_header(k, v) for k, v in headers},
            "session_id": hmap.get(SESSION_HEADER),
            "user_id": hmap.get(USER_HEADER),
            "body": body[:4096].decode("utf-8", "replace"),
            "body_size": len(body),
            "verified": False,
        })
        if route:
            record["operation"] = ("StopRuntimeSession" if route.group(2) == "stopruntimesession"
                                   else "InvokeAgentRuntime")
        a2a_get = (s.forward_a2a is not None and route is not None and scope["method"] == "GET"
                   and route.group(2).startswith("invocations"))
        if not route or (scope["method"] != "POST" and not a2a_get):
            return await self.error(send, record, 403, "MissingAuthenticationTokenException",
                                    "Missing Authentication Token")
        auth = hmap.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return await self.error(send, record, 403, "AccessDeniedException", MISMATCH)

        now = utcnow() + dt.timedelta(seconds=s.clock_offset)
        verdict = verify(scope["method"], raw_path, raw_query, headers, body, self.keys,
                         service=SERVICE, region=s.region, now=now,
                         max_skew_seconds=s.max_skew, skew_error=s.skew_error)
        record.update(verdict.summary())
        if not verdict.ok:
            record["verified"] = False
            return await self.error(send, record, verdict.status, verdict.error_type, verdict.message)
        if s.strict:
            unsigned = [n for n in verdict.unsigned_headers if must_be_signed(n)]
            if unsigned:
                record["verified"] = False
                return await self.error(send, record, 403, "InvalidSignatureException",
                                        f"This test double requires every header it relies on to be "
                                        f"signed; sent but not signed: {', '.join(unsigned)}")
        akid = verdict.access_key_id
        if akid in s.expired_keys or s.expire_next > 0:
            if akid not in s.expired_keys:
                s.expire_next -= 1
            record["injected"] = "ExpiredTokenException"
            return await self.error(send, record, 403, "ExpiredTokenException",
                                    "The security token included in the request is expired")
        action = "bedrock-agentcore:" + record["operation"]
        arn = record["arn"]
        if akid in s.deny_keys or (s.deny_user_id and record["user_id"] is not None):
            if akid not in s.deny_keys:
                action = "bedrock-agentcore:InvokeAgentRuntimeForUser"
            record["injected"] = "AccessDeniedException"
            return await self.error(send, record, 403, "AccessDeniedException",
                                    f"User: arn:aws:sts::123456789012:assumed-role/double/{akid} is not "
                                    f"authorized to perform: {action} on resource: {arn} because no "
                                    f"identity-based policy allows the {action} action")
        if s.arn and arn != s.arn:
            return await self.error(send, record, 404, "ResourceNotFoundException",
                                    f"No agent runtime found for {arn}")
        session_id = record["session_id"]
        if session_id is not None and not 33 <= len(session_id) <= 256:
            return await self.error(send, record, 400, "ValidationException",
                                    f"Invalid length for parameter runtimeSessionId, value: "
                                    f"{len(session_id)}, valid min length: 33")
        if record["operation"] == "StopRuntimeSession":
            return await self.stop(send, record, session_id)
        if s.forward_a2a is not None:
            rest = route.group(2)[len("invocations"):] or "/"
            return await self.forward(scope, send, record, headers, body, session_id, rest)
        return await self.invoke(scope, receive, send, record, headers, body, session_id)

    async def forward(self, scope, send, record, headers, body, session_id, rest):
        """An A2A runtime (--forward-a2a): the verified request goes to the A2A agent at
        that base URL, path `rest` (what follows `invocations`), as the platform hands
        it to the container: without AWS auth, with the session id; the answer streams
        back as it comes."""
        import httpx

        session_id = session_id or f"double-{uuid.uuid4()}"
        with LOCK:
            SESSIONS.setdefault(session_id, {"invocations": 0, "stopped": False})["invocations"] += 1
        record.update(verified=True, response_session_id=session_id)
        inner = {k: v for k, v in headers
                 if k not in ("authorization", "x-amz-security-token", "x-amz-date", "host",
                              "content-length", SESSION_HEADER)}
        inner[SESSION_HEADER] = session_id
        url = self.settings.forward_a2a.rstrip("/") + rest
        async with httpx.AsyncClient(timeout=None) as client:
            async with client.stream(scope["method"], url, headers=inner,
                                     content=body if scope["method"] == "POST" else None) as resp:
                record["status"] = resp.status_code
                out = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in resp.headers.items()
                       if k.lower() not in ("content-length", "transfer-encoding", "connection")]
                out += [(b"x-amzn-bedrock-agentcore-runtime-session-id", session_id.encode()),
                        (b"x-amzn-requestid", record["request_id"].encode())]
                await send({"type": "http.response.start", "status": resp.status_code,
                            "headers": out})
                async for chunk in resp.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    def shown_header(name: str, value: str) -> str:
        if name == "authorization":
            return value.split("Signature=")[0] + "Signature=<hidden>" if "Signature=" in value else "<hidden>"
        if name == "x-amz-security-token":
            return f"<{len(value)} characters>"
        return value

    async def stop(self, send, record, session_id):
        if session_id is None:
            return await self.error(send, record, 400, "ValidationException",
                                    "1 validation error detected: Value null at 'runtimeSessionId' "
                                    "failed to satisfy constraint: Member must not be null")
        with LOCK:
            known = session_id in SESSIONS
            if known:
                SESSIONS[session_id]["stopped"] = True
        if not known:
            return await self.error(send, record, 404, "ResourceNotFoundException",
                                    "Session not found or already terminated")
        stop_event(session_id).set()
        record.update(status=200, verified=True, response_session_id=session_id)
        await self.reply(send, 200, {}, [("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id", session_id),
                                         ("x-amzn-RequestId", record["request_id"])])

    async def invoke(self, scope, receive, send, record, headers, body, session_id):
        session_id = session_id or f"double-{uuid.uuid4()}"
        with LOCK:
            entry = SESSIONS.setdefault(session_id, {"invocations": 0, "stopped": False})
            entry["invocations"] += 1
            if entry["stopped"]:
                # The next invoke on a stopped session gets a fresh microVM, same id.
                entry["stopped"] = False
                STOPPED.pop(session_id, None)
        record.update(verified=True, response_session_id=session_id)
        # What reaches the container: the request without AWS auth, the session id, and a
        # workload access token for the runtime user when the caller named one.
        inner = [(k, v) for k, v in headers
                 if k not in ("authorization", "x-amz-security-token", "x-amz-date", "host",
                              SESSION_HEADER)]
        inner.append((SESSION_HEADER, session_id))
        if record["user_id"] is not None:
            inner.append(("workloadaccesstoken", f"double-wat-for:{record['user_id']}"))
        inner.append(("host", "127.0.0.1:8080"))
        inner_scope = dict(scope, path="/invocations", raw_path=b"/invocations", query_string=b"",
                           headers=[(k.encode("latin-1"), v.encode("latin-1")) for k, v in inner])
        sent = False

        async def inner_receive():
            nonlocal sent
            if sent:
                return await receive()  # the client's disconnect, if it hangs up mid-stream
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        failed = {"status": None}

        async def inner_send(message):
            if message["type"] == "http.response.start":
                status = message["status"]
                record["status"] = status
                if status >= 400:
                    failed["status"] = status
                    return
                extra = [(b"x-amzn-bedrock-agentcore-runtime-session-id", session_id.encode()),
                         (b"x-amzn-requestid", record["request_id"].encode())]
                record["content_type"] = dict(message.get("headers", [])).get(b"content-type", b"").decode()
                await send(dict(message, headers=list(message.get("headers", [])) + extra))
                return
            if failed["status"] is not None:
                if not message.get("more_body"):
                    status = failed["status"]
                    await self.error(send, record, 424, "RuntimeClientError",
                                     f"Received error ({status}) from runtime. Please check your "
                                     f"CloudWatch logs for more information.")
                return
            await send(message)

        await agent(inner_scope, inner_receive, inner_send)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--key", action="append", default=[], help="AKID:SECRET[:TOKEN]")
    p.add_argument("--keys-file", help="JSON lines of handed-out credentials, reread on a miss")
    p.add_argument("--arn", help="the only runtime ARN that exists (default: any)")
    p.add_argument("--expire-next", type=int, default=0)
    p.add_argument("--expired-key", action="append", default=[])
    p.add_argument("--deny-key", action="append", default=[])
    p.add_argument("--deny-user-id", action="store_true")
    p.add_argument("--max-skew", type=int, default=900)
    p.add_argument("--clock-offset", type=float, default=0.0)
    p.add_argument("--skew-error", default="RequestExpired",
                   choices=["RequestExpired", "InvalidSignatureException"])
    p.add_argument("--no-strict", dest="strict", action="store_false")
    p.add_argument("--forward-a2a", metavar="URL",
                   help="an A2A runtime: verified invocations (POST, and GET for the card) "
                        "go to the A2A agent at URL")
    p.add_argument("--error-type-uri", action="store_true",
                   help="send x-amzn-ErrorType in the Name:uri form")
    args = p.parse_args()
    keys = KeyStore([Known.parse(k) for k in args.key], args.keys_file)
    app = FrontDoor(Settings(args), keys)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    print(f"http://{args.host}:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1,
                            access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
