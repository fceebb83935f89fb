"""The AWS test doubles of tests/aws, proven against independent real clients first.

boto3's own ``bedrock-agentcore`` client signs InvokeAgentRuntime and StopRuntimeSession
and the AgentCore double verifies them (botocore recomputing the signature over the
request as received); a body changed after signing, a wrong secret, an unknown key or a
wrong session token are refused with AWS's error types. botocore's own credential
providers fetch from the container-endpoint and IMDSv2 doubles, and boto3 / botocore's
chain get credentials from STS (moto) with AssumeRole, AssumeRoleWithWebIdentity and a
profile role chain over credential_process; the AgentCore double accepts exactly those
credentials. The verifier reproduces the AWS SigV4 test-suite vectors.

Run: .venv/bin/python -m pytest -q tests/python/test_aws_doubles.py
"""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import boto3
import botocore.session
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

AWS = Path(__file__).resolve().parents[1] / "aws"
sys.path.insert(0, str(AWS))
import sigv4_check  # noqa: E402  (the verifier the doubles share)

PYTHON = os.environ.get("A2A_GATEWAY_TEST_PYTHON") or sys.executable
REGION = "us-east-1"
ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/my_agent-AbC123"
STATIC = ("AKIDSTATIC00000000001", "static-secret-key")
TEMP = ("ASIATEMP000000000001", "temporary-secret-key", "temporary-session-token")
SOURCE = ("AKIDSOURCE0000000001", "source-secret-key")
NO_RETRY = Config(retries={"total_max_attempts": 1}, read_timeout=20, connect_timeout=5)
DEFAULTS = {"expire_next": 0, "expired_keys": [], "deny_keys": [], "deny_user_id": False,
            "clock_offset": 0, "max_skew": 900, "skew_error": "RequestExpired", "strict": True,
            "error_type_uri": False}


class Double:
    """One double as a child process; its URL is the first line it prints."""

    def __init__(self, script: str, *args: str):
        self.log = tempfile.NamedTemporaryFile(prefix=f"{script}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([PYTHON, str(AWS / script), *args], cwd=AWS,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: lines.put(self.proc.stdout.readline()), daemon=True).start()
        try:
            self.url = lines.get(timeout=30).strip()
        except queue.Empty:
            self.url = ""
        if not self.url.startswith("http://127.0.0.1:"):
            self.stop()
            pytest.fail(f"{script} did not print its URL: {Path(self.log.name).read_text()}")

    def calls(self) -> list[dict]:
        return httpx.get(f"{self.url}/_calls", timeout=10).json()

    def control(self, **settings) -> dict:
        r = httpx.post(f"{self.url}/_control", json=settings, timeout=10)
        r.raise_for_status()
        return r.json()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def keys_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("aws") / "issued-keys.jsonl"
    path.touch()
    return str(path)


@pytest.fixture(scope="module")
def agentcore_double(keys_file):
    d = Double("agentcore_double.py", "--region", REGION, "--arn", ARN,
               "--key", ":".join(STATIC), "--key", ":".join(TEMP), "--keys-file", keys_file)
    yield d
    d.stop()


@pytest.fixture
def agentcore(agentcore_double):
    """The AgentCore double with its default settings and no records."""
    agentcore_double.control(**DEFAULTS)
    httpx.post(f"{agentcore_double.url}/_reset", timeout=10)
    return agentcore_double


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """An environment where botocore's credential chain finds nothing unless told:
    no AWS_* variables, empty config and credentials files, IMDS disabled."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    (tmp_path / "config").write_text("")
    (tmp_path / "credentials").write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", REGION)  # what aws-config reads first
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)  # what botocore reads
    return tmp_path


def client(url: str, key: str, secret: str, token: str | None = None, session=None):
    if session is not None:
        return session.create_client("bedrock-agentcore", endpoint_url=url, region_name=REGION,
                                     config=NO_RETRY)
    return boto3.client("bedrock-agentcore", endpoint_url=url, region_name=REGION,
                        aws_access_key_id=key, aws_secret_access_key=secret,
                        aws_session_token=token, config=NO_RETRY)


def new_session_id() -> str:
    return f"a2a-test-{uuid.uuid4()}"  # 45 characters, [A-Za-z0-9-]


def invoke(c, prompt: str, **extra) -> dict:
    return c.invoke_agent_runtime(agentRuntimeArn=ARN, qualifier="DEFAULT",
                                  payload=json.dumps({"prompt": prompt}),
                                  contentType="application/json",
                                  accept="text/event-stream, application/json", **extra)


def error_of(excinfo) -> tuple[int, str, str]:
    e = excinfo.value.response
    return e["ResponseMetadata"]["HTTPStatusCode"], e["Error"]["Code"], e["Error"]["Message"]


def last_call(d: Double, **match) -> dict:
    calls = [c for c in d.calls() if all(c.get(k) == v for k, v in match.items())]
    assert calls, f"no call matching {match} in {d.calls()}"
    return calls[-1]


# ------------------------------------------------------------------ AgentCore double


def test_boto3_invocation_verifies_and_its_signed_headers_are_recorded(agentcore):
    sid = new_session_id()
    r = invoke(client(agentcore.url, *STATIC), "echo hello", runtimeSessionId=sid,
               runtimeUserId="alice@example.com")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert r["contentType"] == "application/json"
    assert r["runtimeSessionId"] == sid
    assert json.loads(r["response"].read()) == "hello"

    call = last_call(agentcore, session_id=sid)
    assert call["verified"] is True and call["status"] == 200
    assert call["operation"] == "InvokeAgentRuntime"
    assert call["access_key_id"] == STATIC[0] and call["credential_source"] == "static"
    assert call["arn"] == ARN and call["qualifier"] == "DEFAULT"
    # The ARN is one fully percent-encoded path segment on the wire.
    assert "/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fmy_agent-AbC123/invocations" == call["raw_path"]
    assert call["user_id"] == "alice@example.com"
    assert call["credential_scope"].endswith(f"/{REGION}/bedrock-agentcore/aws4_request")
    for header in ("host", "x-amz-date", "content-type", "accept",
                   "x-amzn-bedrock-agentcore-runtime-session-id",
                   "x-amzn-bedrock-agentcore-runtime-user-id"):
        assert header in call["signed_headers"], call["signed_headers"]
    assert "user-agent" in call["unsigned_headers"]
    assert "x-amz-content-sha256" not in call["headers"]
    assert "Signature=<hidden>" in call["headers"]["authorization"]


def test_boto3_streamed_reply_is_the_agent_apps_sse(agentcore):
    r = invoke(client(agentcore.url, *STATIC), "stream 3", runtimeSessionId=new_session_id())
    assert r["contentType"].startswith("text/event-stream")
    frames = [line[len("data: "):] for line in r["response"].read().decode().split("\n")
              if line.startswith("data: ")]
    assert [json.loads(f) for f in frames] == ["chunk-1 ", "chunk-2 ", "chunk-3 "]


def test_whoami_reports_the_session_and_the_runtime_user(agentcore):
    sid = new_session_id()
    r = invoke(client(agentcore.url, *STATIC), "whoami", runtimeSessionId=sid, runtimeUserId="bob")
    seen = json.loads(r["response"].read())
    assert seen["session_id"] == sid
    assert seen["workload_access_token"] == "double-wat-for:bob"


def test_stop_runtime_session_is_signed_and_ends_the_sessions_stream(agentcore):
    c = client(agentcore.url, *STATIC)
    sid = new_session_id()
    r = invoke(c, "slow 20", runtimeSessionId=sid)
    assert r["contentType"].startswith("text/event-stream")
    done = threading.Event()

    def drain():
        r["response"].read()
        done.set()

    threading.Thread(target=drain, daemon=True).start()
    time.sleep(0.5)
    assert not done.is_set()
    out = c.stop_runtime_session(agentRuntimeArn=ARN, runtimeSessionId=sid, qualifier="DEFAULT")
    assert out["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert out["runtimeSessionId"] == sid
    assert done.wait(5), "the slow stream did not end after StopRuntimeSession"
    call = last_call(agentcore, operation="StopRuntimeSession")
    assert call["verified"] is True and call["session_id"] == sid
    assert "x-amzn-bedrock-agentcore-runtime-session-id" in call["signed_headers"]
    # boto3 fills the idempotency token clientToken itself.
    assert "clientToken" in json.loads(call["body"])

    with pytest.raises(ClientError) as e:
        c.stop_runtime_session(agentRuntimeArn=ARN, runtimeSessionId=new_session_id())
    assert error_of(e)[:2] == (404, "ResourceNotFoundException")


def test_a_body_changed_after_signing_is_refused(agentcore):
    c = client(agentcore.url, *STATIC)

    def tamper(request, **_):
        request.body = request.body.replace(b"echo hi", b"echo ho")  # same length

    c.meta.events.register("before-send.bedrock-agentcore.InvokeAgentRuntime", tamper)
    sid = new_session_id()
    with pytest.raises(ClientError) as e:
        invoke(c, "echo hi", runtimeSessionId=sid)
    status, code, message = error_of(e)
    assert (status, code) == (403, "InvalidSignatureException")
    assert message.startswith("The request signature we calculated does not match")
    assert "The Canonical String for this request should have been" in message
    call = last_call(agentcore, session_id=sid)
    assert call["verified"] is False and call["body"] == '{"prompt": "echo ho"}'


def test_a_wrong_secret_is_refused(agentcore):
    with pytest.raises(ClientError) as e:
        invoke(client(agentcore.url, STATIC[0], "not-the-secret"), "echo x",
               runtimeSessionId=new_session_id())
    assert error_of(e)[:2] == (403, "InvalidSignatureException")


def test_unknown_keys_and_wrong_session_tokens_are_unrecognized(agentcore):
    with pytest.raises(ClientError) as e:
        invoke(client(agentcore.url, "AKIDUNKNOWN000000001", "whatever"), "echo x")
    assert error_of(e) == (403, "UnrecognizedClientException",
                           "The security token included in the request is invalid.")
    with pytest.raises(ClientError) as e:
        invoke(client(agentcore.url, TEMP[0], TEMP[1], "another-token"), "echo x")
    assert error_of(e)[:2] == (403, "UnrecognizedClientException")
    with pytest.raises(ClientError) as e:  # temporary keys without their token
        invoke(client(agentcore.url, TEMP[0], TEMP[1]), "echo x")
    assert error_of(e)[:2] == (403, "UnrecognizedClientException")


def test_temporary_credentials_with_their_session_token_verify(agentcore):
    sid = new_session_id()
    r = invoke(client(agentcore.url, *TEMP), "echo temp", runtimeSessionId=sid)
    assert json.loads(r["response"].read()) == "temp"
    call = last_call(agentcore, session_id=sid)
    assert call["verified"] is True and call["session_token_sent"] is True
    assert "x-amz-security-token" in call["signed_headers"]
    assert call["headers"]["x-amz-security-token"] == f"<{len(TEMP[2])} characters>"


def test_expired_token_once_then_accepted(agentcore):
    agentcore.control(expire_next=1)
    c = client(agentcore.url, *STATIC)
    with pytest.raises(ClientError) as e:
        invoke(c, "echo first")
    assert error_of(e) == (403, "ExpiredTokenException",
                           "The security token included in the request is expired")
    assert json.loads(invoke(c, "echo second")["response"].read()) == "second"
    agentcore.control(expired_keys=[STATIC[0]])
    with pytest.raises(ClientError) as e:
        invoke(c, "echo third")
    assert error_of(e)[1] == "ExpiredTokenException"


def test_credentials_past_their_expiration_are_expired(agentcore):
    past = sigv4_check.iso8601(sigv4_check.utcnow() - dt.timedelta(seconds=5))
    httpx.post(f"{agentcore.url}/_keys", json={"AccessKeyId": "ASIAOLD0000000000001",
               "SecretAccessKey": "old-secret", "Token": "old-token", "Expiration": past})
    with pytest.raises(ClientError) as e:
        invoke(client(agentcore.url, "ASIAOLD0000000000001", "old-secret", "old-token"), "echo x")
    assert error_of(e)[:2] == (403, "ExpiredTokenException")


def test_a_skewed_clock_is_request_expired(agentcore):
    agentcore.control(clock_offset=20 * 60)  # the double's clock runs 20 minutes ahead
    with pytest.raises(ClientError) as e:
        invoke(client(agentcore.url, *STATIC), "echo x")
    status, code, message = error_of(e)
    assert (status, code) == (400, "RequestExpired")
    assert message.startswith("Signature expired: ") and message.endswith(" - 15 min.)")
    agentcore.control(clock_offset=-20 * 60, skew_error="InvalidSignatureException")
    with pytest.raises(ClientError) as e:
        invoke(client(agentcore.url, *STATIC), "echo x")
    assert error_of(e)[:2] == (403, "InvalidSignatureException")
    assert error_of(e)[2].startswith("Signature not yet current: ")


def test_bearer_tokens_and_missing_authentication(agentcore):
    url = f"{agentcore.url}/runtimes/{ARN.replace(':', '%3A').replace('/', '%2F')}/invocations?qualifier=DEFAULT"
    r = httpx.post(url, json={"prompt": "echo x"}, headers={"Authorization": "Bearer eyJ.x.y"})
    assert r.status_code == 403
    assert r.headers["x-amzn-errortype"] == "AccessDeniedException"
    assert r.json()["message"].startswith("Authorization method mismatch")
    r = httpx.post(url, json={"prompt": "echo x"})
    assert (r.status_code, r.headers["x-amzn-errortype"]) == (403, "MissingAuthenticationTokenException")
    assert r.json() == {"message": "Missing Authentication Token"}


def test_access_denied_for_a_key_or_for_the_user_id(agentcore):
    c = client(agentcore.url, *STATIC)
    agentcore.control(deny_user_id=True)
    with pytest.raises(ClientError) as e:
        invoke(c, "echo x", runtimeUserId="carol")
    status, code, message = error_of(e)
    assert (status, code) == (403, "AccessDeniedException")
    assert "bedrock-agentcore:InvokeAgentRuntimeForUser" in message
    assert json.loads(invoke(c, "echo y")["response"].read()) == "y"
    agentcore.control(deny_user_id=False, deny_keys=[STATIC[0]])
    with pytest.raises(ClientError) as e:
        invoke(c, "echo z")
    assert error_of(e)[1] == "AccessDeniedException"


def test_the_error_type_header_in_its_name_uri_form(agentcore):
    agentcore.control(expire_next=1, error_type_uri=True)
    with pytest.raises(ClientError) as e:
        invoke(client(agentcore.url, *STATIC), "echo x")
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"].startswith(
        "ExpiredTokenException:http")
    assert error_of(e)[1] == "ExpiredTokenException"  # botocore splits at ':'


def signed_by_hand(url: str, body: bytes, headers: dict, sign_only: list[str]) -> httpx.Response:
    """POST signed with botocore over ``sign_only`` headers, then the others added."""
    request = AWSRequest(method="POST", url=url, data=body,
                         headers={k: v for k, v in headers.items() if k.lower() in sign_only})
    SigV4Auth(Credentials(*STATIC), "bedrock-agentcore", REGION).add_auth(request)
    sent = dict(request.headers) | headers
    return httpx.post(url, content=body, headers=sent)


def test_strict_mode_wants_the_runtime_headers_signed(agentcore):
    url = f"{agentcore.url}/runtimes/{ARN.replace(':', '%3A').replace('/', '%2F')}/invocations"
    body = b'{"prompt": "echo x"}'
    headers = {"content-type": "application/json",
               "x-amzn-bedrock-agentcore-runtime-session-id": new_session_id()}
    r = signed_by_hand(url, body, headers, ["content-type"])
    assert (r.status_code, r.headers["x-amzn-errortype"]) == (403, "InvalidSignatureException")
    assert "x-amzn-bedrock-agentcore-runtime-session-id" in r.json()["message"]
    agentcore.control(strict=False)
    assert signed_by_hand(url, body, headers, ["content-type"]).status_code == 200
    r = signed_by_hand(url, body, headers, ["content-type", "x-amzn-bedrock-agentcore-runtime-session-id"])
    assert r.status_code == 200 and r.json() == "x"


# ------------------------------------------------------------------ the verifier itself

SUITE_KEY = ("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SUITE_TOKEN = (
    "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmx"
    "fpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0K"
    "PkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZb"
    "qBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==")
SUITE_NOW = dt.datetime(2015, 8, 30, 12, 36, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("name,method,query,token,signed,signature", [
    ("get-vanilla", "GET", "", None, "host;x-amz-date",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    ("post-vanilla", "POST", "", None, "host;x-amz-date",
     "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
    ("get-vanilla-query-order-key-case", "GET", "Param2=value2&Param1=value1", None, "host;x-amz-date",
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
    ("post-sts-header-before", "POST", "", SUITE_TOKEN, "host;x-amz-date;x-amz-security-token",
     "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"),
])
def test_the_verifier_reproduces_the_aws_sigv4_test_suite(name, method, query, token, signed, signature):
    keys = sigv4_check.KeyStore([sigv4_check.Known(*SUITE_KEY, token)])
    headers = [("Host", "example.amazonaws.com"), ("X-Amz-Date", "20150830T123600Z")]
    if token:
        headers.append(("X-Amz-Security-Token", token))
    auth = (f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            f"SignedHeaders={signed}, Signature={signature}")
    ok = sigv4_check.verify(method, "/", query, headers + [("Authorization", auth)], b"", keys,
                            service="service", region="us-east-1", now=SUITE_NOW)
    assert ok.ok, ok.message
    flipped = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    bad = sigv4_check.verify(method, "/", query, headers + [("Authorization", auth.replace(signature, flipped))],
                             b"", keys, service="service", region="us-east-1", now=SUITE_NOW)
    assert (bad.ok, bad.error_type) == (False, "InvalidSignatureException")


# A fixed InvokeAgentRuntime request, signed by botocore (no clock: fixed x-amz-date):
# the value a Rust unit test of the canonical request can compare with.
AGENTCORE_VECTOR = {
    "path": "/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fmy_agent-AbC123/invocations",
    "query": "qualifier=DEFAULT",
    "headers": [("host", "bedrock-agentcore.us-east-1.amazonaws.com"),
                ("content-type", "application/json"),
                ("x-amz-date", "20260102T030405Z"),
                ("x-amzn-bedrock-agentcore-runtime-session-id", "a2a-0123456789abcdef0123456789abcdef"),
                ("x-amzn-bedrock-agentcore-runtime-user-id", "alice")],
    "body": b'{"prompt":"hello"}',
    "signature": "fe009da986373d2b7d5ee0bb71f5f3d10e0dc4657a711d67cc7c143d2d6499fb",
}


def test_an_agentcore_vector_signed_by_botocore():
    v = AGENTCORE_VECTOR
    request = AWSRequest(method="POST", url=f"https://{v['headers'][0][1]}{v['path']}?{v['query']}",
                         data=v["body"], headers=dict(v["headers"][1:]))
    request.context["timestamp"] = "20260102T030405Z"
    signer = SigV4Auth(Credentials(*SUITE_KEY), "bedrock-agentcore", "us-east-1")
    canonical = signer.canonical_request(request)
    assert canonical.split("\n")[1] == (
        "/runtimes/arn%253Aaws%253Abedrock-agentcore%253Aus-east-1%253A123456789012"
        "%253Aruntime%252Fmy_agent-AbC123/invocations")  # encoded twice
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    keys = sigv4_check.KeyStore([sigv4_check.Known(*SUITE_KEY)])
    signed = ";".join(sorted(k for k, _ in v["headers"]))
    auth = (f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/bedrock-agentcore/aws4_request, "
            f"SignedHeaders={signed}, Signature={signature}")
    verdict = sigv4_check.verify("POST", v["path"], v["query"], v["headers"] + [("authorization", auth)],
                                 v["body"], keys, service="bedrock-agentcore", region="us-east-1",
                                 now=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc))
    assert verdict.ok, verdict.message
    assert signature == v["signature"], (canonical, signature)


# ------------------------------------------------------------------ credential doubles


def test_botocore_container_provider_reads_the_container_double(agentcore, keys_file, clean_env, monkeypatch):
    token_file = clean_env / "pod-identity-token"
    token_file.write_text("eks-pod-identity-token-value")  # no trailing newline: sent verbatim
    ecs = Double("container_credentials_double.py", "--token-file", str(token_file),
                 "--keys-file", keys_file, "--path", "/v1/credentials")
    try:
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"{ecs.url}/v1/credentials")
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", str(token_file))
        session = botocore.session.Session()
        creds = session.get_credentials()
        assert creds.method == "container-role"
        frozen = creds.get_frozen_credentials()
        assert frozen.access_key.startswith("ASIAECS") and frozen.token
        [call] = ecs.calls()
        assert call["authorized"] and call["authorization"] == "eks-pod-identity-token-value"
        assert call["accept"] == "application/json" and call["access_key_id"] == frozen.access_key

        sid = new_session_id()
        invoke(client(agentcore.url, "", "", session=session), "echo ecs", runtimeSessionId=sid)
        call = last_call(agentcore, session_id=sid)
        assert call["verified"] and call["access_key_id"] == frozen.access_key
        assert call["credential_source"] == "container"

        r = httpx.get(f"{ecs.url}/v1/credentials", headers={"Authorization": "wrong"})
        assert r.status_code == 401 and r.json()["Code"] == "AccessDenied"

        # Short-lived on demand: botocore refetches credentials that expire within 10 min.
        ecs.control(expires_in=60)
        session = botocore.session.Session()
        creds = session.get_credentials()
        first = creds.get_frozen_credentials().access_key
        second = creds.get_frozen_credentials().access_key
        assert first != second
        assert len([c for c in ecs.calls() if c["status"] == 200]) >= 4
    finally:
        ecs.stop()


def test_credentials_used_after_their_expiration_are_refused(agentcore, keys_file):
    ecs = Double("container_credentials_double.py", "--keys-file", keys_file, "--expires-in", "1")
    try:
        issued = httpx.get(f"{ecs.url}/credentials", timeout=10).json()
        c = client(agentcore.url, issued["AccessKeyId"], issued["SecretAccessKey"], issued["Token"])
        assert json.loads(invoke(c, "echo fresh")["response"].read()) == "fresh"
        expiration = sigv4_check.parse_iso8601(issued["Expiration"])
        time.sleep((expiration - sigv4_check.utcnow()).total_seconds() + 0.2)
        with pytest.raises(ClientError) as e:
            invoke(c, "echo stale")
        assert error_of(e)[:2] == (403, "ExpiredTokenException")
    finally:
        ecs.stop()


def test_botocore_imds_fetcher_reads_the_imdsv2_double(agentcore, keys_file, clean_env, monkeypatch):
    imds = Double("imds_double.py", "--keys-file", keys_file, "--role", "gateway-role")
    try:
        monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url)
        session = botocore.session.Session()
        creds = session.get_credentials()
        assert creds.method == "iam-role"
        frozen = creds.get_frozen_credentials()
        put, role, cred = imds.calls()
        assert (put["method"], put["path"], put["ttl"], put["status"]) == ("PUT", "/latest/api/token", "21600", 200)
        assert role["path"] == "/latest/meta-data/iam/security-credentials/" and role["token_valid"]
        assert cred["path"].endswith("/gateway-role") and cred["access_key_id"] == frozen.access_key

        sid = new_session_id()
        invoke(client(agentcore.url, "", "", session=session), "echo imds", runtimeSessionId=sid)
        call = last_call(agentcore, session_id=sid)
        assert call["verified"] and call["credential_source"] == "imds"

        base = f"{imds.url}/latest/meta-data/iam/security-credentials-extended/"
        assert httpx.get(base).status_code == 401  # IMDSv2: no token, no answer
        token = httpx.put(f"{imds.url}/latest/api/token",
                          headers={"x-aws-ec2-metadata-token-ttl-seconds": "60"}).text
        assert httpx.put(f"{imds.url}/latest/api/token").status_code == 400
        h = {"x-aws-ec2-metadata-token": token}
        assert httpx.get(base, headers=h).text == "gateway-role"
        extended = httpx.get(base + "gateway-role", headers=h).json()
        assert extended["Code"] == "Success" and extended["AccountId"] == "123456789012"
        imds.control(no_extended=True)
        assert httpx.get(base, headers=h).status_code == 404
    finally:
        imds.stop()


@pytest.fixture(scope="module")
def sts(keys_file):
    d = Double("sts_double.py", "--key", ":".join(SOURCE), "--keys-file", keys_file,
               "--require-signature")
    yield d
    d.stop()


def test_boto3_assume_role_against_moto_gives_credentials_the_double_accepts(agentcore, sts):
    c = boto3.client("sts", endpoint_url=sts.url, region_name=REGION, config=NO_RETRY,
                     aws_access_key_id=SOURCE[0], aws_secret_access_key=SOURCE[1])
    out = c.assume_role(RoleArn="arn:aws:iam::123456789012:role/a2a-invoker",
                        RoleSessionName="a2a-gateway", ExternalId="ext-1", DurationSeconds=900)
    creds = out["Credentials"]
    call = last_call(sts, action="AssumeRole")
    assert call["verified"] and call["access_key_id"] == SOURCE[0]
    assert (call["external_id"], call["role_session_name"]) == ("ext-1", "a2a-gateway")
    assert call["issued_access_key_id"] == creds["AccessKeyId"]

    sid = new_session_id()
    invoke(client(agentcore.url, creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"]),
           "echo assumed", runtimeSessionId=sid)
    call = last_call(agentcore, session_id=sid)
    assert call["verified"] and call["credential_source"] == "sts:AssumeRole"

    bad = boto3.client("sts", endpoint_url=sts.url, region_name=REGION, config=NO_RETRY,
                       aws_access_key_id=SOURCE[0], aws_secret_access_key="wrong")
    with pytest.raises(ClientError) as e:
        bad.assume_role(RoleArn="arn:aws:iam::123456789012:role/a2a-invoker", RoleSessionName="x-y")
    assert error_of(e)[:2] == (403, "SignatureDoesNotMatch")


def test_botocore_web_identity_chain_against_moto(agentcore, sts, clean_env, monkeypatch):
    token_file = clean_env / "web-identity-token"
    token_file.write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2ln")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/irsa-gateway")
    monkeypatch.setenv("AWS_ROLE_SESSION_NAME", "gateway-pod")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts.url)
    session = botocore.session.Session()
    creds = session.get_credentials()
    assert creds.method == "assume-role-with-web-identity"
    frozen = creds.get_frozen_credentials()
    call = last_call(sts, action="AssumeRoleWithWebIdentity")
    assert call["web_identity_token"] == token_file.read_text()
    assert call["role_arn"] == "arn:aws:iam::123456789012:role/irsa-gateway"
    assert call["signed"] is False and call["issued_access_key_id"] == frozen.access_key

    sid = new_session_id()
    invoke(client(agentcore.url, "", "", session=session), "echo irsa", runtimeSessionId=sid)
    assert last_call(agentcore, session_id=sid)["verified"]


def test_botocore_profile_role_chain_over_credential_process(agentcore, sts, clean_env, monkeypatch):
    script = clean_env / "creds.py"
    script.write_text("import json\nprint(json.dumps({'Version': 1, 'AccessKeyId': %r, "
                      "'SecretAccessKey': %r}))\n" % SOURCE)
    (clean_env / "config").write_text(
        "[profile base]\n"
        f"credential_process = {sys.executable} {script}\n"
        "[profile gateway]\n"
        "role_arn = arn:aws:iam::123456789012:role/a2a-invoker\n"
        "source_profile = base\n"
        "external_id = ext-2\n"
        "role_session_name = a2a-gateway\n")
    monkeypatch.setenv("AWS_PROFILE", "gateway")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", sts.url)
    session = botocore.session.Session()
    creds = session.get_credentials()
    assert creds.method == "assume-role"
    frozen = creds.get_frozen_credentials()
    call = last_call(sts, action="AssumeRole", external_id="ext-2")
    assert call["verified"] and call["access_key_id"] == SOURCE[0]
    assert call["issued_access_key_id"] == frozen.access_key

    sid = new_session_id()
    invoke(client(agentcore.url, "", "", session=session), "echo chain", runtimeSessionId=sid)
    assert last_call(agentcore, session_id=sid)["verified"]
