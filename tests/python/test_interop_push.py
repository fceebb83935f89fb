"""Push notifications to a real webhook receiver, registered by the official A2A Python
SDK client (a2a-sdk 1.3.0) on JSON-RPC, HTTP+JSON (REST) and gRPC against
`a2a-gateway serve` in front of a real AgentCore runtime app (upstream_agent.py).

The receiver (http.server on 127.0.0.1:0) verifies every call as a Standard Webhooks
receiver would, with libraries that know nothing of the gateway:

- ``signature = "v1"``: the `standardwebhooks` package, ``Webhook(whsec).verify``;
- ``signature = "v1a"`` (the default): each ``v1a,`` signature over
  ``id.timestamp.body`` with an Ed25519 public key from the gateway's
  ``/.well-known/jwks.json``, checked by `cryptography`.

It drops duplicates by ``webhook-id`` (it answers the first call on each webhook 503
after keeping its event, so the gateway retries and that event arrives twice) and the tests assert that every task event
arrives once, in the order the SDK's stream saw it, verified, with the config's token and
credentials, while GetTaskPushNotificationConfig answers them redacted. Consecutive
chunks of one artifact that are pending together arrive coalesced (``[push] coalesce``,
on by default: one ``artifactUpdate`` with their parts in order), so the events are
compared with the stream's after the receiver's own folding of appended chunks
(``folded``), and the artifact it reassembles must be the streamed one exactly.

Skipped (with the reason in pytest's summary) only while the built `a2a-gateway` binary
has no `serve` subcommand.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import threading
import time
import uuid

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from google.protobuf.json_format import MessageToDict
from standardwebhooks import Webhook

from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    GetTaskPushNotificationConfigRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)

from interop import (
    HTTP_TIMEOUT_SECS,
    gateway_serve_missing,
    start_gateway,
    start_upstream_agent,
    user_message,
)

# The Standard Webhooks tolerance for webhook-timestamp.
TOLERANCE_SECS = 300
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}


def verify_v1a(keys: list[Ed25519PublicKey], headers: dict[str, str], body: bytes) -> None:
    """Every ``v1a,`` signature must verify with one of the JWKS keys (two sign during a
    rotation); raises otherwise."""
    webhook_id = headers["webhook-id"]
    timestamp = headers["webhook-timestamp"]
    if abs(time.time() - int(timestamp)) > TOLERANCE_SECS:
        raise ValueError(f"webhook-timestamp {timestamp} is out of tolerance")
    content = f"{webhook_id}.{timestamp}.".encode() + body
    signatures = [
        s.split(",", 1)[1] for s in headers["webhook-signature"].split() if s.startswith("v1a,")
    ]
    if not signatures:
        raise ValueError(f"no v1a signature in {headers['webhook-signature']!r}")
    for signature in signatures:
        raw = base64.b64decode(signature)
        for key in keys:
            try:
                key.verify(raw, content)
                break
            except InvalidSignature:
                continue
        else:
            raise ValueError(f"v1a signature {signature} verifies with no JWKS key")


def jwks_keys(jwks: dict) -> list[Ed25519PublicKey]:
    keys = []
    for jwk in jwks["keys"]:
        assert (jwk["kty"], jwk["crv"], jwk["alg"]) == ("OKP", "Ed25519", "EdDSA"), jwk
        x = jwk["x"] + "=" * (-len(jwk["x"]) % 4)
        keys.append(Ed25519PublicKey.from_public_bytes(base64.urlsafe_b64decode(x)))
    assert keys, jwks
    return keys


class Receiver:
    """A webhook receiver: verifies each call with `verify(headers, body)` (401 when it
    fails), keeps the events deduplicated by webhook-id, per path, and answers the first
    call on each path 503 (after keeping it), 200 otherwise."""

    def __init__(self):
        self.verify = None
        self.lock = threading.Lock()
        self.events: dict[str, list[dict]] = {}
        self.headers: dict[str, list[dict[str, str]]] = {}
        self.seen: dict[str, set[str]] = {}
        self.duplicates: dict[str, int] = {}
        self.refused: list[str] = []
        # Paths whose first artifactUpdate call is answered 503 (after it was kept),
        # and every call to them as (webhook-id, body, status answered).
        self.fail_first_artifact: set[str] = set()
        self.calls: dict[str, list[tuple[str, bytes, int]]] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                status = receiver.handle(self.path, headers, body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def handle(self, path: str, headers: dict[str, str], body: bytes) -> int:
        try:
            self.verify(headers, body)
        except Exception as e:  # any failure to verify is the test's failure
            with self.lock:
                self.refused.append(f"{path}: {type(e).__name__}: {e}")
            return 401
        with self.lock:
            first_call = path not in self.seen
            status = 503 if first_call else 200
            if path in self.fail_first_artifact and "artifactUpdate" in json.loads(body):
                self.fail_first_artifact.discard(path)
                status = 503
            calls = self.calls.setdefault(path, [])
            calls.append((headers["webhook-id"], body, status))
            seen = self.seen.setdefault(path, set())
            webhook_id = headers["webhook-id"]
            if webhook_id in seen:
                self.duplicates[path] = self.duplicates.get(path, 0) + 1
                calls[-1] = (webhook_id, body, 200)
                return 200
            seen.add(webhook_id)
            self.events.setdefault(path, []).append(json.loads(body))
            self.headers.setdefault(path, []).append(headers)
        # The first call on a webhook is kept but answered 503 (as when a receiver fails
        # after its work), so the gateway sends it again: a duplicate to drop.
        return status

    def url(self, name: str) -> tuple[str, str]:
        path = f"/hooks/{name}-{uuid.uuid4().hex[:8]}"
        return path, self.base + path

    async def until_settled(self, path: str, timeout: float = 30) -> list[dict]:
        """The events of `path` once the last one is a terminal status update."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                events = list(self.events.get(path, []))
                refused = list(self.refused)
            assert not refused, refused
            if events and state_of(events[-1]) in TERMINAL:
                return events
            assert time.monotonic() < deadline, f"not settled in {timeout} s: {summary(events)}"
            await asyncio.sleep(0.05)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def state_of(event: dict) -> str:
    (kind, body), = event.items()
    return body.get("status", {}).get("state", "") if kind in ("task", "statusUpdate") else ""


def summary(events: list[dict]) -> list[tuple[str, str, str]]:
    """(kind, state, artifact text) of StreamResponse objects in their JSON form."""
    out = []
    for event in events:
        (kind, body), = event.items()
        text = "".join(
            p.get("text", "") for p in body.get("artifact", {}).get("parts", [])
        )
        out.append((kind, state_of(event), text))
    return out


def folded(events: list[dict]) -> list[tuple[str, str, str]]:
    """`summary` after folding each artifactUpdate that appends to the artifact of the
    one before it into that one, as a receiver following the append rule does."""
    out: list[tuple[str, str, str]] = []
    last_artifact = None
    for event, (kind, state, text) in zip(events, summary(events)):
        (_, body), = event.items()
        artifact = body.get("artifact", {}).get("artifactId") if kind == "artifactUpdate" else None
        if artifact is not None and artifact == last_artifact and body.get("append"):
            out[-1] = (kind, state, out[-1][2] + text)
        else:
            out.append((kind, state, text))
        last_artifact = artifact
    return out


@pytest.fixture(scope="module", params=["v1a", "v1"])
def push_gateway(request, tmp_path_factory):
    """(gateway base URL, receiver) for `[push] signature = <param>`."""
    missing = gateway_serve_missing()
    if missing:
        pytest.skip(missing)
    signature = request.param
    whsec = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    secret_file = Path(tmp_path_factory.mktemp("push")) / "whsec"
    secret_file.write_text(whsec + "\n")
    config = f"""
[push]
allow_http = true
allow_cidrs = ["127.0.0.1/32"]
initial_backoff_ms = 100
max_backoff_secs = 1
signature = "{signature}"
{f'hmac_secret_file = "{secret_file}"' if signature == "v1" else ""}
"""
    receiver = Receiver()
    upstream, invocations = start_upstream_agent()
    try:
        gateway, base = start_gateway(invocations, config_toml=config)
    except BaseException:
        upstream.stop()
        receiver.stop()
        raise
    try:
        if signature == "v1":
            receiver.verify = lambda headers, body: Webhook(whsec).verify(body, headers)
        else:
            jwks = httpx.get(f"{base}/.well-known/jwks.json", timeout=HTTP_TIMEOUT_SECS)
            assert jwks.status_code == 200, jwks.text
            keys = jwks_keys(jwks.json())
            receiver.verify = lambda headers, body: verify_v1a(keys, headers, body)
        card = httpx.get(f"{base}/.well-known/agent-card.json", timeout=HTTP_TIMEOUT_SECS)
        assert card.json()["capabilities"]["pushNotifications"] is True
        yield base, receiver
    finally:
        gateway.stop()
        upstream.stop()
        receiver.stop()


@pytest.fixture(params=["JSONRPC", "HTTP+JSON", "GRPC"])
def binding(request):
    return request.param


def push_config(url: str, token: str, credentials: str, task_id: str = "") -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(
        task_id=task_id,
        url=url,
        token=token,
        authentication=AuthenticationInfo(scheme="Bearer", credentials=credentials),
    )


def check_calls(receiver: Receiver, path: str, token: str, credentials: str, task_id: str):
    """Every kept call carried the config's token and credentials and was about the task;
    the receiver dropped the retried first call's duplicate."""
    with receiver.lock:
        headers = list(receiver.headers[path])
        events = list(receiver.events[path])
        duplicates = receiver.duplicates.get(path, 0)
    for h in headers:
        assert h["content-type"] == "application/json", h
        assert h["x-a2a-notification-token"] == token, h
        assert h["a2a-notification-token"] == token, h
        assert h["authorization"] == f"Bearer {credentials}", h
    ids = [h["webhook-id"] for h in headers]
    assert len(set(ids)) == len(ids), ids
    for event in events:
        (kind, body), = event.items()
        assert body.get("taskId", body.get("id")) == task_id, event
    assert duplicates >= 1, "the 503'd first call was retried with the same webhook-id"


async def collect(client, request, timeout: float = 30) -> list[dict]:
    async def run():
        return [
            MessageToDict(e, preserving_proto_field_name=False)
            async for e in client.send_message(request)
        ]

    return await asyncio.wait_for(run(), timeout)


async def test_inline_config_of_send_message_pushes_every_event(push_gateway, make_client, binding):
    base, receiver = push_gateway
    client = await make_client(base, streaming=True)
    path, url = receiver.url(f"inline-{binding}")
    token, credentials = secrets.token_hex(8), secrets.token_hex(8)
    request = SendMessageRequest(
        message=user_message("async"),
        configuration=SendMessageConfiguration(
            task_push_notification_config=push_config(url, token, credentials)
        ),
    )
    streamed = await collect(client, request)
    pushed = await receiver.until_settled(path)
    assert folded(pushed) == folded(streamed)
    assert summary(pushed)[0] == ("task", "TASK_STATE_SUBMITTED", "")
    assert summary(pushed)[-1] == ("statusUpdate", "TASK_STATE_COMPLETED", "")
    assert "".join(text for _, _, text in summary(pushed)) == "one two three"
    check_calls(receiver, path, token, credentials, streamed[0]["task"]["id"])


async def test_created_config_pushes_later_events_and_get_redacts(push_gateway, make_client, binding):
    base, receiver = push_gateway
    client = await make_client(base)
    replies = [r async for r in client.send_message(SendMessageRequest(message=user_message("input")))]
    asked = replies[0].task
    assert TaskState.Name(asked.status.state) == "TASK_STATE_INPUT_REQUIRED"

    path, url = receiver.url(f"created-{binding}")
    token, credentials = secrets.token_hex(8), secrets.token_hex(8)
    created = await client.create_task_push_notification_config(
        push_config(url, token, credentials, task_id=asked.id)
    )
    assert created.task_id == asked.id and created.id and created.url == url
    got = await client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=asked.id, id=created.id)
    )
    assert (got.id, got.task_id, got.url) == (created.id, asked.id, url)
    assert got.token == "***"
    assert (got.authentication.scheme, got.authentication.credentials) == ("Bearer", "***")
    assert token not in str(got) and credentials not in str(got)

    streaming = await make_client(base, streaming=True)
    follow_up = SendMessageRequest(
        message=user_message("async", task_id=asked.id, context_id=asked.context_id)
    )
    streamed = await collect(streaming, follow_up)
    pushed = await receiver.until_settled(path)
    # Only the events stored after the config: the INPUT_REQUIRED task is not pushed.
    assert [s for s in summary(pushed) if s[1] == "TASK_STATE_INPUT_REQUIRED"] == []
    assert folded(pushed) == [s for s in folded(streamed) if s[0] != "task"]
    assert summary(pushed)[-1] == ("statusUpdate", "TASK_STATE_COMPLETED", "")
    assert "".join(text for _, _, text in summary(pushed)) == "one two three"
    check_calls(receiver, path, token, credentials, asked.id)


async def test_a_retried_coalesced_post_keeps_its_webhook_id_and_body(push_gateway, make_client):
    """The receiver answers the first artifact POST 503 (after keeping it): the gateway
    sends that POST again with the same webhook-id and body (the range it fixed before
    its first attempt), chunks pending together arrive in fewer POSTs than the stream
    had chunks, and deduplication by webhook-id leaves the artifact exactly as streamed."""
    base, receiver = push_gateway
    client = await make_client(base, streaming=True)
    path, url = receiver.url("coalesced")
    with receiver.lock:
        receiver.fail_first_artifact.add(path)
    token, credentials = secrets.token_hex(8), secrets.token_hex(8)
    request = SendMessageRequest(
        message=user_message("async"),
        configuration=SendMessageConfiguration(
            task_push_notification_config=push_config(url, token, credentials)
        ),
    )
    streamed = await collect(client, request)
    pushed = await receiver.until_settled(path)
    assert folded(pushed) == folded(streamed)
    assert "".join(text for _, _, text in summary(pushed)) == "one two three"
    with receiver.lock:
        calls = list(receiver.calls[path])
    artifact_calls = [c for c in calls if "artifactUpdate" in json.loads(c[1])]
    failed = [c for c in artifact_calls if c[2] == 503]
    assert len(failed) == 1, artifact_calls
    retried = [c for c in artifact_calls if c[0] == failed[0][0] and c[2] == 200]
    assert retried and retried[0][1] == failed[0][1], "the same range, byte for byte"
    streamed_chunks = [e for e in streamed if "artifactUpdate" in e]
    pushed_chunks = [e for e in pushed if "artifactUpdate" in e]
    assert len(pushed_chunks) < len(streamed_chunks), (summary(pushed), summary(streamed))
    check_calls(receiver, path, token, credentials, streamed[0]["task"]["id"])
