"""Issue 42: the wall clock stepped under a running daemon (libfaketime, Debian's
``faketime``), on ``test:///default`` (no host is disturbed).

The daemon runs with libfaketime preloaded, its wall clock offset read from a file the
test rewrites (the monotonic clock left real, as a clock step leaves it). A VM under
``rollout: Restart`` with a restart window two hours ahead gets a restart-class change:

- before the window its restart is staged (RestartRequired, waiting for the window);
- the clock stepped forward into the window: the next plan restarts it (the row
  Synced, no restart required any more);
- the clock stepped back out of the window: nothing restarts again, the row stays.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers.daemon import Daemon, vm_rows, wait_for
from tests.helpers.faults import vm

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
VM = "rtest-clock-web"
# libfaketime 0.9.10 with the monotonic clock left real fails an absolute
# ``clock_nanosleep`` on it (EINVAL), which is how ``time.sleep`` waits: the daemon's
# sleeps go through select() instead, which it leaves alone.
SLEEP_BY_SELECT = """\
import select, time
time.sleep = lambda seconds: select.select([], [], [], seconds) and None
"""


def _windowed(memory: str, hour: int) -> str:
    return vm(VM, memory=memory).replace(
        f"  name: {VM}\n",
        f"  name: {VM}\n  annotations:\n    reconciler.kubevirt.io/rollout: Restart\n"
        f'    reconciler.kubevirt.io/restart-window: "0 {hour} * * *; 2h; UTC"\n',
        1,
    )


def _row(d: Daemon) -> dict[str, object]:
    return vm_rows(d.state()).get(VM, {})


def test_clock_steps_move_a_restart_into_its_window_and_never_twice(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon]
) -> None:
    assert LIBFAKETIME.exists(), "Debian package faketime (scripts/setup installs it)"
    hour = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)).hour  # the window: 2 h ahead
    offset = tmp_path / "faketime"
    offset.write_text("+0\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLEEP_BY_SELECT)
    env = {
        "PYTHONPATH": str(site),
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(offset),
        "FAKETIME_CACHE_DURATION": "1",
        "DONT_FAKE_MONOTONIC": "1",
    }
    git_repo.write("vms/web.yaml", _windowed("64Mi", hour))
    first = git_repo.commit("web")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"source: {{repo: {git_repo.path}}}\nconnect: test:///default\nlisten: 127.0.0.1:0\n"
        "intervals: {resync: 2s}\n"
    )
    d = start("--config", str(config), env=env)
    d.wait_applied(first)
    git_repo.write("vms/web.yaml", _windowed("128Mi", hour))
    second = git_repo.commit("more memory: a restart")
    d.wait_applied(second)
    row = wait_for("the restart staged", lambda: (r := _row(d)).get("restart_required") and r)
    assert "restart window" in str(row["message"]), row
    assert not d.events("restarted")

    offset.write_text("+7200\n")  # two hours forward: inside the window
    wait_for("the restart made in the window", lambda: d.events("restarted"), timeout=60)
    wait_for(
        "the row Synced", lambda: not _row(d).get("restart_required") and _row(d).get("sync") == "Synced"
    )

    offset.write_text("+0\n")  # back out of the window
    resyncs = len(d.events("reconciled"))
    wait_for("three resyncs after the step back", lambda: len(d.events("reconciled")) >= resyncs + 3)
    assert len(d.events("restarted")) == 1  # never a second restart
    assert not _row(d).get("restart_required"), _row(d)
