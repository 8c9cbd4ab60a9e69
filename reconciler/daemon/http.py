"""The HTTP listener: ``GET /`` (the status page), ``GET /api/status``, ``GET /healthz``,
``GET /livez``, ``GET /metrics`` and ``POST /hooks/git``.

Input: requests on the configured address (loopback by default). Output: the status page
(``page.PAGE``) and its JSON document, health (both with every string through
``wording.escape.clean_json``: printable, no credentials in URLs), Prometheus text, and a trigger call for each
authenticated push notification. I/O (``http.server`` in a thread). Every answer is
read-only but the webhook's trigger. The webhook never decides anything: a valid request
only means "the source may have changed"; the loop fetches and compares heads.

Authentication (reject when missing or wrong, 401; the body is never parsed):
- ``X-Hub-Signature-256: sha256=<hex>``: HMAC SHA-256 of the raw body with the shared
  secret, as GitHub, Gitea, Forgejo and Gogs send it;
- ``X-Gitlab-Token: <secret>``: GitLab sends the shared secret itself (no HMAC); it is
  compared in constant time.

The listener cannot slow the loop down (issue 42): ``/api/status`` answers the bytes of
the last published document, serialized once per document (no work per request); each
connection carries one request; at most ``MAX_CONNECTIONS`` are served at once (more
are answered 503 at once); each client address gets ``RATE_PER_S`` requests a second
(a burst of ``BURST``; more are answered 429 with ``Retry-After``). The refusals are
canned bytes written once the request line and headers are read, before any work;
``/healthz`` and ``/livez`` are never refused for the rate or the cap (a monitor on the
same address as the pollers still gets its answer). Beyond ``MAX_THREADS`` connections
at once, the accepting thread answers 503 itself, nothing read; the addresses
remembered are bounded (``MAX_CLIENTS``), as is a request (its line and headers by
``http.server``, a body by ``MAX_BODY``). Every request runs on its own thread, never
on the reconcile's.

Malformed requests (a header that is not ASCII, a bad request line, an unknown method, a
body larger than ``MAX_BODY``) are answered with a 4xx and one log line. A client that
drops its connection or stalls past ``CLIENT_TIMEOUT_S`` costs one count of
``on_dropped`` and nothing else: no traceback, no thread kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import socket
import sys
import threading
from collections import OrderedDict
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import structlog

from reconciler.config.daemon import parse_listen
from reconciler.context import SystemClock
from reconciler.daemon import page
from reconciler.wording.escape import clean_json

if TYPE_CHECKING:
    from collections.abc import Callable

log = structlog.get_logger("reconciler.daemon.http")

MAX_BODY = 5 * 1024 * 1024
HOOK_PATH = "/hooks/git"
CLIENT_TIMEOUT_S = 30.0  # a client silent this long is dropped (a slow-loris guard)
DROPPED = (ConnectionError, TimeoutError)  # resets, broken pipes, socket timeouts
MAX_CONNECTIONS = 32  # requests served at once (health probes aside); more are answered 503 at once
MAX_THREADS = 128  # connections with a thread at once; more are answered 503 unread
HEALTH_PATHS = frozenset({"/healthz", "/livez"})  # never refused for the rate nor the cap
RATE_PER_S = 50.0  # requests a second per client address
BURST = 200.0  # requests a client may send at once before the rate applies
MAX_CLIENTS = 1024  # client addresses remembered for their rate (the least recent forgotten)
BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nRetry-After: 1\r\nConnection: close\r\n\r\nbusy\n"
LIMITED = (
    b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 13\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    b"rate limited\n"
)


class Admission:
    """Who is served: at most ``limit`` connections at once, and per client address a
    token bucket of ``rate`` a second (``burst`` at once). ``clock``: monotonic seconds."""

    def __init__(
        self,
        clock: Callable[[], float],
        limit: int = MAX_CONNECTIONS,
        rate: float = RATE_PER_S,
        burst: float = BURST,
        clients: int = MAX_CLIENTS,
    ) -> None:
        self.clock = clock
        self.limit, self.rate, self.burst, self.clients = limit, rate, burst, clients
        self.active = 0
        self.threads = 0
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # address -> (tokens, at)
        self._lock = threading.Lock()

    def admit(self, address: str) -> bytes | None:
        """None: serve it (``done()`` when it ends); else the canned refusal to write."""
        now = self.clock()
        with self._lock:
            tokens, at = self._buckets.pop(address, (self.burst, now))
            tokens = min(self.burst, tokens + max(0.0, now - at) * self.rate)
            if tokens < 1.0:
                self._buckets[address] = (tokens, now)
                refusal: bytes | None = LIMITED
            elif self.active >= self.limit:
                self._buckets[address] = (tokens, now)
                refusal = BUSY
            else:
                self._buckets[address] = (tokens - 1.0, now)
                self.active += 1
                refusal = None
            while len(self._buckets) > self.clients:
                self._buckets.popitem(last=False)
        return refusal

    def done(self) -> None:
        with self._lock:
            self.active -= 1

    def enter(self) -> bool:
        """A connection accepted: False (refuse it unread) beyond ``MAX_THREADS``."""
        with self._lock:
            if self.threads >= MAX_THREADS:
                return False
            self.threads += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self.threads -= 1


def _ascii(value: str) -> bytes | None:
    """A header's value as ASCII bytes, or None (``http.server`` decodes headers as Latin-1)."""
    try:
        return value.strip().encode("ascii")
    except UnicodeEncodeError:
        return None


def signature_ok(secret: bytes, body: bytes, headers: Any) -> tuple[bool, str]:
    """(accepted, why) for a webhook request. ``headers`` needs ``.get(name)``."""
    if not secret:
        return False, "webhook not configured (no secret)"
    sig = headers.get("X-Hub-Signature-256")
    if sig:
        raw = _ascii(sig)
        algo, _, digest = (raw or b"").partition(b"=")
        if algo != b"sha256" or not digest:
            return False, "malformed X-Hub-Signature-256"
        want = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
        if hmac.compare_digest(want, digest.lower()):
            return True, "hmac-sha256"
        return False, "bad signature"
    token = headers.get("X-Gitlab-Token")
    if token is not None:
        raw = _ascii(token)
        if raw is None:
            return False, "malformed X-Gitlab-Token"
        if hmac.compare_digest(raw, secret):
            return True, "gitlab-token"
        return False, "bad token"
    return False, "missing signature"


class _Server(ThreadingHTTPServer):
    """A request that failed in a way the handler did not answer is counted, never printed
    (``socketserver`` would print a traceback to stderr)."""

    daemon_threads = True
    request_queue_size = 128  # connections the kernel holds before the accepting thread takes them
    on_dropped: Callable[[], None] = staticmethod(lambda: None)
    on_refused: Callable[[str], None] = staticmethod(lambda why: None)
    admission: Admission

    def process_request(self, request: Any, client_address: Any) -> None:
        """On the accepting thread: beyond ``MAX_THREADS`` connections, canned bytes
        written without reading (no thread)."""
        if self.admission.enter():
            super().process_request(request, client_address)
            return
        self.on_refused("busy")
        with contextlib.suppress(OSError):
            request.setblocking(False)
            request.send(BUSY)
            request.recv(8192)  # what the client sent already: unread, the close would reset
        self.shutdown_request(request)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.admission.leave()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A request that failed (most often a client gone: a broken pipe after the daemon
        was paused): counted, and one log line, never a traceback on stderr."""
        self.on_dropped()
        err = sys.exc_info()[1]
        gone = isinstance(err, ConnectionError | TimeoutError)
        (log.debug if gone else log.warning)(
            "http request failed", client=str(client_address[0]) if client_address else "", error=repr(err)
        )


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    """One connection to ``outer``'s listener (``http.server`` reads and answers it in
    ``__init__``)."""

    server_version = "reconciler"
    protocol_version = "HTTP/1.1"
    timeout = CLIENT_TIMEOUT_S

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug("http", client=self.client_address[0], request=fmt % args)

    def log_error(self, fmt: str, *args: Any) -> None:
        """The one line of a request ``http.server`` refused (bad request line,
        header or method); the answer is a 4xx (``send_error``)."""
        log.warning("http request refused", client=self.client_address[0], why=fmt % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # An unknown method (501) or HTTP version (505) is the client's mistake: 405, 400.
        super().send_error({501: 405, 505: 400}.get(code, code), message, explain)

    admitted = False

    def __init__(self, request: Any, client_address: Any, server: Any, outer: HttpServer) -> None:
        self.outer = outer
        super().__init__(request, client_address, server)

    def handle(self) -> None:
        try:
            super().handle()
        except DROPPED:
            self.outer.on_dropped()  # once per connection

    def parse_request(self) -> bool:
        """The request line and headers read: a request over its client's rate or
        the cap is answered with canned bytes before any work (health probes never)."""
        if not super().parse_request():
            return False
        if self.path.split("?", 1)[0] in HEALTH_PATHS:
            return True
        gate = self.outer.server.admission
        refusal = gate.admit(str(self.client_address[0]))
        if refusal is None:
            self.admitted = True
            return True
        self.outer.server.on_refused("busy" if refusal is BUSY else "rate-limited")
        self.close_connection = True
        with contextlib.suppress(*DROPPED):
            self.wfile.write(refusal)
        return False

    def finish(self) -> None:
        if self.admitted:
            self.outer.server.admission.done()
        with contextlib.suppress(*DROPPED):  # the last flush to a client gone
            super().finish()

    def _send(
        self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8", extra: Any = None
    ) -> None:
        self.close_connection = True  # one request per connection: each one admitted
        self.send_response(code)
        self.send_header("Connection", "close")
        self.send_header("Content-Type", ctype)
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        probe = {"/healthz": self.outer.health, "/livez": self.outer.live}.get(path)
        if probe is not None:
            ok, info = probe()
            body = json.dumps(
                clean_json({"status": "ok" if ok else "unhealthy", **info}), sort_keys=True
            ).encode()
            self._send(200 if ok else 503, body + b"\n", "application/json")
        elif path == "/metrics":
            data, ctype = self.outer.metrics()
            self._send(200, data, ctype)
        elif path == "/" and self.outer.status is not None:
            self._send(200, page.PAGE, "text/html; charset=utf-8", page.HEADERS)
        elif path == "/api/status" and self.outer.status is not None:
            self._send(200, self.outer.status_bytes(), "application/json", {"Cache-Control": "no-store"})
        else:
            self._send(404, b"not found\n")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if path != HOOK_PATH:
            self._send(404, b"not found\n")
            return
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.outer.on_webhook("rejected")
            log.warning("webhook rejected", client=self.client_address[0], why="body size")
            self.close_connection = True
            self._send(413, b"body too large or no Content-Length\n")
            return
        body = self.rfile.read(length)
        if len(body) < length:  # the client went away mid-body
            self.close_connection = True
            self.outer.on_dropped()
            return
        ok, why = signature_ok(self.outer.secret(), body, self.headers)
        if not ok:
            self.outer.on_webhook("rejected")
            log.warning("webhook rejected", client=self.client_address[0], why=why)
            self._send(401, f"{why}\n".encode())
            return
        self.outer.on_webhook("accepted")
        event = (
            self.headers.get("X-GitHub-Event")
            or self.headers.get("X-Gitea-Event")
            or self.headers.get("X-Gitlab-Event", "")
        )
        log.info("webhook accepted", auth=why, forge_event=event)
        self.outer.on_push()
        self._send(202, b"accepted\n")


class HttpServer:
    """Serves in a background thread until ``close()``."""

    def __init__(
        self,
        listen: str,
        secret: Callable[[], bytes],
        on_push: Callable[[], None],
        health: Callable[[], tuple[bool, dict[str, Any]]],
        metrics: Callable[[], tuple[bytes, str]],
        on_webhook: Callable[[str], None] = lambda result: None,
        live: Callable[[], tuple[bool, dict[str, Any]]] | None = None,
        status: Callable[[], dict[str, Any]] | None = None,
        on_dropped: Callable[[], None] = lambda: None,
        on_refused: Callable[[str], None] = lambda why: None,
        admission: Admission | None = None,
    ) -> None:
        host, port = parse_listen(listen)
        self.secret = secret
        self.on_push = on_push
        self.health = health
        self.metrics = metrics
        self.on_webhook = on_webhook
        self.live = live
        self.status = status
        self.on_dropped = on_dropped
        server_class = _Server6 if ":" in host else _Server
        self.server = server_class((host, port), partial(_Handler, outer=self))
        self.server.on_dropped = on_dropped
        self.server.on_refused = on_refused
        self.server.admission = admission or Admission(SystemClock().monotonic)
        self._published: tuple[object, bytes] | None = None  # (document, its bytes)
        self._publish_lock = threading.Lock()
        self.server.daemon_threads = True
        bound = self.server.server_address[1]
        self.address = f"[{host}]:{bound}" if ":" in host else f"{host}:{bound}"
        # serve_forever wakes every poll_interval only to check for shutdown(): keep it rare.
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 2.0}, name="http", daemon=True
        )

    def status_bytes(self) -> bytes:
        """The last published status document's bytes, serialized once per document (the
        daemon publishes a new document object after each reconcile)."""
        assert self.status is not None
        doc = self.status()
        with self._publish_lock:
            if self._published is None or self._published[0] is not doc:
                body = json.dumps(clean_json(doc), sort_keys=True).encode() + b"\n"
                self._published = (doc, body)
            return self._published[1]

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        """Stop serving now: a connection of our own wakes ``serve_forever`` from its poll."""
        stopper = threading.Thread(target=self.server.shutdown, name="http-stop", daemon=True)
        if self.thread.is_alive():
            stopper.start()
        host, port = self.server.socket.getsockname()[:2]
        while stopper.is_alive():
            with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
                pass
            stopper.join(timeout=0.05)
        self.server.server_close()
        self.thread.join(timeout=5)
