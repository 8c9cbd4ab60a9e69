"""The domain XML serializer (``reconciler.render.xml``).

Covers: fixed element order of ``<domain>`` and ``<devices>`` children whatever the
build order (devices of one kind keep their order); text and attribute escaping
round-trips through an XML parser; an element without a place in the order is a
programming error, not silently moved; user text from the VM (disk serials) is
escaped in the rendered domain; the check for characters XML cannot carry answers as
its regular expression does, for every ASCII character and beyond.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from reconciler.model import ExpandedVM, Manifest
from reconciler.render import XML_INVALID, HostCaps, _xml_invalid, render_domain
from reconciler.render.xml import serialize, sub
from reconciler.settings.host import HostConfig


def test_fixed_order_and_stable_device_order() -> None:
    dom = ET.Element("domain", {"type": "kvm"})
    devices = sub(dom, "devices")
    sub(devices, "interface", type="user")
    sub(devices, "disk", device="disk", type="file").set("n", "1")
    sub(devices, "emulator", "/usr/bin/qemu")
    sub(devices, "disk", device="cdrom", type="file").set("n", "2")
    sub(dom, "os")
    sub(dom, "memory", "1", unit="b")
    sub(dom, "name", "x")
    text = serialize(dom)
    assert [c.tag for c in ET.fromstring(text)] == ["name", "memory", "os", "devices"]
    assert [(c.tag, c.get("n")) for c in ET.fromstring(text).find("devices")] == [  # type: ignore[union-attr]
        ("emulator", None),
        ("disk", "1"),
        ("disk", "2"),
        ("interface", None),
    ]
    assert text.startswith('<domain type="kvm">\n  <name>x</name>\n')
    assert text.endswith("</domain>\n")


def test_escaping_round_trips() -> None:
    dom = ET.Element("domain")
    sub(dom, "name", 'a<b>&"c"')
    sub(dom, "description", None, note='x"y<z>&\n\tw')
    parsed = ET.fromstring(serialize(dom))
    assert parsed.findtext("name") == 'a<b>&"c"'
    assert parsed.find("description").get("note") == 'x"y<z>&\n\tw'  # type: ignore[union-attr]


def test_unknown_element_is_refused() -> None:
    dom = ET.Element("domain")
    sub(dom, "mystery")
    with pytest.raises(ValueError, match="<mystery> has no place"):
        serialize(dom)


def test_user_text_is_escaped_in_the_domain() -> None:
    vm = {
        "metadata": {"name": "esc"},
        "spec": {
            "template": {
                "spec": {
                    "domain": {
                        "memory": {"guest": "1Gi"},
                        "devices": {
                            "disks": [{"name": "d", "serial": "</serial><disk>&", "disk": {"bus": "virtio"}}]
                        },
                    },
                    "volumes": [{"name": "d", "emptyDisk": {"capacity": "1Gi"}}],
                }
            }
        },
    }
    xml = render_domain(
        ExpandedVM(vm=vm, source=Manifest(vm, "vms/esc.yaml", 1)), HostConfig(), HostCaps.default()
    ).xml
    assert ET.fromstring(xml).findtext("devices/disk/serial") == "</serial><disk>&"
    assert len(ET.fromstring(xml).findall("devices/disk")) == 1


@pytest.mark.parametrize(
    "char",
    [chr(c) for c in range(128)] + ["\u00e9", "\u2028", "\ud800", "\udfff", "\ufffe", "\uffff", "\U0001f600"],
)
def test_xml_invalid_answers_as_its_expression(char: str) -> None:
    text = f'<domain type="kvm">\n  <name>a{char}b</name>\n</domain>\n'
    assert _xml_invalid(text) == (XML_INVALID.search(text) is not None)
