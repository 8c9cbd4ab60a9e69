"""The background sender: commit statuses and notifications leave the daemon here.

Input: ``Request`` values (method, URL, body, headers, a coalescing key, a label safe to
log) and the daemon's clock. Output: HTTP requests from one worker thread, retried with
exponential back-off, and one result per attempt for the metrics. I/O (the network).

It never blocks the loop: ``put`` only appends to a bounded queue (a request of the same
key replaces the one waiting, so a commit's newer state supersedes an older one; a full
queue drops the new request, counted). Nothing it logs or raises carries a header or a
body: headers hold tokens, URLs of Slack-compatible webhooks are secrets themselves, so
a request is named by its ``label`` and ``what`` alone. A destination answering 401 or
403 (a wrong or expired token) is one warning until it accepts a request again; such
requests are not retried, nor are other 4xx answers but 408 and 429.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from reconciler.context import Clock

log = structlog.get_logger("reconciler.daemon.outbox")

CAPACITY = 256
MAX_ATTEMPTS = 8
FIRST_BACKOFF_S = 2.0
MAX_BACKOFF_S = 300.0
TIMEOUT_S = 10.0
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
    attempt: int = 0
    due: float = 0.0  # monotonic time it may be sent


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a redirect would carry the token elsewhere: answered as the 3xx it is


def http_send(req: Request) -> int:
    """Send ``req``; the HTTP status. Raises OSError when nothing answered."""
    r = urllib.request.Request(req.url, data=req.body, method=req.method, headers=dict(req.headers))
    try:
        with urllib.request.build_opener(_NoRedirect).open(r, timeout=TIMEOUT_S) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except urllib.error.URLError as err:
        reason = err.reason
        raise OSError(
            str(reason) if not isinstance(reason, OSError) else reason.strerror or "unreachable"
        ) from None
    except ValueError as err:  # a malformed URL: never retried
        raise OSError(f"bad URL: {type(err).__name__}") from None


def backoff(attempt: int) -> float:
    return float(min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** max(0, attempt - 1)))


class Outbox:
    """A bounded queue of requests and the one thread that sends them."""

    def __init__(
        self,
        clock: Clock,
        send: Callable[[Request], int] = http_send,
        on_result: Callable[[str, str], None] = lambda label, result: None,
        capacity: int = CAPACITY,
    ) -> None:
        self.clock = clock
        self._send = send
        self._on_result = on_result
        self.capacity = capacity
        self._queue: OrderedDict[str, Request] = OrderedDict()
        self._cond = threading.Condition()
        self._seq = 0
        self._stop = False
        self._thread: threading.Thread | None = None
        self.refused: set[str] = set()  # labels whose last answer was 401/403

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def put(self, req: Request) -> bool:
        """Queue ``req`` (replacing a waiting one of the same key); False when full."""
        with self._cond:
            key = req.key
            if not key:
                self._seq += 1
                key = f"#{self._seq}"
            if key not in self._queue and len(self._queue) >= self.capacity:
                self._on_result(req.label, "dropped")
                log.warning("notification queue full: dropped", destination=req.label, what=req.what)
                return False
            self._queue.pop(key, None)
            self._queue[key] = replace(req, key=key, due=self.clock.monotonic(), attempt=0)
            self._cond.notify()
        return True

    def pump(self) -> float | None:
        """Send every request that is due, once. Seconds until the next one is due (None:
        nothing waits). Tests call this with a fake clock; the worker thread calls it too."""
        now = self.clock.monotonic()
        with self._cond:
            due = [r for r in self._queue.values() if r.due <= now]
        for req in due:
            self._deliver(req)
        with self._cond:
            if not self._queue:
                return None
            return max(0.0, min(r.due for r in self._queue.values()) - self.clock.monotonic())

    def _deliver(self, req: Request) -> None:
        attempt = req.attempt + 1
        try:
            code: int | None = self._send(req)
            why = f"HTTP {code}"
        except OSError as err:
            code, why = None, str(err) or type(err).__name__
        with self._cond:
            if self._queue.get(req.key) is not req:
                return  # replaced by a newer request of the same key while this one was sent
            if code is not None and 200 <= code < 300:
                del self._queue[req.key]
                result = "sent"
            elif code in (401, 403):
                del self._queue[req.key]
                result = "unauthorized"
            elif code is not None and 300 <= code < 500 and code not in RETRY_CODES:
                del self._queue[req.key]
                result = "rejected"
            elif attempt >= MAX_ATTEMPTS:
                del self._queue[req.key]
                result = "gave-up"
            else:
                self._queue[req.key] = replace(
                    req, attempt=attempt, due=self.clock.monotonic() + backoff(attempt)
                )
                result = "retry"
        self._on_result(req.label, result)
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
        elif result == "gave-up":
            log.warning(
                "giving up on a request", destination=req.label, what=req.what, attempts=attempt, error=why
            )
        else:
            log.info("send failed: retrying", destination=req.label, what=req.what, attempt=attempt, error=why,
                     in_s=backoff(attempt))  # fmt: skip

    # -- the worker thread ----------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._stop = False
            self._thread = threading.Thread(target=self._run, name="outbox", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            wait = self.pump()
            with self._cond:
                if self._stop:
                    return
                due_now = any(r.due <= self.clock.monotonic() for r in self._queue.values())
                if not due_now:
                    self._cond.wait(timeout=wait)
                if self._stop:
                    return

    def close(self, timeout: float = 2.0) -> None:
        """Stop the worker (requests still waiting are dropped: the state file and the
        next reconcile say the same again)."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            self._thread = None
