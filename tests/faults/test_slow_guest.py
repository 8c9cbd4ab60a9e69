"""Issue item 4 (and issue 14's watchdog item): one slow guest never holds the host.

A guest with no OS ignores ACPI shutdown, so its graceful stop waits out the grace
period (in the background) and is then forced. Meanwhile the rest of the plan applies
(a new VM is defined while the slow one still runs) and the revision counts as applied,
the log says when the stop started and when it was forced, the systemd watchdog keeps
being fed during the wait, and the stop's end brings the row back to Synced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler.model import PowerState
from tests.helpers.daemon import Daemon, wait_for
from tests.helpers.faults import config, name, state_of, vm

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)
GRACE_S = 8  # the watchdog's 1 s pings counted over the wait


def test_slow_stop_runs_beside_the_rest_of_the_plan(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    slow, new = name("slow-a"), name("slow-b")  # sorted: the slow one is planned first
    own_domains += [slow, new]
    git_repo.write("vms/a.yaml", vm(slow, grace=GRACE_S))
    first = git_repo.commit("running")
    cfg = config(tmp_path, str(git_repo.path))
    d = start("--config", str(cfg), env={"WATCHDOG_USEC": "2000000"})
    d.wait_applied(first)
    assert state_of(slow) == PowerState.RUNNING

    git_repo.write("vms/a.yaml", vm(slow, strategy="Halted", grace=GRACE_S))
    git_repo.write("vms/b.yaml", vm(new, strategy="Halted"))
    second = git_repo.commit("halt a, add b")
    started = wait_for("the stop to start", lambda: d.events("graceful stop started"))
    assert started[0]["subject"] == f"vm/{slow}"
    assert started[0]["grace_s"] == GRACE_S
    pings_at_start = len(d.notify.has("WATCHDOG=1"))
    wait_for("the new VM defined", lambda: state_of(new) is not None)
    assert state_of(slow) == PowerState.RUNNING  # its stop is still waiting for the guest

    d.wait_applied(second)  # applied while the stop waits in the background
    forced = wait_for("the forced stop", lambda: d.events("graceful stop forced"), timeout=GRACE_S + 60)
    assert forced[0]["subject"] == f"vm/{slow}"
    pings_during = len(d.notify.has("WATCHDOG=1")) - pings_at_start
    assert pings_during >= 3, f"watchdog starved during the stop ({pings_during} pings)"
    assert state_of(slow) == PowerState.SHUTOFF
    wait_for(  # the stop's end triggers a reconcile: its row is Synced again
        "both rows Synced",
        lambda: {v["name"]: v["sync"] for v in d.state().get("vms", [])} == {slow: "Synced", new: "Synced"},
    )
