"""Devices against libvirt's test driver: SR-IOV pools and mediated devices.

Covers: a libvirt network with ``<forward mode='hostdev'>`` (a pool of virtual
functions) is read into the host facts as such; a VM whose ``sriov`` interface maps to
it plans cleanly, and one whose ``sriov`` interface maps to a NAT network is a plan
error naming the interface at file:line (the revision is then not applied on this
host at all). Mediated devices: VMs asking for a vGPU pool are applied with one
instance each, read back from the driver with an empty plan; the next reconcile keeps
every instance where it is when a VM sorted before them arrives, and a VM the
exhausted pool cannot serve is a plan error naming the holders (nothing applied).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import libvirt
import pytest

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import SourceSnapshot
from reconciler.model.changes import Action
from reconciler.reconcile import reconcile_once
from reconciler.render import mdev
from reconciler.settings.host import HostConfig, HostDevice, NetworkTarget
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.source import DirView
from tests.helpers.domains import drop_domains

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
    assert plan.changes == ()  # one VM this host cannot run: nothing of the revision applies here
    assert "vms/nat.yaml:14:15: vm/rtest-vf-nat: spec.template.spec.domain.devices.interfaces[0].sriov: " in (
        status.message
    )
    assert "libvirt network 'default' is not an SR-IOV pool on this host" in status.message


GPU_VM = """apiVersion: kubevirt.io/v1
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
          gpus:
            - name: vgpu
              deviceName: nvidia.com/GRID_T4-1Q
"""
UUIDS = tuple(f"9a8c6a4e-2f57-4c3b-9d0c-5d1f3b8e1a0{i}" for i in (1, 2, 3))
GPU_HOST = HostConfig(
    name="h1", host_devices={"nvidia.com/GRID_T4-1Q": HostDevice("mdev", "nvidia-222", UUIDS)}
)
NAMES = ("rtest-mdev-a0", "rtest-mdev-b", "rtest-mdev-c", "rtest-mdev-d")


def reconcile(repo: Path, hv: Hypervisor, dry_run: bool = False) -> tuple[list[tuple[str, Action]], str]:
    snap = SourceSnapshot(repo=str(repo), ref="HEAD", commit="f" * 40, files=DirView(str(repo)))
    target = HostTarget(URI, GPU_HOST, PlanPolicy(host="h1"))
    plan, status = reconcile_once(snap, "vms", target, hv, dry_run=dry_run)
    return [(c.name, c.action) for c in plan.changes if c.name.startswith("rtest-mdev")], status.message


def held(hv: Hypervisor) -> dict[str, tuple[str, ...]]:
    return {d.name: mdev.held_mdevs(d.persistent_xml) for d in hv.list_domains() if d.name in NAMES}


@pytest.fixture
def gpu_hv() -> Iterator[Hypervisor]:
    with Hypervisor(URI) as hv:
        try:
            yield hv
        finally:
            drop_domains(hv, NAMES)


def test_vgpu_instances_are_handed_out_once_and_stay(gpu_hv: Hypervisor, tmp_path: Path) -> None:
    (tmp_path / "vms").mkdir()
    for name in ("rtest-mdev-c", "rtest-mdev-b"):
        (tmp_path / "vms" / f"{name}.yaml").write_text(GPU_VM.format(name=name))
    changes, message = reconcile(tmp_path, gpu_hv)
    assert message == ""
    assert sorted(changes) == [("rtest-mdev-b", Action.CREATE), ("rtest-mdev-c", Action.CREATE)]
    assert held(gpu_hv) == {"rtest-mdev-b": (UUIDS[0],), "rtest-mdev-c": (UUIDS[1],)}
    changes, _ = reconcile(tmp_path, gpu_hv, dry_run=True)  # read back: nothing to do
    assert sorted(changes) == [("rtest-mdev-b", Action.UNCHANGED), ("rtest-mdev-c", Action.UNCHANGED)]
    # A VM sorted before them arrives: it takes the free instance, the others stay.
    (tmp_path / "vms" / "rtest-mdev-a0.yaml").write_text(GPU_VM.format(name="rtest-mdev-a0"))
    changes, message = reconcile(tmp_path, gpu_hv)
    assert message == ""
    assert ("rtest-mdev-a0", Action.CREATE) in changes
    kept = {"rtest-mdev-a0": (UUIDS[2],), "rtest-mdev-b": (UUIDS[0],), "rtest-mdev-c": (UUIDS[1],)}
    assert held(gpu_hv) == kept
    # One more than the pool holds: an error of the revision on this host, which applies
    # as a whole or not at all (the host keeps what it runs).
    (tmp_path / "vms" / "rtest-mdev-d.yaml").write_text(GPU_VM.format(name="rtest-mdev-d"))
    changes, message = reconcile(tmp_path, gpu_hv)
    assert changes == []
    assert (
        "vm/rtest-mdev-d: spec.template.spec.domain.devices.gpus[0].deviceName: cannot run on host h1"
        in message
    )
    assert "the others held by vm/rtest-mdev-a0, vm/rtest-mdev-b, vm/rtest-mdev-c" in message
    assert held(gpu_hv) == kept
