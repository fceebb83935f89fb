"""A double of the EC2 instance metadata service, IMDSv2 only (a session token is required).

The AWS SDKs (botocore's InstanceMetadataFetcher, Rust ``aws-config``'s
ImdsCredentialsProvider) reach it at ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` and do:

  PUT /latest/api/token   with x-aws-ec2-metadata-token-ttl-seconds: 1..21600
      -> 200 text/plain token (and the same ttl header back); no or a bad ttl -> 400
  GET /latest/meta-data/iam/security-credentials/          -> the role name
  GET /latest/meta-data/iam/security-credentials/ROLE      -> the credentials JSON
      each GET with x-aws-ec2-metadata-token: <token>; none, unknown or expired -> 401

aws-config (1.x) first tries the "extended" paths
``/latest/meta-data/iam/security-credentials-extended/[ROLE]`` (the JSON also carries
``AccountId``) and falls back to the legacy ones on 404; botocore uses the legacy ones.
Both are served unless ``--no-extended`` (then the extended paths answer 404). Also
``GET /latest/meta-data/placement/region``. The credentials JSON:

  {"Code": "Success", "LastUpdated": "...", "Type": "AWS-HMAC", "AccessKeyId": "ASIA...",
   "SecretAccessKey": "...", "Token": "...", "Expiration": "2026-01-02T03:04:05Z"}

Each credentials GET hands out new credentials expiring ``expires_in`` seconds later and
appends them to ``--keys-file``. ``--allow-v1`` answers GETs without a token (IMDSv1).

Usage:
  python imds_double.py [--port 0] [--role a2a-gateway-instance] [--expires-in 3600]
      [--keys-file FILE] [--region us-east-1] [--no-extended] [--allow-v1]

Prints ``http://127.0.0.1:PORT`` first; stops on SIGTERM. ``GET /_calls`` lists every
call (method, path, token sent and accepted, ttl asked, status, access key id handed out);
``POST /_control`` takes {"expires_in": 5, "fail": 500, "fail_count": 1, "no_extended": true}.
"""

from __future__ import annotations

import argparse
import secrets
import time

from http_double import Double, Handler, new_credentials, serve
from sigv4_check import append_issued, expires_after, iso8601, utcnow

CREDS = "/latest/meta-data/iam/security-credentials/"
EXTENDED = "/latest/meta-data/iam/security-credentials-extended/"


class Imds(Handler):
    tokens: dict[str, float] = {}  # token -> expiry (monotonic)

    def do_PUT(self):
        if self.control():
            return
        d = self.double
        self.body()
        ttl = self.headers.get("x-aws-ec2-metadata-token-ttl-seconds")
        entry = d.record({"method": "PUT", "path": self.path, "ttl": ttl,
                          "user_agent": self.headers.get("user-agent")})
        if self.path != "/latest/api/token":
            entry["status"] = 404
            return self.send(404, "Not Found")
        if self.headers.get("x-forwarded-for"):
            entry["status"] = 403
            return self.send(403, "Forbidden")
        try:
            seconds = int(ttl)
        except (TypeError, ValueError):
            seconds = 0
        if not 1 <= seconds <= 21600:
            entry["status"] = 400
            return self.send(400, "Bad Request")
        failure = d.take_failure()
        if failure:
            entry["status"] = failure
            return self.send(failure, "failure injected by the test")
        token = secrets.token_urlsafe(40)
        with d.lock:
            self.tokens[token] = time.monotonic() + seconds
        entry["status"] = 200
        self.send(200, token, headers={"x-aws-ec2-metadata-token-ttl-seconds": str(seconds)})

    def do_GET(self):
        if self.control():
            return
        d = self.double
        s = d.settings
        token = self.headers.get("x-aws-ec2-metadata-token")
        with d.lock:
            valid = token is not None and self.tokens.get(token, 0) > time.monotonic()
        entry = d.record({"method": "GET", "path": self.path, "token_sent": token is not None,
                          "token_valid": valid, "user_agent": self.headers.get("user-agent")})
        if not valid and not (token is None and s["allow_v1"]):
            entry["status"] = 401
            return self.send(401, "Unauthorized")
        path = self.path
        if path == "/latest/meta-data/placement/region":
            entry["status"] = 200
            return self.send(200, s["region"])
        extended = path.startswith(EXTENDED)
        if extended and s["no_extended"]:
            entry["status"] = 404
            return self.send(404, "Not Found")
        base = EXTENDED if extended else CREDS
        if not path.startswith(base):
            entry["status"] = 404
            return self.send(404, "Not Found")
        failure = d.take_failure()
        if failure:
            entry["status"] = failure
            return self.send(failure, "failure injected by the test")
        role = path[len(base):]
        if role == "":
            entry["status"] = 200
            return self.send(200, s["role"])
        if role != s["role"]:
            entry["status"] = 404
            return self.send(404, "Not Found")
        with d.lock:
            d.issued += 1
            seq = d.issued
        akid, secret, session_token = new_credentials("EC2", seq)
        now = utcnow().replace(microsecond=0)
        expiration = expires_after(float(s["expires_in"]))
        append_issued(s.get("keys_file"), akid, secret, session_token, expiration, "imds")
        entry.update(status=200, access_key_id=akid, expiration=iso8601(expiration), extended=extended)
        body = {
            "Code": "Success", "LastUpdated": iso8601(now), "Type": "AWS-HMAC",
            "AccessKeyId": akid, "SecretAccessKey": secret, "Token": session_token,
            "Expiration": iso8601(expiration),
        }
        if extended:
            body["AccountId"] = s["account_id"]
        self.send(200, body, content_type="text/plain")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--role", default="a2a-gateway-instance")
    p.add_argument("--expires-in", type=float, default=3600)
    p.add_argument("--keys-file")
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--account-id", default="123456789012")
    p.add_argument("--no-extended", action="store_true")
    p.add_argument("--allow-v1", action="store_true")
    a = p.parse_args()
    Imds.double = Double({
        "role": a.role, "expires_in": a.expires_in, "keys_file": a.keys_file, "region": a.region,
        "account_id": a.account_id, "no_extended": a.no_extended, "allow_v1": a.allow_v1,
    })
    serve(Imds, a.host, a.port)


if __name__ == "__main__":
    main()
