"""A restart of the daemon while its source fails keeps what it knew (issue 42), in
process on a fake clock (``test:///default``).

Covers: the retry back-off (failures in a row, the source failing) is kept in
``state.json`` and read back at start, so the next failure waits the next delay and not
the first one again; ``/healthz`` of the restarted daemon is unhealthy with the source's
condition before its first reconcile; a success ends the back-off kept.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from reconciler.config.daemon import DaemonConfig, HostEntry, Policy
from reconciler.daemon.notify import Notifier
from reconciler.daemon.scheduler import BACKOFF_BASE_S, RETRY, START
from reconciler.daemon.service import Daemon
from reconciler.settings.host import HostConfig
from reconciler.source.settings import SourceConfig
from tests.helpers.clock import FakeClock

if TYPE_CHECKING:
    from pathlib import Path

UNREACHABLE = "http://127.0.0.1:9/vms.git"  # nothing listens: every fetch fails


def _daemon(tmp_path: Path, clock: FakeClock) -> Daemon:
    config = DaemonConfig(
        source=SourceConfig(UNREACHABLE),
        hosts=(HostEntry("test:///default", HostConfig(name="h1")),),
        state_dir=str(tmp_path / "state"),
        listen="",
        policy=Policy(),
    )
    return Daemon(config, notifier=Notifier({}), clock=clock)


def test_a_restart_keeps_the_back_off_and_the_source_condition(tmp_path: Path) -> None:
    clock = FakeClock()
    first = _daemon(tmp_path, clock)
    first.step({START})
    for _ in range(2):
        clock.advance(first.schedule.retry_at - clock.monotonic() if first.schedule.retry_at else 0)
        first.step({RETRY})
    assert first.reason == "SourceFailed"
    assert first.schedule.failures == 3
    kept = json.loads((tmp_path / "state" / "state.json").read_text())["retry"]
    assert kept == {"failures": 3, "source": True}

    again = _daemon(tmp_path, clock)  # the process restarted
    ok, body = again._health()
    assert not ok
    assert body["reason"] == "SourceFailed"
    assert (again.schedule.failures, again.schedule.source_failing) == (3, True)
    again.step({START})
    assert again.schedule.retry_at is not None
    assert again.schedule.failures == 4
    fourth = min(BACKOFF_BASE_S * 2**3, again.schedule.resync_interval_s)  # capped by the resync
    assert again.schedule.retry_at - clock.monotonic() == fourth > BACKOFF_BASE_S  # not the first again


def test_a_success_ends_the_back_off_kept(tmp_path: Path) -> None:
    clock = FakeClock()
    d = _daemon(tmp_path, clock)
    d.state.backoff(2, True)
    assert json.loads((tmp_path / "state" / "state.json").read_text())["retry"]["failures"] == 2
    d.state.backoff(0, False)
    assert "retry" not in json.loads((tmp_path / "state" / "state.json").read_text())
