"""The domain XML a daemon keeps packed (``model.packed``, ``RenderedDomain.packed``).

Covers: packing gives back the very text (ASCII, non-ASCII, empty, a domain far from the
dictionary), deterministically and a third of its size or less for a small domain; a
packed record reads as the same XML and is packed once; a plan of packed domains equals
the plan of the same domains as text, and the compare cache finds a packed domain's
comparison without parsing again (a hit per domain on the second plan).
"""

from __future__ import annotations

from reconciler.compare.cache import CompareCache
from reconciler.model import PowerState
from reconciler.model.packed import pack_xml, unpack_xml
from reconciler.plan.build import build_plan
from reconciler.settings.policy import PlanPolicy
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
