"""One descriptor per libvirt device kind (``reconciler.model.devices``), and the
tables derived from it.

Covers: each derived table equals the one the stages kept before the descriptors
(render's order of ``<devices>``, the owned and implicit kinds, the identity of a
device, which kinds hotplug and which device fields change live, the plan's KubeVirt
field for a libvirt path, where a preference sets it); every rendered kind is
written by the module its descriptor names; every host fact a descriptor names is
a field of ``HostFacts``; docs/mapping.md's device table is the one the descriptors
give.
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reconciler.compare import provenance
from reconciler.compare.changes import LIVE_RULES, classify, hotpluggable
from reconciler.compare.essence import device_roots, essence
from reconciler.hostfacts.facts import HostFacts
from reconciler.model import devices as dev
from reconciler.model.changes import ChangeClass

ROOT = Path(__file__).resolve().parents[2]

# The tables as the stages kept them before the descriptors.
OLD_DEVICES_ORDER = (
    "emulator",
    "disk",
    "controller",
    "interface",
    "serial",
    "console",
    "channel",
    "input",
    "tpm",
    "graphics",
    "sound",
    "video",
    "hostdev",
    "watchdog",
    "memballoon",
    "rng",
    "panic",
    "vsock",
)
OLD_OWNED = {
    "disk",
    "interface",
    "hostdev",
    "filesystem",
    "rng",
    "watchdog",
    "tpm",
    "graphics",
    "sound",
    "redirdev",
    "smartcard",
    "vsock",
    "shmem",
}
OLD_IMPLICIT = {"controller", "memballoon"}
OLD_PROVENANCE = (
    (r"^devices/disk\[(?P<x>[^\]]+)\]", "devices.disks ({x})"),
    (r"^devices/interface\[(?P<x>[^\]]+)\]", "devices.interfaces ({x})"),
    (r"^devices/tpm", "devices.tpm"),
    (r"^devices/rng", "devices.rng"),
    (r"^devices/watchdog", "devices.watchdog"),
    (r"^devices/(graphics|video)", "devices.autoattachGraphicsDevice"),
    (r"^devices/(serial|console)", "devices.autoattachSerialConsole"),
    (r"^devices/input", "devices.inputs"),
    (r"^devices/memballoon", "devices.autoattachMemBalloon"),
    (r"^devices/channel", "guest agent channel"),
    (r"^devices/hostdev", "devices.hostDevices"),
)
OLD_PREFERENCE = {
    "devices.tpm": ("devices", "preferredTPM"),
    "devices.rng": ("devices", "preferredRng"),
    "devices.autoattachGraphicsDevice": ("devices", "preferredAutoattachGraphicsDevice"),
    "devices.autoattachSerialConsole": ("devices", "preferredAutoattachSerialConsole"),
    "devices.autoattachMemBalloon": ("devices", "preferredAutoattachMemBalloon"),
    "devices.inputs": ("devices", "preferredInputBus"),
}
OLD_PREFERENCE_PREFIX = {
    "devices.disks": ("devices", "preferredDiskBus"),
    "devices.interfaces": ("devices", "preferredInterfaceModel"),
}


def test_derived_tables_equal_the_stages_old_ones() -> None:
    assert dev.DEVICES_ORDER == OLD_DEVICES_ORDER
    assert dev.OWNED_DEVICES == OLD_OWNED
    assert dev.IMPLICIT_DEVICES == OLD_IMPLICIT
    assert {k: v for k, v in provenance._PREFERENCE.items() if k.startswith("devices.")} == OLD_PREFERENCE
    assert {
        k: v for k, v in provenance._PREFERENCE_PREFIX.items() if k.startswith("devices.")
    } == OLD_PREFERENCE_PREFIX


def _old_device_key(el: ET.Element, index: int, repeated: bool) -> str:
    tag = el.tag
    if tag == "disk":
        target = el.find("target")
        if target is not None and target.get("dev"):
            return f"disk[{target.get('dev')}]"
    elif tag == "interface":
        mac = el.find("mac")
        if mac is not None and mac.get("address"):
            return f"interface[{mac.get('address', '').lower()}]"
    elif tag == "controller":
        return f"controller[{el.get('type', '')}:{el.get('index', index)}]"
    elif tag == "input":
        return f"input[{el.get('type', '')}:{el.get('bus', '')}]"
    return f"{tag}[{index}]" if repeated else tag


DEVICES = """<devices>
  <emulator>/usr/bin/qemu-system-x86_64</emulator>
  <disk type="file" device="disk"><target dev="vda" bus="virtio"/></disk>
  <disk type="file" device="cdrom"><target bus="sata"/></disk>
  <controller type="pci" index="0" model="pcie-root"/>
  <controller type="usb"/>
  <interface type="network"><mac address="52:54:00:AB:CD:EF"/></interface>
  <interface type="user"/>
  <interface type="user"><mac/></interface>
  <serial type="pty"/>
  <console type="pty"/>
  <input type="tablet" bus="usb"/>
  <input type="mouse"/>
  <graphics type="vnc"/>
  <video><model type="vga"/></video>
  <hostdev mode="subsystem" type="pci"/>
  <hostdev mode="subsystem" type="usb"/>
  <memballoon model="virtio"/>
  <rng model="virtio"/>
  <audio id="1" type="none"/>
  <parallel type="pty"/>
</devices>"""


def test_device_identity_is_what_it_was() -> None:
    children = list(ET.fromstring(DEVICES))
    counts = {tag: sum(1 for c in children if c.tag == tag) for tag in {c.tag for c in children}}
    seen: dict[str, int] = {}
    for child in children:
        i = seen.get(child.tag, 0)
        seen[child.tag] = i + 1
        repeated = counts[child.tag] > 1
        assert dev.device_key(child, i, repeated) == _old_device_key(child, i, repeated)
    keys = [dev.device_key(c, 0, False) for c in children[:7]]
    assert keys[1:6] == [
        "disk[vda]",
        "disk",
        "controller[pci:0]",
        "controller[usb:0]",
        "interface[52:54:00:ab:cd:ef]",
    ]


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("devices/disk[vda]/source@file", "devices.disks (vda)"),
        ("devices/disk[vdb]", "devices.disks (vdb)"),
        ("devices/disk/target@bus", "domain (devices/disk/target@bus)"),
        ("devices/interface[52:54:00:00:00:01]/model@type", "devices.interfaces (52:54:00:00:00:01)"),
        ("devices/tpm/backend@version", "devices.tpm"),
        ("devices/tpm", "devices.tpm"),
        ("devices/rng@model", "devices.rng"),
        ("devices/watchdog@action", "devices.watchdog"),
        ("devices/graphics@type", "devices.autoattachGraphicsDevice"),
        ("devices/video/model@type", "devices.autoattachGraphicsDevice"),
        ("devices/serial[0]@type", "devices.autoattachSerialConsole"),
        ("devices/console@type", "devices.autoattachSerialConsole"),
        ("devices/input[tablet:usb]@bus", "devices.inputs"),
        ("devices/memballoon@model", "devices.autoattachMemBalloon"),
        ("devices/channel/target@name", "guest agent channel"),
        ("devices/hostdev[1]/source/address@bus", "devices.hostDevices"),
        ("devices/sound@model", "domain (devices/sound@model)"),
        ("devices/vsock/cid@auto", "domain (devices/vsock/cid@auto)"),
        ("devices/controller[scsi:0]@model", "domain (devices/controller[scsi:0]@model)"),
        ("devices/panic@model", "domain (devices/panic@model)"),
        ("devices/emulator", "domain (devices/emulator)"),
    ],
)
def test_the_plan_names_a_device_field_as_before(path: str, field: str) -> None:
    old = next(
        (name.format(**m.groupdict()) for rx, name in OLD_PROVENANCE if (m := re.match(rx, path))),
        f"domain ({path})",
    )
    assert provenance.kubevirt_field(path)[0] == old == field


def _disk(device: str, bus: str) -> dict[str, str]:
    return {"devices/disk[sdb]": "", "devices/disk[sdb]@device": device, "devices/disk[sdb]/target@bus": bus}


@pytest.mark.parametrize(
    ("ess", "root", "plugs"),
    [
        (_disk("disk", "virtio"), "devices/disk[sdb]", True),
        (_disk("disk", "scsi"), "devices/disk[sdb]", True),
        (_disk("cdrom", "usb"), "devices/disk[sdb]", True),
        (_disk("disk", "sata"), "devices/disk[sdb]", False),
        (_disk("floppy", "virtio"), "devices/disk[sdb]", False),
        ({}, "devices/interface[52:54:00:00:00:01]", True),
        ({}, "devices/hostdev[0]", False),
        ({}, "devices/rng", False),
        ({}, "devices/audio", False),  # a kind no descriptor knows
    ],
)
def test_which_devices_hotplug(ess: dict[str, str], root: str, plugs: bool) -> None:
    assert hotpluggable(ess, root) is plugs


@pytest.mark.parametrize(
    ("path", "desired", "live", "cls"),
    [
        ("devices/disk[sda]/source@file", {"devices/disk[sda]@device": "cdrom"}, {}, ChangeClass.LIVE),
        ("devices/disk[sda]/source@file", {}, {"devices/disk[sda]@device": "floppy"}, ChangeClass.LIVE),
        ("devices/disk[vda]/source@file", {"devices/disk[vda]@device": "disk"}, {}, ChangeClass.RESTART),
        ("devices/hostdev[0]/source/address@bus", {}, {}, ChangeClass.RESTART),
        ("devices/interface[52:54:00:00:00:01]/link@state", {}, {}, ChangeClass.LIVE),
        ("devices/interface[52:54:00:00:00:01]/model@type", {}, {}, ChangeClass.RESTART),
    ],
)
def test_device_fields_that_change_live(
    path: str, desired: dict[str, str], live: dict[str, str], cls: ChangeClass
) -> None:
    assert classify(path, desired, live) == cls


def test_the_change_class_table_names_each_row_once() -> None:
    names = [rule.what for rule in LIVE_RULES]
    assert len(set(names)) == len(names)
    assert "removable media (cdrom, floppy)" in names
    assert "interface link state" in names
    assert "device hotplug / unplug (disk on virtio, scsi, usb; interface)" in names


def test_an_extra_device_of_an_owned_kind_is_a_difference() -> None:
    ess = essence("<domain><devices><rng model='virtio'/><memballoon model='virtio'/></devices></domain>")
    assert "devices/rng@model" in ess
    assert device_roots(ess) == {"devices/rng"}


@pytest.mark.parametrize("kind", [k for k in dev.DEVICE_KINDS if k.rendered], ids=lambda k: k.element)
def test_a_rendered_kind_is_written_by_its_module(kind: dev.DeviceKind) -> None:
    source = (ROOT / "reconciler" / kind.module).read_text()
    assert re.search(rf'sub\((?:sub\()?devices, "{kind.element}"', source), kind.module


def test_host_facts_of_a_kind_are_host_facts() -> None:
    names = {f.name for f in dataclasses.fields(HostFacts)}
    for kind in dev.DEVICE_KINDS:
        assert set(kind.facts) <= names, kind.element


def test_docs_mapping_has_the_descriptors_device_table() -> None:
    """``python -m reconciler.model.devices`` prints the table; paste it between the markers."""
    text = (ROOT / "docs" / "mapping.md").read_text()
    start = text.index(dev.MAPPING_BEGIN)
    end = text.index(dev.MAPPING_END) + len(dev.MAPPING_END) + 1
    assert text[start:end] == dev.mapping_table()
