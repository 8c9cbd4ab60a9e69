"""Field diff and change classes (DESIGN §5), with no host.

Covers:
- each live-class change: title / description / metadata, memory and vCPUs within
  the maximum, virtio / scsi disk and interface hotplug and unplug, cdrom media,
  interface link state;
- restart-class changes: a maximum raised above the running one, machine type,
  clock, a disk's source, a non-hotpluggable (sata) disk, non-owned device kinds;
- libvirt defaults on the live side are no change; extra owned devices are removals;
- running_diff: the operations for a running domain (ordered detach, update,
  attach), balloon actual ignored, maxima at or below the running one met;
- memory_op; the change-class table's rows; diff_domains(old, new) between two
  desired renderings (what PR CI does); many missing fields are each their own change.
"""

from __future__ import annotations

import pytest

from reconciler.compare.changes import LIVE_RULES, classify, diff_essences, memory_op, running_diff
from reconciler.compare.essence import essence
from reconciler.model.changes import ChangeClass, LiveOp, LiveOpKind
from tests.helpers.domains import diff_domains

LIVE = ChangeClass.LIVE
RESTART = ChangeClass.RESTART


def dom(
    *,
    memory: int = 128,
    current: int | None = None,
    vcpus: int = 2,
    max_vcpus: int = 4,
    machine: str = "q35",
    clock: str = "utc",
    title: str = "",
    devices: str = "",
    metadata: str = "",
) -> str:
    cur = current if current is not None else memory
    t = f"<title>{title}</title>" if title else ""
    md = f"<metadata>{metadata}</metadata>" if metadata else ""
    return (
        f"<domain type='kvm'><name>vm</name>{t}{md}<memory unit='MiB'>{memory}</memory>"
        f"<currentMemory unit='MiB'>{cur}</currentMemory><vcpu current='{vcpus}'>{max_vcpus}</vcpu>"
        f"<os><type arch='x86_64' machine='{machine}'>hvm</type></os><clock offset='{clock}'/>"
        f"<devices>{devices}</devices></domain>"
    )


def disk(dev: str, bus: str = "virtio", source: str = "/d/a.qcow2", device: str = "disk") -> str:
    src = f"<source file='{source}'/>" if source else ""
    return f"<disk type='file' device='{device}'>{src}<target dev='{dev}' bus='{bus}'/></disk>"


def nic(mac: str, link: str = "") -> str:
    lk = f"<link state='{link}'/>" if link else ""
    return f"<interface type='network'><mac address='{mac}'/><source network='default'/>{lk}</interface>"


def classes(desired: str, live: str) -> dict[str, ChangeClass]:
    return {f.path: f.change_class for f in diff_domains(desired, live)}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(dom(), dom(title="web"), {"title": LIVE}, id="title"),
        pytest.param(
            dom(metadata="<app:x xmlns:app='urn:app'>1</app:x>"),
            dom(metadata="<app:x xmlns:app='urn:app'>2</app:x>"),
            {"metadata/{urn:app}x": LIVE},
            id="metadata",
        ),
        pytest.param(dom(), dom(current=96), {"currentMemory": LIVE}, id="balloon-within-max"),
        pytest.param(
            dom(memory=512, current=128),
            dom(memory=512, current=384),
            {"currentMemory": LIVE},
            id="balloon-up-within-max",
        ),
        pytest.param(
            dom(memory=512, current=128),
            dom(memory=512, current=640),
            {"currentMemory": RESTART},
            id="balloon-above-max",
        ),
        pytest.param(dom(), dom(memory=96), {"memory": LIVE, "currentMemory": LIVE}, id="memory-down"),
        pytest.param(
            dom(), dom(memory=256), {"memory": RESTART, "currentMemory": RESTART}, id="memory-above-max"
        ),
        pytest.param(dom(), dom(vcpus=3), {"vcpu@current": LIVE}, id="vcpus-within-max"),
        pytest.param(
            dom(), dom(vcpus=6, max_vcpus=6), {"vcpu": RESTART, "vcpu@current": RESTART}, id="vcpu-max-up"
        ),
        pytest.param(dom(), dom(machine="pc-i440fx-9.0"), {"os/type@machine": RESTART}, id="machine"),
        pytest.param(dom(), dom(clock="localtime"), {"clock@offset": RESTART}, id="clock"),
        pytest.param(dom(), dom(devices=disk("vdb")), {"devices/disk[vdb]": LIVE}, id="virtio-disk-hotplug"),
        pytest.param(dom(devices=disk("vdb")), dom(), {"devices/disk[vdb]": LIVE}, id="virtio-disk-unplug"),
        pytest.param(
            dom(), dom(devices=disk("sdb", "scsi")), {"devices/disk[sdb]": LIVE}, id="scsi-disk-hotplug"
        ),
        pytest.param(dom(), dom(devices=disk("sda", "sata")), {"devices/disk[sda]": RESTART}, id="sata-disk"),
        pytest.param(
            dom(devices=disk("vda", "virtio")),
            dom(devices=disk("sda", "sata")),
            {"devices/disk[vda]": LIVE, "devices/disk[sda]": RESTART},
            id="bus-change",
        ),
        pytest.param(
            dom(devices=disk("vda")),
            dom(devices=disk("vda", source="/d/b.qcow2")),
            {"devices/disk[vda]/source@file": RESTART},
            id="disk-source",
        ),
        pytest.param(
            dom(devices=disk("sdc", "sata", "/iso/a.iso", "cdrom")),
            dom(devices=disk("sdc", "sata", "/iso/b.iso", "cdrom")),
            {"devices/disk[sdc]/source@file": LIVE},
            id="cdrom-media",
        ),
        pytest.param(
            dom(devices=disk("sdc", "sata", "", "cdrom")),
            dom(devices=disk("sdc", "sata", "/iso/b.iso", "cdrom")),
            {"devices/disk[sdc]/source@file": LIVE},
            id="cdrom-insert",
        ),
        pytest.param(
            dom(),
            dom(devices=nic("52:54:00:00:00:02")),
            {"devices/interface[52:54:00:00:00:02]": LIVE},
            id="nic-hotplug",
        ),
        pytest.param(
            dom(devices=nic("52:54:00:00:00:02")),
            dom(devices=nic("52:54:00:00:00:02", "down")),
            {"devices/interface[52:54:00:00:00:02]/link@state": LIVE},
            id="link-state",
        ),
        pytest.param(
            dom(),
            dom(devices="<rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>"),
            {"devices/rng": RESTART},
            id="rng-added",
        ),
        pytest.param(
            dom(devices="<watchdog model='i6300esb'/>"),
            dom(),
            {"devices/watchdog": RESTART},
            id="watchdog-removed",
        ),
    ],
)
def test_change_classes(old: str, new: str, expected: dict[str, ChangeClass]) -> None:
    assert classes(new, old) == expected


def test_libvirt_defaults_on_the_live_side_are_no_change() -> None:
    desired = dom(devices=disk("vda"))
    live = desired.replace(
        "<clock offset='utc'/>", "<clock offset='utc'/><on_crash>destroy</on_crash>"
    ).replace(
        "</devices>",
        "<controller type='usb' index='0'/><memballoon model='virtio'/><input type='mouse' bus='ps2'/></devices>",
    )
    assert diff_domains(desired, live) == ()


def test_removed_and_added_device_values() -> None:
    (f,) = diff_domains(dom(), dom(devices=disk("vdb", source="/d/x.qcow2")))
    assert f.old is not None
    assert "source@file=/d/x.qcow2" in f.old
    assert f.new is None


def test_running_diff_operations() -> None:
    desired = essence(
        dom(
            vcpus=3,
            title="new",
            devices=disk("vdb") + disk("sdc", "sata", "/iso/b.iso", "cdrom") + nic("52:54:00:00:00:03"),
        )
    )
    running = essence(
        dom(
            current=64,
            devices=disk("vdc") + disk("sdc", "sata", "/iso/a.iso", "cdrom") + nic("52:54:00:00:00:03"),
        )
    )
    rd = running_diff(desired, running)
    assert rd.restart == ()
    assert list(rd.ops) == [
        LiveOp(LiveOpKind.DETACH, "disk[vdc]"),
        LiveOp(LiveOpKind.UPDATE, "disk[sdc]"),
        LiveOp(LiveOpKind.ATTACH, "disk[vdb]"),
        LiveOp(LiveOpKind.SET_METADATA, "title", "new"),
        LiveOp(LiveOpKind.SET_VCPUS, "", "3"),
    ]
    assert "currentMemory" not in {f.path for f in rd.live}  # the balloon's actual size is the guest's


def test_running_diff_restart_and_met_maxima() -> None:
    running = essence(dom(memory=256, max_vcpus=8))
    # A lower maximum than the running one is met; the clock is not.
    rd = running_diff(essence(dom(memory=128, max_vcpus=4, clock="localtime")), running)
    assert [f.path for f in rd.restart] == ["clock@offset"]
    assert rd.ops == ()


def test_memory_op() -> None:
    desired = essence(dom(memory=96))
    fields = diff_domains(dom(memory=96), dom())
    assert memory_op(fields, desired, essence(dom())) == LiveOp(LiveOpKind.SET_MEMORY, "", str(96 * 1024))
    assert memory_op((), desired, essence(dom())) is None
    assert memory_op(fields, essence(dom(memory=512)), essence(dom())) is None  # above the running maximum


def test_change_class_table_rows() -> None:
    """Every row of the table covers its field; a field no row covers is restart-class."""
    base = essence(dom())
    covered = {
        "title": essence(dom(title="t")),
        "currentMemory": essence(dom(memory=96)),
        "devices/disk[vdb]": essence(dom(devices=disk("vdb"))),
    }
    for path, desired in covered.items():
        assert classify(path, desired, base) == LIVE, path
    assert classify("os/type@machine", base, base) == RESTART
    assert len({rule.what for rule in LIVE_RULES}) == len(LIVE_RULES)


def test_running_diff_sets_the_balloon_from_the_definition_change() -> None:
    running = essence(dom())
    desired = essence(dom(memory=96))
    defined = diff_domains(dom(memory=96), dom())
    assert running_diff(desired, running, defined).ops == (LiveOp(LiveOpKind.SET_MEMORY, "", str(96 * 1024)),)
    assert running_diff(desired, running).ops == ()


def test_diff_between_two_renderings_is_symmetric_in_classes() -> None:
    a, b = dom(), dom(devices=disk("vdb"))
    assert classes(b, a) == classes(a, b) == {"devices/disk[vdb]": LIVE}


def test_many_fields_the_live_domain_lacks_are_each_their_own_change() -> None:
    """A domain defined with far less than the render writes (a bare domain adopted): each
    field is one change with its value, never the whole document as one ``root``."""
    live = {"name": "web", "memory": "65536"}
    desired = {
        **live,
        **{f"devices/controller[pci:{i}]@index": str(i) for i in range(1, 8)},
        "os/type@machine": "q35",
    }
    fields = diff_essences(desired, live)
    assert [f.path for f in fields] == sorted(p for p in desired if p not in live)
    assert all(f.old is None and f.new == desired[f.path] for f in fields)
