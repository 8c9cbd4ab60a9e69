"""The listener cannot slow the loop down (issue 42).

Covers:
- per client address a token bucket: a burst, then the rate (429), on a fake clock;
  other addresses unaffected; the addresses remembered are bounded;
- at most so many connections served at once (503 beyond), each freed when it ends;
- ``/api/status`` is serialized once per published document: the same bytes for every
  request until the daemon publishes a new document;
- on a real socket: a client over its rate gets the canned 429 with ``Retry-After``
  (``/healthz`` and ``/livez`` answered all the same),
  one request per connection, and the refusals are counted.
"""

from __future__ import annotations

import socket
from typing import Any

from reconciler.daemon.http import BUSY, LIMITED, Admission, HttpServer
from tests.helpers.clock import FakeClock


def test_a_client_gets_its_burst_then_its_rate() -> None:
    clock = FakeClock()
    gate = Admission(clock.monotonic, limit=100, rate=2.0, burst=3.0)
    answers = [gate.admit("10.0.0.1") for _ in range(4)]
    assert answers == [None, None, None, LIMITED]
    assert gate.admit("10.0.0.2") is None  # another client: its own bucket
    clock.advance(0.5)  # one token back
    assert gate.admit("10.0.0.1") is None
    assert gate.admit("10.0.0.1") is LIMITED


def test_connections_are_capped_and_freed() -> None:
    gate = Admission(FakeClock().monotonic, limit=2, rate=100.0, burst=100.0)
    assert gate.admit("a") is None
    assert gate.admit("b") is None
    assert gate.admit("c") is BUSY
    gate.done()
    assert gate.admit("c") is None
    assert gate.active == 2


def test_the_clients_remembered_are_bounded() -> None:
    gate = Admission(FakeClock().monotonic, limit=10**6, rate=1.0, burst=1.0, clients=8)
    for i in range(100):
        assert gate.admit(f"10.0.{i // 256}.{i % 256}") is None
    assert len(gate._buckets) == 8
    assert gate.admit("10.0.0.99") is LIMITED  # still remembered: among the last 8


def _server(doc: dict[str, Any], rate: float = 100.0, burst: float = 100.0) -> tuple[HttpServer, list[str]]:
    refused: list[str] = []
    s = HttpServer(
        "127.0.0.1:0",
        secret=lambda: b"",
        on_push=lambda: None,
        health=lambda: (True, {}),
        metrics=lambda: (b"", "text/plain"),
        status=lambda: doc,
        on_refused=refused.append,
        admission=Admission(FakeClock().monotonic, rate=rate, burst=burst),
    )
    return s, refused


def _get(address: str, path: str) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as c:
        c.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        out = b""
        while chunk := c.recv(65536):  # the server closes: one request per connection
            out += chunk
    return out


def test_the_status_document_is_serialized_once_per_publication() -> None:
    doc = {"reason": "Succeeded", "hosts": []}
    s, _ = _server(doc)
    try:
        first = s.status_bytes()
        assert s.status_bytes() is first  # no work per request
        s.status = lambda: {"reason": "ApplyFailed", "hosts": []}  # a new document published
        assert b"ApplyFailed" in s.status_bytes()
    finally:
        s.server.server_close()  # never started


def test_over_its_rate_a_client_gets_429_unread() -> None:
    s, refused = _server({"reason": "Succeeded"}, rate=0.001, burst=2.0)
    s.start()
    try:
        answers = [_get(s.address, "/api/status") for _ in range(3)]
    finally:
        s.close()
    assert answers[0].startswith(b"HTTP/1.1 200")
    assert b"Connection: close" in answers[0]
    assert answers[0].endswith(b'{"reason": "Succeeded"}\n')
    assert answers[2] == LIMITED
    assert b"Retry-After: 1" in answers[2]
    assert refused == ["rate-limited"]


def test_health_probes_are_never_refused_for_the_rate() -> None:
    s, refused = _server({"reason": "Succeeded"}, rate=0.001, burst=1.0)
    s.start()
    try:
        assert _get(s.address, "/api/status").startswith(b"HTTP/1.1 200")
        assert _get(s.address, "/api/status") == LIMITED
        assert _get(s.address, "/healthz").startswith(b"HTTP/1.1 200")  # the same client, over its rate
        assert _get(s.address, "/livez").startswith(b"HTTP/1.1 ")
    finally:
        s.close()
    assert refused == ["rate-limited"]
