"""AWS STS for the tests: moto (PyPI ``moto``, its server mode) behind a thin front that
records each call, verifies its SigV4 signature with botocore, and publishes the
credentials STS hands out to the keys file the AgentCore double reads.

Why moto behind a front: moto answers AssumeRole, AssumeRoleWithWebIdentity and
GetCallerIdentity exactly in STS's wire format (the Query protocol, XML), with random
access keys and secrets it keeps to itself. The front reads the ``<Credentials>`` out of
each successful answer and appends them to ``--keys-file`` (and learns them itself), so
the AgentCore double accepts precisely those credentials until their ``Expiration``,
and a role chain (AssumeRole signed with credentials from an earlier AssumeRole) verifies.
moto does not check signatures; the front does (``service`` sts, any region), records the
verdict and, with ``--require-signature``, refuses a badly signed AssumeRole the way STS
does (403 SignatureDoesNotMatch, InvalidClientTokenId, ExpiredToken ...).
AssumeRoleWithWebIdentity is unsigned by design; its token is recorded.

Point clients at it with ``AWS_ENDPOINT_URL_STS=http://127.0.0.1:PORT`` (botocore and
Rust aws-config both read it) and set a region (``AWS_REGION``): STS clients need one
to sign even with an endpoint override.

Usage:
  python sts_double.py [--port 0] [--key AKID:SECRET[:TOKEN]]... [--keys-file FILE]
      [--require-signature] [--expires-in SECONDS]

Prints ``http://127.0.0.1:PORT`` first; stops on SIGTERM. ``GET /_calls`` lists every
call (Action, RoleArn, RoleSessionName, ExternalId, DurationSeconds, WebIdentityToken,
verified, access key id that signed, status, access key id handed out, expiration);
``POST /_control`` takes {"fail": 403|500, "fail_count": 1, "expires_in": 60,
"require_signature": true}.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import signal
import sys
import threading
import uuid
from urllib.parse import parse_qsl

from moto.moto_server.werkzeug_app import (DomainDispatcherApplication, MotoRequestHandler,
                                           create_backend_app)
from werkzeug.serving import make_server

from http_double import Double
from sigv4_check import Known, KeyStore, append_issued, expires_after, iso8601, parse_iso8601, verify

STS_CODES = {
    "InvalidSignatureException": "SignatureDoesNotMatch",
    "UnrecognizedClientException": "InvalidClientTokenId",
    "ExpiredTokenException": "ExpiredToken",
    "MissingAuthenticationTokenException": "MissingAuthenticationToken",
    "IncompleteSignatureException": "IncompleteSignature",
    "RequestExpired": "RequestExpired",
}
CREDENTIALS = re.compile(
    r"<Credentials>\s*<AccessKeyId>(?P<akid>[^<]+)</AccessKeyId>\s*"
    r"<SecretAccessKey>(?P<secret>[^<]+)</SecretAccessKey>\s*"
    r"<SessionToken>(?P<token>[^<]+)</SessionToken>\s*"
    r"<Expiration>(?P<exp>[^<]+)</Expiration>\s*</Credentials>")


class QuietHandler(MotoRequestHandler):
    def log_request(self, *args, **kwargs):
        pass


def xml_error(status: int, code: str, message: str) -> tuple[str, bytes]:
    kind = "Receiver" if status >= 500 else "Sender"
    text = message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    body = (f'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            f"<Error><Type>{kind}</Type><Code>{code}</Code><Message>{text}</Message></Error>"
            f"<RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>")
    return f"{status} {'Forbidden' if status == 403 else 'Error'}", body.encode()


class Front:
    def __init__(self, moto_app, double: Double, keys: KeyStore):
        self.moto = moto_app
        self.double = double
        self.keys = keys

    def __call__(self, environ, start_response):
        d = self.double
        path = environ.get("PATH_INFO", "")
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        if path.startswith("/_"):
            return self.control(path, environ["REQUEST_METHOD"], body, start_response)
        raw_uri = environ.get("RAW_URI") or environ.get("REQUEST_URI") or path
        raw_path, _, raw_query = raw_uri.partition("?")
        headers = [(k[5:].replace("_", "-").lower(), v) for k, v in environ.items() if k.startswith("HTTP_")]
        for k in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            if environ.get(k):
                headers.append((k.replace("_", "-").lower(), environ[k]))
        params = dict(parse_qsl(raw_query)) | dict(parse_qsl(body.decode("utf-8", "replace")))
        action = params.get("Action")
        signed = any(k == "authorization" for k, _ in headers)
        verdict = verify(environ["REQUEST_METHOD"], raw_path, raw_query, headers, body, self.keys,
                         service="sts", region=None) if signed else None
        entry = d.record({
            "action": action,
            "role_arn": params.get("RoleArn"),
            "role_session_name": params.get("RoleSessionName"),
            "external_id": params.get("ExternalId"),
            "duration_seconds": params.get("DurationSeconds"),
            "web_identity_token": params.get("WebIdentityToken"),
            "signed": signed,
            "verified": bool(verdict and verdict.ok),
            "signature_error": verdict.error_type if verdict and not verdict.ok else None,
            "access_key_id": verdict.access_key_id if verdict else None,
            "credential_scope": verdict.scope if verdict else None,
        })
        failure = d.take_failure()
        if failure:
            entry["status"] = failure
            code = "AccessDenied" if failure < 500 else "ServiceUnavailable"
            status, data = xml_error(failure, code, "failure injected by the test")
            start_response(status, [("Content-Type", "text/xml")])
            return [data]
        needs_signature = action not in ("AssumeRoleWithWebIdentity", "AssumeRoleWithSAML")
        if d.settings.get("require_signature") and needs_signature and not (verdict and verdict.ok):
            error_type = verdict.error_type if verdict else "MissingAuthenticationTokenException"
            message = verdict.message if verdict else "Request is missing Authentication Token"
            status_code = verdict.status if verdict else 403
            entry["status"] = status_code
            status, data = xml_error(status_code, STS_CODES.get(error_type, error_type), message)
            start_response(status, [("Content-Type", "text/xml")])
            return [data]

        captured = {}

        def capture(status, response_headers, exc_info=None):
            captured["status"], captured["headers"] = status, response_headers
            return lambda _data: None

        inner = dict(environ, **{"wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))})
        out = b"".join(self.moto(inner, capture))
        entry["status"] = int(captured["status"].split()[0])
        match = CREDENTIALS.search(out.decode("utf-8", "replace"))
        if entry["status"] == 200 and match:
            expiration = parse_iso8601(match["exp"])
            if d.settings.get("expires_in"):
                expiration = expires_after(float(d.settings["expires_in"]))
                out = out.replace(f"<Expiration>{match['exp']}</Expiration>".encode(),
                                  f"<Expiration>{iso8601(expiration)}</Expiration>".encode())
            known = Known(match["akid"], match["secret"], match["token"], expiration, "sts")
            self.keys.add(known)
            append_issued(d.settings.get("keys_file"), known.access_key_id, known.secret_access_key,
                          known.session_token, expiration, f"sts:{action}")
            entry.update(issued_access_key_id=known.access_key_id, expiration=iso8601(expiration))
        response_headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
        response_headers.append(("Content-Length", str(len(out))))
        start_response(captured["status"], response_headers)
        return [out]

    def control(self, path, method, body, start_response):
        d = self.double
        if path == "/_calls" and method == "GET":
            with d.lock:
                data = json.dumps(d.calls).encode()
        elif path == "/_control" and method == "POST":
            with d.lock:
                d.settings.update(json.loads(body or b"{}"))
                data = json.dumps(d.settings).encode()
        elif path == "/_reset" and method == "POST":
            with d.lock:
                d.calls.clear()
            data = b'{"reset": true}'
        else:
            start_response("404 Not Found", [("Content-Type", "application/json")])
            return [b'{"message": "no such control path"}']
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--key", action="append", default=[], help="AKID:SECRET[:TOKEN] of source credentials")
    p.add_argument("--keys-file")
    p.add_argument("--require-signature", action="store_true")
    p.add_argument("--expires-in", type=float, help="rewrite each Expiration to now + this")
    a = p.parse_args()
    keys = KeyStore([Known.parse(k) for k in a.key], a.keys_file)
    double = Double({"keys_file": a.keys_file, "require_signature": a.require_signature,
                     "expires_in": a.expires_in})
    app = Front(DomainDispatcherApplication(create_backend_app), double, keys)
    server = make_server(a.host, a.port, app, threaded=True, request_handler=QuietHandler)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"http://{a.host}:{server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.1)
    sys.exit(0)


if __name__ == "__main__":
    main()
