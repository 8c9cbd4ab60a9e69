"""Paced restarts on QEMU: the daemon in-process on qemu:///system, tiny diskless guests.

Covers: a VirtualMachinePool of 3 with ``maxUnavailable: 1`` under rollout Restart takes
a restart-class change (the machine type) one replica at a time, in its sortPolicy
order: at every observation at most one replica is down or running the change without
being Ready, and a replica boots the new machine type only after the one before it runs
it (the domains' machine type and state as libvirt reports them, read after every
reconcile); a pool whose readiness never passes on the new definition (a readiness
source that says so) loses one replica to the change and says it is halted, in
state.json and in the commit status it would send, while the other two keep running
their old definition.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

import pytest

from reconciler.config.daemon_file import load_config
from reconciler.context import SystemClock
from reconciler.daemon import forge, rollouts
from reconciler.daemon.notify import Notifier
from reconciler.daemon.service import Daemon
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from reconciler.model.rollout import ReadySource
from tests.helpers.git import GitRepo

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from reconciler.model import VMKey

PREFIX = "rtest-pace-"
NAMES = [f"{PREFIX}web-{i}" for i in range(3)]
HANG_GUARD_S = 240.0

POOL = """apiVersion: pool.kubevirt.io/v1beta1
kind: VirtualMachinePool
metadata:
  name: rtest-pace-web
spec:
  replicas: 3
  maxUnavailable: 1
  updateStrategy:
    proactive:
      selectionPolicy:
        sortPolicy: AscendingOrder
  selector:
    matchLabels:
      app: pace
  virtualMachineTemplate:
    metadata:
      labels:
        app: pace
      annotations:
        reconciler.kubevirt.io/rollout: Restart
    spec:
      runStrategy: Always
      template:
        spec:
          terminationGracePeriodSeconds: 1
          domain:
            machine: {{type: {machine}}}
            cpu: {{cores: 1}}
            memory: {{guest: 64Mi}}
            devices: {{autoattachGraphicsDevice: false}}
"""

pytestmark = pytest.mark.timeout(600)


def observe() -> dict[str, tuple[str, PowerState]]:
    """Each replica's machine type (of what it runs, else its definition) and state."""
    out = {}
    with Hypervisor("qemu:///system") as hv:
        for d in hv.list_domains():
            if d.name in NAMES:
                machine = ET.fromstring(d.live_xml or d.persistent_xml).find("os/type")
                assert machine is not None
                out[d.name] = (machine.get("machine") or "", d.state)
    return out


def daemon(repo: Path, tmp_path: Path, deadline: str) -> Daemon:
    host = tmp_path / "config.yaml"
    host.write_text(
        f"source: {{repo: {repo}}}\nconnect: qemu:///system\n"
        "host: {name: h1, domainType: qemu, networks: {pod: {user: {}}}, defaults: {graphics: none}}\n"
        f"policy: {{owner: rtest-pace, progressDeadline: {deadline}}}\n"
        f"stateDir: {tmp_path / 'state'}\nlisten: false\n"
    )
    return Daemon(load_config(str(host)), notifier=Notifier({}), clock=SystemClock())


def converge_until(
    d: Daemon, done: Callable[[], bool], seen: list[dict[str, tuple[str, PowerState]]]
) -> None:
    """Reconcile (as the daemon's replan timer would) until ``done``, observing the domains after each."""
    end = time.monotonic() + HANG_GUARD_S
    while not done():
        assert time.monotonic() < end, f"no progress: {seen[-3:]}"
        d.cycle(fetch=False, force=True)
        seen.append(observe())
        time.sleep(0.5)


def old_machine(seen: dict[str, tuple[str, PowerState]]) -> str:
    return seen[NAMES[0]][0]


def test_a_pool_of_three_takes_a_restart_class_change_one_replica_at_a_time(
    qemu_workdir: Path, tmp_path: Path
) -> None:
    repo = GitRepo(qemu_workdir)
    repo.write("pools/web.yaml", POOL.format(machine="q35"))
    repo.commit("q35")
    d = daemon(qemu_workdir, tmp_path, "3m")
    try:
        d.cycle(fetch=True, force=True)
        first = observe()
        assert {s for _, s in first.values()} == {PowerState.RUNNING}
        q35 = old_machine(first)
        repo.write("pools/web.yaml", POOL.format(machine="pc"))
        repo.commit("pc")
        d.cycle(fetch=True, force=True)
        seen = [observe()]

        def all_new() -> bool:
            return all(m != q35 and s == PowerState.RUNNING for m, s in seen[-1].values())

        converge_until(d, all_new, seen)
    finally:
        for h in d.hosts:
            h.close()
    for snap in seen:  # never more than one replica down or on the change before it runs
        down = [n for n, (_, s) in snap.items() if s != PowerState.RUNNING]
        assert len(down) <= 1, snap
    first_new = {n: next(i for i, snap in enumerate(seen) if snap[n][0] != q35) for n in NAMES}
    running_new = {
        n: next(i for i, snap in enumerate(seen) if snap[n][0] != q35 and snap[n][1] == PowerState.RUNNING)
        for n in NAMES
    }
    # in order, each only once the one before runs the new machine type
    assert running_new[NAMES[0]] <= first_new[NAMES[1]], seen
    assert running_new[NAMES[1]] <= first_new[NAMES[2]], seen
    assert first_new[NAMES[0]] < first_new[NAMES[1]] < first_new[NAMES[2]], seen


def test_a_pool_never_ready_loses_one_replica_and_says_it_is_halted(
    qemu_workdir: Path, tmp_path: Path
) -> None:
    repo = GitRepo(qemu_workdir)
    repo.write("pools/web.yaml", POOL.format(machine="q35"))
    repo.commit("q35")
    d = daemon(qemu_workdir, tmp_path, "5s")
    try:
        d.cycle(fetch=True, force=True)
        q35 = old_machine(observe())

        def ready(k: VMKey) -> bool:  # a readiness probe that never passes on the new definition
            return observe()[k.domain][0] == q35

        (h,) = d.hosts
        h.ready = ReadySource(ready)
        repo.write("pools/web.yaml", POOL.format(machine="pc"))
        head = repo.commit("pc")
        d.cycle(fetch=True, force=True)
        seen = [observe()]
        converge_until(d, lambda: h.paced is not None and h.paced.progress.halt is not None, seen)
        for _ in range(3):  # halted: more reconciles restart nothing more
            d.cycle(fetch=False, force=True)
            seen.append(observe())
        entry = d.state.doc["hosts"]["h1"]["rollout"]
        health = rollouts.commit_state(h.paced, head)
    finally:
        for x in d.hosts:
            x.close()
    last = seen[-1]
    assert [n for n in NAMES if last[n][0] != q35] == NAMES[:1]  # one replica lost to the change
    assert all(last[n] == (q35, PowerState.RUNNING) for n in NAMES[1:])
    assert all(sum(1 for m, _ in snap.values() if m != q35) <= 1 for snap in seen)
    assert entry["health"] == "Halted"
    assert entry["halt"]["vm"] == NAMES[0]
    assert entry["message"].startswith(f"Halted: halted at vm/{NAMES[0]}: not Ready after ")
    assert health is not None
    assert health[0] == forge.FAILURE
