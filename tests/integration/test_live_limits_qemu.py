"""Live changes that know their limits, and drift judged on the right definition, on QEMU.

Covers, on a running q35 guest rendered from YAML: hot-adding more virtio disks than
the running domain has spare hotplug slots: the spare ones are attached live (the
plan says how many remain), the rest is restart-class (RestartRequired), the apply
succeeds and the next plan tries nothing again (no ``Only PCI buses`` retry loop);
lowering the sockets (``sockets: 2 -> 1``) is restart-class (the boot vCPUs cannot be
unplugged), staged once, never a ``set-vcpus`` libvirt refuses; an edit of the
persistent definition alone (``virsh edit`` of the topology) under rollout Restart is
corrected in the definition while the guest keeps running (same QEMU process);
the free root ports KubeVirt reserves (``render.ports``) are what libvirt leaves empty,
and an interface hot-added into one; a domain defined without them (an earlier
version) gets them in its persistent definition only, under rollout Restart, with no
restart; the root ports of the boot-time devices sealed (``hotplug='off'``) as KubeVirt
seals them, before the first boot, a NIC's port left hotpluggable, a hot-added disk's
port sealed in the definition only, the seals kept by the redefinition, and a sealed
disk removed from git staged for a restart instead of a detach libvirt refuses.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reconciler import render
from reconciler.compare.cache import CompareCache
from reconciler.compare.capacity import capacity
from reconciler.desired import Desired, desired_state
from reconciler.desired.pins import pins_from_live
from reconciler.host.apply import HostResources, apply_plan
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import PowerState, Rollout, SourceSnapshot
from reconciler.model.changes import Action, LiveOpKind, Plan
from reconciler.plan.build import build_plan
from reconciler.render.ports import hotplug_ports
from reconciler.settings.host import HostConfig, NetworkTarget
from reconciler.settings.policy import PlanPolicy
from reconciler.source import DirView
from reconciler.wording.reasons import said
from tests.helpers.qemu import domain_id, sweep_prefix

if TYPE_CHECKING:
    from collections.abc import Iterator

PREFIX = "rtest-limits-"

VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
  annotations:
    reconciler.kubevirt.io/rollout: {rollout}
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 1
      domain:
        cpu: {{sockets: {sockets}, maxSockets: 2}}
        memory: {{guest: 128Mi}}
        devices:
          disks:
{disks}
      networks: []
      volumes:
{volumes}
"""


def vm_yaml(name: str, sockets: int, disks: list[str], rollout: str = "Stage") -> str:
    return VM.format(
        name=name,
        rollout=rollout,
        sockets=sockets,
        disks="\n".join(f"            - name: {d}\n              disk: {{bus: virtio}}" for d in disks),
        volumes="\n".join(f"        - name: {d}\n          emptyDisk: {{capacity: 16Mi}}" for d in disks),
    )


class Host:
    """The repository, host config and plan/apply of one test, against qemu:///system."""

    def __init__(self, workdir: Path, hv: Hypervisor, name: str) -> None:
        self.repo = workdir / "repo"
        (self.repo / "vms").mkdir(parents=True)
        self.name = name
        self.hv = hv
        self.config = HostConfig(
            name="h",
            allowed_dirs=(str(workdir),),
            volume_dir=str(workdir / "volumes"),
            pod_network=NetworkTarget("user"),
            domain_type="qemu",
            graphics="none",
        )
        self.caps = render.parse_host_caps(*hv.capabilities_xml())
        self.cache = CompareCache()
        self.commits = 0

    def write(self, text: str) -> Desired:
        (self.repo / "vms" / "vm.yaml").write_text(text)
        self.commits += 1
        snap = SourceSnapshot(
            repo=str(self.repo), ref="HEAD", commit=f"{self.commits:040x}", files=DirView(str(self.repo))
        )
        mine = [d for d in self.hv.list_domains() if d.name == self.name]
        got = desired_state(snap, "", self.config, self.caps, pins_from_live(mine))
        assert got.errors == ()
        return got

    def plan(self, d: Desired) -> Plan:
        mine = [x for x in self.hv.list_domains() if x.name == self.name]
        return build_plan(d.revision, d.rendered, mine, PlanPolicy(), cache=self.cache)

    def apply(self, p: Plan) -> None:
        results = apply_plan(p, self.hv, HostResources(self.config))
        assert all(r.ok for r in results), [r.message for r in results]


@pytest.fixture
def host(qemu_uri: str, request: pytest.FixtureRequest) -> Iterator[Host]:
    name = (
        f"{PREFIX}{request.node.name.split('[')[0].removeprefix('test_')[:24].replace('_', '-').strip('-')}"
    )
    workdir = Path(tempfile.mkdtemp(prefix=PREFIX, dir="/tmp"))
    workdir.chmod(0o755)
    sweep_prefix(qemu_uri, name)
    with Hypervisor(qemu_uri) as hv:
        yield Host(workdir, hv, name)
    sweep_prefix(qemu_uri, name)
    shutil.rmtree(workdir, ignore_errors=True)


def test_hot_adds_beyond_the_spare_slots_wait_for_a_restart(host: Host) -> None:
    first = host.write(vm_yaml(host.name, 1, ["d0"]))
    host.apply(host.plan(first))
    assert host.hv.state(host.name) == PowerState.RUNNING
    spare = capacity(ET.fromstring(host.hv.running_xml(host.name))).spare_slots
    assert spare is not None
    before = domain_id(host.hv, host.name)
    disks = ["d0", *(f"d{i}" for i in range(1, spare + 2))]  # one more than the spare slots
    more = host.write(vm_yaml(host.name, 1, disks))
    (c,) = host.plan(more).changes
    attaches = [op for op in c.live_ops if op.kind == LiveOpKind.ATTACH]
    assert len(attaches) == spare
    assert c.restart_required
    assert "no spare hotplug slot on the running domain" in said(c)
    assert "(0 left)" in said(c) or spare == 0
    host.apply(host.plan(more))
    assert domain_id(host.hv, host.name) == before  # hot-added, not restarted
    (again,) = host.plan(more).changes
    assert again.live_ops == ()  # nothing tried again
    assert again.restart_required
    assert again.action == Action.UNCHANGED


def test_fewer_sockets_wait_for_a_restart_instead_of_a_refused_set_vcpus(host: Host) -> None:
    two = host.write(vm_yaml(host.name, 2, ["d0"]))
    host.apply(host.plan(two))
    before = domain_id(host.hv, host.name)
    one = host.write(vm_yaml(host.name, 1, ["d0"]))
    (c,) = host.plan(one).changes
    assert not [op for op in c.live_ops if op.kind == LiveOpKind.SET_VCPUS]
    assert c.restart_required
    assert "the guest can unplug 0: restart-class" in said(c)
    host.apply(host.plan(one))
    assert domain_id(host.hv, host.name) == before
    (again,) = host.plan(one).changes
    assert (again.action, again.live_ops, again.restart_required) == (Action.UNCHANGED, (), True)


def test_an_edit_of_the_persistent_definition_alone_restarts_nothing(host: Host) -> None:
    d = host.write(vm_yaml(host.name, 2, ["d0"], rollout=str(Rollout.RESTART)))
    host.apply(host.plan(d))
    before = domain_id(host.hv, host.name)
    edited = host.hv.persistent_xml(host.name)
    tree = ET.fromstring(edited)
    topology = tree.find("cpu/topology")
    assert topology is not None
    topology.set("sockets", "4")  # virsh edit: the persistent definition only
    vcpu = tree.find("vcpu")
    assert vcpu is not None
    vcpu.text = str(int(topology.get("cores", "1")) * int(topology.get("threads", "1")) * 4)
    host.hv.define(ET.tostring(tree, encoding="unicode"), host.name)
    (c,) = host.plan(d).changes
    assert c.drift
    assert c.action == Action.UPDATE, said(c)
    assert not c.restart_required
    host.apply(host.plan(d))
    assert domain_id(host.hv, host.name) == before  # the guest kept running
    assert not host.plan(d).has_changes


NIC_VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
  annotations:
    reconciler.kubevirt.io/rollout: Restart
spec:
  runStrategy: Always
  template:
    spec:
      terminationGracePeriodSeconds: 1
      domain:
        memory: {{guest: 128Mi}}
        devices:
          disks: []
          interfaces:
{interfaces}
      networks:
{networks}
"""


def nic_yaml(name: str, nics: list[str]) -> str:
    return NIC_VM.format(
        name=name,
        interfaces="\n".join(
            f"            - name: {n}\n              {'masquerade' if i == 0 else 'bridge'}: {{}}"
            for i, n in enumerate(nics)
        ),
        networks="\n".join(
            f"        - name: {n}\n          pod: {{}}"
            if i == 0
            else f"        - name: {n}\n          multus: {{networkName: {n}}}"
            for i, n in enumerate(nics)
        ),
    )


def _ports(xml: str) -> int:
    tree = ET.fromstring(xml)
    return sum(1 for c in tree.iter("controller") if c.get("model") == "pcie-root-port")


def test_an_interface_is_hot_added_into_a_reserved_port(host: Host) -> None:
    first = host.write(nic_yaml(host.name, ["default"]))
    (rendered,) = first.rendered
    expected = hotplug_ports(ET.fromstring(rendered.xml), {}, {})
    assert expected is not None
    assert expected.free == 3  # KubeVirt: max(4 - 1 interface, max(8 - 5 PCI devices, 3))
    host.apply(host.plan(first))
    running = host.hv.running_xml(host.name)
    # libvirt filled the ports predicted for the devices and left KubeVirt's free ones
    assert capacity(ET.fromstring(running)).spare_slots == expected.free
    before = domain_id(host.hv, host.name)
    host.config = dataclasses.replace(host.config, networks={"second": NetworkTarget("user")})
    second = host.write(nic_yaml(host.name, ["default", "second"]))
    (c,) = host.plan(second).changes
    assert [op.kind for op in c.live_ops] == [LiveOpKind.ATTACH], (said(c), c.restart_required)
    assert not c.restart_required
    assert "hot-added into a spare hotplug slot (2 left)" in said(c)
    host.apply(host.plan(second))
    assert domain_id(host.hv, host.name) == before  # hot-added, not restarted
    assert len(ET.fromstring(host.hv.running_xml(host.name)).findall("devices/interface")) == 2
    assert not host.plan(second).has_changes


def test_a_domain_without_reserved_ports_gets_them_at_its_next_boot(host: Host) -> None:
    d = host.write(nic_yaml(host.name, ["default"]))
    (rendered,) = d.rendered
    tree = ET.fromstring(rendered.xml)
    devices = tree.find("devices")
    assert devices is not None
    for port in [p for p in devices.findall("controller") if p.get("model") == "pcie-root-port"]:
        devices.remove(port)  # as an earlier version rendered it
    old = dataclasses.replace(rendered, xml_data=ET.tostring(tree, encoding="unicode"))
    host.apply(build_plan(d.revision, (old,), [], PlanPolicy(), cache=host.cache))
    assert host.hv.state(host.name) == PowerState.RUNNING
    before = domain_id(host.hv, host.name)
    running_ports = _ports(host.hv.running_xml(host.name))
    (c,) = host.plan(d).changes  # rollout Restart
    assert c.action == Action.UPDATE, said(c)
    assert not c.restart_required
    assert not c.stop
    assert not c.start
    assert "hotplug ports reserved at next boot" in said(c)
    host.apply(host.plan(d))
    assert domain_id(host.hv, host.name) == before  # the guest kept running
    assert _ports(host.hv.running_xml(host.name)) == running_ports  # not before the next cold boot
    assert _ports(host.hv.persistent_xml(host.name)) >= _ports(rendered.xml) - 1
    (again,) = host.plan(d).changes
    assert again.action == Action.UNCHANGED, said(again)
    assert not again.restart_required


def _sealed(xml: str) -> dict[str, bool]:
    """Each PCIe device of the domain (its kind and target or model) -> whether the root
    port it sits on has hotplug off."""
    tree = ET.fromstring(xml)
    off = {
        int(c.get("index") or "0")
        for c in tree.iter("controller")
        if c.get("model") == "pcie-root-port"
        and (t := c.find("target")) is not None
        and t.get("hotplug") == "off"
    }
    out = {}
    devices = tree.find("devices")
    assert devices is not None
    for el in devices:
        address = el.find("address")
        if address is None or address.get("type") != "pci" or address.get("bus") in (None, "0x00"):
            continue
        target = el.find("target")
        name = (
            target.get("dev")
            if el.tag == "disk" and target is not None
            else el.get("model") or el.get("type")
        )
        out[f"{el.tag}:{name}"] = int(address.get("bus") or "0", 0) in off
    return out


def test_boot_time_devices_sit_on_sealed_ports_and_leave_only_by_a_restart(host: Host) -> None:
    d = host.write(vm_yaml(host.name, 1, ["d0", "d1"]))
    host.apply(host.plan(d))
    assert host.hv.state(host.name) == PowerState.RUNNING
    # as KubeVirt seals them: every PCIe device's port but a NIC's, before the first boot
    for xml in (host.hv.persistent_xml(host.name), host.hv.running_xml(host.name)):
        sealed = _sealed(xml)
        assert sealed["disk:vda"], sealed
        assert sealed["disk:vdb"], sealed
        assert sealed["memballoon:virtio"], sealed
        # the pod interface KubeVirt attaches by itself keeps a hotpluggable port
        assert [k for k, v in sealed.items() if not v] == ["interface:user"], list(sealed.items())
    assert not host.plan(d).has_changes
    before = domain_id(host.hv, host.name)
    fewer = host.write(vm_yaml(host.name, 1, ["d0"]))
    (c,) = host.plan(fewer).changes
    assert not [op for op in c.live_ops if op.kind == LiveOpKind.DETACH]
    assert c.restart_required
    assert "disk[vdb]: its root port is sealed (hotplug off): restart-class" in said(c)
    host.apply(host.plan(fewer))
    assert domain_id(host.hv, host.name) == before  # nothing tried live, nothing restarted
    (again,) = host.plan(fewer).changes
    assert (again.action, again.live_ops, again.restart_required) == (Action.UNCHANGED, (), True)


def test_a_nics_port_stays_hotpluggable(host: Host) -> None:
    d = host.write(nic_yaml(host.name, ["default"]))
    host.apply(host.plan(d))
    sealed = _sealed(host.hv.running_xml(host.name))
    assert [k for k, v in sealed.items() if not v and k.startswith("interface")] == ["interface:user"], sealed
    assert [k for k, v in sealed.items() if not v] == ["interface:user"], sealed
    assert not host.plan(d).has_changes


def test_a_hot_added_disk_is_sealed_from_the_next_boot_and_unpluggable_until_then(host: Host) -> None:
    d = host.write(vm_yaml(host.name, 1, ["d0"]))
    host.apply(host.plan(d))
    before = domain_id(host.hv, host.name)
    more = host.write(vm_yaml(host.name, 1, ["d0", "d1"]))
    (c,) = host.plan(more).changes
    assert [str(op) for op in c.live_ops] == ["attach disk[vdb]"], said(c)
    host.apply(host.plan(more))
    assert domain_id(host.hv, host.name) == before  # hot-added
    assert _sealed(host.hv.persistent_xml(host.name))["disk:vdb"]  # sealed from the next boot on
    assert not _sealed(host.hv.running_xml(host.name))["disk:vdb"]  # its running port: hotplug on
    assert _sealed(host.hv.persistent_xml(host.name))["disk:vda"]  # the redefinition kept the seal
    assert not host.plan(more).has_changes
    (c,) = host.plan(d).changes  # back to one disk: vdb leaves the running guest live
    assert [str(op) for op in c.live_ops] == ["detach disk[vdb]"], said(c)
    assert not c.restart_required
    host.apply(host.plan(d))
    assert domain_id(host.hv, host.name) == before
    assert not host.plan(d).has_changes
