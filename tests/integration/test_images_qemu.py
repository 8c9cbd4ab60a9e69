"""A VM whose DataVolume imports ``http://127.0.0.1:PORT/tiny.qcow2`` runs on QEMU from
those bytes (real libvirtd, TCG, the cached test guest of ``tests/helpers/guest.py``).

Covers: the plan downloads the image from a local HTTP server in-process into the
host's store and names its digest; apply makes the VM's pool volume from the stored
file; the guest, booted by ``kernelBoot``, reads the image's marker from its disk
(``/dev/vda``) through the guest agent.
"""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
from typing import TYPE_CHECKING

import libvirt
import pytest
import yaml

from reconciler.host.hypervisor import Hypervisor
from reconciler.model import SourceSnapshot
from reconciler.plan.text import format_plan
from reconciler.reconcile import reconcile_once
from reconciler.settings.images import ImageStoreConfig
from reconciler.settings.policy import PlanPolicy
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
from tests.helpers.imageserver import image_server

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PREFIX = "rtest-img-"
NAME = PREFIX + "http"
MARKER = b"TINY-IMAGE-FROM-HTTP"


@pytest.fixture
def pool(qemu_uri: str, qemu_workdir: Path) -> Iterator[str]:
    pool_dir = qemu_workdir / "pool"
    pool_dir.mkdir()
    name = f"rtest-img-pool-{qemu_workdir.name}"
    conn = libvirt.open(qemu_uri)
    p = conn.storagePoolCreateXML(
        f"<pool type='dir'><name>{name}</name><target><path>{pool_dir}</path></target></pool>", 0
    )
    try:
        yield name
    finally:
        remove_guest(qemu_uri, NAME)
        for vol in p.listAllVolumes():
            vol.delete(0)
        p.destroy()
        conn.close()


def test_a_vm_runs_from_an_http_image(qemu_uri: str, qemu_workdir: Path, pool: str) -> None:
    raw = qemu_workdir / "tiny.raw"
    raw.write_bytes(MARKER + b"\0" * (4 << 20))
    tiny = qemu_workdir / "tiny.qcow2"
    subprocess.run(["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(raw), str(tiny)], check=True)
    data = tiny.read_bytes()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with image_server() as server:
        server.files["/tiny.qcow2"] = data
        url = server.url("/tiny.qcow2")
        vm = vm_manifest(NAME)
        vm["spec"]["dataVolumeTemplates"] = [
            {
                "metadata": {"name": "tiny"},
                "spec": {
                    "source": {"http": {"url": url}},
                    "storage": {"resources": {"requests": {"storage": "64Mi"}}},
                },
            }
        ]
        tspec = vm["spec"]["template"]["spec"]
        tspec["domain"]["devices"]["disks"] = [{"name": "tiny", "disk": {"bus": "virtio"}}]
        tspec["volumes"] = [{"name": "tiny", "dataVolume": {"name": "tiny"}}]
        (qemu_workdir / "vms" / f"{NAME}.yaml").write_text(yaml.safe_dump(vm, sort_keys=False))
        config = dataclasses.replace(
            host_config(build_test_guest(), qemu_workdir),
            storage_pool=pool,
            image_store=ImageStoreConfig(str(qemu_workdir / "store")),
        )
        assert config.domain_type == "qemu"
        snap = SourceSnapshot(
            repo=str(qemu_workdir), ref="HEAD", commit="e" * 40, files=DirView(str(qemu_workdir))
        )
        with Hypervisor(qemu_uri) as hv:
            plan, status = reconcile_once(
                snap, "vms", HostTarget(qemu_uri, config, PlanPolicy(host="h1")), hv
            )
    assert not plan.errors, status.message
    assert all(r.ok for r in status.results), [r.message for r in status.results if not r.ok]
    assert f"image {url} → {digest}" in format_plan(plan)
    stored = qemu_workdir / "store" / "sha256" / digest.removeprefix("sha256:")
    assert stored.read_bytes() == data
    wait_agent(qemu_uri, NAME, 240)
    marker = MARKER.decode()
    assert (
        guest_exec(qemu_uri, NAME, "/bin/sh", "-c", f"head -c {len(marker)} /dev/vda | grep -qx {marker}")
        == 0
    )
    assert guest_exec(qemu_uri, NAME, "/bin/sh", "-c", "head -c 4 /dev/vda | grep -qx NOPE") == 1


def test_a_data_volume_clones_a_pool_volume(qemu_uri: str, qemu_workdir: Path, pool: str) -> None:
    """``source.pvc`` copies an existing volume of the host's pool, at the requested size."""
    raw = qemu_workdir / "golden.raw"
    raw.write_bytes(b"GOLDEN-VOLUME" + b"\0" * (1 << 20))
    conn = libvirt.open(qemu_uri)
    try:
        p = conn.storagePoolLookupByName(pool)
        p.createXML(
            "<volume><name>golden</name><capacity unit='bytes'>8388608</capacity>"
            "<target><format type='qcow2'/></target></volume>",
            0,
        )
    finally:
        conn.close()
    with Hypervisor(qemu_uri) as hv:
        hv.upload_pool_volume(pool, "golden", str(_qcow2_of(raw)))
    vm = vm_manifest(NAME, run_strategy="Halted")
    vm["spec"]["dataVolumeTemplates"] = [
        {
            "metadata": {"name": "copy"},
            "spec": {
                "source": {"pvc": {"name": "golden"}},
                "storage": {"resources": {"requests": {"storage": "32Mi"}}},
            },
        }
    ]
    tspec = vm["spec"]["template"]["spec"]
    tspec["domain"]["devices"]["disks"] = [{"name": "copy", "disk": {"bus": "virtio"}}]
    tspec["volumes"] = [{"name": "copy", "dataVolume": {"name": "copy"}}]
    (qemu_workdir / "vms" / f"{NAME}.yaml").write_text(yaml.safe_dump(vm, sort_keys=False))
    config = dataclasses.replace(host_config(build_test_guest(), qemu_workdir), storage_pool=pool)
    snap = SourceSnapshot(
        repo=str(qemu_workdir), ref="HEAD", commit="e" * 40, files=DirView(str(qemu_workdir))
    )
    with Hypervisor(qemu_uri) as hv:
        plan, status = reconcile_once(snap, "vms", HostTarget(qemu_uri, config, PlanPolicy(host="h1")), hv)
    assert not plan.errors, status.message
    assert all(r.ok for r in status.results), [r.message for r in status.results if not r.ok]
    copy = qemu_workdir / "pool" / "copy"
    back = qemu_workdir / "copy.raw"
    subprocess.run(["qemu-img", "convert", "-q", "-O", "raw", str(copy), str(back)], check=True)
    assert back.read_bytes().startswith(b"GOLDEN-VOLUME")
    assert back.stat().st_size == 32 << 20


def _qcow2_of(raw: Path) -> Path:
    out = raw.with_suffix(".qcow2")
    subprocess.run(["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(raw), str(out)], check=True)
    return out
