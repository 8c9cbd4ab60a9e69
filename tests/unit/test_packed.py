"""The rendered domains a daemon keeps packed (``model.packed``, ``RenderedDomain.packed``).

Covers: packing gives back the very text (ASCII, non-ASCII, empty, a domain far from the
dictionary), deterministically and a third of its size or less for a small domain; a
packed record reads as the same XML and is packed once; every field of a packed record
reads as the record's own (those in its blob too: volumes, warnings, derived MACs, ...),
a Secret its volumes hold is the very object (never pickled), what a plan reads of its
volumes (ephemeral paths, images, sizes made) is the same as read from the volumes, and
equal revisions are shared by the records packed together; a name no field has is an
``AttributeError``; each field is kept or packed; a plan of packed domains in sync
(and its status rows) reads nothing packed once their comparisons are cached; a plan of packed domains equals the plan of the same domains as text
(disks not resized warned of alike), and the compare cache finds a packed domain's
comparison without parsing again (a hit per domain on the second plan).
"""

from __future__ import annotations

import dataclasses
import sys

import pytest

from reconciler import model, ownership
from reconciler.compare.cache import CompareCache
from reconciler.model import (
    ConfigDigest,
    PowerState,
    Problem,
    RenderedDomain,
    RevisionInfo,
    Rollout,
    VolumeSpec,
)
from reconciler.model import packed as packing
from reconciler.model.changes import Action
from reconciler.model.packed import COLD, HOT, SIZED_KINDS, pack_xml, unpack_xml
from reconciler.model.secretdata import SecretData
from reconciler.ownership import inventory
from reconciler.plan.build import build_plan
from reconciler.settings.policy import PlanPolicy
from reconciler.status import vm_statuses
from tests.helpers.plans import REV, live_of, rendered

DOMAIN = """<domain type="kvm">
  <name>web-0</name>
  <uuid>c2c7bf5c-6264-55e7-a437-0bd70222dc61</uuid>
  <title>Café ☕ — 東京</title>
  <memory unit="b">2147483648</memory>
  <vcpu placement="static">2</vcpu>
  <os>
    <type arch="x86_64" machine="q35">hvm</type>
  </os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type="file" device="disk">
      <driver name="qemu" type="qcow2" />
      <source file="/var/lib/reconciler/images/web-0-root.qcow2" />
      <target dev="vda" bus="virtio" />
    </disk>
    <interface type="network">
      <mac address="02:1f:d0:03:e7:bd" />
      <source network="default" />
      <model type="virtio" />
    </interface>
  </devices>
</domain>
"""


def test_packing_gives_back_the_very_text() -> None:
    far = "<domain>" + "".join(f"<x n='{i * 7919 % 10007}'/>" for i in range(3000)) + "</domain>"
    for text in (DOMAIN, "", "<domain/>", far):
        packed = pack_xml(text)
        assert unpack_xml(packed) == text
        assert pack_xml(text) == packed  # deterministic: the packed form is a key
    assert len(pack_xml(DOMAIN)) * 3 < len(DOMAIN.encode())


def test_a_packed_record_reads_as_its_xml() -> None:
    d = rendered("web-0", DOMAIN)
    p = d.packed()
    assert isinstance(p.xml_data, bytes)
    assert p.xml == d.xml == DOMAIN
    assert p.packed() is p
    assert p != d  # the records differ in what they hold, not in what they say
    assert (p.spec_hash, p.name, p.key) == (d.spec_hash, d.name, d.key)


SECRET = SecretData({"default/db": (("password", b"never-pickled"),)})
VOLUMES = (
    VolumeSpec("file", "/var/lib/reconciler/images/web-0-root.qcow2", 10 << 30),
    VolumeSpec("pool-volume", "web-0-data", 1 << 30, pool="default"),
    VolumeSpec("file", "/srv/web-0-scratch.qcow2", 1 << 30, must_exist=True),
    VolumeSpec(
        "overlay",
        "/var/lib/reconciler/images/web-0-os.qcow2",
        backing="/img/os.qcow2",
        image="registry.example/os:1",
        digest="sha256:" + "a" * 64,
        ephemeral=True,
    ),
    VolumeSpec(
        "cloudinit-iso",
        "/var/lib/reconciler/volumes/web-0/cloudinit.iso",
        format="raw",
        content=b'{"files":{}}',
        ephemeral=True,
        secrets=SECRET,
    ),
)
REVISIONS = (RevisionInfo("VirtualMachineClusterInstancetype", "u1.nano", hash="1" * 64, data="{}"),)


def _full(name: str = "web-0") -> RenderedDomain:
    return rendered(
        name,
        DOMAIN.replace("web-0", name),
        volumes=VOLUMES,
        rollout=Rollout.RESTART,
        revisions=REVISIONS,
        warnings=(Problem("a warning"),),
        macs=(("02:1f:d0:03:e7:bd", "spec.template.spec.domain.devices.interfaces[0].macAddress"),),
        derived_macs=(("02:1f:d0:03:e7:bd", "default"),),
        config=(ConfigDigest("cloudinit", "", "sha256:" + "b" * 64),),
        passthrough=("devices.watchdog",),
        restart_now=True,
    )


def test_a_packed_record_reads_as_its_fields() -> None:
    d = _full()
    same: dict[object, object] = {}
    p = d.packed(same)
    assert p.packed() is p
    for f in dataclasses.fields(d):
        if f.name != "xml_data" and f.compare:
            assert getattr(p, f.name) == getattr(d, f.name), f.name
    assert [v.secrets for v in p.volumes][-1] is SECRET  # held by reference, never pickled
    assert {*HOT, *COLD, "xml_data"} == {f.name for f in dataclasses.fields(d) if f.init or f.name == "name"}
    assert (
        (p.ephemeral_paths, p.images)
        == (d.ephemeral_paths, d.images)
        == (
            (VOLUMES[3].path, VOLUMES[4].path),
            (("registry.example/os:1", "sha256:" + "a" * 64),),
        )
    )
    made = ((VOLUMES[0].path, 10 << 30), ("web-0-data", 1 << 30))
    assert p.sizes_made(made)
    assert d.sizes_made(made)
    assert not p.sizes_made(made[:1])
    assert not d.sizes_made(made[:1])
    assert inventory.created_sizes(d, None) == made
    assert SIZED_KINDS == inventory.SIZED_KINDS
    assert ownership.mark_for(p, REV) == ownership.mark_for(d, REV)
    other = _full("web-1").packed(same)
    assert other.revisions is p.revisions  # shared by the records packed together
    with pytest.raises(AttributeError):
        p.no_such_field  # type: ignore[attr-defined]  # noqa: B018
    assert dataclasses.replace(p, adopt=True).volumes == d.volumes  # a record made from it whole


def test_a_disk_not_resized_is_warned_of_alike_when_packed() -> None:
    d = _full()
    p = d.packed()
    mark = dataclasses.replace(ownership.mark_for(d, REV), volumes=((VOLUMES[0].path, 5 << 30),))
    live = live_of(d, mark=mark)
    policy = PlanPolicy()
    want = build_plan(REV, [d], [live], policy).warnings
    assert want
    assert build_plan(REV, [p], [live], policy).warnings == want


def test_packed_domains_plan_as_their_text_and_hit_the_compare_cache() -> None:
    text = [rendered(f"vm-{i}", DOMAIN.replace("web-0", f"vm-{i}")) for i in range(3)]
    live = [
        live_of(text[0]),
        live_of(text[1], persistent=text[1].xml.replace('unit="b">2147483648', 'unit="b">1073741824')),
        live_of(text[2], state=PowerState.SHUTOFF),
    ]
    packed = [d.packed() for d in text]
    policy = PlanPolicy()
    want = build_plan(REV, text, live, policy, cache=CompareCache())
    cache = CompareCache()
    first = build_plan(REV, packed, live, policy, cache=cache)
    assert [(c.name, c.action, c.fields) for c in first.changes] == [
        (c.name, c.action, c.fields) for c in want.changes
    ]
    assert [c.definition.xml if c.definition else None for c in first.changes] == [
        c.definition.xml if c.definition else None for c in want.changes
    ]
    hits = cache.hits
    again = build_plan(REV, packed, live, policy, cache=cache)
    assert cache.hits - hits == 3  # every comparison found: nothing parsed again
    assert [(c.name, c.action, c.fields) for c in again.changes] == [
        (c.name, c.action, c.fields) for c in first.changes
    ]


def test_a_plan_of_domains_in_sync_unpacks_nothing_once_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    packed = [_full(f"vm-{i}").packed() for i in range(3)]
    live = [live_of(d) for d in packed]
    cache = CompareCache()
    first = build_plan(REV, packed, live, PlanPolicy(), cache=cache)  # compared: the XML read
    read: list[str] = []

    def unpack_xml(data: bytes) -> str:
        read.append("xml")
        return packing.unpack_xml(data)

    def cold_field(d: RenderedDomain, name: str, volume: type[VolumeSpec]) -> object:
        read.append(name)
        return packing.cold_field(d, name, volume)

    monkeypatch.setattr(model, "unpack_xml", unpack_xml)  # as the records call them
    monkeypatch.setattr(model, "cold_field", cold_field)
    again = build_plan(REV, packed, live, PlanPolicy(), cache=cache)
    rows = vm_statuses(again, (), live, "host")
    assert [c.action for c in again.changes] == [c.action for c in first.changes] == [Action.UNCHANGED] * 3
    assert [r.images for r in rows] == [(("registry.example/os:1", "sha256:" + "a" * 64),)] * 3
    assert read == []  # what the plan and the rows read of a domain in sync is kept as it is
    assert packed[0].volumes == VOLUMES  # (read back where read at all)
    assert read == ["volumes"]


def test_the_ephemeral_paths_a_mark_reads_back_are_the_packed_records_own() -> None:
    """The one path a packed record keeps and the mark read back holds too is one object;
    the paths of the other volumes rest in the blob only, so the mark's copy is its own and
    no interned string (CPython's table of them never shrinks)."""
    p = _full().packed({})
    mark = inventory.read_mark(ownership.with_mark(DOMAIN, ownership.mark_for(p, REV)))
    assert mark is not None
    assert mark.ephemeral == p.ephemeral_paths
    assert all(a is b for a, b in zip(mark.ephemeral, p.ephemeral_paths, strict=True))
    root = "".join(["/var/lib/reconciler/images/", "web-0-root.qcow2"])  # a fresh copy of the path
    assert mark.volumes[0][0] == root
    assert sys.intern(root) is root  # interned by this call: neither the mark nor the record holds it so
