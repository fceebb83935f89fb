"""SigV4 verification shared by the AWS test doubles in this folder.

botocore (the AWS SDK for Python's core, ``botocore.auth.SigV4Auth``) recomputes the
signature of a request exactly as it arrived: the method, the raw path as on the wire,
the query, the headers the client listed in ``SignedHeaders`` with the values received,
and the body. The double knows the credentials (access key id -> secret access key and
the session token it expects); a mismatch anywhere gives the error an AWS front door
gives, as a ``Verdict`` the double turns into its reply.

The credentials a double knows come from the command line (``AKID:SECRET[:TOKEN]``) and
from a *keys file*: JSON lines with the fields of a credential endpoint's answer
(``AccessKeyId``, ``SecretAccessKey``, ``Token``, ``Expiration``, ``Source``). The
credential doubles (container endpoint, IMDSv2, STS) append every set they hand out to
the keys file given to them, and the AgentCore double rereads it whenever it meets an
access key id it does not know yet; so it accepts exactly the credentials that were
handed out, and knows when each expires.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from urllib.parse import unquote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

ALGORITHM = "AWS4-HMAC-SHA256"
AMZ_DATE = "%Y%m%dT%H%M%SZ"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

# Messages as AWS front doors word them (the InvalidSignatureException one is followed,
# as AWS does, by the canonical request and string to sign the server computed).
SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. "
    "Check your AWS Secret Access Key and signing method. "
    "Consult the service documentation for details."
)
INVALID_TOKEN = "The security token included in the request is invalid."
EXPIRED_TOKEN = "The security token included in the request is expired"
MISSING_TOKEN = "Missing Authentication Token"


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def iso8601(t: dt.datetime) -> str:
    """The ``Expiration`` format of every AWS credential source: ``2026-01-02T03:04:05Z``."""
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def expires_after(seconds: float) -> dt.datetime:
    """now + seconds, rounded up to a whole second (Expiration has no fractions, and a
    credential should not look shorter-lived than asked)."""
    t = utcnow() + dt.timedelta(seconds=seconds)
    return t.replace(microsecond=0) + dt.timedelta(seconds=1 if t.microsecond else 0)


def parse_iso8601(text: str) -> dt.datetime:
    t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


@dataclass
class Known:
    """Credentials a double knows: the secret for an access key id, the session token it
    expects with it (None: long-term keys, no token allowed), and when they expire."""

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None
    expiration: dt.datetime | None = None
    source: str = "static"

    @staticmethod
    def parse(spec: str) -> "Known":
        """``AKID:SECRET`` or ``AKID:SECRET:TOKEN`` (AWS keys and tokens hold no ``:``)."""
        parts = spec.split(":", 2)
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise ValueError(f"expected AKID:SECRET[:TOKEN], got {spec!r}")
        return Known(parts[0], parts[1], parts[2] if len(parts) == 3 else None)


def append_issued(path: str | None, access_key_id: str, secret: str, token: str | None,
                  expiration: dt.datetime | None, source: str) -> None:
    """Append one handed-out credential set to a keys file (one JSON line, one write)."""
    if not path:
        return
    line = json.dumps({
        "AccessKeyId": access_key_id,
        "SecretAccessKey": secret,
        "Token": token,
        "Expiration": iso8601(expiration) if expiration else None,
        "Source": source,
    }) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


class KeyStore:
    """Access key id -> ``Known``: static keys first, then the keys file (reread when it
    grew), then keys added at run time (``add``)."""

    def __init__(self, static: list[Known] | None = None, keys_file: str | None = None):
        self._lock = threading.Lock()
        self._static = {k.access_key_id: k for k in static or []}
        self._added: dict[str, Known] = {}
        self._from_file: dict[str, Known] = {}
        self._keys_file = keys_file
        self._file_size = -1

    def add(self, known: Known) -> None:
        with self._lock:
            self._added[known.access_key_id] = known

    def _reload(self) -> None:
        if not self._keys_file:
            return
        try:
            size = os.path.getsize(self._keys_file)
        except OSError:
            return
        if size == self._file_size:
            return
        with open(self._keys_file, encoding="utf-8") as f:
            text = f.read()
        entries = {}
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line being written right now
            exp = row.get("Expiration")
            entries[row["AccessKeyId"]] = Known(
                row["AccessKeyId"], row["SecretAccessKey"], row.get("Token"),
                parse_iso8601(exp) if exp else None, row.get("Source") or "keys-file",
            )
        self._from_file = entries
        self._file_size = len(text.encode())

    def lookup(self, access_key_id: str) -> Known | None:
        with self._lock:
            for table in (self._static, self._added, self._from_file):
                if access_key_id in table:
                    return table[access_key_id]
            self._reload()
            return self._from_file.get(access_key_id)


@dataclass
class Verdict:
    """What the verifier concluded about one request. ``ok`` False carries the AWS error:
    HTTP status, error type (``x-amzn-ErrorType``) and message."""

    ok: bool
    status: int = 200
    error_type: str | None = None
    message: str | None = None
    access_key_id: str | None = None
    credential_source: str | None = None
    scope: str | None = None
    signed_headers: list[str] = field(default_factory=list)
    unsigned_headers: list[str] = field(default_factory=list)
    session_token_sent: bool = False
    amz_date: str | None = None
    canonical_request: str | None = None
    string_to_sign: str | None = None
    known: Known | None = None

    def summary(self) -> dict:
        return {
            "verified": self.ok,
            "error_type": None if self.ok else self.error_type,
            "access_key_id": self.access_key_id,
            "credential_source": self.credential_source,
            "credential_scope": self.scope,
            "signed_headers": self.signed_headers,
            "unsigned_headers": self.unsigned_headers,
            "session_token_sent": self.session_token_sent,
            "amz_date": self.amz_date,
        }


class _AsReceived(SigV4Auth):
    """botocore's SigV4 over a received request: the headers are exactly those the client
    listed in SignedHeaders (botocore alone would drop some, e.g. user-agent), and the
    query is decoded then re-encoded as AWS canonicalises it."""

    def __init__(self, credentials, service, region, signed: HTTPHeaders, query_pairs):
        super().__init__(credentials, service, region)
        self._signed = signed
        self._query_pairs = query_pairs

    def headers_to_sign(self, request):
        return self._signed

    def canonical_query_string(self, request):
        return self._canonical_query_string_params(self._query_pairs)


_AUTH_PARAM = re.compile(r"(Credential|SignedHeaders|Signature)=([^,\s]*)")
# Not signing these is expected (hop-by-hop, or headers SDKs leave out on purpose).
_NEVER_SIGNED = {
    "authorization", "connection", "keep-alive", "te", "trailer", "transfer-encoding",
    "upgrade", "expect", "proxy-authorization", "content-length", "accept-encoding",
}


def _query_pairs(raw_query: str) -> list[tuple[str, str]]:
    pairs = []
    if raw_query:
        for part in raw_query.split("&"):
            if part == "":
                continue
            key, _, value = part.partition("=")
            pairs.append((unquote(key), unquote(value)))
    return pairs


def _redact(canonical: str, token: str | None) -> str:
    return canonical.replace(token, "<session token>") if token else canonical


def verify(method: str, raw_path: str, raw_query: str, headers: list[tuple[str, str]],
           body: bytes, keys: KeyStore, *, service: str, region: str | None,
           now: dt.datetime | None = None, max_skew_seconds: int = 900,
           skew_error: str = "RequestExpired") -> Verdict:
    """Verify one request's SigV4 ``Authorization`` header.

    ``headers`` are the received (name, value) pairs in order, repeated names allowed.
    ``region`` None accepts the region of the credential scope. The failures, in the order
    they are checked, are those of an AWS JSON front door: 403
    MissingAuthenticationTokenException (no Authorization), 403 IncompleteSignatureException
    (a part missing), 403 InvalidSignatureException (wrong scope, date or signature),
    400 RequestExpired (``skew_error``: date more than ``max_skew_seconds`` off),
    403 UnrecognizedClientException (unknown key, or a session token that is not the one
    issued with it), 403 ExpiredTokenException (credentials past their expiration).
    """
    now = now or utcnow()
    hmap: dict[str, list[str]] = {}
    for name, value in headers:
        hmap.setdefault(name.lower(), []).append(value)
    auth = ",".join(hmap.get("authorization", []))
    v = Verdict(ok=False, status=403)
    token_values = hmap.get("x-amz-security-token")
    v.session_token_sent = bool(token_values)

    if not auth:
        v.error_type, v.message = "MissingAuthenticationTokenException", MISSING_TOKEN
        return v
    algorithm = auth.split(" ", 1)[0]
    if algorithm != ALGORITHM:
        v.error_type = "IncompleteSignatureException"
        v.message = f"Unsupported authorization type '{algorithm}'; expected {ALGORITHM}"
        return v
    params = dict(_AUTH_PARAM.findall(auth))
    missing = [p for p in ("Credential", "SignedHeaders", "Signature") if not params.get(p)]
    amz_date = (hmap.get("x-amz-date") or [None])[0]
    if not amz_date and hmap.get("date"):
        try:
            parsed = dt.datetime.strptime(hmap["date"][0], "%a, %d %b %Y %H:%M:%S GMT")
            amz_date = parsed.strftime(AMZ_DATE)
        except ValueError:
            amz_date = None
    problems = [f"Authorization header requires '{p}' parameter." for p in missing]
    if not amz_date:
        problems.append(
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
        )
    if problems:
        v.error_type = "IncompleteSignatureException"
        v.message = " ".join(problems) + f" Authorization={auth.split(' ', 1)[0]}"
        return v
    v.amz_date = amz_date
    scope = params["Credential"].split("/")
    v.signed_headers = params["SignedHeaders"].split(";")
    v.unsigned_headers = sorted(n for n in hmap if n not in v.signed_headers and n not in _NEVER_SIGNED)
    if len(scope) != 5:
        v.error_type = "IncompleteSignatureException"
        v.message = f"Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term, got '{params['Credential']}'"
        return v
    akid, scope_date, scope_region, scope_service, terminator = scope
    v.access_key_id = akid
    v.scope = "/".join(scope[1:])
    v.status, v.error_type = 403, "InvalidSignatureException"
    if terminator != "aws4_request":
        v.message = f"Credential should be scoped with a valid terminator: 'aws4_request', not '{terminator}'."
        return v
    if scope_date != amz_date[:8]:
        v.message = (f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version "
                     f"of date from HTTP: '{scope_date}' != '{amz_date[:8]}', from '{amz_date}'.")
        return v
    if region is not None and scope_region != region:
        v.message = f"Credential should be scoped to a valid region, not '{scope_region}'. "
        return v
    if scope_service != service:
        v.message = f"Credential should be scoped to correct service: '{service}'. "
        return v
    if "host" not in v.signed_headers:
        v.message = "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization."
        return v
    try:
        signed_at = dt.datetime.strptime(amz_date, AMZ_DATE).replace(tzinfo=dt.timezone.utc)
    except ValueError:
        v.error_type = "IncompleteSignatureException"
        v.message = f"Date must be in ISO-8601 'basic format'. Got '{amz_date}'."
        return v
    skew = dt.timedelta(seconds=max_skew_seconds)
    minutes = max_skew_seconds // 60
    if signed_at < now - skew or signed_at > now + skew:
        if signed_at < now - skew:
            text = (f"Signature expired: {amz_date} is now earlier than "
                    f"{(now - skew).strftime(AMZ_DATE)} ({now.strftime(AMZ_DATE)} - {minutes} min.)")
        else:
            text = (f"Signature not yet current: {amz_date} is still later than "
                    f"{(now + skew).strftime(AMZ_DATE)} ({now.strftime(AMZ_DATE)} + {minutes} min.)")
        if skew_error == "RequestExpired":
            v.status, v.error_type = 400, "RequestExpired"
        else:
            v.status, v.error_type = 403, "InvalidSignatureException"
        v.message = text
        return v

    known = keys.lookup(akid)
    if known is None:
        v.status, v.error_type, v.message = 403, "UnrecognizedClientException", INVALID_TOKEN
        return v
    v.known = known
    v.credential_source = known.source
    sent_token = token_values[0] if token_values else None
    if (sent_token or None) != (known.session_token or None):
        v.status, v.error_type, v.message = 403, "UnrecognizedClientException", INVALID_TOKEN
        return v
    if known.expiration is not None and known.expiration <= now:
        v.status, v.error_type, v.message = 403, "ExpiredTokenException", EXPIRED_TOKEN
        return v

    body_hash = hashlib.sha256(body).hexdigest()
    declared = (hmap.get("x-amz-content-sha256") or [None])[0]
    if declared is not None and declared != body_hash:
        v.status, v.error_type = 403, "InvalidSignatureException"
        v.message = ("The provided 'x-amz-content-sha256' header does not match what was computed "
                     "(this double requires the body's SHA-256).")
        return v

    signed = HTTPHeaders()
    for name in v.signed_headers:
        for value in hmap.get(name, []):
            signed[name] = value
    request = AWSRequest(method=method.upper(), url=f"http://{(hmap.get('host') or ['localhost'])[0]}{raw_path}",
                         data=body)
    if declared is not None:
        request.headers["X-Amz-Content-SHA256"] = declared
    request.context["timestamp"] = amz_date
    signer = _AsReceived(Credentials(akid, known.secret_access_key, known.session_token),
                         scope_service, scope_region, signed, _query_pairs(raw_query))
    canonical = signer.canonical_request(request)
    string_to_sign = signer.string_to_sign(request, canonical)
    expected = signer.signature(string_to_sign, request)
    v.canonical_request = _redact(canonical, known.session_token)
    v.string_to_sign = string_to_sign
    if expected != params["Signature"]:
        v.message = (f"{SIGNATURE_MISMATCH}\n\nThe Canonical String for this request should have been\n"
                     f"'{v.canonical_request}'\n\nThe String-to-Sign should have been\n'{string_to_sign}'\n")
        return v
    v.ok, v.status, v.error_type, v.message = True, 200, None, None
    return v
