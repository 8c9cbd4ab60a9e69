"""Paced restarts on QEMU: the daemon in-process on qemu:///system, tiny diskless guests.

Covers: a VirtualMachinePool of 3 with ``maxUnavailable: 1`` under rollout Restart takes
a restart-class change (the machine type) one replica at a time, in its sortPolicy
order: at every observation at most one replica is down or running the change without
being Ready, and a replica boots the new machine type only after the one before it runs
it (the domains' machine type and state as libvirt reports them, read after every
reconcile). A pool whose readiness probe never passes on the new definition, with the
real test guest and its real probe: tests/integration/test_probed_rollout_qemu.py.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.config.daemon_file import load_config
from reconciler.context import SystemClock
from reconciler.daemon.notify import Notifier
from reconciler.daemon.service import Daemon
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.git import GitRepo
from tests.helpers.qemu import cycle_until

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


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


def converge_until(d: Daemon, done: Callable[[], bool], seen: list[Any]) -> None:
    cycle_until(d, done, observe, seen, HANG_GUARD_S)


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
