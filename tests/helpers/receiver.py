"""A local HTTP receiver standing in for a forge, a webhook, Slack or Alertmanager.

Input: the answers to give (status codes, in order; then ``default``), an optional delay.
Output: ``Receiver`` with its base URL and every request it got (method, path, headers,
body, when it arrived), and ``openapi_check``, which validates one request against a pinned OpenAPI
operation of ``tests/data/forges`` (method, path and its required parameters, body
schema). Binds 127.0.0.1 only.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema

FORGES = Path(__file__).resolve().parents[1] / "data" / "forges"


@dataclass(frozen=True)
class Got:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = 0.0  # when it arrived (epoch seconds)

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    def __init__(self, codes: list[int] | None = None, default: int = 201, delay_s: float = 0.0) -> None:
        self.codes = list(codes or [])
        self.default = default
        self.delay_s = delay_s
        self.got: list[Got] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                with outer._lock:
                    outer.got.append(Got("POST", self.path, dict(self.headers.items()), body, time.time()))
                    code = outer.codes.pop(0) if outer.codes else outer.default
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def requests(self) -> list[Got]:
        with self._lock:
            return list(self.got)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def load_operation(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FORGES / name).read_text())
    return doc


def openapi_check(doc: dict[str, Any], got: Got, prefix: str) -> dict[str, str]:
    """Check ``got`` against the one POST operation of the pinned excerpt ``doc``; the
    path parameters found. ``prefix`` is the path before the description's paths (the
    API root the daemon was configured with)."""
    ((template, ops),) = doc["paths"].items()
    op = ops[got.method.lower()]  # KeyError: a method the forge does not take there
    assert got.path.startswith(prefix), (got.path, prefix)
    rest = got.path[len(prefix) :]
    pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
    m = re.match(pattern, rest)
    assert m is not None, f"{rest} does not match {template}"
    params = []
    for p in op["parameters"]:
        if "$ref" in p:
            p = doc["components"]["parameters"][p["$ref"].rsplit("/", 1)[1]]
        params.append(p)
    for p in params:
        if p["in"] == "path" and p.get("required"):
            assert m.group(p["name"]), p["name"]
    if "requestBody" in op:  # OpenAPI 3
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        assert got.headers.get("Content-Type", "").startswith("application/json")
    else:  # Swagger 2: the body parameter
        (body,) = [p for p in params if p["in"] == "body"]
        schema = body["schema"]
    wrapped = {**schema, "definitions": doc.get("definitions", {})}
    jsonschema.validate(got.json(), wrapped, cls=jsonschema.Draft4Validator)
    return m.groupdict()
