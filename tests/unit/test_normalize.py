"""The normaliser against real libvirt read-back XML, and its rules one by one.

Covers:
- captured QEMU fixtures (tests/data/normalize/*, see capture.py): desired XML equals
  libvirt's persistent and running read-back (addresses, aliases, defaults, units,
  machine alias, expanded host-model CPU, autoport, empty cdrom, NUMA units); the
  ``render-*`` cases are the render stage's golden domains defined on QEMU (sysinfo
  entries reordered, clock adjustment stored as offset='variable', the default
  tray dropped, ps2 inputs added ahead of the spec's);
- a captured hotplug: the new device is the only difference, at a live address;
- essence rules: memory units, MAC case, implied vcpu current / currentMemory,
  device identities (disk target, interface MAC, controller type:index);
- carry_addresses: live addresses copied into a redefinition, implicit controllers
  and balloon carried, a spec's own address kept, nothing across machine families;
- device_xml / device_addresses;
- properties: device order and memory units make no difference (hypothesis).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.compare import essence as normalize
from reconciler.compare.changes import running_diff
from reconciler.model.changes import ChangeClass
from tests.helpers.domains import diff_domains

DATA = Path(__file__).resolve().parents[1] / "data" / "normalize"
CASES = sorted(p.name for p in DATA.iterdir() if (p / "desired.xml").exists())


def read(case: str, name: str) -> str:
    return (DATA / case / name).read_text()


@pytest.mark.parametrize("case", CASES)
def test_desired_equals_persistent_read_back(case: str) -> None:
    assert diff_domains(read(case, "desired.xml"), read(case, "persistent.xml")) == ()


@pytest.mark.parametrize("case", [c for c in CASES if (DATA / c / "running.xml").exists()])
def test_desired_equals_running_read_back(case: str) -> None:
    desired = normalize.essence(read(case, "desired.xml"))
    running = normalize.essence(read(case, "running.xml"))
    assert running_diff(desired, running).empty
    assert "@id" not in running  # the running domain's id is not compared


def test_captured_hotplug_is_the_only_difference() -> None:
    before = read("i440fx-hotplug", "persistent.xml")
    after_desired = read("i440fx-hotplug", "hotplug.xml")
    changes = diff_domains(after_desired, before)
    assert [(c.path, c.change_class) for c in changes] == [("devices/disk[vdb]", ChangeClass.LIVE)]
    assert diff_domains(after_desired, read("i440fx-hotplug", "persistent-after.xml")) == ()
    running = normalize.essence(read("i440fx-hotplug", "running-after.xml"))
    assert running_diff(normalize.essence(after_desired), running).empty


def test_captured_hotplug_keeps_every_address() -> None:
    old = normalize.device_addresses(read("i440fx-hotplug", "persistent.xml"))
    new = normalize.device_addresses(read("i440fx-hotplug", "persistent-after.xml"))
    live = normalize.device_addresses(read("i440fx-hotplug", "running-after.xml"))
    assert old, "the fixture has addressed devices"
    for key, address in old.items():
        assert new[key] == address
        assert live[key] == address
    assert new["disk[vdb]"] == live["disk[vdb]"]
    assert new["disk[vdb]"] not in old.values()


def test_carry_addresses_matches_what_libvirt_kept() -> None:
    carried = normalize.carry_addresses(
        read("i440fx-hotplug", "hotplug.xml"), read("i440fx-hotplug", "persistent.xml")
    )
    got = normalize.device_addresses(carried)
    old = normalize.device_addresses(read("i440fx-hotplug", "persistent.xml"))
    assert {k: got[k] for k in old} == old
    assert "disk[vdb]" not in got  # new: libvirt picks its address at define time


MINIMAL = """<domain type='qemu'><name>n</name>{mem}<vcpu{cur}>4</vcpu>
<os><type arch='x86_64' machine='{machine}'>hvm</type></os><devices>{devices}</devices></domain>"""


def dom(
    mem: str = "<memory unit='MiB'>64</memory>", cur: str = "", machine: str = "pc", devices: str = ""
) -> str:
    return MINIMAL.format(mem=mem, cur=cur, machine=machine, devices=devices)


@pytest.mark.parametrize(
    ("mem", "kib"),
    [
        ("<memory unit='b'>67108864</memory>", "65536"),
        ("<memory unit='MiB'>64</memory>", "65536"),
        ("<memory>65536</memory>", "65536"),
        ("<memory unit='G'>1</memory>", "1048576"),
    ],
)
def test_memory_units_become_kib(mem: str, kib: str) -> None:
    ess = normalize.essence(dom(mem=mem))
    assert ess["memory"] == kib
    assert ess["currentMemory"] == kib  # implied: libvirt adds it on read-back
    assert "memory@unit" not in ess


def test_vcpu_current_is_implied() -> None:
    assert normalize.essence(dom())["vcpu@current"] == "4"
    assert normalize.essence(dom(cur=" current='2'"))["vcpu@current"] == "2"


def test_device_identities_and_volatile_children() -> None:
    devices = (
        "<disk type='file' device='disk'><source file='/a'/><target dev='vdb' bus='virtio'/>"
        "<alias name='virtio-disk1'/><address type='pci' domain='0x0000' bus='0x00' slot='0x05' function='0x0'/></disk>"
        "<interface type='user'><mac address='52:54:00:AB:CD:EF'/></interface>"
        "<controller type='usb' index='0' model='piix3-uhci'/>"
    )
    ess = normalize.essence(dom(devices=devices))
    assert ess["devices/disk[vdb]/source@file"] == "/a"
    assert ess["devices/interface[52:54:00:ab:cd:ef]/mac@address"] == "52:54:00:ab:cd:ef"
    assert ess["devices/controller[usb:0]@model"] == "piix3-uhci"
    assert not any("alias" in p or "address@" in p for p in ess if p.startswith("devices/disk"))


def test_same_value_machine_aliases() -> None:
    assert normalize.same_value("os/type@machine", "q35", "pc-q35-7.2")
    assert normalize.same_value("os/type@machine", "pc", "pc-i440fx-7.2")
    assert not normalize.same_value("os/type@machine", "q35", "pc-i440fx-7.2")
    assert not normalize.same_value("memory", "1", "2")


ADDR = "<address type='pci' domain='0x0000' bus='0x00' slot='{slot}' function='0x0'/>"


def test_carry_addresses_rules() -> None:
    live = dom(
        devices=(
            f"<interface type='user'><mac address='52:54:00:00:00:01'/>{ADDR.format(slot='0x03')}</interface>"
            f"<controller type='usb' index='0' model='piix3-uhci'><alias name='usb'/>{ADDR.format(slot='0x01')}</controller>"
            f"<memballoon model='virtio'>{ADDR.format(slot='0x04')}</memballoon>"
        )
    )
    desired = dom(
        devices=(
            "<disk type='file' device='disk'><source file='/a'/><target dev='vda' bus='virtio'/></disk>"
            "<interface type='user'><mac address='52:54:00:00:00:01'/></interface>"
            f"<interface type='user'><mac address='52:54:00:00:00:02'/>{ADDR.format(slot='0x09')}</interface>"
        )
    )
    got = normalize.device_addresses(normalize.carry_addresses(desired, live))
    assert got["interface[52:54:00:00:00:01]"].endswith("slot=0x03 type=pci")
    assert got["interface[52:54:00:00:00:02]"].endswith("slot=0x09 type=pci")  # the spec's own address
    assert got["controller[usb:0]"].endswith("slot=0x01 type=pci")  # implicit controller carried
    assert got["memballoon"].endswith("slot=0x04 type=pci")
    assert "disk[vda]" not in got
    assert "<alias" not in normalize.carry_addresses(desired, live)


def test_carry_addresses_not_across_machine_families() -> None:
    live = dom(
        machine="pc-i440fx-7.2",
        devices=f"<interface type='user'><mac address='52:54:00:00:00:01'/>{ADDR.format(slot='0x03')}</interface>",
    )
    desired = dom(
        machine="q35", devices="<interface type='user'><mac address='52:54:00:00:00:01'/></interface>"
    )
    assert normalize.carry_addresses(desired, live) == desired
    same_family = dom(
        machine="pc", devices="<interface type='user'><mac address='52:54:00:00:00:01'/></interface>"
    )
    assert "slot='0x03'" in normalize.carry_addresses(same_family, live).replace('"', "'")


def test_device_xml() -> None:
    running = read("i440fx-hotplug", "running-after.xml")
    xml = normalize.device_xml(running, "disk[vdb]")
    assert xml is not None
    assert "vdb" in xml
    assert "<address" in xml
    assert "<alias" not in xml
    assert normalize.device_xml(running, "disk[vdz]") is None


# -- properties -----------------------------------------------------------------------

_devices = st.lists(
    st.one_of(
        st.sampled_from("abcdefgh").map(
            lambda c: (
                f"<disk type='file' device='disk'><source file='/d/{c}'/><target dev='vd{c}' bus='virtio'/></disk>"
            )
        ),
        st.integers(1, 250).map(
            lambda n: (
                f"<interface type='user'><mac address='52:54:00:00:00:{n:02X}'/><model type='virtio'/></interface>"
            )
        ),
    ),
    unique=True,
    max_size=6,
)


@given(devices=_devices, seed=st.randoms(use_true_random=False))
def test_device_order_is_no_difference(devices: list[str], seed) -> None:  # type: ignore[no-untyped-def]
    shuffled = list(devices)
    seed.shuffle(shuffled)
    assert normalize.essence(dom(devices="".join(devices))) == normalize.essence(
        dom(devices="".join(shuffled))
    )
    assert diff_domains(dom(devices="".join(devices)), dom(devices="".join(shuffled))) == ()


@given(mib=st.integers(1, 1 << 20))
def test_memory_in_any_unit_is_the_same(mib: int) -> None:
    forms = [
        f"<memory unit='MiB'>{mib}</memory>",
        f"<memory unit='KiB'>{mib * 1024}</memory>",
        f"<memory unit='b'>{mib * 1024 * 1024}</memory>",
        f"<memory>{mib * 1024}</memory>",
    ]
    assert len({tuple(sorted(normalize.essence(dom(mem=f)).items())) for f in forms}) == 1
