"""Reading a live domain back into a VirtualMachine (``importer.domain``), host-less.

Covers: each render golden case's domain reads back into a VM that renders to the same
domain (the renderer in reverse, on the golden files themselves); the run strategy
from power state and autostart; domain names mapped to VM names (namespaced, refused
with the rename to make); memory quantities; refusals naming the element (an IDE
disk, an empty drive, SPICE graphics, a boot device list, a gap in target names, a
domain without ``<cpu>``); the host config merged from several domains, the minority
of a single-valued setting named; what libvirt fills in by itself is no loss, the rest
of the live definition is (``verify.dropped``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.catalog import build_catalog
from reconciler.compare.changes import diff_essences
from reconciler.compare.essence import essence
from reconciler.config.host import load_host_config
from reconciler.desired import desired_from_catalog
from reconciler.importer.domain import read_domain, run_strategy, vm_name
from reconciler.importer.hostconfig import chosen_settings, host_config_obj, setting_conflicts
from reconciler.importer.reading import quantity_kib
from reconciler.importer.verify import dropped, manifest_of
from reconciler.model import PowerState, RunStrategy
from reconciler.render import HostCaps

RENDER = Path(__file__).resolve().parents[1] / "data" / "render"
HOST = load_host_config((RENDER / "host.yaml").read_bytes(), "host.yaml")
# Cases whose domain no VM renders back on the shared host config: generated files of
# the volume directory (emptyDisk, containerDisk, cloud-init and config ISOs, ephemeral
# NVRAM), a case with its own host config (networks, pools, devices, kernels), placement
# a host hands out (dedicated CPUs, vGPUs); the libvirt suite imports these on a host.
NOT_ROUND_TRIPPED = {
    "cloudinit-secrets",
    "config-disks",
    "dedicated-cpus",
    "efi-no-secureboot",
    "hotplug-devices",
    "lun-block-pool",
    "mediated-devices",
    "network-bindings",
    "binding-plugins",
    "storage-sources",
    "image-sources",
    "container-disk-registry",
    "windows-hyperv",
    "sriov",
    "host-devices",
    "networks",
    "kernel-boot",
    "spice-passthrough",  # its pass-through grows from the proof: imported in the libvirt suite
}
CASES = sorted(p.parent.name for p in RENDER.glob("*/domain.xml") if p.parent.name not in NOT_ROUND_TRIPPED)

MINIMAL = """<domain type="kvm">
  <name>{name}</name>
  <memory unit="KiB">1048576</memory>
  <vcpu>2</vcpu>
  <os><type arch="x86_64" machine="q35">hvm</type>{boot}</os>
  <features><acpi/></features>
  {cpu}
  <devices>{devices}</devices>
</domain>"""


def domain(
    name: str = "vm1", devices: str = "", boot: str = "", cpu: str = '<cpu mode="host-model"/>'
) -> str:
    return MINIMAL.format(name=name, devices=devices, boot=boot, cpu=cpu)


@pytest.mark.parametrize("case", CASES)
def test_golden_domains_render_back(case: str) -> None:
    xml = (RENDER / case / "domain.xml").read_text()
    reading = read_domain(xml, PowerState.RUNNING, autostart=True)
    assert reading.reasons == ()
    cat = build_catalog([manifest_of(reading)])
    desired = desired_from_catalog(cat, "r", lambda _p: b"", HOST, HostCaps.default())
    assert desired.errors == ()
    (rendered,) = desired.rendered
    assert diff_essences(essence(rendered.xml), essence(xml)) == ()
    assert dropped(rendered.xml, xml) == ()


@pytest.mark.parametrize(
    ("state", "autostart", "strategy"),
    [
        (PowerState.RUNNING, True, RunStrategy.ALWAYS),
        (PowerState.PAUSED, False, RunStrategy.RERUN_ON_FAILURE),
        (PowerState.SHUTOFF, True, RunStrategy.MANUAL),
        (PowerState.CRASHED, False, RunStrategy.HALTED),
    ],
)
def test_run_strategy(state: PowerState, autostart: bool, strategy: RunStrategy) -> None:
    assert run_strategy(state, autostart) == strategy


def test_names() -> None:
    assert vm_name("web") == ("default", "web", "")
    assert vm_name("team-a_web") == ("team-a", "web", "")
    ns, mapped, why = vm_name("Win10 Pro_x")
    assert (ns, mapped) == ("", "win10-pro-x")
    assert "not a KubeVirt name" in why
    reading = read_domain(domain(name="Win10"))
    assert "virsh domrename 'Win10' win10" in reading.reasons[0]
    assert reading.notes == ("name 'Win10' maps to 'win10'",)


def test_quantities() -> None:
    assert [quantity_kib(k) for k in (1048576, 2048, 1000, 1024**3)] == ["1Gi", "2Mi", "1000Ki", "1Ti"]
    reading = read_domain(
        domain().replace("<vcpu>", '<currentMemory unit="KiB">524288</currentMemory><vcpu>')
    )
    memory = reading.vm["spec"]["template"]["spec"]["domain"]["memory"]
    assert memory == {"guest": "512Mi", "maxGuest": "1Gi"}


def test_a_domain_without_cpu_has_qemus_default_model_on_x86_only() -> None:
    """No ``<cpu>``: QEMU's default x86 CPU, qemu64 (libvirt writes it so for TCG);
    elsewhere the domain names no model KubeVirt could take."""
    reading = read_domain(domain(cpu=""))
    assert reading.reasons == ()
    assert reading.vm["spec"]["template"]["spec"]["domain"]["cpu"]["model"] == "qemu64"
    arm = read_domain(domain(cpu="").replace('arch="x86_64" machine="q35"', 'arch="aarch64" machine="virt"'))
    assert any(why.startswith("<cpu>: the domain names no CPU model") for why in arm.reasons)


@pytest.mark.parametrize(
    ("devices", "boot", "cpu", "reason"),
    [
        (
            '<disk type="file" device="cdrom"><source file="/srv/a.iso"/><target dev="hda" bus="ide"/></disk>',
            "",
            '<cpu mode="host-model"/>',
            "<disk target='hda'>: bus 'ide'",
        ),
        (
            '<disk type="file" device="cdrom"><target dev="sda" bus="sata"/></disk>',
            "",
            '<cpu mode="host-model"/>',
            "<disk target='sda'>: an empty drive",
        ),
        (
            '<graphics type="spice"/>',
            "",
            '<cpu mode="host-model"/>',
            "<graphics type='spice'>: graphics are VNC",
        ),
        ("", '<boot dev="cdrom"/><boot dev="hd"/>', '<cpu mode="host-model"/>', "<os><boot dev='cdrom'>"),
        (
            '<disk type="file" device="disk"><source file="/srv/b.qcow2"/><target dev="vdb" bus="virtio"/></disk>',
            "",
            '<cpu mode="host-model"/>',
            "the vdX names leave a gap",
        ),
        (
            '<disk type="file" device="disk"><driver type="qcow2"/><source file="/srv/b.img"/>'
            '<target dev="vda" bus="virtio"/></disk>',
            "",
            '<cpu mode="host-model"/>',
            "a hostDisk's format is read from its name",
        ),
    ],
)
def test_refusals_name_the_element(devices: str, boot: str, cpu: str, reason: str) -> None:
    reading = read_domain(domain(devices=devices, boot=boot, cpu=cpu))
    assert any(reason in r for r in reading.reasons), reading.reasons


def test_host_config_merges_and_names_the_minority() -> None:
    emulator = "<emulator>{}</emulator>"
    disk = '<disk type="file" device="disk"><source file="{}"/><target dev="vda" bus="virtio"/></disk>'
    readings = [
        read_domain(domain("a", emulator.format("/usr/bin/qemu-a") + disk.format("/srv/a/root.qcow2"))),
        read_domain(domain("b", emulator.format("/usr/bin/qemu-a") + disk.format("/srv/a/x/b.qcow2"))),
        read_domain(domain("c", emulator.format("/usr/bin/qemu-c") + disk.format("/data/c.qcow2"))),
    ]
    chosen = chosen_settings(readings)
    assert chosen["emulator"] == "/usr/bin/qemu-a"
    assert setting_conflicts(readings[0], chosen) == ()
    assert "this domain has '/usr/bin/qemu-c'" in setting_conflicts(readings[2], chosen)[0]
    obj = host_config_obj(readings, "h1", {"domainType": "kvm"})
    assert obj["allowedDirectories"] == ["/data", "/srv/a", "/var/lib/reconciler"]
    assert "domainType" not in obj  # the host's own
    assert obj["emulator"] == "/usr/bin/qemu-a"


def test_what_libvirt_fills_in_is_no_loss() -> None:
    desired = domain()
    live = desired.replace("<vcpu>", '<vcpu placement="static">').replace(
        "</domain>", "<on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot></domain>"
    )
    assert dropped(desired, live) == ()
    kept = live.replace(
        "</domain>", "<pm><suspend-to-mem enabled='no'/></pm><on_crash>restart</on_crash></domain>"
    )
    assert dropped(desired, kept) == ("on_crash=restart", "pm/suspend-to-mem@enabled=no")
