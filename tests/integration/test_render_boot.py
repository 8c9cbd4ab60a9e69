"""Render + provision + boot on real libvirtd/QEMU (TCG), domain names ``rtest-render-*``.

Covers:
- a VM with a ``DiskOrCreate`` hostDisk, an ``emptyDisk`` and a NoCloud cloud-init ISO
  is provisioned, defined from the rendered XML, started, and its live XML carries
  the three disks at the rendered paths and targets;
- the created images have the requested virtual sizes; the ISO has label ``cidata``
  and the user-data; provisioning twice changes nothing;
- ``discard_ephemeral`` removes the emptyDisk and the ISO (not the hostDisk), and the
  next provision recreates them;
- storage-pool volumes: a blank dataVolume, one cloned from an image file, and a
  missing PVC refused before anything is created.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pycdlib
import pytest

from reconciler.errors import ReconcilerError
from reconciler.host.hypervisor import Hypervisor
from reconciler.host.provision import discard_ephemeral, provision
from reconciler.model import ExpandedVM, Manifest, RenderedDomain
from reconciler.render import parse_host_caps, render_domain
from reconciler.settings.host import HostConfig, ImageSource, NetworkTarget

if TYPE_CHECKING:
    from collections.abc import Iterator

BASE = Path("/var/lib/reconciler-rtest")


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = BASE / uuid.uuid4().hex[:12]
    d.mkdir(parents=True)
    d.chmod(0o755)
    BASE.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def hv(qemu_uri: str) -> Iterator[Hypervisor]:
    with Hypervisor(qemu_uri) as h:
        yield h


def host_for(workdir: Path, **kw: Any) -> HostConfig:
    return HostConfig(
        allowed_dirs=(str(workdir),),
        volume_dir=str(workdir / "volumes"),
        nvram_dir=str(workdir / "nvram"),
        domain_type="qemu",  # TCG: no KVM on the test machines
        pod_network=NetworkTarget("user"),
        graphics="none",
        **kw,
    )


def expanded(name: str, template_spec: dict[str, Any], **spec: Any) -> ExpandedVM:
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {"runStrategy": "Always", "template": {"spec": template_spec}, **spec},
    }
    return ExpandedVM(vm=vm, source=Manifest(vm, f"vms/{name}.yaml", 1))


def image_info(path: Path) -> dict[str, Any]:
    out = subprocess.run(
        ["qemu-img", "info", "--output=json", "-U", str(path)], check=True, capture_output=True, text=True
    )
    return dict(json.loads(out.stdout))


def read_iso(path: Path) -> tuple[str, dict[str, bytes]]:
    iso = pycdlib.PyCdlib()
    iso.open(str(path))
    try:
        label = iso.pvd.volume_identifier.decode().strip()
        files = {}
        for name in ("user-data", "meta-data"):
            buf = io.BytesIO()
            iso.get_file_from_iso_fp(buf, joliet_path=f"/{name}")
            files[name] = buf.getvalue()
        return label, files
    finally:
        iso.close()


def cleanup(hv: Hypervisor, name: str) -> None:
    if hv.get_domain(name) is not None:
        with contextlib.suppress(ReconcilerError):
            hv.destroy(name)
        hv.undefine(name)


def boot_spec(workdir: Path) -> dict[str, Any]:
    return {
        "domain": {
            "cpu": {"sockets": 1, "cores": 1, "threads": 1},
            "memory": {"guest": "128Mi"},
            "machine": {"type": "q35"},
            "devices": {
                "disks": [
                    {"name": "root", "disk": {"bus": "virtio"}},
                    {"name": "scratch", "disk": {"bus": "virtio"}},
                    {"name": "cloudinit", "cdrom": {"bus": "sata"}},
                ],
                "interfaces": [{"name": "default", "masquerade": {}}],
            },
        },
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [
            {
                "name": "root",
                "hostDisk": {
                    "path": str(workdir / "disks/root.qcow2"),
                    "type": "DiskOrCreate",
                    "capacity": "1Gi",
                },
            },
            {"name": "scratch", "emptyDisk": {"capacity": "512Mi"}},
            {"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config\nhostname: booted\n"}},
        ],
    }


def test_boot_with_created_disks_and_cloud_init(hv: Hypervisor, workdir: Path) -> None:
    host = host_for(workdir)
    caps = parse_host_caps(*hv.capabilities_xml())
    rendered: RenderedDomain = render_domain(expanded("rtest-render-boot", boot_spec(workdir)), host, caps)
    root = workdir / "disks/root.qcow2"
    scratch = workdir / "volumes/rtest-render-boot/scratch.qcow2"
    iso = workdir / "volumes/rtest-render-boot/cloudinit.iso"
    try:
        provision(rendered, hv, host)
        assert image_info(root)["virtual-size"] == 1 << 30
        assert image_info(root)["format"] == "qcow2"
        assert image_info(scratch)["virtual-size"] == 512 << 20
        label, files = read_iso(iso)
        assert label == "cidata"
        assert files["user-data"] == b"#cloud-config\nhostname: booted\n"
        assert b"instance-id: rtest-render-boot.default" in files["meta-data"]

        before = {p: p.stat().st_mtime_ns for p in (root, scratch, iso)}
        provision(rendered, hv, host)  # idempotent
        assert {p: p.stat().st_mtime_ns for p in (root, scratch, iso)} == before

        hv.define(rendered.xml, rendered.name)
        hv.start(rendered.name)
        deadline = time.monotonic() + 20
        while str(hv.state(rendered.name)) != "running" and time.monotonic() < deadline:
            time.sleep(0.2)
        live = hv.get_domain(rendered.name)
        assert live is not None
        assert str(live.state) == "running"
        dom = ET.fromstring(live.live_xml)
        assert dom.get("type") == "qemu"
        assert dom.findtext("uuid") == rendered.uuid
        disks = {
            d.find("target").get("dev"): (d.get("device"), d.find("source").get("file"))  # type: ignore[union-attr]
            for d in dom.iter("disk")
        }
        assert disks == {
            "vda": ("disk", str(root)),
            "vdb": ("disk", str(scratch)),
            "sda": ("cdrom", str(iso)),
        }
        iface = dom.find("devices/interface")
        assert iface is not None
        assert iface.get("type") == "user"
        mac = iface.find("mac")
        assert mac is not None
        rendered_mac = ET.fromstring(rendered.xml).find("devices/interface/mac")
        assert rendered_mac is not None
        assert mac.get("address") == rendered_mac.get("address")

        hv.destroy(rendered.name)
        removed = discard_ephemeral(rendered, host)
        assert sorted(removed) == sorted([str(scratch), str(iso)])
        assert root.exists()
        assert not scratch.exists()
        assert not iso.exists()
        provision(rendered, hv, host)
        assert scratch.exists()
        assert iso.exists()
        hv.start(rendered.name)
        assert str(hv.state(rendered.name)) == "running"
    finally:
        cleanup(hv, rendered.name)


@pytest.fixture
def pool(hv: Hypervisor, workdir: Path) -> Iterator[str]:
    import libvirt

    pool_dir = workdir / "pool"
    pool_dir.mkdir()
    name = f"rtest-render-pool-{workdir.name}"
    conn = libvirt.open("qemu:///system")
    p = conn.storagePoolCreateXML(
        f"<pool type='dir'><name>{name}</name><target><path>{pool_dir}</path></target></pool>", 0
    )
    try:
        yield name
    finally:
        for vol in p.listAllVolumes():
            vol.delete(0)
        p.destroy()
        conn.close()


def test_pool_volumes_blank_and_cloned(hv: Hypervisor, workdir: Path, pool: str) -> None:
    image = workdir / "images/base.qcow2"
    image.parent.mkdir()
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image), "64M"], check=True)
    host = host_for(
        workdir, storage_pool=pool, images={"https://images.example/base.qcow2": ImageSource(str(image))}
    )
    spec = {
        "domain": {
            "memory": {"guest": "128Mi"},
            "devices": {
                "disks": [
                    {"name": "os", "disk": {"bus": "virtio"}},
                    {"name": "data", "disk": {"bus": "virtio"}},
                ]
            },
        },
        "volumes": [
            {"name": "os", "dataVolume": {"name": "os"}},
            {"name": "data", "dataVolume": {"name": "data"}},
        ],
    }
    templates = [
        {
            "metadata": {"name": "os"},
            "spec": {
                "source": {"http": {"url": "https://images.example/base.qcow2"}},
                "storage": {"resources": {"requests": {"storage": "256Mi"}}},
            },
        },
        {
            "metadata": {"name": "data"},
            "spec": {"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "128Mi"}}}},
        },
    ]
    rendered = render_domain(
        expanded("rtest-render-pool", spec, dataVolumeTemplates=templates),
        host,
        parse_host_caps(*hv.capabilities_xml()),
    )
    provision(rendered, hv, host)
    assert hv.pool_volume_exists(pool, "os")
    assert hv.pool_volume_exists(pool, "data")
    os_info = image_info(workdir / "pool/os")
    assert os_info["format"] == "qcow2"
    assert os_info["virtual-size"] == 256 << 20
    assert "backing-filename" not in os_info  # a clone, not an overlay of the image
    assert image_info(workdir / "pool/data")["virtual-size"] == 128 << 20
    provision(rendered, hv, host)  # idempotent: existing volumes are kept


def test_missing_pvc_is_refused_before_anything_is_created(hv: Hypervisor, workdir: Path, pool: str) -> None:
    host = host_for(workdir, storage_pool=pool)
    spec = {
        "domain": {
            "memory": {"guest": "128Mi"},
            "devices": {
                "disks": [
                    {"name": "scratch", "disk": {"bus": "virtio"}},
                    {"name": "claim", "disk": {"bus": "virtio"}},
                ]
            },
        },
        "volumes": [
            {"name": "scratch", "emptyDisk": {"capacity": "64Mi"}},
            {"name": "claim", "persistentVolumeClaim": {"claimName": "nowhere"}},
        ],
    }
    rendered = render_domain(
        expanded("rtest-render-pvc", spec), host, parse_host_caps(*hv.capabilities_xml())
    )
    with pytest.raises(ReconcilerError, match="volume nowhere does not exist in storage pool"):
        provision(rendered, hv, host)
    assert not (workdir / "volumes").exists()


def test_existing_pool_volume_of_another_format_is_refused(hv: Hypervisor, workdir: Path, pool: str) -> None:
    subprocess.run(
        ["virsh", "-q", "-c", "qemu:///system", "vol-create-as", pool, "legacy", "16M", "--format", "raw"],
        check=True,
    )
    host = host_for(workdir, storage_pool=pool)  # storagePoolFormat qcow2
    spec = {
        "domain": {
            "memory": {"guest": "128Mi"},
            "devices": {"disks": [{"name": "d", "disk": {"bus": "virtio"}}]},
        },
        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "legacy"}}],
    }
    rendered = render_domain(
        expanded("rtest-render-fmt", spec), host, parse_host_caps(*hv.capabilities_xml())
    )
    assert '<driver name="qemu" type="qcow2" />' in rendered.xml
    with pytest.raises(
        ReconcilerError,
        match=r"legacy in storage pool .* is raw, but the host config says storagePoolFormat qcow2",
    ):
        provision(rendered, hv, host)
    raw_host = host_for(workdir, storage_pool=pool, storage_pool_format="raw")
    provision(
        render_domain(expanded("rtest-render-fmt", spec), raw_host, parse_host_caps(*hv.capabilities_xml())),
        hv,
        raw_host,
    )


@pytest.mark.parametrize("secure", [True, False])
def test_efi_boots_with_per_vm_nvram(hv: Hypervisor, workdir: Path, secure: bool) -> None:
    host = host_for(workdir)
    spec = {
        "domain": {
            "memory": {"guest": "256Mi"},
            "machine": {"type": "q35"},
            "features": {"smm": {}} if secure else {},
            "firmware": {"bootloader": {"efi": {"secureBoot": secure}}},
            "devices": {"disks": [{"name": "scratch", "disk": {"bus": "virtio"}}]},
        },
        "volumes": [{"name": "scratch", "emptyDisk": {"capacity": "64Mi"}}],
    }
    rendered = render_domain(
        expanded("rtest-render-efi", spec), host, parse_host_caps(*hv.capabilities_xml())
    )
    nvram = workdir / "nvram" / "rtest-render-efi_VARS.fd"
    try:
        provision(rendered, hv, host)
        hv.define(rendered.xml, rendered.name)
        hv.start(rendered.name)
        live = hv.get_domain(rendered.name)
        assert live is not None
        assert str(live.state) == "running"
        loader = ET.fromstring(live.live_xml).find("os/loader")
        assert loader is not None
        assert loader.get("secure") == ("yes" if secure else "no")
        assert nvram.is_file()  # copied from the template by libvirt
        hv.destroy(rendered.name)
        assert str(nvram) in discard_ephemeral(rendered, host)  # efi.persistent unset: fresh per cold boot
        assert not nvram.exists()
    finally:
        cleanup(hv, rendered.name)
