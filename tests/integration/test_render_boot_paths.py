"""Provisioning refuses paths that escape the allowed directories once symlinks are resolved.

Render checks paths lexically (it is pure); a symlink planted inside an allowed
directory can only be seen on the host. Covers: a hostDisk ``Disk`` that is a
symlink to ``/etc/shadow`` or to a block device, a ``DiskOrCreate`` below a
symlinked directory pointing outside, a containerDisk image symlinked outside,
a device node inside an allowed directory, and the volume directory itself
symlinked away. In every case ``provision`` raises before creating anything.
Runs without libvirt (no pool volumes involved) but needs qemu-img, so it sits
with the host tests.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from reconciler.host.provision import ProvisionError, discard_ephemeral, provision
from reconciler.model import ExpandedVM, Manifest
from reconciler.render import HostCaps, render_domain
from reconciler.settings.host import HostConfig, ImageSource

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def area() -> Iterator[tuple[Path, Path]]:
    base = Path("/var/lib/reconciler-rtest") / f"paths-{uuid.uuid4().hex[:8]}"
    allowed, outside = base / "allowed", base / "outside"
    allowed.mkdir(parents=True)
    outside.mkdir()
    yield allowed, outside
    shutil.rmtree(base, ignore_errors=True)


def vm(volumes: list[dict[str, Any]]) -> ExpandedVM:
    obj = {
        "metadata": {"name": "rtest-render-paths"},
        "spec": {
            "runStrategy": "Halted",
            "template": {
                "spec": {
                    "domain": {
                        "memory": {"guest": "64Mi"},
                        "devices": {
                            "disks": [{"name": v["name"], "disk": {"bus": "virtio"}} for v in volumes]
                        },
                    },
                    "volumes": volumes,
                }
            },
        },
    }
    return ExpandedVM(vm=obj, source=Manifest(obj, "vms/p.yaml", 1))


def host(allowed: Path, **kw: Any) -> HostConfig:
    return HostConfig(allowed_dirs=(str(allowed),), volume_dir=str(allowed / "volumes"), **kw)


def scratch() -> dict[str, Any]:
    return {"name": "scratch", "emptyDisk": {"capacity": "16Mi"}}


def attempt(allowed: Path, volumes: list[dict[str, Any]], **kw: Any) -> None:
    h = host(allowed, **kw)
    rendered = render_domain(vm(volumes), h, HostCaps.default())  # lexically fine
    with pytest.raises(ProvisionError, match=r"outside the allowed directories|not a regular file"):
        provision(rendered, None, h)
    assert not (allowed / "volumes").exists(), "something was created before the refusal"


@pytest.mark.parametrize("target", ["/etc/shadow", "/dev/null"])
def test_symlinked_host_disk_is_refused(area: tuple[Path, Path], target: str) -> None:
    allowed, _ = area
    (allowed / "disk.img").symlink_to(target)
    attempt(
        allowed, [scratch(), {"name": "d", "hostDisk": {"path": str(allowed / "disk.img"), "type": "Disk"}}]
    )


def test_disk_or_create_below_a_symlinked_directory_is_refused(area: tuple[Path, Path]) -> None:
    allowed, outside = area
    (allowed / "escape").symlink_to(outside)
    path = allowed / "escape" / "new.qcow2"
    attempt(
        allowed,
        [
            scratch(),
            {"name": "d", "hostDisk": {"path": str(path), "type": "DiskOrCreate", "capacity": "1Mi"}},
        ],
    )
    assert not (outside / "new.qcow2").exists()


def test_symlinked_image_is_refused(area: tuple[Path, Path]) -> None:
    allowed, outside = area
    (outside / "secret.qcow2").write_bytes(b"x")
    (allowed / "image.qcow2").symlink_to(outside / "secret.qcow2")
    images = {"example/img:1": ImageSource(str(allowed / "image.qcow2"))}
    attempt(allowed, [scratch(), {"name": "c", "containerDisk": {"image": "example/img:1"}}], images=images)


def test_device_node_inside_allowed_directory_is_refused(area: tuple[Path, Path]) -> None:
    allowed, _ = area
    os.mknod(allowed / "sda", 0o600 | 0o060000, os.makedev(8, 0))  # a block device node
    attempt(allowed, [scratch(), {"name": "d", "hostDisk": {"path": str(allowed / "sda"), "type": "Disk"}}])


def test_symlinked_volume_directory_is_refused(area: tuple[Path, Path]) -> None:
    allowed, outside = area
    (allowed / "volumes").symlink_to(outside)
    h = host(allowed)
    rendered = render_domain(vm([scratch()]), h, HostCaps.default())
    with pytest.raises(ProvisionError, match="outside the allowed directories"):
        provision(rendered, None, h)
    assert list(outside.iterdir()) == []
    with pytest.raises(ProvisionError, match="outside the allowed directories"):
        discard_ephemeral(rendered, h)


def test_inside_paths_are_created(area: tuple[Path, Path]) -> None:
    allowed, _ = area
    h = host(allowed)
    d = {
        "name": "d",
        "hostDisk": {"path": str(allowed / "a/b/raw.img"), "type": "DiskOrCreate", "capacity": "1Mi"},
    }
    rendered = render_domain(vm([scratch(), d]), h, HostCaps.default())
    provision(rendered, None, h)
    raw = allowed / "a/b/raw.img"
    assert raw.stat().st_size == 1 << 20
    assert raw.stat().st_blocks == 0
    assert (allowed / "volumes/rtest-render-paths/scratch.qcow2").is_file()


def test_cloud_init_iso_is_rewritten_only_when_its_content_changes(area: tuple[Path, Path]) -> None:
    allowed, _ = area
    h = host(allowed)

    def rendered(user_data: str) -> Any:
        return render_domain(
            vm([{"name": "ci", "cloudInitNoCloud": {"userData": user_data}}]), h, HostCaps.default()
        )

    iso = allowed / "volumes/rtest-render-paths/ci.iso"
    provision(rendered("#cloud-config\na: 1\n"), None, h)
    first = iso.stat().st_ino, iso.read_bytes()
    provision(rendered("#cloud-config\na: 1\n"), None, h)  # a new build would differ in its timestamps
    assert (iso.stat().st_ino, iso.read_bytes()) == first
    provision(rendered("#cloud-config\na: 2\n"), None, h)
    assert iso.stat().st_ino != first[0]
    assert b"a: 2" in iso.read_bytes()
