"""Issue 42: the wall clock stepped under a running daemon (libfaketime, Debian's
``faketime``), on ``test:///default`` (no host is disturbed).

The daemon runs with libfaketime preloaded (``tests/helpers/faketime.py``), its wall
clock offset read from a file the test rewrites (the monotonic clock left real, as a
clock step leaves it). A VM under
``rollout: Restart`` with a restart window two hours ahead gets a restart-class change:

- before the window its restart is staged (RestartRequired, waiting for the window);
- the clock stepped forward into the window: the next plan restarts it (the row
  Synced, no restart required any more);
- the clock stepped back out of the window: nothing restarts again, the row stays.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import pytest

from tests.helpers.daemon import Daemon, vm_rows, wait_for
from tests.helpers.faketime import Stepped
from tests.helpers.faults import vm

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)
VM = "rtest-clock-web"


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
    hour = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)).hour  # the window: 2 h ahead
    clock = Stepped(tmp_path)
    git_repo.write("vms/web.yaml", _windowed("64Mi", hour))
    first = git_repo.commit("web")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"source: {{repo: {git_repo.path}}}\nconnect: test:///default\nlisten: 127.0.0.1:0\n"
        "intervals: {resync: 2s}\n"
    )
    d = start("--config", str(config), env=clock.env)
    d.wait_applied(first)
    git_repo.write("vms/web.yaml", _windowed("128Mi", hour))
    second = git_repo.commit("more memory: a restart")
    d.wait_applied(second)
    row = wait_for("the restart staged", lambda: (r := _row(d)).get("restart_required") and r)
    assert "restart window" in str(row["message"]), row
    assert not d.events("restarted")

    clock.step(+7200)  # two hours forward: inside the window
    wait_for("the restart made in the window", lambda: d.events("restarted"), timeout=60)
    wait_for(
        "the row Synced", lambda: not _row(d).get("restart_required") and _row(d).get("sync") == "Synced"
    )

    clock.step(0)  # back out of the window
    resyncs = len(d.events("reconciled"))
    wait_for("three resyncs after the step back", lambda: len(d.events("reconciled")) >= resyncs + 3)
    assert len(d.events("restarted")) == 1  # never a second restart
    assert not _row(d).get("restart_required"), _row(d)
