"""A real OpenID provider in front of `a2a-gateway serve`: `oidc-provider` (npm, pinned in
tests/oidc/package-lock.json, installed by scripts/test.sh with `npm ci`) runs
tests/oidc/provider.mjs on a free 127.0.0.1 port and issues OAuth 2.0 client-credentials
access tokens as RS256 JWTs (RFC 9068, `typ: at+jwt`). The gateway is configured with
`[server.auth] kind = "jwt"` and the provider's OIDC `discovery_url`; the official `a2a-sdk`
client (1.3.0) sends the tokens with its own `AuthInterceptor`, which reads the
`openIdConnect` scheme from the gateway's card.

- tokens from the provider drive SendMessage, GetTask and ListTasks on JSON-RPC, HTTP+JSON
  and gRPC, in front of the real `BedrockAgentCoreApp` (tests/python/upstream_agent.py);
- a client whose token lacks the required scope gets 403 with
  `WWW-Authenticate: Bearer … error="insufficient_scope"`;
- the `tenant` claim the provider adds binds the tenant: a request naming another tenant is
  refused (403) and another tenant's caller gets TaskNotFound;
- the real `BedrockAgentCoreApp` behind the gateway finds the verified caller and tenant in
  its RequestContext (`X-Amzn-Bedrock-AgentCore-Runtime-Custom-Caller` / `-Tenant`), and with
  `upstream.auth.kind = "forward"` the caller's own token as `Authorization`;
- key rotation at the provider: it is restarted (same port, same issuer) with
  [new, old] signing keys, then with [new] only. New tokens are accepted as soon as they
  appear (one unknown-`kid` refetch), old ones until their key leaves the JWKS, then
  refused with 401 `error="invalid_token"`.

Without node or the installed package the tests are skipped locally and fail under CI=true.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid

from pathlib import Path

import httpx
import pytest

from a2a.client import ClientConfig, create_client
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError

from interop import (
    HTTP_TIMEOUT_SECS,
    ROOT,
    Proc,
    free_port,
    gateway_serve_missing,
    start_gateway,
    start_upstream_agent,
    user_message,
)

OIDC_DIR = ROOT / "tests" / "oidc"
FIXTURES = ROOT / "tests" / "fixtures" / "jwt"
RESOURCE = "urn:a2a-gateway:test"
SCOPES = ["a2a.invoke", "a2a.read"]
REQUIRED_SCOPE = "a2a.invoke"
# client_id -> (scope it may request, tenant claim)
CLIENTS = {
    "agent-alpha": ("a2a.invoke a2a.read", "tenant-a"),
    "agent-beta": ("a2a.invoke", "tenant-b"),
    "agent-reader": ("a2a.read", "tenant-a"),
}
OLD_KEY = ("key-old", FIXTURES / "rsa-1.pem")
NEW_KEY = ("key-new", FIXTURES / "rsa-2.pem")
# How long the gateway may take to see a JWKS change: it refreshes every second here
# (refresh_secs = 1, as the provider sends no Cache-Control), plus slack for a loaded machine.
JWKS_CHANGE_SECS = 15


def oidc_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (OIDC_DIR / "node_modules" / "oidc-provider").is_dir():
        return "tests/oidc/node_modules is missing: run `npm ci` in tests/oidc (scripts/test.sh does)"
    return None


class OidcProvider:
    """tests/oidc/provider.mjs on a fixed free port; `restart(keys)` keeps port and issuer."""

    def __init__(self, keys):
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.discovery_url = f"{self.issuer}/.well-known/openid-configuration"
        self.secrets = {client: uuid.uuid4().hex for client in CLIENTS}
        self.dir = Path(tempfile.mkdtemp(prefix="a2a-interop-oidc-"))
        self.proc: Proc | None = None
        self.start(keys)

    def start(self, keys) -> None:
        config = {
            "port": self.port,
            "resource": RESOURCE,
            "scopes": SCOPES,
            "keys": [{"kid": kid, "pem_file": str(pem)} for kid, pem in keys],
            "clients": [
                {
                    "client_id": client,
                    "client_secret": self.secrets[client],
                    "scope": scope,
                    "tenant": tenant,
                }
                for client, (scope, tenant) in CLIENTS.items()
            ],
        }
        path = self.dir / "provider.json"
        path.write_text(json.dumps(config))
        self.proc = Proc("oidc-provider", ["node", "provider.mjs", str(path)], cwd=str(OIDC_DIR))
        self.proc.wait_ready(self.discovery_url)

    def restart(self, keys) -> None:
        self.proc.stop()
        self.start(keys)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    def jwks_kids(self) -> list[str]:
        jwks_uri = httpx.get(self.discovery_url, timeout=HTTP_TIMEOUT_SECS).json()["jwks_uri"]
        return [k["kid"] for k in httpx.get(jwks_uri, timeout=HTTP_TIMEOUT_SECS).json()["keys"]]

    def token(self, client: str, scope: str | None = None) -> str:
        """A client-credentials access token for `client` (its whole allowed scope by
        default), from the provider's token endpoint."""
        meta = httpx.get(self.discovery_url, timeout=HTTP_TIMEOUT_SECS).json()
        resp = httpx.post(
            meta["token_endpoint"],
            auth=(client, self.secrets[client]),
            data={"grant_type": "client_credentials", "scope": scope or CLIENTS[client][0]},
            timeout=HTTP_TIMEOUT_SECS,
        )
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["token_type"] == "Bearer", body
        return body["access_token"]


def gateway_config(provider: OidcProvider) -> str:
    return f"""
[server.auth]
kind = "jwt"
tenant_claim = "tenant"

[server.auth.jwt]
issuer = "{provider.issuer}"
audience = ["{RESOURCE}"]
discovery_url = "{provider.discovery_url}"
required_scopes = ["{REQUIRED_SCOPE}"]
caller_claim = "client_id"
refresh_secs = 1
min_refresh_secs = 1
unknown_kid_refetch_secs = 1
"""


def kid_of(token: str) -> str:
    """The `kid` of a JWT's header."""
    header = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"]


@pytest.fixture(scope="module")
def upstream():
    missing = oidc_missing() or gateway_serve_missing()
    if missing:
        assert os.environ.get("CI") != "true", missing
        pytest.skip(missing)
    proc, invocations = start_upstream_agent()
    yield invocations
    proc.stop()


@pytest.fixture(scope="module")
def deployment(upstream):
    """(provider, gateway base URL): the provider signs with the old key only."""
    provider = OidcProvider([OLD_KEY])
    try:
        gateway, base = start_gateway(upstream, config_toml=gateway_config(provider))
    except BaseException:
        provider.stop()
        raise
    yield provider, base
    gateway.stop()
    provider.stop()


class Bearer(CredentialService):
    """The token the test holds now, for every scheme the card declares."""

    def __init__(self, token: str):
        self.token = token

    async def get_credentials(self, security_scheme_name, context):
        return self.token


@pytest.fixture
async def sdk():
    """sdk(base, token, binding) -> the SDK's client sending `token` through its own
    AuthInterceptor; all closed at the end."""
    opened = []

    async def make(base: str, token: str, binding: str = "JSONRPC"):
        grpc_options = {}
        if binding == "GRPC":
            import grpc

            grpc_options = {
                "use_client_preference": True,
                "grpc_channel_factory": lambda target: grpc.aio.insecure_channel(target),
            }
        http = httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECS)
        config = ClientConfig(
            streaming=False,
            httpx_client=http,
            supported_protocol_bindings=[binding],
            **grpc_options,
        )
        client = await create_client(
            base, client_config=config, interceptors=[AuthInterceptor(Bearer(token))]
        )
        opened.append((client, http))
        return client

    yield make
    for client, http in opened:
        await client.close()
        await http.aclose()


async def send_blocking(client, text: str, tenant: str = ""):
    request = SendMessageRequest(
        message=user_message(text),
        configuration=SendMessageConfiguration(return_immediately=False),
        tenant=tenant,
    )
    async for response in client.send_message(request):
        return response.task
    raise AssertionError("no response")


def jsonrpc(base: str, token: str, method: str, params: dict) -> httpx.Response:
    """One raw JSON-RPC call (to see the HTTP status and WWW-Authenticate)."""
    return httpx.post(
        base,
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
        timeout=HTTP_TIMEOUT_SECS,
    )


def test_card_declares_the_provider(deployment):
    """The card's openIdConnect scheme names the provider's discovery document, which the
    SDK's AuthInterceptor reads to attach the token."""
    provider, base = deployment
    card = httpx.get(f"{base}/.well-known/agent-card.json", timeout=HTTP_TIMEOUT_SECS).json()
    oidc = card["securitySchemes"]["oidc"]["openIdConnectSecurityScheme"]
    assert oidc["openIdConnectUrl"] == provider.discovery_url, card["securitySchemes"]
    assert card["securityRequirements"] == [{"schemes": {"oidc": {"list": [REQUIRED_SCOPE]}}}]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_provider_tokens_drive_the_sdk(deployment, sdk, binding):
    provider, base = deployment
    client = await sdk(base, provider.token("agent-alpha"), binding)
    task = await send_blocking(client, "string")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    got = await client.get_task(GetTaskRequest(id=task.id))
    assert got.id == task.id and got.status.state == TaskState.TASK_STATE_COMPLETED
    listed = await client.list_tasks(ListTasksRequest())
    assert task.id in [t.id for t in listed.tasks]


def test_missing_scope_is_403_insufficient_scope(deployment):
    provider, base = deployment
    token = provider.token("agent-reader")
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "string"}]}
    resp = jsonrpc(base, token, "SendMessage", {"message": message})
    assert resp.status_code == 403, resp.text
    challenge = resp.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge, challenge
    assert token not in challenge and token not in resp.text


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_missing_scope_is_refused_to_the_sdk(deployment, sdk, binding):
    provider, base = deployment
    client = await sdk(base, provider.token("agent-reader"), binding)
    with pytest.raises(A2AClientError) as refused:
        await send_blocking(client, "string")
    said = str(refused.value)
    assert ("PERMISSION_DENIED" if binding == "GRPC" else "403") in said, said


async def test_tenant_claim_binds_the_tenant(deployment, sdk):
    provider, base = deployment
    alpha = await sdk(base, provider.token("agent-alpha"))
    beta = await sdk(base, provider.token("agent-beta"))
    task = await send_blocking(alpha, "string")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    # The credential's tenant, named or not.
    assert (await alpha.get_task(GetTaskRequest(id=task.id, tenant="tenant-a"))).id == task.id
    assert (await alpha.get_task(GetTaskRequest(id=task.id))).id == task.id
    # Another tenant's caller: exactly TaskNotFound, named tenant or not.
    with pytest.raises(TaskNotFoundError):
        await beta.get_task(GetTaskRequest(id=task.id))
    with pytest.raises(TaskNotFoundError):
        await beta.get_task(GetTaskRequest(id=task.id, tenant="tenant-b"))
    assert task.id not in [t.id for t in (await beta.list_tasks(ListTasksRequest())).tasks]
    # A request naming a tenant the token does not carry is refused (403).
    resp = jsonrpc(
        base, provider.token("agent-alpha"), "GetTask", {"id": task.id, "tenant": "tenant-b"}
    )
    assert resp.status_code == 403, resp.text
    assert 'error="insufficient_scope"' in resp.headers["www-authenticate"]


def reply_of(task) -> dict:
    """The JSON the `identity` prompt of upstream_agent.py answered."""
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    return json.loads("".join(p.text for a in task.artifacts for p in a.parts))


async def test_the_runtime_app_sees_the_caller_and_tenant(deployment, sdk):
    """The real BedrockAgentCoreApp finds the verified caller (the `client_id` claim) and the
    tenant (the `tenant` claim) in its RequestContext's custom headers, and no
    Authorization (upstream.auth.kind = "none")."""
    provider, base = deployment
    for client_id, tenant in [("agent-alpha", "tenant-a"), ("agent-beta", "tenant-b")]:
        client = await sdk(base, provider.token(client_id))
        seen = reply_of(await send_blocking(client, "identity"))
        # The owner of a JWT caller names its issuer (docs/authentication.md#owner-namespaces).
        caller = f"jwt:{provider.issuer}#{client_id}"
        assert seen == {"caller": caller, "tenant": tenant, "authorization_sha256": None}


async def test_forward_passes_the_callers_token_to_the_runtime_app(deployment, upstream, sdk):
    """upstream.auth.kind = "forward": the app's RequestContext has the caller's own
    provider token as `Authorization: Bearer …`, beside the caller and tenant headers."""
    provider, _ = deployment
    gateway, base = start_gateway(
        upstream,
        extra_env={"A2A_GATEWAY_UPSTREAM__AUTH__KIND": "forward"},
        config_toml=gateway_config(provider),
    )
    try:
        token = provider.token("agent-alpha")
        seen = reply_of(await send_blocking(await sdk(base, token), "identity"))
        digest = hashlib.sha256(f"Bearer {token}".encode()).hexdigest()
        caller = f"jwt:{provider.issuer}#agent-alpha"
        assert seen == {"caller": caller, "tenant": "tenant-a", "authorization_sha256": digest}
    finally:
        gateway.stop()


def accepted(base: str, token: str):
    """True when the gateway accepts `token` (ListTasks), else the refusal."""
    resp = jsonrpc(base, token, "ListTasks", {})
    if resp.status_code == 200 and "result" in resp.json():
        return True
    return (resp.status_code, resp.headers.get("www-authenticate"), resp.text[:300])


async def test_signing_key_rotation(upstream, sdk):
    """Own provider and gateway: the provider is restarted twice."""
    provider = OidcProvider([OLD_KEY])
    gateway = None
    try:
        gateway, base = start_gateway(upstream, config_toml=gateway_config(provider))
        old = provider.token("agent-alpha")
        assert kid_of(old) == OLD_KEY[0]
        assert accepted(base, old) is True

        # Step 1: the provider signs with the new key and still publishes the old one.
        provider.restart([NEW_KEY, OLD_KEY])
        assert provider.jwks_kids() == [NEW_KEY[0], OLD_KEY[0]]
        new = provider.token("agent-alpha")
        assert kid_of(new) == NEW_KEY[0]
        # A new kid is fetched on demand (one refetch): accepted at once.
        assert accepted(base, new) is True
        assert accepted(base, old) is True
        client = await sdk(base, new)
        task = await send_blocking(client, "string")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED

        # Step 2: the old key is removed from the JWKS.
        provider.restart([NEW_KEY])
        assert provider.jwks_kids() == [NEW_KEY[0]]

        # The gateway refreshes its JWKS every second: the old token is refused after the
        # next refresh (polled, bounded), and never accepted again.
        deadline = time.monotonic() + JWKS_CHANGE_SECS
        while (resp := jsonrpc(base, old, "ListTasks", {})).status_code == 200:
            assert time.monotonic() < deadline, "the old token is still accepted"
            time.sleep(0.25)
        assert resp.status_code == 401, resp.text
        challenge = resp.headers["www-authenticate"]
        assert 'error="invalid_token"' in challenge, challenge
        assert old not in challenge and old not in resp.text
        with pytest.raises(A2AClientError, match="401"):
            await send_blocking(await sdk(base, old), "string")
        # The new key's tokens go on working, old and freshly issued ones alike.
        assert accepted(base, new) is True
        assert accepted(base, provider.token("agent-alpha")) is True
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.id == task.id
    finally:
        if gateway is not None:
            gateway.stop()
        provider.stop()
