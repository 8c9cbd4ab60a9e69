"""Issue 42: a restart decided is never lost to a crash of the daemon (real libvirtd + QEMU).

A restart-class rollout of three VMs under ``rollout: Restart`` (one batch of three:
``max-unavailable: 100%``) defines each new definition, then stops the guests
gracefully (guests with no OS ignore ACPI, so each stop waits out its grace period). The daemon is killed (SIGKILL) while the stops wait:
started again, it makes every one of the three restarts (each guest runs the new
definition), and while a restart is still to make its row is never ``Synced``.
"""

from __future__ import annotations

import signal
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

import pytest

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.daemon import Daemon, vm_rows, wait_for
from tests.helpers.faults import URI, config, name, state_of, vm

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(240)
GRACE_S = 8


def _restarted_vm(vm_name: str, memory: str) -> str:
    return vm(vm_name, grace=GRACE_S, memory=memory).replace(
        f"  name: {vm_name}\n",
        f"  name: {vm_name}\n  annotations:\n    reconciler.kubevirt.io/rollout: Restart\n"
        '    reconciler.kubevirt.io/max-unavailable: "100%"\n',  # all three at once: not paced
        1,
    )


def _running_kib(dom: str) -> int:
    """The running domain's memory (0: it is off, between the stop and the start)."""
    with Hypervisor(URI) as hv:
        text = hv.running_xml(dom)
    if not text:
        return 0
    el = ET.fromstring(text).find("memory")
    assert el is not None
    assert el.text
    return int(el.text) * {"KiB": 1, "MiB": 1024}[el.get("unit", "KiB")]


def test_sigkill_during_a_rollout_loses_no_restart(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    doms = [name(f"intent-{i}") for i in range(3)]
    own_domains += doms
    for dom in doms:
        git_repo.write(f"vms/{dom}.yaml", _restarted_vm(dom, "64Mi"))
    first = git_repo.commit("three running VMs")
    cfg = config(tmp_path, str(git_repo.path))
    d = start("--config", str(cfg))
    d.wait_applied(first)
    assert all(state_of(dom) == PowerState.RUNNING for dom in doms)

    for dom in doms:  # a maximum beyond the running one: restart-class
        git_repo.write(f"vms/{dom}.yaml", _restarted_vm(dom, "128Mi"))
    second = git_repo.commit("more memory: a restart")
    wait_for("three stops waiting", lambda: len(d.events("graceful stop started")) >= 3, timeout=60)
    d.signal(signal.SIGKILL)
    d.proc.wait(timeout=30)
    assert all(state_of(dom) == PowerState.RUNNING for dom in doms)  # the stops never came
    assert all(_running_kib(dom) == 64 * 1024 for dom in doms)

    again = start("--config", str(cfg))
    rows = vm_rows(again.wait_attempted(second))
    behind = [r for dom, r in rows.items() if dom in doms and _running_kib(dom) != 128 * 1024]
    assert all(r["sync"] != "Synced" for r in behind), behind  # a restart to make is not Synced
    wait_for(
        "the three guests running the new definition",
        lambda: all(state_of(dom) == PowerState.RUNNING and _running_kib(dom) == 128 * 1024 for dom in doms),
        timeout=3 * GRACE_S + 60,
    )
    wait_for(
        "the three rows Synced",
        lambda: all(vm_rows(again.state()).get(dom, {}).get("sync") == "Synced" for dom in doms),
        timeout=60,
    )
