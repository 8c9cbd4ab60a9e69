"""Issue 42: the wall clock stepped under a running daemon (libfaketime, as in
``test_clock_steps.py``), for the crash-loop back-off and the prune window.

- the prune window (``policy.pruneWindow``, on ``test:///default``: no host disturbed):
  with ``maxPrune: 1`` a prune is made; the clock stepped two hours back, an apply
  does not open a new window (its prune forgotten): a second prune is refused; stepped
  forward past the window's end, the next commit makes it (the refusal does not hold the
  window open);
- the crash-loop back-off (real QEMU): a guest crashed twice waits 10 s; crashed a
  third time it shows ``CrashLoopBackOff`` (state file, ``reconciler_vms``, ``status
  --connect``), not "Synced" (issue item 6); the clock stepped two hours forward, it is
  started at once as a first restart (the wall clock says it ran long enough); crashed
  again and the clock stepped back, it is started again, its back-off not stretched by
  the step, and is Synced again.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler.model import PowerState
from tests.helpers.daemon import Daemon, wait_for
from tests.helpers.faketime import Stepped
from tests.helpers.faults import HOST, URI, config, metric, name, state_of, status_json, vm
from tests.helpers.manifests import vm_yaml

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)


def crash(dom: str) -> None:
    """Kill the guest's QEMU process: libvirt sees the domain shut off (crashed)."""
    os.kill(int(Path(f"/run/libvirt/qemu/{dom}.pid").read_text().strip()), signal.SIGKILL)


def _seen(d: Daemon, offset_s: int) -> None:
    """Wait until the daemon's log says its wall clock is stepped by ``offset_s``."""

    def stepped() -> bool:
        last = d.log_lines[-1].get("timestamp", "") if d.log_lines else ""
        at = dt.datetime.fromisoformat(last).timestamp() if last else 0.0
        return abs(at - time.time() - offset_s) < 600

    wait_for("the daemon's clock stepped", stepped)


def test_clock_steps_and_the_prune_window(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon]
) -> None:
    clock = Stepped(tmp_path)
    vms = [f"rtest-prunewin-{x}" for x in "abcd"]
    for v in vms:
        git_repo.write(f"vms/{v}.yaml", vm_yaml(v, strategy="Halted"))
    first = git_repo.commit("four")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        f"source: {{repo: {git_repo.path}}}\nconnect: test:///default\nlisten: 127.0.0.1:0\n"
        "intervals: {resync: 1s}\n"
        "policy: {prune: true, maxPrune: 1, maxPrunePercent: 100, pruneWindow: 1h}\n"
    )
    d = start("--config", str(cfg), env=clock.env)
    d.wait_applied(first)
    git_repo.remove(f"vms/{vms[0]}.yaml")
    second = git_repo.commit("one gone")
    d.wait_applied(second)
    wait_for("the first prune", lambda: d.events("deleted"))

    clock.step(-7200)  # two hours back: the same window, from now
    _seen(d, -7200)
    git_repo.write("vms/extra.yaml", vm_yaml("rtest-prunewin-e", strategy="Halted"))
    added = git_repo.commit("one more")
    d.wait_applied(added)  # an apply after the step back opens no new window
    git_repo.remove(f"vms/{vms[1]}.yaml")
    third = git_repo.commit("another gone")
    d.wait_attempted(third)
    wait_for("the second prune refused", lambda: d.events("prune refused"))
    reconciled = len(d.events("reconciled"))
    wait_for("three resyncs after the step back", lambda: len(d.events("reconciled")) >= reconciled + 3)
    assert len(d.events("deleted")) == 1, d.events("deleted")

    clock.step(+3700)  # forward, past the window's end (an hour after the step back)
    _seen(d, +3700)
    git_repo.write("vms/extra.yaml", vm_yaml("rtest-prunewin-e", strategy="Halted") + "# touched\n")
    fourth = git_repo.commit("a new commit: the refusal was for the previous one")
    d.wait_applied(fourth)
    # The daemon's log is read from its pipe: the event may arrive after state.json.
    wait_for("the second prune", lambda: len(d.events("deleted")) >= 2)
    assert [e["subject"] for e in d.events("deleted")] == [f"vm/{vms[0]}", f"vm/{vms[1]}"]
    assert not [e for e in d.events("prune refused") if e.get("revision") == fourth[:12]]


def test_clock_steps_and_the_crash_loop_back_off(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    clock = Stepped(tmp_path)
    dom = name("clock-crash")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom))
    sha = git_repo.commit()
    d = start(
        "--config",
        str(config(tmp_path, str(git_repo.path), extra="intervals: {resync: 1s}\n")),
        env=clock.env,
    )
    d.wait_applied(sha)

    def crashed_and_started(restart: str) -> str:
        wait_for("running", lambda: state_of(dom) == PowerState.RUNNING)
        before = len(d.events("started"))
        crash(dom)
        started = wait_for(restart, lambda: d.events("started")[before:], timeout=60)
        return str(started[0]["reason"])

    assert "(restart 1)" in crashed_and_started("restart 1: at once")
    assert "(restart 2 after 10s back-off)" in crashed_and_started("restart 2: after 10 s")
    wait_for("running", lambda: state_of(dom) == PowerState.RUNNING)
    before = len(d.events("started"))
    crash(dom)  # the third crash: 20 s of back-off
    rows = wait_for(
        "CrashLoopBackOff in the state file",
        lambda: [v for v in d.state().get("vms", []) if v["name"] == dom and v["sync"] == "CrashLoopBackOff"],
    )
    assert "back-off" in rows[0]["message"]  # a status and a metric, not "Synced" (issue item 6)

    def counted() -> bool:  # the metrics follow the state file within the same reconcile
        _, text = d.get("/metrics")
        return metric(text, "reconciler_vms", host=HOST, sync="CrashLoopBackOff") == [1.0] and metric(
            text, "reconciler_vms", host=HOST, sync="Synced"
        ) == [0.0]

    wait_for("CrashLoopBackOff in reconciler_vms", counted)
    shown = status_json("--state-dir", str(d.state_dir), "--connect", URI)
    assert [v["sync"] for v in shown["vms"] if v["name"] == dom] == ["CrashLoopBackOff"]
    clock.step(+7200)  # two hours forward: by the wall clock it ran long enough
    started = wait_for("started after the step forward", lambda: d.events("started")[before:], timeout=60)
    assert "(restart 1)" in started[0]["reason"]  # counted afresh, not restart 3 after its back-off

    wait_for("running", lambda: state_of(dom) == PowerState.RUNNING)
    before = len(d.events("started"))
    crash(dom)  # restart 2 again: 10 s after a start two hours ahead of the clock stepped back
    clock.step(0)
    started = wait_for("started after the step back", lambda: d.events("started")[before:], timeout=60)
    assert "(restart 2 after 10s back-off)" in started[0]["reason"]  # served, not stretched by 2 h
    wait_for("running", lambda: state_of(dom) == PowerState.RUNNING)
    wait_for(  # the back-off served: Synced again
        "Synced again",
        lambda: [v for v in d.state().get("vms", []) if v["name"] == dom and v["sync"] == "Synced"],
    )
