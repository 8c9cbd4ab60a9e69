"""Host capabilities as the render stage reads them (``parse_host_caps``).

Covers: domain type ``kvm`` where the host offers it and ``qemu`` where it does not
(read from the capabilities XML, never guessed); emulator and machine types of the
host architecture; OVMF code/VARS paths from domain capabilities (plain and secure
boot); libvirt's test driver and hostless use fall back to ``HostCaps.default()``;
unparsable XML is an error; host config overrides win over capabilities; a VM with
more vCPUs than the host's machine type takes (``maxCpus``) is a render error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.errors import RenderError
from reconciler.model import ExpandedVM, Manifest
from reconciler.render import HostCaps, parse_host_caps, render_domain
from reconciler.render.caps import CapsError
from reconciler.settings.host import HostConfig

CAPS = Path(__file__).resolve().parents[1] / "data" / "render" / "caps"


def read(name: str) -> str:
    return (CAPS / name).read_text()


def test_kvm_host() -> None:
    caps = parse_host_caps(read("qemu-kvm-capabilities.xml"), read("qemu-kvm-domcapabilities.xml"))
    assert caps.domain_type == "kvm"
    assert caps.arch == "x86_64"
    assert caps.emulator == "/usr/bin/qemu-system-x86_64"
    assert "q35" in caps.machines
    assert "pc-q35-7.2" in caps.machines
    assert caps.ovmf_code == "/usr/share/OVMF/OVMF_CODE_4M.fd"
    assert caps.ovmf_vars == "/usr/share/OVMF/OVMF_VARS_4M.fd"


def test_emulation_only_host_gets_qemu() -> None:
    xml = read("qemu-kvm-capabilities.xml").replace("<domain type='kvm'/>", "")
    assert parse_host_caps(xml, None).domain_type == "qemu"


def test_secure_boot_firmware_from_q35_domain_capabilities() -> None:
    caps = parse_host_caps(read("qemu-kvm-capabilities.xml"), read("qemu-q35-domcapabilities.xml"))
    assert caps.ovmf_code == "/usr/share/OVMF/OVMF_CODE_4M.fd"
    assert caps.ovmf_secure_code == "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
    assert caps.ovmf_secure_vars == "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"


def test_test_driver_falls_back_to_defaults() -> None:
    assert parse_host_caps(read("test-driver-capabilities.xml"), None) == HostCaps.default()
    assert HostCaps.default().domain_type == "qemu"
    assert HostCaps.default().emulator == "/usr/bin/qemu-system-x86_64"


@pytest.mark.parametrize("xml", ["", "<capabilities", "<capabilities><host/></capabilities>"])
def test_bad_capabilities_are_errors(xml: str) -> None:
    with pytest.raises(CapsError):
        parse_host_caps(xml, None)


def _vm(machine: str, sockets: int = 1) -> ExpandedVM:
    domain = {"memory": {"guest": "1Gi"}, "machine": {"type": machine}, "cpu": {"sockets": sockets}}
    vm = {"metadata": {"name": "m"}, "spec": {"template": {"spec": {"domain": domain}}}}
    return ExpandedVM(vm=vm, source=Manifest(vm, "vms/m.yaml", 1))


def test_machine_type_checked_against_the_host_and_overrides_win() -> None:
    caps = parse_host_caps(read("qemu-kvm-capabilities.xml"), None)
    xml = render_domain(_vm("pc-q35-7.2"), HostConfig(), caps).xml
    assert '<domain type="kvm">' in xml
    assert 'machine="pc-q35-7.2"' in xml
    with pytest.raises(RenderError, match="machine type 'virt' is not offered by this host"):
        render_domain(_vm("virt"), HostConfig(), caps)
    forced = render_domain(
        _vm("q35"), HostConfig(domain_type="qemu", emulator="/opt/qemu/bin/qemu"), caps
    ).xml
    assert '<domain type="qemu">' in forced
    assert "<emulator>/opt/qemu/bin/qemu</emulator>" in forced


def test_vcpus_checked_against_the_machine_types_maximum() -> None:
    caps = parse_host_caps(read("qemu-kvm-capabilities.xml"), None)
    assert ("pc", 255) in caps.max_cpus
    assert ("pc-q35-7.2", 288) in caps.max_cpus
    assert '<vcpu placement="static">288</vcpu>' in render_domain(_vm("q35", 288), HostConfig(), caps).xml
    with pytest.raises(RenderError, match="289 vCPUs: machine type 'q35' on this host takes at most 288"):
        render_domain(_vm("q35", 289), HostConfig(), caps)
    with pytest.raises(RenderError, match="256 vCPUs: machine type 'pc' on this host takes at most 255"):
        render_domain(_vm("pc", 256), HostConfig(), caps)
    render_domain(_vm("q35", 289), HostConfig(), HostCaps.default())  # hostless: only the global limit
