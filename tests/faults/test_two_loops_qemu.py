"""Issue 32, on real libvirtd + QEMU: the promises a controller keeps between commits.

- Two loops: with an ``Always`` VM running, a bad head (a misspelt field,
  ``restartPolicy`` beside ``runStrategy``) or a force-push refused by
  ``allowRollback: false``, and the VM's QEMU killed with SIGKILL: it is running again
  within seconds (a lifecycle event, the last applied revision enforced), the state
  file says both revisions, and the blocked head is not applied.
- VMs never wait for each other: a VM switched to Halted whose guest ignores ACPI (no
  OS) waits out its grace period in the background while an ``Always`` VM killed
  meanwhile comes back within seconds, long before the grace period ends.

Guests have no OS. Domain names are ``rtest-fault-*-<pid>``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from tests.helpers.daemon import Daemon, wait_for
from tests.helpers.faults import URI, config, name, state_of, vm
from tests.helpers.qemu import kill_qemu

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(240)
BACK_WITHIN_S = 15.0  # "within seconds": an event, a settle window, one plan and a start


def killed_comes_back(dom: str) -> float:
    """Kill the guest's QEMU; seconds until it runs again (the wait is a hang guard)."""
    with Hypervisor(URI) as hv:
        kill_qemu(hv, dom)
    t0 = time.monotonic()
    wait_for(f"{dom} running again", lambda: state_of(dom) == PowerState.RUNNING, timeout=60)
    return time.monotonic() - t0


BROKEN = {
    "misspelt-field": "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {{name: {n}}}\n"
    "spec:\n  runStratgy: Always\n  template: {{spec: {{domain: {{devices: {{}}}}}}}}\n",
    "restartPolicy-beside-runStrategy": "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\n"
    "metadata: {{name: {n}}}\nspec:\n  runStrategy: Always\n"
    "  template: {{spec: {{restartPolicy: Always, domain: {{devices: {{}}}}}}}}\n",
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_a_bad_head_keeps_crash_recovery(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str], broken: str
) -> None:
    dom = name("loop-head")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom))
    good = git_repo.commit()
    d = start("--config", str(config(tmp_path, str(git_repo.path), extra="intervals: {resync: 1h}\n")))
    d.wait_applied(good)
    git_repo.write("vms/b.yaml", BROKEN[broken].format(n=name("loop-broken")))
    bad = git_repo.commit("broken")
    state = d.wait_attempted(bad)
    assert state["applied_revision"] == good
    took = killed_comes_back(dom)
    assert took < BACK_WITHIN_S, f"{took:.1f}s"
    state = d.state()
    (host,) = state["hosts"].values()
    assert (host["held"]["enforced"], host["held"]["blocked"]) == (good, bad)
    assert state["applied_revision"] == good
    assert state_of(name("loop-broken")) is None  # nothing of the blocked head


def test_a_refused_rollback_keeps_crash_recovery(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    dom = name("loop-rollback")
    own_domains.append(dom)
    git_repo.write("vms/a.yaml", vm(dom))
    old = git_repo.commit("old")
    git_repo.write("vms/a.yaml", vm(dom, memory="96Mi"))
    new = git_repo.commit("new")
    extra = "intervals: {resync: 1h}\npolicy: {allowRollback: false}\n"
    d = start("--config", str(config(tmp_path, str(git_repo.path), extra=extra)))
    d.wait_applied(new)
    git_repo.git("reset", "-q", "--hard", old)  # a force-push back
    state = d.wait_attempted(old)
    assert state["reason"] == "RollbackRefused"
    took = killed_comes_back(dom)
    assert took < BACK_WITHIN_S, f"{took:.1f}s"
    assert d.state()["applied_revision"] == new


def test_a_crashed_vm_is_restarted_while_another_vms_graceful_stop_waits(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], own_domains: list[str]
) -> None:
    grace = 45
    slow, crashing = name("loop-slow"), name("loop-crash")
    own_domains += [slow, crashing]
    git_repo.write("vms/slow.yaml", vm(slow, grace=grace))
    git_repo.write("vms/crash.yaml", vm(crashing))
    first = git_repo.commit("both running")
    d = start("--config", str(config(tmp_path, str(git_repo.path), extra="intervals: {resync: 1h}\n")))
    d.wait_applied(first)
    git_repo.write("vms/slow.yaml", vm(slow, strategy="Halted", grace=grace))
    second = git_repo.commit("halt the slow one")
    wait_for("the graceful stop under way", lambda: d.events("graceful stop started"))
    d.wait_applied(second)  # applied while its stop waits in the background
    stopping = {v["name"]: v for v in d.state()["vms"]}[slow]
    assert stopping["sync"] == "OutOfSync"
    assert "under way" in stopping["message"]
    took = killed_comes_back(crashing)
    assert took < BACK_WITHIN_S, f"{took:.1f}s"
    assert state_of(slow) == PowerState.RUNNING  # its grace period is far from over
    assert not d.events("graceful stop forced")
