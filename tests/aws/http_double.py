"""What the small stdlib HTTP doubles here share: a threaded server on 127.0.0.1 (port 0
by default) that prints ``http://127.0.0.1:PORT`` as its first stdout line and stops on
SIGTERM, a record of calls served at ``GET /_calls``, settings changed at run time with
``POST /_control`` (a JSON object merged into them), ``POST /_reset``, and a counter of
issued credentials for access key ids that are unique and look like AWS's."""

from __future__ import annotations

import json
import secrets
import signal
import string
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sigv4_check import utcnow

_ALNUM = string.ascii_uppercase + string.digits


def new_credentials(prefix: str, seq: int) -> tuple[str, str, str]:
    """(access key id, secret, session token) that are new each time: ``ASIA`` + a
    3-letter source tag + a sequence number + random, 20 characters like AWS's."""
    middle = f"{prefix[:3].upper():<3}{seq:05d}"
    akid = "ASIA" + middle + "".join(secrets.choice(_ALNUM) for _ in range(20 - 4 - len(middle)))
    secret = secrets.token_urlsafe(30)[:40]
    token = "IQoJb3JpZ2luX2VjE" + secrets.token_urlsafe(90)
    return akid, secret, token


class Double:
    """Shared state of one double: settings, records, a lock."""

    def __init__(self, settings: dict):
        self.settings = settings
        self.calls: list[dict] = []
        self.issued = 0
        self.lock = threading.Lock()

    def record(self, entry: dict) -> dict:
        with self.lock:
            entry.setdefault("time", utcnow().isoformat())
            entry["seq"] = len(self.calls) + 1
            self.calls.append(entry)
        return entry

    def take_failure(self) -> int | None:
        """The status to fail the next call with, if told to (``fail``: a status,
        ``fail_count``: how many calls, -1 for all)."""
        with self.lock:
            status = self.settings.get("fail")
            count = self.settings.get("fail_count", -1)
            if not status or count == 0:
                return None
            if count > 0:
                self.settings["fail_count"] = count - 1
            return int(status)


class Handler(BaseHTTPRequestHandler):
    """Base handler: ``double`` is set on the subclass; ``/_`` paths are control."""

    protocol_version = "HTTP/1.1"
    double: Double

    def log_message(self, *args):
        pass

    def body(self) -> bytes:
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, status: int, body: bytes | str | dict | list, content_type: str | None = None,
             headers: dict | None = None) -> None:
        if isinstance(body, (dict, list)):
            body, content_type = json.dumps(body).encode(), content_type or "application/json"
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("content-type", content_type or "text/plain")
        self.send_header("content-length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        if not self.control():
            self.body()
            self.send(405, "Method Not Allowed")

    def control(self) -> bool:
        if not self.path.startswith("/_"):
            return False
        d = self.double
        data = self.body()
        if self.path == "/_calls" and self.command == "GET":
            with d.lock:
                self.send(200, list(d.calls))
        elif self.path == "/_control" and self.command == "POST":
            with d.lock:
                d.settings.update(json.loads(data or b"{}"))
                self.send(200, d.settings)
        elif self.path == "/_reset" and self.command == "POST":
            with d.lock:
                d.calls.clear()
            self.send(200, {"reset": True})
        else:
            self.send(404, {"message": "no such control path"})
        return True


def serve(handler: type[Handler], host: str, port: int) -> None:
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"http://{host}:{server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    sys.exit(0)
