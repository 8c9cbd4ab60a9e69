"""startStrategy: Paused on real QEMU: the guest starts with its vCPUs paused.

Covers: an Always VM with ``startStrategy: Paused`` is defined and started paused
(libvirt reports it paused, not running); the next plan is a no-op (a paused guest
is a started one, nothing restarts it); without startStrategy the same VM runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from reconciler.model.results import Reason
from reconciler.wording.reasons import said
from tests.helpers.qemu import URI, host, snapshot

if TYPE_CHECKING:
    from pathlib import Path

PREFIX = "rtest-paused-"
VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 1
{start}      domain:
        memory:
          guest: 64Mi
        devices:
          autoattachGraphicsDevice: false
"""


def test_a_paused_start_strategy_starts_paused_and_stays(prefixed_repo: Path) -> None:
    repo = prefixed_repo
    from reconciler.reconcile import reconcile_once

    (repo / "vms" / "p.yaml").write_text(VM.format(name=PREFIX + "p", start="      startStrategy: Paused\n"))
    (repo / "vms" / "r.yaml").write_text(VM.format(name=PREFIX + "r", start=""))
    target = host(repo)
    with Hypervisor(URI) as hv:
        plan, status = reconcile_once(snapshot(repo, "a"), "", target, hv)
        assert status.reason == Reason.SUCCEEDED, status.message
        assert hv.state(PREFIX + "p") == PowerState.PAUSED
        assert hv.state(PREFIX + "r") == PowerState.RUNNING
        plan, status = reconcile_once(snapshot(repo, "a"), "", target, hv, dry_run=True)
        assert not plan.has_changes, [(c.name, c.action, said(c)) for c in plan.changes if not c.is_noop]
        assert hv.state(PREFIX + "p") == PowerState.PAUSED
