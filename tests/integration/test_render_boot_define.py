"""Every golden domain is accepted by real libvirt (qemu:///system), not only by the schema.

Covers: each ``tests/data/render/<case>/domain.xml``, renamed ``rtest-render-golden-<case>``
(UUID dropped so cases cannot clash with running tests), is defined and read back
by the QEMU driver, which checks far more than ``virt-xml-validate`` (format and
device combinations, firmware, features), then undefined with its NVRAM. A case
using what this host's facts say it lacks (the passt backend) is refused by libvirt
for exactly that reason, which is what the plan's host-facts check predicts.
"""

from __future__ import annotations

import re
from pathlib import Path

import libvirt
import pytest

from reconciler.host.hypervisor import Hypervisor

DATA = Path(__file__).resolve().parents[1] / "data" / "render"
CASES = sorted(p.parent for p in DATA.glob("*/domain.xml"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden_domain_defines(qemu_uri: str, case: Path) -> None:
    name = f"rtest-render-golden-{case.name}"
    xml = re.sub(r"<name>[^<]*</name>", f"<name>{name}</name>", (case / "domain.xml").read_text(), count=1)
    xml = re.sub(r"\s*<uuid>[^<]*</uuid>", "", xml, count=1)
    with Hypervisor(qemu_uri) as hv:
        passt = hv.host_facts().passt
    conn = libvirt.open(qemu_uri)
    try:
        if '<backend type="passt"' in xml and not passt:
            with pytest.raises(libvirt.libvirtError, match="passt"):
                conn.defineXML(xml)
            return
        dom = conn.defineXML(xml)
        try:
            assert dom.name() == name
            assert "<devices>" in dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        finally:
            dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
    finally:
        conn.close()
