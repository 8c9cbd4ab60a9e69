"""Back-off and the loop's timers (reconciler/daemon/service.py, in-process on test:///default).

Covers: while a failing source backs off, neither the fetch timer nor the resync timer
reads it again before the retry (the deleted-branch error no longer repeats every fetch
interval); a failed apply's back-off does not hold the timers (a fix can arrive with the
next fetch, drift is still checked at the resync).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from reconciler.config.daemon import DaemonConfig, HostEntry
from reconciler.daemon.notify import Notifier
from reconciler.daemon.scheduler import FETCH
from reconciler.daemon.service import Daemon
from reconciler.source.settings import SourceConfig
from tests.libvirt.test_daemon import vm_yaml
from tests.libvirt.test_daemon_loop import _teardown, make, track

if TYPE_CHECKING:
    from pathlib import Path

    from tests.conftest import GitRepo

__all__ = ["_teardown"]  # the autouse fixture that removes loop-* domains and closes daemons

pytestmark = pytest.mark.libvirt_test


def test_source_back_off_holds_the_fetch_and_resync_timers(tmp_path: Path) -> None:
    config = DaemonConfig(
        source=SourceConfig(f"file://{tmp_path}/no-such-remote.git"),
        hosts=(HostEntry("test:///default"),),
        state_dir=str(tmp_path / "s"),
        listen="",
    )
    d = track(Daemon(config, notifier=Notifier({})))
    d.step({FETCH})
    assert d.reason == "SourceFailed"
    assert d._t.retry_at is not None
    attempts = d.reconciles
    d._t.next_fetch = d._t.next_resync = 0.0  # both timers due
    d.step(set())
    assert d.reconciles == attempts  # nothing read the failing source before the retry
    assert d._timeout(time.monotonic()) >= d._t.retry_at - time.monotonic() - 0.5
    d._t.retry_at = 0.0  # the retry is due
    d.step(set())
    assert d.reconciles == attempts + 1


def test_apply_back_off_does_not_hold_the_timers(tmp_path: Path, git_repo: GitRepo) -> None:
    git_repo.write("vms/a.yaml", vm_yaml("loop-backoff"))
    git_repo.commit()
    d = make(git_repo, tmp_path / "s")
    d._t.retry_at, d._t.failures = time.monotonic() + 3600, 3  # as after a failed apply
    d._t.next_resync = 0.0
    d.step(set())
    assert d.reconciles == 1  # the resync ran
