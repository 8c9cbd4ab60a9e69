"""The test guest's VM and host config (``tests/helpers/guest.py``) as the pipeline reads them.

Covers: the host config file of ``host_config_yaml`` loads to ``host_config``; the VM of
``vm_manifest`` plans on ``test:///default`` to a domain with direct kernel boot from the
image directory, the guest's switches on the command line, the guest agent channel and,
with an address, one interface on the bridge (none without); the replicas of
``pool_manifest`` ask for a DHCP lease.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

import pytest
import yaml

from reconciler.config.host import load_host_config
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import SourceSnapshot
from reconciler.reconcile import reconcile_once
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.source import DirView
from tests.helpers.guest import GuestBridge, host_config, host_config_yaml, pool_manifest, vm_manifest

if TYPE_CHECKING:
    from pathlib import Path

BRIDGE = GuestBridge("eth1", "198.18.7", "198.18.7.1")  # an interface test:///default has


@pytest.mark.parametrize("bridge", [BRIDGE, None])
def test_host_config_file_is_the_host_config(tmp_path: Path, bridge: GuestBridge | None) -> None:
    text = host_config_yaml(tmp_path / "image", tmp_path / "work", bridge)
    assert load_host_config(text.encode(), "host.yaml") == host_config(
        tmp_path / "image", tmp_path / "work", bridge
    )


def planned_xml(tmp_path: Path, manifest: dict[str, object], bridge: GuestBridge | None) -> ET.Element:
    image = tmp_path / "image"
    image.mkdir()
    for f in ("vmlinuz", "initrd.img"):
        (image / f).write_bytes(b"x")
    repo = tmp_path / "repo"
    (repo / "vms").mkdir(parents=True)
    (repo / "vms" / "g.yaml").write_text(yaml.safe_dump(manifest))
    snap = SourceSnapshot(repo=str(repo), ref="HEAD", commit="e" * 40, files=DirView(str(repo)))
    target = HostTarget("test:///default", host_config(image, repo, bridge), PlanPolicy(host="h1"))
    with Hypervisor("test:///default") as hv:
        plan, status = reconcile_once(snap, "vms", target, hv, dry_run=True)
    assert not plan.errors, status.message
    (change,) = [c for c in plan.changes if c.name == "rtest-guest-x"]
    assert change.desired is not None
    return ET.fromstring(change.desired.xml)


def test_vm_boots_the_guest_kernel_on_the_bridge(tmp_path: Path) -> None:
    root = planned_xml(tmp_path, vm_manifest("rtest-guest-x", ip="198.18.7.2/24", http=False), BRIDGE)
    assert root.get("type") == "qemu"
    assert root.findtext("os/kernel") == str(tmp_path / "image" / "vmlinuz")
    assert root.findtext("os/initrd") == str(tmp_path / "image" / "initrd.img")
    cmdline = root.findtext("os/cmdline", "").split()
    assert {"quiet", "rtest.name=rtest-guest-x", "rtest.ip=198.18.7.2/24", "rtest.http=0"} <= set(cmdline)
    assert not {"rtest.agent=0", "rtest.tcp=0", "rtest.healthy=0"} & set(cmdline)
    assert [t.get("name") for t in root.iterfind("devices/channel/target")] == ["org.qemu.guest_agent.0"]
    (iface,) = root.iterfind("devices/interface")
    assert (iface.get("type"), iface.find("source").get("bridge")) == ("bridge", "eth1")  # type: ignore[union-attr]


def test_vm_without_address_has_no_interface(tmp_path: Path) -> None:
    root = planned_xml(tmp_path, vm_manifest("rtest-guest-x", agent=False), None)
    assert root.findall("devices/interface") == []
    assert "rtest.agent=0" in root.findtext("os/cmdline", "").split()


def test_pool_replicas_ask_for_a_lease(tmp_path: Path) -> None:
    image = tmp_path / "image"
    image.mkdir()
    for f in ("vmlinuz", "initrd.img"):
        (image / f).write_bytes(b"x")
    repo = tmp_path / "repo"
    (repo / "vms").mkdir(parents=True)
    (repo / "vms" / "pool.yaml").write_text(yaml.safe_dump(pool_manifest("rtest-guest-pool", 2, ip="dhcp")))
    snap = SourceSnapshot(repo=str(repo), ref="HEAD", commit="e" * 40, files=DirView(str(repo)))
    target = HostTarget("test:///default", host_config(image, repo, BRIDGE), PlanPolicy(host="h1"))
    with Hypervisor("test:///default") as hv:
        plan, status = reconcile_once(snap, "vms", target, hv, dry_run=True)
    assert not plan.errors, status.message
    xmls = {c.name: ET.fromstring(c.desired.xml) for c in plan.changes if c.desired is not None}
    assert sorted(xmls) == ["rtest-guest-pool-0", "rtest-guest-pool-1"]
    for root in xmls.values():
        assert "rtest.ip=dhcp" in root.findtext("os/cmdline", "").split()
