"""Host facts of devices and boot files: what a host must offer for SR-IOV interfaces,
mediated devices and a direct kernel boot.

Covers: an ``sriov`` interface on a libvirt network that is not an SR-IOV pool
(forward mode hostdev), and any other binding on such a pool, are one problem each at
the interface's (or network's) field; unknown pools are never checked; the new facts
survive the JSON file.
"""

from __future__ import annotations

from typing import Any

from reconciler.hostfacts import HostFacts, check_domain, facts_from_json, facts_to_json

IFACES = "spec.template.spec.domain.devices.interfaces"


def spec(*ifaces: dict[str, Any]) -> dict[str, Any]:
    nets = [{"name": i["name"], "multus": {"networkName": i["name"]}} for i in ifaces]
    devices = {"interfaces": list(ifaces)}
    return {"spec": {"template": {"spec": {"domain": {"devices": devices}, "networks": nets}}}}


def domain(devices: str = "", os_extra: str = "") -> str:
    return (
        "<domain type='kvm'><name>x</name><memory unit='KiB'>1048576</memory>"
        f"<vcpu>1</vcpu><os><type arch='x86_64' machine='q35'>hvm</type>{os_extra}</os>"
        f"<devices>{devices}</devices></domain>"
    )


def network_iface(net: str) -> str:
    return f"<interface type='network'><source network='{net}'/></interface>"


SRIOV_FACTS = HostFacts(
    host="h1", networks=(("default", True), ("vf-pool", True)), hostdev_networks=("vf-pool",)
)


def test_sriov_needs_a_network_pooling_virtual_functions() -> None:
    xml = domain(network_iface("default") + network_iface("vf-pool"))
    ok = spec({"name": "a", "bridge": {}}, {"name": "b", "sriov": {}})
    assert check_domain(xml, ok, SRIOV_FACTS, {}) == ()
    swapped = spec({"name": "a", "sriov": {}}, {"name": "b", "bridge": {}})
    problems = [(p.field, p.message) for p in check_domain(xml, swapped, SRIOV_FACTS, {})]
    assert problems == [
        (
            f"{IFACES}[0].sriov",
            "libvirt network 'default' is not an SR-IOV pool on this host "
            "(it needs <forward mode='hostdev' managed='yes'><pf dev='NIC'/></forward>)",
        ),
        (
            "spec.template.spec.networks[1]",
            "libvirt network 'vf-pool' hands out SR-IOV virtual functions (forward mode hostdev) "
            "on this host: give the interface sriov: {}",
        ),
    ]
    unknown = HostFacts(networks=SRIOV_FACTS.networks)  # which networks pool VFs is not known
    assert check_domain(xml, swapped, unknown, {}) == ()


def test_device_facts_survive_the_facts_file() -> None:
    assert facts_from_json(facts_to_json(SRIOV_FACTS), "f.json") == SRIOV_FACTS
