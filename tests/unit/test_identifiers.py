"""The one reading of each identifier (``reconciler.model.identifiers``), and the one
answer to "is this a remote" and "does this VM belong to this host".

Covers: PCI addresses (any case, slot at most 1f, function at most 7, nothing after
the address) as a host config's ``hostDevices`` and an interface's ``pciAddress``
read them, canonical in the XML; USB ids; UUIDs (libvirt's forms, canonical) in a
host config's mdev pool and in ``firmware.uuid``; MAC addresses; DNS-1123 labels and
subdomains as the catalog and render check names; mdev type ids; git remotes in the
source settings and in the default owner (``a+b@host:path`` is one remote for both);
which host a rendered VM belongs to; a domain's derived UUID (KubeVirt's uuid5 of its
name) and derived MAC as the standard library spells them.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest

from reconciler import ownership
from reconciler.config.host import load_host_config
from reconciler.errors import ConfigError, RenderError
from reconciler.manifests import limits
from reconciler.model import ExpandedVM, Manifest, RenderedDomain, RunStrategy, VMKey
from reconciler.model import identifiers as ids
from reconciler.render import HostCaps, render_domain
from reconciler.render.identity import KUBEVIRT_FIRMWARE_NS, derived_uuid
from reconciler.render.interfaces import stable_mac
from reconciler.settings.host import HostConfig
from reconciler.source.settings import SourceConfig


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("0000:65:00.0", ids.PciAddress(0, 0x65, 0, 0)),
        ("0000:AF:1F.7", ids.PciAddress(0, 0xAF, 0x1F, 7)),
        ("ffff:00:10.3", ids.PciAddress(0xFFFF, 0, 0x10, 3)),
    ],
)
def test_pci_addresses(text: str, address: ids.PciAddress) -> None:
    assert ids.parse_pci(text) == address
    assert ids.parse_pci(address.text) == address
    assert address.text == text.lower()


@pytest.mark.parametrize(
    "text",
    ["65:00.0", "0000:65:20.0", "0000:65:00.8", "0000:65:00.0\n", "0000:65:0.0", "0x00:65:00.0", None, 1],
)
def test_what_is_no_pci_address(text: object) -> None:
    assert ids.parse_pci(text) is None


def test_a_pci_address_as_libvirt_writes_it() -> None:
    assert ids.PciAddress(0, 0x65, 1, 2).attributes() == {
        "domain": "0x0000",
        "bus": "0x65",
        "slot": "0x01",
        "function": "0x2",
    }


def test_host_config_pci_and_usb_are_canonical() -> None:
    host = load_host_config(
        b"name: h\nhostDevices:\n  gpu: {pci: 0000:AF:00.0}\n  key: {usb: 1D6B:0002}\n", "h.yaml"
    )
    assert host.host_devices["gpu"].address == "0000:af:00.0"
    assert host.host_devices["key"].address == "1d6b:0002"
    with pytest.raises(ConfigError, match=r"h\.yaml:3:.*'0000:65:20\.0' is not DDDD:BB:SS\.F"):
        load_host_config(b"name: h\nhostDevices:\n  gpu: {pci: '0000:65:20.0'}\n", "h.yaml")


def _vm(iface: dict[str, Any]) -> ExpandedVM:
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
                        "devices": {"interfaces": [{"name": "n", "masquerade": {}, **iface}]},
                    },
                    "networks": [{"name": "n", "pod": {}}],
                }
            },
        },
    }
    return ExpandedVM(vm=obj, source=Manifest(obj, "vms/edge.yaml", 1))


def test_an_interface_pci_address_of_any_case_is_written_in_libvirt_form() -> None:
    xml = render_domain(_vm({"pciAddress": "0000:0A:1F.0"}), HostConfig(), HostCaps.default()).xml
    assert '<address type="pci" domain="0x0000" bus="0x0a" slot="0x1f" function="0x0" />' in xml


@pytest.mark.parametrize(
    ("iface", "field", "text"),
    [
        ({"pciAddress": "0000:00:20.0"}, "pciAddress", "'0000:00:20.0' is not a PCI address (dddd:bb:ss.f)"),
        ({"macAddress": "52:54:00:zz:00:01"}, "macAddress", "'52:54:00:zz:00:01' is not a MAC address"),
    ],
)
def test_interface_identifiers_refused_at_the_field(iface: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(RenderError) as err:
        render_domain(_vm(iface), HostConfig(), HostCaps.default())
    assert f"interfaces[0].{field}: {text}" in str(err.value), str(err.value)


def test_usb_ids() -> None:
    assert ids.parse_usb("1D6B:0002") == ids.UsbId(0x1D6B, 2)
    assert ids.UsbId(0x1050, 0x407).text == "1050:0407"
    for bad in ("1d6b:02", "1d6b-0002", "yubikey", "1d6b:0002:1"):
        assert ids.parse_usb(bad) is None


@pytest.mark.parametrize(
    "text",
    [
        "6a1a24a1-4061-4607-8bf4-a3963d0c5895",
        "6A1A24A1-4061-4607-8BF4-A3963D0C5895",
        "6a1a24a140614607-8bf4a3963d0c5895",
    ],
)
def test_uuids(text: str) -> None:
    assert ids.parse_uuid(text) == "6a1a24a1-4061-4607-8bf4-a3963d0c5895"


@pytest.mark.parametrize("text", ["not-a-uuid", "6a1a24a1-4061-4607-8bf4-a3963d0c589", "", None, 5])
def test_what_is_no_uuid(text: object) -> None:
    assert ids.parse_uuid(text) is None


def test_mdev_pool_uuids_are_canonical() -> None:
    host = load_host_config(
        b"name: h\nhostDevices:\n  v: {mdev: {type: nvidia-222, uuids: [6A1A24A1-4061-4607-8BF4-A3963D0C5895]}}\n",
        "h.yaml",
    )
    assert host.host_devices["v"].uuids == ("6a1a24a1-4061-4607-8bf4-a3963d0c5895",)


def test_mac_addresses() -> None:
    assert ids.parse_mac("52-54-00-AB-CD-EF") == "52:54:00:ab:cd:ef"
    for bad in ("52:54:00:ab:cd", "52:54:00:ab:cd:ef:01", "5254.00ab.cdef", ""):
        assert ids.parse_mac(bad) is None


@pytest.mark.parametrize(
    ("text", "label", "subdomain"),
    [
        ("web", True, True),
        ("web-1", True, True),
        ("web.eu-1", False, True),
        ("a" * 63, True, True),
        ("a" * 64, False, True),
        (".".join(["a" * 63] * 4), False, False),  # 255 characters
        ("Web", False, False),
        ("-web", False, False),
        ("web-", False, False),
        ("a..b", False, False),
        ("a_b", False, False),
        ("", False, False),
        (10, False, False),
    ],
)
def test_dns_names(text: object, label: bool, subdomain: bool) -> None:
    assert ids.is_dns_label(text) is label
    assert ids.is_dns_subdomain(text) is subdomain
    assert (limits.name_problem(text) == "") is subdomain
    assert (limits.namespace_problem(text) == "") is label


def test_mdev_types() -> None:
    assert ids.is_mdev_type("nvidia-222")
    assert ids.is_mdev_type("i915-GVTg_V5_4")
    assert not ids.is_mdev_type("nvidia 222")
    assert not ids.is_mdev_type("-x")


@pytest.mark.parametrize(
    ("repo", "remote", "owner"),
    [
        ("https://user:s3cret@git.example/org/vms.git", True, "https://git.example/org/vms#."),
        ("git@git.example:org/vms.git", True, "git.example:org/vms#."),
        ("deploy+ci@git.example:org/vms", True, "git.example:org/vms#."),
        ("file:///srv/vms", True, "file:///srv/vms#."),
        ("/srv/vms", False, "/srv/vms#."),
    ],
)
def test_one_answer_to_is_this_a_remote(repo: str, remote: bool, owner: str) -> None:
    """The daemon clones what the settings call a remote, and names its owner the same way."""
    assert ids.is_remote_url(repo) is remote
    assert SourceConfig(repo).remote is remote
    assert ownership.legacy_owner(repo, "") == owner


@pytest.mark.parametrize(
    ("hostname", "host", "claim_unselected", "runs"),
    [
        ("h1", "h1", False, True),
        ("h1", "h2", True, False),
        ("", "h2", True, True),
        ("", "h2", False, False),
    ],
)
def test_which_host_a_vm_belongs_to(hostname: str, host: str, claim_unselected: bool, runs: bool) -> None:
    d = RenderedDomain(
        VMKey("default", "a"), "u", "<domain/>", "h", RunStrategy.ALWAYS, "a.yaml", hostname=hostname
    )
    assert d.runs_on(host, claim_unselected) is runs


@pytest.mark.parametrize("name", ["web", "vm-00000", "team-a-db-0", "x" * 253, "ns-é"])
def test_derived_uuid_is_uuid5_of_the_name(name: str) -> None:
    assert derived_uuid(name) == str(uuid.uuid5(KUBEVIRT_FIRMWARE_NS, name))


@pytest.mark.parametrize(
    ("seed", "domain", "iface"), [("", "web", "default"), ("owner", "team-a-db-0", "ext")]
)
def test_stable_mac_is_the_digests_first_bytes(seed: str, domain: str, iface: str) -> None:
    text = f"{seed}/{domain}/{iface}" if seed else f"{domain}/{iface}"
    digest = hashlib.sha256(text.encode()).digest()
    assert stable_mac(domain, iface, seed) == "02:" + ":".join(f"{b:02x}" for b in digest[:5])
