"""The background senders: commit statuses and notifications leave the daemon here.

Input: ``Request`` values (method, URL, body, headers, the state it reports as a key and
a group, a label safe to log naming its destination) and the daemon's clock. Output:
HTTP requests, one queue and one thread per destination, each with its own back-off,
and one result per attempt for the metrics (depth and age of the oldest request per
destination are read from the queues). I/O (the network).

It never blocks the loop: ``put`` only appends to the destination's bounded queue. A
destination that hangs or fails holds only its own queue: every request has a deadline
(``TIMEOUT_S``, connect to answer), and after a failure that destination's queue waits
out an exponential back-off while the others go on. Newest state first: a request of
the same key replaces the one waiting, one of the same group (a context's commit
status) drops an older commit's, and grouped requests go out newest first (events go
in order: a resolution after its alert). At most once per state: a state delivered is
remembered and not sent again, and a request that went out without an answer in time
is not retried (it may have arrived). A full queue drops the new request, counted.
Nothing it logs or raises carries a header or a body: headers hold tokens, URLs of
Slack-compatible webhooks are secrets themselves, so a request is named by its
``label`` and ``what`` alone. A destination answering 401 or 403 (a wrong or expired
token) is one warning until it accepts a request again; such requests are not retried,
nor are other 4xx answers but 408 and 429. Plain HTTP(S) to the destination: no proxy
from the environment, and a redirect is answered as the 3xx it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import socket
import threading
from collections import OrderedDict
from dataclasses import field, replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import structlog

from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from reconciler.context import Clock

log = structlog.get_logger("reconciler.daemon.outbox")

CAPACITY = 256
MAX_ATTEMPTS = 8
FIRST_BACKOFF_S = 2.0
MAX_BACKOFF_S = 300.0
TIMEOUT_S = 10.0  # the deadline of one request, all of it (connect, send, answer)
MAX_ANSWER = 64 * 1024  # bytes of an answer read (its status is what counts)
SENT_MEMORY = 1024  # states remembered per destination as delivered (at most once)
RETRY_CODES = frozenset({408, 429})


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    url: str = field(repr=False)  # a Slack-compatible webhook's URL is its secret
    body: bytes = field(repr=False)
    headers: Mapping[str, str] = field(repr=False)  # may hold a token
    label: str  # the destination, safe to log ("github api.github.com", "slack[0] hooks.slack.com")
    what: str  # what it reports, safe to log ("status reconciler/host1 success 1a2b3c4d5e6f")
    key: str = ""  # a newer request with the same key replaces a waiting one
    group: str = ""  # a newer key of the same group supersedes (drops) a waiting one
    attempt: int = 0
    due: float = 0.0  # monotonic time it may be sent


class Unanswered(OSError):
    """The request went out and no answer came within its deadline: it may have arrived,
    so it is never sent again (at most once per state)."""


def _abort(conn: http.client.HTTPConnection) -> None:
    """The request's deadline passed: wake its thread up (a blocked read returns)."""
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def http_send(req: Request, deadline_s: float = TIMEOUT_S) -> int:
    """Send ``req`` within ``deadline_s`` in all (connect, send, the answer's status
    line and headers); the HTTP status. Redirects are answered as the 3xx they are (one
    would carry the token elsewhere). Raises ``Unanswered`` when the request went out
    and no answer came in time, another OSError when it could not be sent."""
    parts = urlsplit(req.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OSError("bad URL")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        conn = kind(parts.hostname, parts.port, timeout=deadline_s)
    except ValueError:  # a malformed port: never retried
        raise OSError("bad URL") from None
    timer = threading.Timer(deadline_s, _abort, (conn,))
    timer.daemon = True
    timer.start()
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        try:
            conn.connect()
        except OSError as err:
            raise OSError(err.strerror or type(err).__name__) from None
        try:
            headers = {k.title(): v for k, v in req.headers.items()}  # as urllib sends them
            conn.request(req.method, target, body=req.body, headers=headers)
            resp = conn.getresponse()
            resp.read(MAX_ANSWER)  # a bounded read of the answer: the destination finishes writing it
            return int(resp.status)
        except (OSError, http.client.HTTPException) as err:
            raise Unanswered(f"no answer within {deadline_s:g} s ({type(err).__name__})") from None
    finally:
        timer.cancel()
        conn.close()


def backoff(attempt: int) -> float:
    return float(min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** max(0, attempt - 1)))


def _digest(req: Request) -> bytes:
    return hashlib.blake2b(
        req.method.encode() + b" " + req.url.encode() + b"\0" + req.body, digest_size=16
    ).digest()


class _Lane:
    """One destination's queue: its own requests, back-off, record of states delivered
    and (once started) its own thread."""

    def __init__(self, label: str, capacity: int) -> None:
        self.label = label
        self.capacity = capacity
        self.queue: OrderedDict[str, Request] = OrderedDict()
        self.since: dict[str, float] = {}  # key -> monotonic time it first waited (age metric)
        self.sent: OrderedDict[str, bytes] = OrderedDict()  # key -> digest of the state delivered
        self.cond = threading.Condition()
        self.failures = 0  # consecutive failed attempts: the lane's back-off
        self.resume_at = 0.0  # monotonic: nothing is sent before (back-off after a failure)
        self.thread: threading.Thread | None = None

    def due(self, now: float) -> list[Request]:
        """Due requests, newest first where a newer state supersedes (grouped: statuses),
        then the rest in the order they came (events: a resolution after its alert)."""
        if now < self.resume_at:
            return []
        ready = [r for r in self.queue.values() if r.due <= now]
        return [r for r in reversed(ready) if r.group] + [r for r in ready if not r.group]

    def next_due(self) -> float | None:
        if not self.queue:
            return None
        return max(self.resume_at, min(r.due for r in self.queue.values()))

    def remember(self, req: Request) -> None:
        self.sent[req.key] = _digest(req)
        self.sent.move_to_end(req.key)
        while len(self.sent) > SENT_MEMORY:
            self.sent.popitem(last=False)


class Outbox:
    """Bounded queues of requests, one per destination (``Request.label``), each with its
    own back-off and its own sending thread: a destination that hangs or fails holds
    only its own requests, never another's. A request names its state by ``key`` (a
    newer one of the same key replaces a waiting one) and ``group`` (a newer key of the
    same group drops the older one: a newer commit's status of a context supersedes an
    older commit's); a state delivered once is never sent again; a request that went
    out and got no answer within its deadline is not sent again either."""

    def __init__(
        self,
        clock: Clock,
        send: Callable[[Request], int] = http_send,
        on_result: Callable[[str, str], None] = lambda label, result: None,
        capacity: int = CAPACITY,
        on_lane: Callable[[str], None] = lambda label: None,
    ) -> None:
        self.clock = clock
        self._send = send
        self._on_result = on_result
        self._on_lane = on_lane
        self.capacity = capacity
        self._lanes: dict[str, _Lane] = {}
        self._lock = threading.Lock()  # the set of lanes
        self._seq = 0
        self._started = False
        self._stop = False
        self.refused: set[str] = set()  # labels whose last answer was 401/403

    def __len__(self) -> int:
        return sum(self.depth(label) for label in self.labels())

    def labels(self) -> list[str]:
        with self._lock:
            return sorted(self._lanes)

    def waiting(self) -> list[Request]:
        """Every request waiting, destination by destination."""
        out: list[Request] = []
        for lane in self._all():
            with lane.cond:
                out.extend(lane.queue.values())
        return out

    def depth(self, label: str) -> int:
        """Requests waiting for ``label``."""
        lane = self._lanes.get(label)
        if lane is None:
            return 0
        with lane.cond:
            return len(lane.queue)

    def oldest_s(self, label: str) -> float:
        """Seconds the oldest request waiting for ``label`` has waited (0: none waits)."""
        lane = self._lanes.get(label)
        if lane is None:
            return 0.0
        with lane.cond:
            first = min(lane.since.values(), default=None)
        return 0.0 if first is None else max(0.0, self.clock.monotonic() - first)

    def _lane(self, label: str) -> _Lane:
        with self._lock:
            lane = self._lanes.get(label)
            if lane is None:
                lane = self._lanes[label] = _Lane(label, self.capacity)
                new = True
            else:
                new = False
            if new and self._started:
                self._spawn(lane)
        if new:
            self._on_lane(label)
        return lane

    def put(self, req: Request) -> bool:
        """Queue ``req`` on its destination's lane; False when it is not queued (full, or
        that state was delivered already)."""
        lane = self._lane(req.label)
        with lane.cond:
            key = req.key
            if not key:
                self._seq += 1
                key = f"#{self._seq}"
            req = replace(req, key=key, due=self.clock.monotonic(), attempt=0)
            if lane.sent.get(key) == _digest(req):
                return False  # this very state was delivered: at most once
            superseded = [k for k, r in lane.queue.items() if req.group and r.group == req.group and k != key]
            for k in superseded:
                del lane.queue[k]
                lane.since.pop(k, None)
            full = key not in lane.queue and len(lane.queue) >= lane.capacity
            if not full:
                lane.since.setdefault(key, req.due)
                lane.queue.pop(key, None)
                lane.queue[key] = req
                lane.cond.notify()
        for _ in superseded:
            self._on_result(req.label, "superseded")
        if full:
            self._on_result(req.label, "dropped")
            log.warning("notification queue full: dropped", destination=req.label, what=req.what)
            return False
        return True

    def pump(self) -> float | None:
        """Send every request that is due, once, lane after lane. Seconds until the next
        one is due (None: nothing waits). Tests call this with a fake clock; each lane's
        thread pumps its own lane."""
        waits = [w for w in (self._pump(lane) for lane in self._all()) if w is not None]
        return min(waits, default=None)

    def _all(self) -> list[_Lane]:
        with self._lock:
            return list(self._lanes.values())

    def _pump(self, lane: _Lane) -> float | None:
        with lane.cond:
            due = lane.due(self.clock.monotonic())
        for req in due:
            if not self._deliver(lane, req):
                break  # the destination failed: the lane backs off as a whole
        with lane.cond:
            at = lane.next_due()
        return None if at is None else max(0.0, at - self.clock.monotonic())

    def _deliver(self, lane: _Lane, req: Request) -> bool:
        """Send ``req``; False when the destination failed (the lane backs off)."""
        with lane.cond:
            if lane.queue.get(req.key) is not req:
                return True  # superseded or replaced since
        attempt = req.attempt + 1
        try:
            code: int | None = self._send(req)
            why = f"HTTP {code}"
        except Unanswered as err:
            code, why = -1, str(err)
        except OSError as err:
            code, why = None, str(err) or type(err).__name__
        with lane.cond:
            cur = lane.queue.get(req.key)
            failed = False
            if code is not None and 200 <= code < 300:
                result = "sent"
                lane.remember(req)
            elif code == -1:
                result = "unanswered"  # it may have arrived: never sent twice
                lane.remember(req)
                failed = True
            elif code in (401, 403):
                result = "unauthorized"
            elif code is not None and 300 <= code < 500 and code not in RETRY_CODES:
                result = "rejected"
            elif attempt >= MAX_ATTEMPTS:
                result, failed = "gave-up", True
            else:
                result, failed = "retry", True
            if result == "retry":
                if cur is req:
                    lane.queue[req.key] = replace(
                        req, attempt=attempt, due=self.clock.monotonic() + backoff(attempt)
                    )
            elif cur is req or (cur is not None and lane.sent.get(req.key) == _digest(cur)):
                lane.queue.pop(req.key, None)  # done (or replaced by the very state just sent)
                lane.since.pop(req.key, None)
            lane.failures = lane.failures + 1 if failed else 0
            lane.resume_at = self.clock.monotonic() + backoff(lane.failures) if failed else 0.0
        self._on_result(req.label, result)
        self._log(req, result, code, attempt, why)
        return not failed

    def _log(self, req: Request, result: str, code: int | None, attempt: int, why: str) -> None:
        if result == "sent":
            if req.label in self.refused:
                self.refused.discard(req.label)
                log.info("destination accepts our requests again", destination=req.label)
            log.debug("sent", destination=req.label, what=req.what)
        elif result == "unauthorized":
            if req.label not in self.refused:
                self.refused.add(req.label)
                log.warning(
                    "destination refused the credentials (wrong or expired token?): not retried",
                    destination=req.label,
                    what=req.what,
                    status=code,
                )
        elif result == "rejected":
            log.warning(
                "destination rejected a request: not retried",
                destination=req.label,
                what=req.what,
                status=code,
            )
        elif result == "unanswered":
            log.warning(
                "destination did not answer in time: not sent again", destination=req.label, what=req.what,
                error=why,
            )  # fmt: skip
        elif result == "gave-up":
            log.warning(
                "giving up on a request", destination=req.label, what=req.what, attempts=attempt, error=why
            )
        else:
            log.info("send failed: retrying", destination=req.label, what=req.what, attempt=attempt, error=why,
                     in_s=backoff(attempt))  # fmt: skip

    # -- the lanes' threads ---------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started, self._stop = True, False
            for lane in self._lanes.values():
                self._spawn(lane)

    def _spawn(self, lane: _Lane) -> None:
        lane.thread = threading.Thread(
            target=self._run, args=(lane,), name=f"outbox {lane.label}", daemon=True
        )
        lane.thread.start()

    def _run(self, lane: _Lane) -> None:
        while True:
            wait = self._pump(lane)
            with lane.cond:
                if self._stop:
                    return
                if not lane.due(self.clock.monotonic()):
                    lane.cond.wait(timeout=wait)
                if self._stop:
                    return

    def close(self, timeout: float = 2.0) -> None:
        """Stop the threads (requests still waiting are dropped: the state file and the
        next reconcile say the same again)."""
        with self._lock:
            self._stop, self._started = True, False
            lanes = list(self._lanes.values())
        for lane in lanes:
            with lane.cond:
                lane.cond.notify()
        deadline = self.clock.monotonic() + timeout
        for lane in lanes:
            if lane.thread is not None:
                lane.thread.join(timeout=max(0.0, deadline - self.clock.monotonic()))
                lane.thread = None
