"""Interface bindings (reconciler/render/interfaces.py): passt, macvtap and the rejected ones.

Covers: passt on a multus network is an error (pod network only, as on KubeVirt);
macvtap on a network not mapped to a host interface, and a network mapped to a host
interface without macvtap, are errors naming the field; two bindings on one
interface; the rendered XML of both bindings is in the golden case
``tests/data/render/network-bindings``.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.errors import RenderError
from reconciler.hostconfig import HostConfig, NetworkTarget
from reconciler.model import ExpandedVM, Manifest
from reconciler.render import HostCaps, render_domain

HOST = HostConfig(
    networks={"lan": NetworkTarget("direct", "eth0"), "storage": NetworkTarget("bridge", "br0")}
)


def vm(iface: dict[str, Any], network: dict[str, Any]) -> ExpandedVM:
    obj = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "edge", "namespace": "default"},
        "spec": {
            "runStrategy": "Halted",
            "template": {
                "spec": {
                    "domain": {
                        "memory": {"guest": "64Mi"},
                        "devices": {"interfaces": [{"name": "n", **iface}]},
                    },
                    "networks": [{"name": "n", **network}],
                }
            },
        },
    }
    return ExpandedVM(vm=obj, source=Manifest(obj, "vms/edge.yaml", 1))


@pytest.mark.parametrize(
    ("iface", "network", "field", "text"),
    [
        ({"passt": {}}, {"multus": {"networkName": "storage"}}, "interfaces[0].passt", "pod network only"),
        (
            {"macvtap": {}},
            {"multus": {"networkName": "storage"}},
            "interfaces[0].macvtap",
            "mapped to a host interface",
        ),
        ({"bridge": {}}, {"multus": {"networkName": "lan"}}, "interfaces[0]", "give the interface macvtap"),
        ({"bridge": {}, "passt": {}}, {"pod": {}}, "interfaces[0].passt", "one binding per interface"),
        ({"binding": {"name": "x"}}, {"pod": {}}, "interfaces[0].binding", "network binding plugins"),
    ],
)
def test_binding_errors_name_the_field(
    iface: dict[str, Any], network: dict[str, Any], field: str, text: str
) -> None:
    with pytest.raises(RenderError) as err:
        render_domain(vm(iface, network), HOST, HostCaps.default())
    assert f"spec.template.spec.domain.devices.{field}: " in str(err.value), str(err.value)
    assert text in str(err.value)


def test_macvtap_and_passt_render() -> None:
    xml = render_domain(vm({"macvtap": {}}, {"multus": {"networkName": "lan"}}), HOST, HostCaps.default()).xml
    assert '<interface type="direct">' in xml and '<source dev="eth0" mode="bridge" />' in xml
    xml = render_domain(vm({"passt": {}}, {"pod": {}}), HOST, HostCaps.default()).xml
    assert '<interface type="user">' in xml and '<backend type="passt" />' in xml
