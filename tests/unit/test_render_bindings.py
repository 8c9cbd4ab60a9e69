"""Interface bindings (reconciler/render/interfaces.py) and host devices (render/devices.py).

Covers: passt on a multus network is an error (pod network only, as on KubeVirt);
macvtap on a network not mapped to a host interface, and a network mapped to a host
interface without macvtap, are errors naming the field; two bindings on one
interface; sriov on the pod network, on a network not mapped to a libvirt network, or
with its link down is an error; an sriov interface has no emulated model; the
rendered XML of the bindings is in the golden cases
``tests/data/render/network-bindings`` and ``sriov``. Host devices: two VMs of one host passing
the same device through are a plan error naming both; the host config's
``hostDevices`` entries are checked with their line (the XML is in the golden case
``host-devices``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from reconciler.config.host import load_host_config
from reconciler.errors import ConfigError, RenderError
from reconciler.model import ExpandedVM, Manifest
from reconciler.render import HostCaps, render_domain
from reconciler.settings.host import HostConfig, NetworkTarget
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from pathlib import Path

HOST = HostConfig(
    networks={
        "lan": NetworkTarget("direct", "eth0"),
        "storage": NetworkTarget("bridge", "br0"),
        "fast": NetworkTarget("network", "sriov-ens1f0"),
    }
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
        (
            {"bridge": {}},
            {"multus": {"networkName": "lan"}},
            "interfaces[0]",
            "give the interface binding: {name: macvtap}",
        ),
        ({"bridge": {}, "passt": {}}, {"pod": {}}, "interfaces[0].passt", "one binding per interface"),
        (
            {"binding": {"name": "x"}},
            {"pod": {}},
            "interfaces[0].binding.name",
            "network binding plugin 'x' is not known on this host: KubeVirt documents passt, macvtap, slirp; "
            "map a site plugin to its libvirt equivalent in the host config "
            "(networks: {bindingPlugins: {x: bridge}})",
        ),
        ({"binding": {}}, {"pod": {}}, "interfaces[0].binding.name", "a binding plugin needs a name"),
        (
            {"passtBinding": {}},
            {"multus": {"networkName": "storage"}},
            "interfaces[0].passtBinding",
            "pod network only",
        ),
        (
            {"binding": {"name": "passt"}},
            {"multus": {"networkName": "storage"}},
            "interfaces[0].binding",
            "pod network only",
        ),
        (
            {"binding": {"name": "slirp"}},
            {"multus": {"networkName": "storage"}},
            "interfaces[0].binding",
            "pod network only",
        ),
        ({"slirp": {}}, {"multus": {"networkName": "storage"}}, "interfaces[0].slirp", "pod network only"),
        (
            {"binding": {"name": "macvtap"}},
            {"multus": {"networkName": "storage"}},
            "interfaces[0].binding",
            "mapped to a host interface",
        ),
        (
            {"passtBinding": {}, "binding": {"name": "passt"}},
            {"pod": {}},
            "interfaces[0].binding",
            "one binding per interface (passtBinding, binding given)",
        ),
        ({"passtBinding": {"x": 1}}, {"pod": {}}, "interfaces[0].passtBinding.x", "not supported"),
        ({"sriov": {}}, {"pod": {}}, "interfaces[0].sriov", "SR-IOV is for multus networks only"),
        (
            {"sriov": {}},
            {"multus": {"networkName": "storage"}},
            "interfaces[0].sriov",
            "SR-IOV needs network 'n' mapped to a libvirt network whose <forward mode='hostdev'>",
        ),
        (
            {"sriov": {}, "state": "down"},
            {"multus": {"networkName": "fast"}},
            "interfaces[0].state",
            "a virtual function's link cannot be set down",
        ),
    ],
)
def test_binding_errors_name_the_field(
    iface: dict[str, Any], network: dict[str, Any], field: str, text: str
) -> None:
    with pytest.raises(RenderError) as err:
        render_domain(vm(iface, network), HOST, HostCaps.default())
    assert f"spec.template.spec.domain.devices.{field}: " in str(err.value), str(err.value)
    assert text in str(err.value)


def test_current_binding_forms_render_without_warnings() -> None:
    """KubeVirt's current forms: the core passtBinding and the documented binding plugins."""
    cases: list[tuple[dict[str, Any], dict[str, Any], str, str]] = [
        ({"passtBinding": {}}, {"pod": {}}, '<interface type="user">', '<backend type="passt" />'),
        ({"binding": {"name": "passt"}}, {"pod": {}}, '<interface type="user">', '<backend type="passt" />'),
        ({"binding": {"name": "slirp"}}, {"pod": {}}, '<interface type="user">', '<model type="virtio" />'),
        (
            {"binding": {"name": "macvtap"}},
            {"multus": {"networkName": "lan"}},
            '<interface type="direct">',
            '<source dev="eth0" mode="bridge" />',
        ),
    ]
    for iface, network, kind, detail in cases:
        d = render_domain(vm(iface, network), HOST, HostCaps.default())
        assert kind in d.xml, iface
        assert detail in d.xml, iface
        assert d.warnings == (), iface
    slirp = render_domain(vm({"binding": {"name": "slirp"}}, {"pod": {}}), HOST, HostCaps.default()).xml
    assert "<backend" not in slirp  # QEMU's own user-mode stack


def test_site_binding_plugins_come_from_the_host_config() -> None:
    host = load_host_config(
        b"networks:\n  multus: {storage: {bridge: br0}}\n  bindingPlugins: {l2-tap: bridge, passt: slirp}\n",
        "host.yaml",
    )
    d = render_domain(
        vm({"binding": {"name": "l2-tap"}}, {"multus": {"networkName": "storage"}}), host, HostCaps.default()
    )
    assert '<interface type="bridge">' in d.xml
    assert '<source bridge="br0" />' in d.xml
    overridden = render_domain(vm({"binding": {"name": "passt"}}, {"pod": {}}), host, HostCaps.default()).xml
    assert '<interface type="user">' in overridden
    assert "<backend" not in overridden


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"networks: {bindingPlugins: {l2: tap}}\n", "host.yaml:1:"),
        (b"networks: {bindingPlugins: [l2]}\n", "networks.bindingPlugins: expected a mapping"),
    ],
)
def test_binding_plugin_table_errors_name_the_line(text: bytes, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_host_config(text, "host.yaml")
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("key", "network", "form"),
    [
        ("passt", {"pod": {}}, "passtBinding: {}"),
        ("slirp", {"pod": {}}, "binding: {name: slirp}"),
        ("macvtap", {"multus": {"networkName": "lan"}}, "binding: {name: macvtap}"),
    ],
)
def test_discontinued_bindings_render_and_warn(key: str, network: dict[str, Any], form: str) -> None:
    d = render_domain(vm({key: {}}, network), HOST, HostCaps.default())
    (warning,) = map(words, d.warnings)
    assert warning == (
        f"vm/edge: spec.template.spec.domain.devices.interfaces[0].{key}: the core {key} binding was "
        f"discontinued in KubeVirt v1.3, whose admission refuses it; it is rendered here, but write {form} "
        "to keep the VM valid on KubeVirt"
    )


def test_macvtap_and_passt_render() -> None:
    xml = render_domain(vm({"macvtap": {}}, {"multus": {"networkName": "lan"}}), HOST, HostCaps.default()).xml
    assert '<interface type="direct">' in xml
    assert '<source dev="eth0" mode="bridge" />' in xml
    xml = render_domain(vm({"passt": {}}, {"pod": {}}), HOST, HostCaps.default()).xml
    assert '<interface type="user">' in xml
    assert '<backend type="passt" />' in xml


def test_sriov_takes_a_vf_from_the_mapped_network() -> None:
    """The interface plugs into the libvirt network pooling the VFs; the guest sees the VF
    itself, so no emulated model is rendered (a preference's model has no effect)."""
    d = render_domain(
        vm({"sriov": {}, "model": "e1000"}, {"multus": {"networkName": "fast"}}), HOST, HostCaps.default()
    )
    assert '<interface type="network">' in d.xml
    assert '<source network="sriov-ens1f0" />' in d.xml
    assert "<model" not in d.xml.split("<interface", 1)[1].split("</interface>")[0]
    assert [f for _, f in d.macs] == ["spec.template.spec.domain.devices.interfaces[0].macAddress"]


def test_one_host_device_one_vm(tmp_path: Path) -> None:
    """Two VMs of one host passing the same device through: the second is a plan error."""
    from reconciler import source
    from reconciler.desired import desired_state

    doc = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {{name: {name}}}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory: {{guest: 64Mi}}
        devices: {{gpus: [{{name: g, deviceName: nvidia.com/A10}}]}}
"""
    (tmp_path / "a.yaml").write_text(doc.format(name="gpu-a"))
    (tmp_path / "b.yaml").write_text(doc.format(name="gpu-b"))
    from reconciler.model import SourceSnapshot
    from reconciler.settings.host import HostDevice

    snap = SourceSnapshot(repo=str(tmp_path), ref="HEAD", commit="c" * 40, files=source.DirView(tmp_path))
    host = HostConfig(name="h", host_devices={"nvidia.com/A10": HostDevice("pci", "0000:65:00.0")})
    desired = desired_state(snap, "", host, HostCaps.default())
    assert len(desired.errors) == 1, desired.errors
    assert words(desired.errors[0]).startswith("b.yaml:")
    assert (
        "vm/gpu-b: spec.template.spec.domain.devices.gpus[0].deviceName: host device pci 0000:65:00.0"
        in words(desired.errors[0])
    )
    assert "is also passed through to vm/gpu-a (a.yaml:1)" in words(desired.errors[0])


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('{pci: "65:00.0"}', "hostDevices['gpu'].pci: '65:00.0' is not DDDD:BB:SS.F"),
        ('{usb: "yubikey"}', "hostDevices['gpu'].usb: 'yubikey' is not vendor:product"),
        ('{pci: "0000:65:00.0", usb: "1050:0407"}', "give exactly one of pci"),
    ],
)
def test_host_devices_config_errors_name_the_line(entry: str, message: str) -> None:
    from reconciler.config.host import load_host_config
    from reconciler.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        load_host_config(f"name: h\nhostDevices:\n  gpu: {entry}\n".encode(), "host.yaml")
    assert message in str(err.value), str(err.value)
    assert str(err.value).startswith("host.yaml:3:"), str(err.value)
