"""A restarted daemon's publisher takes each host's last outcome back from ``state.json``
(``Publisher.restore``): a failure the previous process announced is not announced
again by the first reconcile of this one (its cause counted as sent), and its clearing
is still announced as the failure's resolution."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from reconciler.config.daemon import DaemonConfig, HostEntry, Policy
from reconciler.config.notify import NotifyConfig, Sink
from reconciler.daemon import events
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.publish import Publisher
from reconciler.settings.host import HostConfig
from reconciler.source.settings import SourceConfig
from tests.helpers.clock import FakeClock

if TYPE_CHECKING:
    from pathlib import Path

OLD, NEW = "a" * 40, "b" * 40
SINK = Sink("webhook", "https://h/x", "webhook[0] h", b"s3cret")


def _publisher(tmp_path: Path) -> Publisher:
    config = DaemonConfig(
        source=SourceConfig(str(tmp_path)),
        hosts=(HostEntry("test:///default", HostConfig(name="h1")),),
        state_dir=str(tmp_path / "state"),
        listen="",
        policy=Policy(),
    )
    config = dataclasses.replace(config, notify=NotifyConfig(sinks=(SINK,)))
    return Publisher(config, FakeClock(), Metrics(), send=lambda _request: 200)


def test_a_failure_kept_in_the_state_is_neither_announced_again_nor_forgotten(tmp_path: Path) -> None:
    p = _publisher(tmp_path)
    kept = {"hosts": {"h1": {"reason": "SourceFailed", "message": "branch deleted", "attempted_revision": NEW,
                             "applied_revision": OLD}}}  # fmt: skip
    assert p.restore(kept) is kept
    restored = p._details["h1"].outcome
    assert restored is not None
    assert (restored.reason, restored.revision, restored.applied) == ("SourceFailed", NEW, OLD)

    again = events.detect(restored, restored, 0.0)  # the first reconcile fails the same way
    assert [e.kind for e in again] == ["failed"]
    assert not p.limiter.allow(SINK.label, again[0], p.clock.monotonic())  # announced already

    fixed = dataclasses.replace(restored, reason="Succeeded", first_error="", applied=NEW)
    cleared = events.detect(restored, fixed, 0.0)
    assert [(e.kind, e.resolved) for e in cleared] == [("applied", False), ("failed", True)]
    assert all(p.limiter.allow(SINK.label, e, p.clock.monotonic()) for e in cleared)


def test_nothing_kept_restores_nothing(tmp_path: Path) -> None:
    p = _publisher(tmp_path)
    docs: list[dict[str, Any]] = [
        {},
        {"hosts": []},
        {"hosts": {"h1": "junk"}},
        {"hosts": {"h1": {"reason": ""}}},
    ]
    for doc in docs:
        assert p.restore(doc) is doc
    assert not p._details
