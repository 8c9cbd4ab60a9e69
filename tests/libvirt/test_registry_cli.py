"""``reconciler images pull`` from a registry (``cli/images.py`` through the registry source),
Debian's docker-registry on loopback (``tests/helpers/registry.py``); no libvirt needed.

Covers: ``pull HOST:PORT/repo:tag`` with ``registries.insecure`` in the host config file
stores the disk and prints the manifest digest, ``ls`` lists it; ``pull docker://...``
(a DataVolume URL) does the same; without ``registries.insecure`` the pull fails with
exit 1 and says to list the registry; the bytes the registry sent are counted (the
``on_bytes`` hook the daemon's metric takes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.images.resolve import Use, fetch_one
from reconciler.images.sources import ImageRef
from reconciler.images.stage import sources_for
from reconciler.images.store import ImageStore
from reconciler.settings.host import HostConfig
from reconciler.settings.images import ImageStoreConfig
from reconciler.settings.registries import Registries
from tests.helpers.registry import Registry, disk_layer, image_layout, push, tiny_qcow2

if TYPE_CHECKING:
    from pathlib import Path


def host_yaml(tmp_path: Path, *insecure: str) -> str:
    p = tmp_path / "host.yaml"
    listed = f"registries: {{insecure: [{', '.join(repr(h) for h in insecure)}]}}\n" if insecure else ""
    p.write_text(
        f"allowedDirectories: [{tmp_path}]\nvolumeDirectory: {tmp_path}/volumes\n"
        f"imageStore: {{dir: {tmp_path}/store, maxBytes: 1Gi}}\n{listed}"
    )
    return str(p)


@pytest.fixture
def pushed(plain_registry: Registry, tmp_path: Path) -> tuple[str, str]:
    layout = tmp_path / "layout"
    digest = image_layout(layout, [disk_layer(tiny_qcow2(tmp_path), "cli.qcow2")])
    push(layout, plain_registry, "cli/tiny:1")
    return f"{plain_registry.host}/cli/tiny:1", digest


@pytest.mark.parametrize("scheme", ["", "docker://"])
def test_pull_and_ls(
    plain_registry: Registry,
    pushed: tuple[str, str],
    tmp_path: Path,
    scheme: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    image, digest = pushed
    config = host_yaml(tmp_path, plain_registry.host)
    assert cli.main(["images", "pull", f"{scheme}{image}", "--host-config", config]) == 0
    out = capsys.readouterr().out
    assert f"{scheme}{image} → {digest} (qcow2, {tmp_path}/store/sha256/" in out
    assert cli.main(["images", "ls", "--host-config", config]) == 0
    assert f"{image}  {digest}  qcow2" in capsys.readouterr().out


def test_pull_refused_without_insecure(
    plain_registry: Registry, pushed: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image, _ = pushed
    assert cli.main(["images", "pull", image, "--host-config", host_yaml(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"list {plain_registry.host} under registries.insecure" in err


def test_pulled_bytes_are_counted(plain_registry: Registry, pushed: tuple[str, str], tmp_path: Path) -> None:
    image, digest = pushed
    host = HostConfig(
        allowed_dirs=(str(tmp_path),),
        volume_dir=str(tmp_path / "volumes"),
        image_store=ImageStoreConfig(str(tmp_path / "store")),
        registries=Registries(insecure=(plain_registry.host,)),
    )
    store = ImageStore(host.image_store)
    counted: list[int] = []
    use = Use(ImageRef("containerDisk", image, "IfNotPresent"), image, "", {})
    got = fetch_one(use, store, sources_for(store, host, counted.append), None)
    assert got.digest == digest
    assert len(counted) == 1
    assert counted[0] > 0
    again = fetch_one(use, store, sources_for(store, host, counted.append), None)
    assert again.digest == digest
    assert len(counted) == 1  # IfNotPresent: the store holds it, nothing pulled
