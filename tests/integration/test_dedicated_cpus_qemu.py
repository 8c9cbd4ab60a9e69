"""Dedicated CPUs on real QEMU: two VMs pinned to disjoint host CPUs, a re-plan a no-op.

Covers: two Always VMs with ``dedicatedCpuPlacement`` (one vCPU each) on a host config
dedicating CPUs 0-1 are defined and started, each vCPU pinned to its own host CPU (as
libvirt reports the running domains' pins); the next plan changes nothing; a third VM
that no longer fits is a plan error naming the VMs holding the set, and the two keep
running untouched.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from reconciler.model.results import Reason
from reconciler.wording.problems import words
from reconciler.wording.reasons import said
from tests.helpers.qemu import URI, host, snapshot

if TYPE_CHECKING:
    from pathlib import Path

PREFIX = "rtest-pinned-"
VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 1
      domain:
        cpu:
          cores: 1
          dedicatedCpuPlacement: true
        memory:
          guest: 64Mi
        devices:
          autoattachGraphicsDevice: false
"""


def pins(hv: Hypervisor, name: str) -> list[str]:
    tune = ET.fromstring(hv.running_xml(name)).find("cputune")
    assert tune is not None, name
    return [p.get("cpuset", "") for p in tune.findall("vcpupin")]


def test_two_dedicated_vms_get_disjoint_cpus_and_keep_them(prefixed_repo: Path) -> None:
    repo = prefixed_repo
    from reconciler.reconcile import reconcile_once

    for name in ("a", "b"):
        (repo / "vms" / f"{name}.yaml").write_text(VM.format(name=PREFIX + name))
    target = host(repo, dedicated_cpus=(0, 1))
    with Hypervisor(URI) as hv:
        plan, status = reconcile_once(snapshot(repo, "a"), "", target, hv)
        assert status.reason == Reason.SUCCEEDED, status.message
        assert hv.state(PREFIX + "a") == hv.state(PREFIX + "b") == PowerState.RUNNING
        assert (pins(hv, PREFIX + "a"), pins(hv, PREFIX + "b")) == (["0"], ["1"])
        plan, status = reconcile_once(snapshot(repo, "a"), "", target, hv, dry_run=True)
        assert not plan.has_changes, [(c.name, c.action, said(c)) for c in plan.changes if not c.is_noop]

        (repo / "vms" / "c.yaml").write_text(VM.format(name=PREFIX + "c"))
        plan, status = reconcile_once(snapshot(repo, "b"), "", target, hv)
        assert status.reason == Reason.RENDER_FAILED
        (error,) = map(words, plan.errors)
        assert error.startswith("vms/c.yaml:")
        assert f"held by vm/{PREFIX}a, vm/{PREFIX}b" in error
        assert hv.get_domain(PREFIX + "c") is None
        assert (pins(hv, PREFIX + "a"), pins(hv, PREFIX + "b")) == (["0"], ["1"])
