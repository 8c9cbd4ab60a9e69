"""Device and boot-file facts on real libvirtd + QEMU.

Covers: the facts list this host's PCI functions as libvirt's node devices show them
(every function under /sys/bus/pci/devices), and a PCI device it lacks is a plan error
at the deviceName's file:line; a libvirt network pooling a NIC's virtual functions
(forward mode hostdev, defined only) is known as an SR-IOV pool, and an sriov
interface on it is refused while the pool is not active; a kernelBoot VM whose kernel
is missing from the mapped image directory, or a symlink leading outside the allowed
directories, is a plan error at ``kernelPath`` while the VM with both files is
approved.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import libvirt

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import SourceSnapshot
from reconciler.model.changes import Action
from reconciler.reconcile import reconcile_once
from reconciler.settings.host import HostConfig, HostDevice, ImageSource, NetworkTarget
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.targets import HostTarget
from reconciler.source import DirView
from tests.helpers.qemu import URI

if TYPE_CHECKING:
    from collections.abc import Iterator


PREFIX = "rtest-devices-"
POOL = "rtest-devices-vf-pool"

VM = """apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory:
          guest: 64Mi
{extra}
"""
GPU = """        devices:
          hostDevices:
            - name: card
              deviceName: example.com/card"""
SRIOV = """        devices:
          interfaces:
            - name: fast
              sriov: {}
      networks:
        - name: fast
          multus:
            networkName: fast"""
KERNEL = """        firmware:
          kernelBoot:
            container:
              image: example/kernel
              kernelPath: /boot/vmlinuz
              initrdPath: /boot/initrd.img"""


def plan(repo: Path, config: HostConfig) -> tuple[list[tuple[str, Action]], str]:
    """The plan's changes of this module's VMs, and its errors (the host's name as ``H``)."""
    snap = SourceSnapshot(repo=str(repo), ref="HEAD", commit="d" * 40, files=DirView(str(repo)))
    with Hypervisor(URI) as hv:
        target = HostTarget(URI, config, PlanPolicy(host="h1"))
        p, status = reconcile_once(snap, "vms", target, hv, dry_run=True)
        message = status.message.replace(f"cannot run on host {hv.hostname()}:", "cannot run on host H:")
    return [(c.name, c.action) for c in p.changes if c.name.startswith(PREFIX)], message


def config(workdir: Path, **kw: object) -> HostConfig:
    return HostConfig(
        name="h1",
        allowed_dirs=(str(workdir / "allowed"),),
        volume_dir=str(workdir / "allowed" / "volumes"),
        domain_type="qemu",
        graphics="none",
        **kw,  # type: ignore[arg-type]
    )


def test_pci_devices_are_facts(prefixed_repo: Path) -> None:
    with Hypervisor(URI) as hv:
        facts = hv.host_facts()
    present = sorted(p.name for p in Path("/sys/bus/pci/devices").iterdir())
    assert facts.pci_devices is not None
    assert set(present) <= set(facts.pci_devices)
    (prefixed_repo / "vms" / "card.yaml").write_text(VM.format(name=PREFIX + "card", extra=GPU))
    missing = "0000:7f:1f.7" if "0000:7f:1f.7" not in present else "0000:7e:1f.7"
    host = config(prefixed_repo, host_devices={"example.com/card": HostDevice("pci", missing)})
    changes, message = plan(prefixed_repo, host)
    assert changes == []
    assert (
        "vms/card.yaml:15:15: vm/rtest-devices-card: spec.template.spec.domain.devices.hostDevices[0].deviceName: "
        f"cannot run on host H: PCI device {missing} does not exist on this host" in message
    )
    here = config(prefixed_repo, host_devices={"example.com/card": HostDevice("pci", present[0])})
    assert plan(prefixed_repo, here) == ([(PREFIX + "card", Action.CREATE)], "")


@contextlib.contextmanager
def vf_pool() -> Iterator[None]:
    conn = libvirt.open(URI)
    net = conn.networkDefineXML(
        f"<network><name>{POOL}</name><forward mode='hostdev' managed='yes'><pf dev='rtestnopf0'/></forward></network>"
    )
    try:
        yield
    finally:
        net.undefine()
        conn.close()


def test_an_sriov_pool_is_known_and_must_be_active(prefixed_repo: Path) -> None:
    (prefixed_repo / "vms" / "vf.yaml").write_text(VM.format(name=PREFIX + "vf", extra=SRIOV))
    host = config(prefixed_repo, networks={"fast": NetworkTarget("network", POOL)})
    with vf_pool():
        with Hypervisor(URI) as hv:
            facts = hv.host_facts()
        assert POOL in (facts.hostdev_networks or ())
        assert dict(facts.networks or ())[POOL] is False
        changes, message = plan(prefixed_repo, host)
    assert changes == []
    assert (
        f"spec.template.spec.networks[0]: cannot run on host H: libvirt network '{POOL}' is not active"
        in message
    )


def test_a_missing_kernel_is_a_plan_error(prefixed_repo: Path, tmp_path: Path) -> None:
    image = prefixed_repo / "allowed" / "kernels" / "example"
    (image / "boot").mkdir(parents=True)
    (image / "boot" / "initrd.img").write_bytes(b"initrd")
    (prefixed_repo / "vms" / "boot.yaml").write_text(VM.format(name=PREFIX + "boot", extra=KERNEL))
    host = config(prefixed_repo, images={"example/kernel": ImageSource(str(image), "raw")})
    changes, message = plan(prefixed_repo, host)
    assert changes == []
    assert (
        "vms/boot.yaml:16:15: vm/rtest-devices-boot: spec.template.spec.domain.firmware.kernelBoot.container.kernelPath: "
        f"cannot run on host H: kernel {image}/boot/vmlinuz is not a regular file inside allowedDirectories"
        in message
    )
    outside = tmp_path / "vmlinuz"
    outside.write_bytes(b"kernel")
    (image / "boot" / "vmlinuz").symlink_to(outside)  # leads out of the allowed directories
    assert "kernelPath: cannot run on host H" in plan(prefixed_repo, host)[1]
    (image / "boot" / "vmlinuz").unlink()
    (image / "boot" / "vmlinuz").write_bytes(b"kernel")
    assert plan(prefixed_repo, host) == ([(PREFIX + "boot", Action.CREATE)], "")
