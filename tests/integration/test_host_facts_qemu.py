"""Host facts on real libvirtd + QEMU: what the plan approves, the host runs.

Covers: on this host (a fresh Debian machine: no hugetlbfs, no libvirt network
``default``) a VM needing hugepages and a VM on a missing libvirt network are plan
errors naming the field with file:line and the missing fact, as is a passt binding
where libvirt has no passt backend; nothing of them is defined while the plain VM
beside them is applied; a VM on the pod network with no
host config mapping boots on user-mode networking, and the plan says so.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

import pytest

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState
from reconciler.model.results import Reason
from reconciler.reconcile import reconcile_once
from reconciler.wording.problems import words
from tests.helpers.qemu import URI, host, snapshot, sweep_prefix

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PREFIX = "rtest-facts-"

VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: {strategy}
  template:
    spec:
      terminationGracePeriodSeconds: 1
      domain:
        memory:
          guest: 64Mi
{memory}
        devices:
          interfaces:
            - name: net
              bridge: {{}}
      networks:
        - name: net
{network}
"""


def vm(name: str, strategy: str = "Halted", memory: str = "", network: str = "pod: {}") -> str:
    return VM.format(name=PREFIX + name, strategy=strategy, memory=memory, network=f"          {network}")


@pytest.fixture
def repo(tmp_path: Path, qemu_uri: str) -> Iterator[Path]:
    sweep_prefix(URI, PREFIX)
    (tmp_path / "vms").mkdir()
    yield tmp_path
    sweep_prefix(URI, PREFIX)


def test_vms_the_host_cannot_run_are_plan_errors_and_never_defined(repo: Path) -> None:
    (repo / "vms" / "plain.yaml").write_text(vm("plain"))
    (repo / "vms" / "huge.yaml").write_text(vm("huge", memory="          hugepages: {pageSize: 2Mi}"))
    (repo / "vms" / "lab.yaml").write_text(vm("lab", network="multus: {networkName: lab}"))
    (repo / "vms" / "passt.yaml").write_text(vm("passt").replace("bridge: {}", "passt: {}"))
    target = host(repo)
    with Hypervisor(URI) as hv:
        facts = hv.host_facts()
        free = dict(facts.hugepages_free or ()).get(2048, 0)
        assert facts.hugetlbfs_mounted is False or free < 32, "this host has hugepages: not a fresh host"
        assert "rtest-no-such-network" not in dict(facts.networks or ())

        plan, status = reconcile_once(snapshot(repo, "a"), "", target, hv, dry_run=True)
        assert status.reason == Reason.RENDER_FAILED
        errors = "\n".join(map(words, plan.errors))
        assert "vms/huge.yaml:" in errors
        assert (
            "vm/rtest-facts-huge: spec.template.spec.domain.memory.hugepages.pageSize: cannot run on host"
            in errors
        )
        assert (
            "vms/lab.yaml:19:11: vm/rtest-facts-lab: spec.template.spec.networks[0]: cannot run on host"
            in errors
        )
        assert "libvirt network 'rtest-no-such-network' does not exist on this host" in errors
        if not facts.passt:  # it would refuse the definition: the plan says so first
            assert (
                "vm/rtest-facts-passt: spec.template.spec.domain.devices.interfaces[0].passt: cannot run on host"
                in errors
            ), errors
            assert "offers no passt backend" in errors
        # A revision with errors applies as a whole or not at all: nothing of it here.
        assert plan.changes == ()

        plan, status = reconcile_once(snapshot(repo, "a"), "", target, hv)
        assert status.reason == Reason.RENDER_FAILED, status.message
        names = {d.name for d in hv.list_domains() if d.name.startswith(PREFIX)}
        assert names == set()  # nothing defined, the VMs the host can run included


def test_pod_network_without_a_default_network_boots_on_user_mode(repo: Path) -> None:
    (repo / "vms" / "pod.yaml").write_text(vm("pod", strategy="Always"))
    target = host(repo)  # no pod mapping in the host config
    with Hypervisor(URI) as hv:
        if dict(hv.host_facts().networks or ()).get("default"):
            pytest.skip("this host has an active libvirt network 'default': the fallback does not apply")
        plan, status = reconcile_once(snapshot(repo, "b"), "", target, hv)
        assert status.reason == Reason.SUCCEEDED, status.message
        assert any("user-mode networking" in w for w in map(words, plan.warnings)), plan.warnings
        assert hv.state(PREFIX + "pod") == PowerState.RUNNING
        iface = ET.fromstring(hv.running_xml(PREFIX + "pod")).find("devices/interface")
        assert iface is not None
        assert iface.get("type") == "user"
