"""The outbox: one queue per destination (issue 42), on a fake clock unless a thread or
a socket is what is proved.

Covers:
- a destination that hangs holds only its own queue: the forge's status goes out while
  a webhook's request is stuck (threads);
- a burst of 20 commits: only the newest commit's status of a context goes out, the
  older ones waiting are dropped as superseded; grouped requests newest first, events
  in the order they came;
- at most once per state: a state delivered is not sent again, a request that went out
  unanswered is not retried;
- a failing destination backs off as a whole, the others not at all;
- the depth and the age of the oldest request per destination;
- ``http_send`` gives up at its deadline on a destination that does not answer.
"""

from __future__ import annotations

import threading

import pytest

from reconciler.daemon.outbox import Outbox, Request, Unanswered, backoff, http_send
from tests.helpers.clock import FakeClock
from tests.helpers.daemon import wait_for
from tests.helpers.receiver import Receiver


def status(sha: str, context: str = "reconciler/h1", state: str = "success", label: str = "forge") -> Request:
    return Request(
        "POST",
        f"http://forge/statuses/{sha}",
        state.encode(),
        {},
        label,
        f"{state} {sha}",
        key=f"status {sha} {context}",
        group=f"status {context}",
    )


def event(what: str, label: str = "webhook[0]") -> Request:
    return Request("POST", "http://hook/", what.encode(), {}, label, what)


def test_a_hanging_destination_holds_only_its_own_queue() -> None:
    release = threading.Event()
    sent: list[str] = []

    def send(req: Request) -> int:
        if req.label.startswith("webhook"):
            release.wait(timeout=30)  # hangs until the test ends
        sent.append(req.what)
        return 201

    box = Outbox(FakeClock(), send=send)
    box.start()
    try:
        box.put(event("applied"))
        wait_for("the webhook's request under way", lambda: box.depth("webhook[0]") == 1)
        box.put(status("a" * 40))
        wait_for("the status sent beside the hung webhook", lambda: "success " + "a" * 40 in sent)
        assert box.depth("webhook[0]") == 1
    finally:
        release.set()
        box.close()


def test_a_burst_of_commits_sends_the_newest_status_alone() -> None:
    sent: list[str] = []
    results: list[str] = []

    def send(req: Request) -> int:
        sent.append(req.what)
        return 201

    box = Outbox(FakeClock(), send=send, on_result=lambda label, result: results.append(result))
    shas = [f"{i:040x}" for i in range(20)]
    for sha in shas:
        box.put(status(sha, state="pending"))
        box.put(status(sha, state="success"))
    box.put(status(shas[-1], context="reconciler/h2"))  # another context: its own state
    box.put(event("first"))
    box.put(event("second"))
    assert box.pump() is None
    assert sent[:2] == [f"success {shas[-1]}"] * 2  # newest first, one per context
    assert sent[2:] == ["first", "second"]  # events keep their order (a resolution after its alert)
    assert results.count("superseded") == 19
    assert results.count("sent") == 4


def test_a_state_is_delivered_at_most_once() -> None:
    sent: list[str] = []

    def send(req: Request) -> int:
        sent.append(req.what)
        return 201

    box = Outbox(FakeClock(), send=send)
    assert box.put(status("b" * 40))
    box.pump()
    assert not box.put(status("b" * 40))  # the same state again: already delivered
    assert box.put(status("b" * 40, state="failure"))  # a new state of the same commit
    box.pump()
    assert sent == ["success " + "b" * 40, "failure " + "b" * 40]


def test_a_request_without_an_answer_is_not_sent_again() -> None:
    clock = FakeClock()
    tries: list[str] = []
    results: list[str] = []

    def hangs(req: Request) -> int:
        tries.append(req.what)
        raise Unanswered("no answer within 10 s")

    box = Outbox(clock, send=hangs, on_result=lambda label, result: results.append(result))
    box.put(status("c" * 40))
    box.pump()
    clock.advance(3600)
    assert box.pump() is None
    assert not box.put(status("c" * 40))  # it may have arrived: never twice
    assert tries == ["success " + "c" * 40]
    assert results == ["unanswered"]


def test_a_failing_destination_backs_off_as_a_whole_and_alone() -> None:
    clock = FakeClock()
    sent: list[str] = []

    def send(req: Request) -> int:
        if req.label == "webhook[0]":
            raise OSError("connection refused")
        sent.append(req.what)
        return 201

    box = Outbox(clock, send=send)
    box.put(event("one"))
    box.put(event("two"))
    assert box.pump() == backoff(1)  # one attempt: the second request waits with the first
    assert box.depth("webhook[0]") == 2
    clock.advance(1)
    box.put(status("d" * 40))
    box.pump()  # the forge is not held by the webhook's back-off
    assert sent == ["success " + "d" * 40]
    assert box.oldest_s("webhook[0]") == 1.0
    assert box.oldest_s("forge") == 0.0
    assert box.depth("forge") == 0


def test_http_send_gives_up_at_its_deadline() -> None:
    slow = Receiver(delay_s=5.0)
    try:
        req = Request("POST", f"{slow.url}/x", b"{}", {}, "webhook[0]", "x")
        with pytest.raises(Unanswered):
            http_send(req, deadline_s=0.3)
        fast = Receiver()
        try:
            assert http_send(Request("POST", f"{fast.url}/x", b"{}", {}, "w", "x"), deadline_s=5) == 201
        finally:
            fast.close()
        with pytest.raises(OSError, match="refused") as err:
            http_send(Request("POST", "http://127.0.0.1:9/x", b"{}", {}, "w", "x"), deadline_s=5)
        assert not isinstance(err.value, Unanswered)  # nothing went out: retried
    finally:
        slow.close()
