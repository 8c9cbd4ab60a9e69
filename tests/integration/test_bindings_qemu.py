"""Network bindings as current KubeVirt writes them, booted on real libvirtd/QEMU (TCG).

Covers: the core ``passtBinding`` (libvirt's passt backend), the documented ``slirp``
binding plugin and a site-specific plugin the host config maps to its libvirt
equivalent, each on the pod network: rendered against the host's real capabilities,
defined, started, running, and the live domain carries the interface the binding
stands for (where libvirt has no passt backend, before 9.2, the passt domain is
refused for exactly that); the ``macvtap`` binding plugin on a multus network mapped to a host
interface is defined (not started: a macvtap on the test machine's uplink would
touch its network). Domains are ``rtest-bind-*``.
"""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.errors import ReconcilerError
from reconciler.host.hypervisor import Hypervisor
from reconciler.model import ExpandedVM, Manifest, PowerState
from reconciler.render import parse_host_caps, render_domain
from reconciler.settings.host import HostConfig, NetworkTarget

if TYPE_CHECKING:
    from collections.abc import Iterator

HOST = HostConfig(
    domain_type="qemu",  # TCG: no KVM on the test machines
    pod_network=NetworkTarget("user"),
    networks={"lan": NetworkTarget("direct", "eth0")},
    binding_plugins={"site-user": "slirp"},
    graphics="none",
)


def expanded(name: str, iface: dict[str, Any], network: dict[str, Any]) -> ExpandedVM:
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {
            "runStrategy": "Always",
            "template": {
                "spec": {
                    "domain": {
                        "cpu": {"sockets": 1, "cores": 1, "threads": 1},
                        "memory": {"guest": "64Mi"},
                        "machine": {"type": "q35"},
                        "devices": {"interfaces": [{"name": "net", **iface}]},
                    },
                    "networks": [{"name": "net", **network}],
                }
            },
        },
    }
    return ExpandedVM(vm=vm, source=Manifest(vm, f"vms/{name}.yaml", 1))


@pytest.fixture
def hv(qemu_uri: str) -> Iterator[Hypervisor]:
    with Hypervisor(qemu_uri) as h:
        yield h


def cleanup(hv: Hypervisor, name: str) -> None:
    if hv.get_domain(name) is not None:
        with contextlib.suppress(ReconcilerError):
            hv.destroy(name)
        hv.undefine(name)


@pytest.mark.parametrize(
    ("name", "iface", "backend"),
    [
        ("rtest-bind-passt", {"passtBinding": {}}, "passt"),
        ("rtest-bind-slirp", {"binding": {"name": "slirp"}}, None),
        ("rtest-bind-site", {"binding": {"name": "site-user"}}, None),
    ],
)
def test_pod_network_bindings_boot(
    hv: Hypervisor, name: str, iface: dict[str, Any], backend: str | None
) -> None:
    rendered = render_domain(
        expanded(name, iface, {"pod": {}}), HOST, parse_host_caps(*hv.capabilities_xml())
    )
    assert rendered.warnings == ()
    cleanup(hv, name)
    if backend == "passt" and not hv.host_facts().passt:
        # libvirt before 9.2 has no passt backend: it refuses the domain for exactly
        # that, as the plan's host-facts check predicts (tests/unit/test_hostfacts.py).
        with pytest.raises(ReconcilerError, match="passt"):
            hv.define(rendered.xml, name)
        assert hv.get_domain(name) is None
        return
    try:
        hv.define(rendered.xml, name)
        hv.start(name)
        assert hv.state(name) == PowerState.RUNNING
        live = hv.get_domain(name)
        assert live is not None
        (nic,) = ET.fromstring(live.live_xml).findall("devices/interface")
        assert nic.get("type") == "user"
        found = nic.find("backend")
        assert (found.get("type") if found is not None else None) == backend
        assert nic.find("alias") is not None  # QEMU created the device
    finally:
        cleanup(hv, name)


def test_macvtap_binding_plugin_defines(hv: Hypervisor) -> None:
    name = "rtest-bind-macvtap"
    vm = expanded(name, {"binding": {"name": "macvtap"}}, {"multus": {"networkName": "lan"}})
    rendered = render_domain(vm, HOST, parse_host_caps(*hv.capabilities_xml()))
    cleanup(hv, name)
    try:
        hv.define(rendered.xml, name)
        live = hv.get_domain(name)
        assert live is not None
        (nic,) = ET.fromstring(live.persistent_xml).findall("devices/interface")
        assert nic.get("type") == "direct"
        source = nic.find("source")
        assert source is not None
        assert source.get("dev") == "eth0"
    finally:
        cleanup(hv, name)
