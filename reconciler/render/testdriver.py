"""A host of ``domainType: test``: the domain as libvirt's test driver keeps its own.

Input: the drafted ``<domain type="test">`` element. Output: the same element, fitted in
place. libvirt's test driver (``test:///default``) is a simulation with one fake
emulator: its guests are i686 ``hvm`` with no machine type, no emulator binary, no
PCI topology and no device back-ends, and the domains it ships (``test``) say none of
them. A host config that names ``domainType: test`` renders what that driver keeps,
so that its own domains import and plan with no change (``reconciler import`` on a
fresh machine, where ``test:///default`` is the default host); any other domain type
is rendered as it always was. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

TEST_DOMAIN_TYPE = "test"
TEST_ARCH = "i686"  # the test driver's only guest architecture (its capabilities)
# What the test driver has no notion of: (parent path, child tag).
_DROPPED = (
    ("devices", "emulator"),
    ("devices/disk", "driver"),
    ("devices/interface", "model"),
    ("devices/interface", "rom"),
)


def fit_test_driver(domain: ET.Element) -> None:
    """Fit a drafted ``<domain type="test">`` to what libvirt's test driver keeps."""
    os_type = domain.find("os/type")
    if os_type is not None:
        os_type.set("arch", TEST_ARCH)
        os_type.attrib.pop("machine", None)
    for parent_path, tag in _DROPPED:
        for parent in domain.findall(parent_path):
            for child in parent.findall(tag):
                parent.remove(child)
    devices = domain.find("devices")
    if devices is not None:
        for ctl in devices.findall("controller"):
            if ctl.get("type") == "pci" and ctl.get("model") == "pcie-root-port":
                devices.remove(ctl)
