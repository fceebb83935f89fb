"""A double of the ECS task-role / EKS Pod Identity container credentials endpoint.

The AWS SDKs (botocore's ContainerProvider, Rust ``aws-config``'s EcsCredentialsProvider)
read it when ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` is set (http only to a loopback
address, 169.254.170.2 or the Pod Identity addresses; otherwise https), sending
``GET <that URL>`` with ``Accept: application/json`` and, when
``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`` (read on every fetch, sent verbatim, so no
trailing newline) or ``AWS_CONTAINER_AUTHORIZATION_TOKEN`` is set, its value as the
``Authorization`` header. The answer is

  {"AccessKeyId": "ASIA...", "SecretAccessKey": "...", "Token": "...",
   "Expiration": "2026-01-02T03:04:05Z", "RoleArn": "...", "AccountId": "123456789012"}

Each call hands out new credentials (``ASIAECS00001...``) that expire ``expires_in``
seconds later, so a test sees every fetch, and appends them to ``--keys-file`` for the
AgentCore double. With ``--access-key/--secret-key/--session-token`` it hands out those
instead, every time.

Usage:
  python container_credentials_double.py [--port 0] [--path /credentials]
      [--token VALUE | --token-file FILE] [--expires-in 3600] [--keys-file FILE]
      [--account-id 123456789012] [--role-arn ARN]
      [--access-key AKID --secret-key SECRET --session-token TOKEN]

Prints ``http://127.0.0.1:PORT`` first (the credentials URL is that plus ``--path``);
stops on SIGTERM. ``GET /_calls`` lists every call (path, Authorization received and
whether it matched, status, the access key id handed out and its expiration);
``POST /_control`` takes {"expires_in": 5, "fail": 500, "fail_count": 1} (fail the next
call(s) with that status: aws-config retries 5xx, not 4xx) or {"token": "..."}.
A wrong or missing Authorization gets 401 {"Code": "AccessDenied", "Message": ...}.
"""

from __future__ import annotations

import argparse

from http_double import Double, Handler, new_credentials, serve
from sigv4_check import append_issued, expires_after, iso8601


class Container(Handler):
    def do_GET(self):
        if self.control():
            return
        d = self.double
        s = d.settings
        path, _, query = self.path.partition("?")
        got = self.headers.get("authorization")
        expected = s.get("token")
        if s.get("token_file"):
            with open(s["token_file"], encoding="utf-8") as f:
                expected = f.read()
        entry = d.record({
            "method": "GET", "path": path, "query": query,
            "accept": self.headers.get("accept"),
            "user_agent": self.headers.get("user-agent"),
            "authorization": got,
            "authorized": expected is None or got == expected,
        })
        if path != s["path"]:
            entry["status"] = 404
            return self.send(404, {"Code": "NotFound", "Message": f"no credentials at {path}"})
        if not entry["authorized"]:
            entry["status"] = 401
            return self.send(401, {"Code": "AccessDenied",
                                   "Message": "The Authorization header is missing or not the token this endpoint expects"})
        failure = d.take_failure()
        if failure:
            entry["status"] = failure
            return self.send(failure, {"Code": "InternalError" if failure >= 500 else "AccessDenied",
                                       "Message": "failure injected by the test"})
        with d.lock:
            d.issued += 1
            seq = d.issued
        if s.get("access_key"):
            akid, secret, token = s["access_key"], s["secret_key"], s.get("session_token")
        else:
            akid, secret, token = new_credentials("ECS", seq)
        expiration = expires_after(float(s["expires_in"]))
        append_issued(s.get("keys_file"), akid, secret, token, expiration, "container")
        entry.update(status=200, access_key_id=akid, expiration=iso8601(expiration))
        self.send(200, {
            "AccessKeyId": akid,
            "SecretAccessKey": secret,
            "Token": token,
            "Expiration": iso8601(expiration),
            "RoleArn": s["role_arn"],
            "AccountId": s["account_id"],
        })


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--path", default="/credentials")
    p.add_argument("--token")
    p.add_argument("--token-file")
    p.add_argument("--expires-in", type=float, default=3600)
    p.add_argument("--keys-file")
    p.add_argument("--account-id", default="123456789012")
    p.add_argument("--role-arn", default="arn:aws:iam::123456789012:role/a2a-gateway-task")
    p.add_argument("--access-key")
    p.add_argument("--secret-key")
    p.add_argument("--session-token")
    a = p.parse_args()
    Container.double = Double({
        "path": a.path, "token": a.token, "token_file": a.token_file, "expires_in": a.expires_in,
        "keys_file": a.keys_file, "account_id": a.account_id, "role_arn": a.role_arn,
        "access_key": a.access_key, "secret_key": a.secret_key, "session_token": a.session_token,
    })
    serve(Container, a.host, a.port)


if __name__ == "__main__":
    main()
