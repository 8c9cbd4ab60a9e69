"""A VM whose containerDisk names ``127.0.0.1:PORT/disks/tiny:1`` runs on QEMU from those
bytes (real libvirtd, TCG, the cached test guest of ``tests/helpers/guest.py``), with
only ``registries.insecure`` naming the loopback registry in the host config.

Covers: the plan pulls the image from Debian's docker-registry into the host's store and
names its manifest digest; apply makes the VM's overlay over the stored file; the guest,
booted by ``kernelBoot``, reads the image's marker from its disk (``/dev/vda``) through
the guest agent.
"""

from __future__ import annotations

import dataclasses
import subprocess
from typing import TYPE_CHECKING

import yaml

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import SourceSnapshot
from reconciler.plan.text import format_plan
from reconciler.reconcile import reconcile_once
from reconciler.settings.images import ImageStoreConfig
from reconciler.settings.policy import PlanPolicy
from reconciler.settings.registries import Registries
from reconciler.settings.targets import HostTarget
from reconciler.source import DirView
from tests.helpers.guest import (
    build_test_guest,
    guest_exec,
    host_config,
    remove_guest,
    vm_manifest,
    wait_agent,
)
from tests.helpers.registry import Registry, disk_layer, image_layout, push

if TYPE_CHECKING:
    from pathlib import Path

PREFIX = "rtest-reg-"
NAME = PREFIX + "disk"
MARKER = b"TINY-IMAGE-FROM-A-REGISTRY"


def test_a_vm_runs_from_a_registry_container_disk(
    qemu_uri: str, qemu_workdir: Path, plain_registry: Registry
) -> None:
    raw = qemu_workdir / "tiny.raw"
    raw.write_bytes(MARKER + b"\0" * (4 << 20))
    tiny = qemu_workdir / "tiny.qcow2"
    subprocess.run(["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(raw), str(tiny)], check=True)
    layout = qemu_workdir / "layout"
    digest = image_layout(layout, [disk_layer(tiny.read_bytes())])
    push(layout, plain_registry, "disks/tiny:1")
    image = f"{plain_registry.host}/disks/tiny:1"
    vm = vm_manifest(NAME)
    tspec = vm["spec"]["template"]["spec"]
    tspec["domain"]["devices"]["disks"] = [{"name": "tiny", "disk": {"bus": "virtio"}}]
    tspec["volumes"] = [{"name": "tiny", "containerDisk": {"image": image}}]
    (qemu_workdir / "vms" / f"{NAME}.yaml").write_text(yaml.safe_dump(vm, sort_keys=False))
    config = dataclasses.replace(
        host_config(build_test_guest(), qemu_workdir),
        image_store=ImageStoreConfig(str(qemu_workdir / "store")),
        registries=Registries(insecure=(plain_registry.host,)),
    )
    assert config.domain_type == "qemu"
    snap = SourceSnapshot(
        repo=str(qemu_workdir), ref="HEAD", commit="e" * 40, files=DirView(str(qemu_workdir))
    )
    try:
        with Hypervisor(qemu_uri) as hv:
            plan, status = reconcile_once(
                snap, "vms", HostTarget(qemu_uri, config, PlanPolicy(host="h1")), hv
            )
        assert not plan.errors, status.message
        assert all(r.ok for r in status.results), [r.message for r in status.results if not r.ok]
        assert f"image {image} → {digest}" in format_plan(plan)
        wait_agent(qemu_uri, NAME, 240)
        marker = MARKER.decode()
        read = f"head -c {len(marker)} /dev/vda | grep -qx {marker}"
        assert guest_exec(qemu_uri, NAME, "/bin/sh", "-c", read) == 0
        assert guest_exec(qemu_uri, NAME, "/bin/sh", "-c", "head -c 4 /dev/vda | grep -qx NOPE") == 1
    finally:
        remove_guest(qemu_uri, NAME)
