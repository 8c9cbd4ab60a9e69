"""Host facts: reading, the JSON file, and the check of a rendered domain against them.

Covers: parsing domain capabilities (machines, firmware, secure boot, TPM, CPU models,
max vCPUs, hugepage sizes, passt); one case per check (machine type, vCPUs, CPU mode
and model, firmware, secure boot, TPM model / backend / version, disk bus, video
model, hugepages not mounted / size not offered / not enough free, libvirt network
missing / inactive, bridge, storage pool missing / inactive, image file); an unknown
fact is never an error; the JSON round trip and its errors; ``validate --host-facts``
offline (a TPM VM against a host without swtpm fails with file:line, exit 1, and so does ``diff`` of a pull request adding it); where
the pod network goes with no host config mapping.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.hostfacts import (
    FactsError,
    HostFacts,
    check_domain,
    facts_from_json,
    facts_to_json,
    parse_host_facts,
    stable_view,
)
from reconciler.render.caps import HostCaps
from reconciler.render.interfaces import pod_network_note, pod_target
from reconciler.settings.host import HostConfig, NetworkTarget
from reconciler.wording.problems import words

if TYPE_CHECKING:
    from pathlib import Path

    from tests.helpers.git import GitRepo

CAPS = """<capabilities><host><cpu><arch>x86_64</arch></cpu><topology><cells num='1'><cell id='0'>
<pages unit='KiB' size='4'>100</pages><pages unit='KiB' size='2048'>0</pages>
</cell></cells></topology></host>
<guest><os_type>hvm</os_type><arch name='x86_64'><emulator>/usr/bin/qemu-system-x86_64</emulator>
<machine canonical='pc-q35-7.2'>q35</machine><machine>pc-q35-7.2</machine>
<domain type='qemu'/><domain type='kvm'/></arch></guest></capabilities>"""

DOMCAPS = """<domainCapabilities><path>/usr/bin/qemu-system-x86_64</path><vcpu max='255'/>
<os supported='yes'><loader supported='yes'><value>/usr/share/OVMF/OVMF_CODE_4M.fd</value>
<value>/usr/share/OVMF/OVMF_CODE_4M.secboot.fd</value>
<enum name='secure'><value>yes</value><value>no</value></enum></loader></os>
<cpu><mode name='host-passthrough' supported='yes'/><mode name='host-model' supported='yes'/>
<mode name='custom' supported='yes'><model usable='yes'>Skylake-Server</model></mode></cpu>
<devices><disk supported='yes'><enum name='bus'><value>virtio</value><value>sata</value></enum></disk>
<video supported='yes'><enum name='modelType'><value>vga</value><value>virtio</value></enum></video>
<tpm supported='yes'><enum name='model'><value>tpm-tis</value><value>tpm-crb</value></enum>
<enum name='backendModel'><value>passthrough</value><value>emulator</value></enum>
<enum name='backendVersion'><value>2.0</value></enum></tpm></devices></domainCapabilities>"""


def facts(**kw: object) -> HostFacts:
    base = parse_host_facts(
        CAPS,
        DOMCAPS,
        host="h1",
        host_cpus=4,
        host_memory_kib=8 << 20,
        hugepages_free={2048: 0},
        hugetlbfs_mounted=True,
        networks={"default": True, "down": False},
        interfaces=["eth0", "br0"],
        pools={"default": True, "cold": False},
        images={"/img/present.qcow2": True, "/img/missing.qcow2": False},
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def domain(
    devices: str = "", os_extra: str = "", head: str = "", machine: str = "q35", vcpus: int = 2
) -> str:
    return (
        f"<domain type='qemu'><name>x</name><memory unit='KiB'>1048576</memory>{head}"
        f"<vcpu placement='static'>{vcpus}</vcpu>"
        f"<os><type arch='x86_64' machine='{machine}'>hvm</type>{os_extra}</os>"
        f"<cpu mode='host-model'/><devices>{devices}</devices></domain>"
    )


SPEC = {
    "spec": {
        "template": {
            "spec": {
                "domain": {"devices": {"interfaces": [{"name": "a"}, {"name": "b"}]}},
                "networks": [{"name": "b", "multus": {}}, {"name": "a", "pod": {}}],
                "volumes": [
                    {"name": "root", "containerDisk": {"image": "example/missing"}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                ],
            }
        }
    }
}


def problems(
    xml: str, f: HostFacts | None = None, images: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    return [(p.field, p.message) for p in check_domain(ET.fromstring(xml), SPEC, f or facts(), images or {})]


def test_parse_reads_domain_capabilities() -> None:
    f = facts()
    assert f.caps.machines == ("pc-q35-7.2", "q35")
    assert f.max_vcpus == 255
    assert f.firmware == ("/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd")
    assert f.secure_boot is True
    assert f.tpm_backends == ("emulator", "passthrough")
    assert f.tpm_versions == ("2.0",)
    assert f.cpu_models == ("Skylake-Server",)
    assert "host-model" in (f.cpu_modes or ())
    assert f.hugepage_sizes_kib == (2048,)
    assert f.caps.networks == ("default",)  # active ones only: where the pod network may go
    assert f.passt is False


def test_a_domain_the_host_offers_everything_for_passes() -> None:
    assert problems(domain()) == []


@pytest.mark.parametrize(
    ("xml", "field", "text"),
    [
        (domain(machine="pc-q35-99.0"), "domain.machine.type", "machine type 'pc-q35-99.0' is not offered"),
        (domain(vcpus=300), "domain.cpu", "300 vCPUs exceed the 255"),
        (
            domain().replace("<cpu mode='host-model'/>", "<cpu mode='custom'><model>Nehalem</model></cpu>"),
            "domain.cpu.model",
            "CPU model 'Nehalem' is not known",
        ),
        (
            domain(os_extra="<loader type='pflash'>/opt/OVMF_OTHER.fd</loader>"),
            "domain.firmware.bootloader.efi",
            "firmware /opt/OVMF_OTHER.fd is not offered",
        ),
        (
            domain(devices="<disk type='file' device='disk'><target dev='hda' bus='ide'/></disk>"),
            "domain.devices.disks",
            "disk bus ide is not offered",
        ),
        (
            domain(devices="<video><model type='bochs'/></video>"),
            "domain.devices.video",
            "video model bochs is not offered",
        ),
        (
            domain(
                head="<memoryBacking><hugepages><page size='1048576' unit='KiB'/></hugepages></memoryBacking>"
            ),
            "domain.memory.hugepages.pageSize",
            "hugepages of 1Gi are not offered by this host (2Mi)",
        ),
        (
            domain(
                head="<memoryBacking><hugepages><page size='2048' unit='KiB'/></hugepages></memoryBacking>"
            ),
            "domain.memory.hugepages.pageSize",
            "needs 512 free hugepages of 2Mi, this host has 0 free",
        ),
        (
            domain(devices="<interface type='network'><source network='nosuch'/></interface>"),
            "spec.networks[1]",
            "libvirt network 'nosuch' does not exist",
        ),
        (
            domain(
                devices="<interface type='network'><source network='default'/></interface>"
                "<interface type='network'><source network='down'/></interface>"
            ),
            "spec.networks[0]",
            "libvirt network 'down' is not active",
        ),
        (
            domain(devices="<interface type='bridge'><source bridge='br9'/></interface>"),
            "spec.networks[1]",
            "bridge 'br9' does not exist",
        ),
        (
            domain(devices="<interface type='direct'><source dev='eth9' mode='bridge'/></interface>"),
            "spec.networks[1]",
            "host interface 'eth9' does not exist",
        ),
        (
            domain(devices="<interface type='user'><backend type='passt'/></interface>"),
            "spec.template.spec.domain.devices.interfaces[0].passtBinding",
            "offers no passt backend",
        ),
        (
            domain(devices="<disk type='volume'><source pool='fast' volume='data'/></disk>"),
            "spec.volumes[1].persistentVolumeClaim",
            "storage pool 'fast' does not exist",
        ),
        (
            domain(devices="<disk type='volume'><source pool='cold' volume='data'/></disk>"),
            "spec.volumes[1].persistentVolumeClaim",
            "storage pool 'cold' is not active",
        ),
    ],
)
def test_each_missing_fact_is_one_problem_at_its_field(xml: str, field: str, text: str) -> None:
    (got,) = problems(xml)
    assert got[0].endswith(field), got
    assert text in got[1], got


def test_secure_boot_and_tpm() -> None:
    secure = domain(
        os_extra="<loader type='pflash' secure='yes'>/usr/share/OVMF/OVMF_CODE_4M.secboot.fd</loader>"
    )
    assert problems(secure) == []
    (p,) = problems(secure, facts(secure_boot=False))
    assert p[0].endswith("efi.secureBoot")
    assert "secure boot is not supported" in p[1]
    tpm = domain(devices="<tpm model='tpm-crb'><backend type='emulator' version='2.0'/></tpm>")
    assert problems(tpm) == []
    (p,) = problems(tpm, facts(tpm_backends=("passthrough",)))
    assert p[0].endswith("devices.tpm")
    assert "'emulator' is not available on this host (install swtpm)" in p[1]
    (p,) = problems(tpm, facts(tpm_versions=("1.2",)))
    assert "TPM version 2.0 is not supported" in p[1]
    (p,) = problems(tpm, facts(tpm_models=("tpm-tis",)))
    assert "TPM model tpm-crb is not supported" in p[1]


def test_hugepages_need_a_mounted_hugetlbfs() -> None:
    xml = domain(head="<memoryBacking><hugepages/></memoryBacking>")
    (p,) = problems(xml, facts(hugetlbfs_mounted=False))
    assert "no hugetlbfs is mounted" in p[1]
    assert problems(xml, facts(hugepages_free=((2048, 512),))) == []


def test_missing_image_file_points_at_the_volume() -> None:
    (p,) = problems(domain(), images={"/img/missing.qcow2": "example/missing"})
    assert p == (
        "spec.template.spec.volumes[0].containerDisk",
        "image file /img/missing.qcow2 (for example/missing) does not exist on this host",
    )
    assert problems(domain(), images={"/img/present.qcow2": "example/present"}) == []


def test_unknown_facts_are_never_checked() -> None:
    xml = domain(
        machine="anything",
        vcpus=9999,
        devices="<interface type='network'><source network='x'/></interface>"
        "<disk type='volume'><source pool='y' volume='z'/></disk>"
        "<tpm model='tpm-crb'><backend type='emulator' version='2.0'/></tpm>",
        head="<memoryBacking><hugepages/></memoryBacking>",
    )
    assert check_domain(ET.fromstring(xml), SPEC, HostFacts(), {}) == ()


def test_json_round_trip_and_stable_view(tmp_path: Path) -> None:
    f = facts()
    assert facts_from_json(facts_to_json(f), "f.json") == f
    busy = dataclasses.replace(f, hugepages_free=((2048, 7),), host_memory_kib=1)
    assert stable_view(busy) == stable_view(f)
    assert stable_view(dataclasses.replace(f, networks=())) != stable_view(f)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "hosts/h1.json: not a host-facts JSON file"),
        ('{"version": 7}', "not a host-facts file of version 1"),
        ('{"version": 1, "cpuz": []}', "unknown key 'cpuz'"),
        ('{"version": 1, "maxVcpus": "many"}', "maxVcpus: expected an integer"),
        (
            '{"version": 1, "networks": [["default", "yes"]]}',
            "networks: expected a list of [name, bool] pairs",
        ),
    ],
)
def test_bad_facts_files_are_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(FactsError, match=message.replace("[", r"\[").replace("]", r"\]")):
        facts_from_json(text, "hosts/h1.json")


TPM_VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: win
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory: {guest: 1Gi}
        devices:
          tpm:
            persistent: true
"""


def test_validate_offline_with_a_facts_file_without_swtpm(
    git_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git_repo.write("vms/README.md", "VMs\n")
    git_repo.commit("base")
    git_repo.write("vms/win.yaml", TPM_VM)
    git_repo.commit("head: a TPM 2.0 VM")
    no_swtpm = tmp_path / "h1.json"
    no_swtpm.write_text(facts_to_json(facts(tpm_backends=("passthrough",))))
    with_swtpm = tmp_path / "h2.json"
    with_swtpm.write_text(facts_to_json(facts()))
    assert cli.main(["validate", "--repo", str(git_repo.path)]) == 0
    assert cli.main(["validate", "--repo", str(git_repo.path), "--host-facts", str(with_swtpm)]) == 0
    capsys.readouterr()
    assert cli.main(["validate", "--repo", str(git_repo.path), "--host-facts", str(no_swtpm)]) == 1
    out = capsys.readouterr().out
    assert "vms/win.yaml:12:11: vm/win: spec.template.spec.domain.devices.tpm: cannot run on host h1: " in out
    assert "TPM backend 'emulator' is not available on this host (install swtpm)" in out
    assert cli.main(["render", "--repo", str(git_repo.path), "--host-facts", str(no_swtpm)]) == 1
    diff = ["diff", "--repo", str(git_repo.path), "--base", "HEAD~1", "--head", "HEAD"]
    assert cli.main([*diff, "--host-facts", str(with_swtpm)]) == 2
    capsys.readouterr()
    assert cli.main([*diff, "--host-facts", str(no_swtpm), "--format", "json"]) == 1
    assert "TPM backend 'emulator' is not available" in capsys.readouterr().out


def test_pod_network_goes_to_default_else_user_mode() -> None:
    auto = HostConfig()
    assert pod_target(auto, HostCaps()) == NetworkTarget("network", "default")  # no host: as before
    assert pod_target(auto, HostCaps(networks=("default",))) == NetworkTarget("network", "default")
    assert pod_target(auto, HostCaps(networks=())) == NetworkTarget("user", "")
    assert pod_target(auto, HostCaps(networks=(), passt=True)) == NetworkTarget("user", "passt")
    mapped = HostConfig(pod_network=NetworkTarget("bridge", "br0"))
    assert pod_target(mapped, HostCaps(networks=())) == NetworkTarget("bridge", "br0")  # config wins
    note = pod_network_note(auto, HostCaps(networks=()))
    assert note is not None
    assert "user-mode networking (user (slirp))" in words(note)
    assert pod_network_note(auto, HostCaps(networks=("default",))) is None
    assert pod_network_note(mapped, HostCaps(networks=())) is None
