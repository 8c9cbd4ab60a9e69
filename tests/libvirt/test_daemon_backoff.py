"""Back-off and the loop's timers (reconciler/daemon/service.py, in-process on test:///default).

Covers: while a failing source backs off, neither the fetch timer nor the resync timer
reads it again before the retry (the deleted-branch error no longer repeats every fetch
interval), and the loop sleeps until the retry; a failed apply's back-off does not hold
the timers (a fix can arrive with the next fetch, drift is still checked at the resync).
The daemon runs on a clock the test advances.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler.config.daemon import DaemonConfig, HostEntry
from reconciler.daemon.health import PROBE_INTERVAL_S
from reconciler.daemon.notify import Notifier
from reconciler.daemon.scheduler import FETCH, REFS, RESYNC, WEBHOOK
from reconciler.daemon.service import Daemon
from reconciler.source.settings import SourceConfig
from tests.helpers.clock import FakeClock
from tests.helpers.loop import Daemons
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.libvirt_test

DAEMONS = Daemons("loop-backoff")
make, track = DAEMONS.make, DAEMONS.track


@pytest.fixture(autouse=True)
def _teardown() -> Iterator[None]:
    """Close the daemons' connections and remove this module's domains from the shared driver."""
    yield
    DAEMONS.close()


def test_source_back_off_holds_the_fetch_and_resync_timers(tmp_path: Path) -> None:
    clock = FakeClock()
    config = DaemonConfig(
        source=SourceConfig(f"file://{tmp_path}/no-such-remote.git"),
        hosts=(HostEntry("test:///default"),),
        state_dir=str(tmp_path / "s"),
        listen="",
        fetch_interval_s=1.0,
        resync_interval_s=10.0,
    )
    d = track(Daemon(config, notifier=Notifier({}), clock=clock))
    d.step({FETCH})  # t=0: fails; retry at 5, fetch due at 1, resync at 10
    assert d.reason == "SourceFailed"
    clock.advance(4)
    d.step({WEBHOOK})  # t=4: a webhook's fetch fails again; retry at 4 + 10 = 14
    attempts = d.reconciles
    clock.advance(7)  # t=11: both timers are due, the retry is not
    d.step(set())
    assert d.reconciles == attempts  # nothing read the failing source before the retry
    assert d.timeout() == 3.0  # the loop sleeps until the retry, not until the timers
    clock.advance(3)  # t=14: the retry is due
    d.step(set())
    assert d.reconciles == attempts + 1


def test_apply_back_off_does_not_hold_the_timers(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", vm_yaml("loop-backoff"))
    git_repo.commit()
    clock = FakeClock()
    d = make(
        git_repo,
        tmp_path / "s",
        clock,
        hosts=(HostEntry("test:///no-such-file.xml"),),
        resync_interval_s=10.0,
    )
    d.step({RESYNC})  # t=0: the host cannot be reached; retry at 5, resync at 10
    assert d.reason == "ApplyFailed"
    assert d.timeout() == PROBE_INTERVAL_S  # the loop wakes to probe the host before the retry
    clock.advance(4)
    git_repo.write("vms/a.yaml", vm_yaml("loop-backoff", memory="96Mi"))
    git_repo.commit()
    d.step({REFS})  # t=4: the new commit fails the same way; retry at 4 + 10 = 14
    attempts = d.reconciles
    clock.advance(7)  # t=11: the resync is due, the retry is not
    d.step(set())
    assert d.reconciles == attempts + 1  # the resync ran
