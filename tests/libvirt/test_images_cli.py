"""``reconciler images ls | pull | prune`` and the store's garbage collection
(``cli/images.py``, ``images/gc.py``), with a local HTTP server and libvirt's test driver.

Covers: ``pull URL`` downloads, checks and stores an image and prints its digest; ``ls``
lists it (text and JSON); a hostile image is refused by ``pull`` with "backing file";
``prune --dry-run`` names an unused image and removes nothing, ``prune`` removes it; a
stored image a domain's overlay leads to (the qcow2 header's backing file) is kept
even past the grace period.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from reconciler import cli
from reconciler.images.gc import collect, referenced
from reconciler.images.store import ImageStore
from reconciler.settings.images import ImageStoreConfig
from tests.helpers.images import Clock, incoming, qemu_img, tiny_qcow2
from tests.helpers.imageserver import ImageServer, image_server

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def server() -> Iterator[ImageServer]:
    with image_server() as s:
        yield s


def host_yaml(tmp_path: Path, grace: str = "1h") -> str:
    p = tmp_path / "host.yaml"
    p.write_text(
        f"allowedDirectories: [{tmp_path}]\nvolumeDirectory: {tmp_path}/volumes\n"
        f"imageStore: {{dir: {tmp_path}/store, maxBytes: 1Gi, gracePeriod: {grace}}}\n"
    )
    return str(p)


def test_pull_ls_and_prune(tmp_path: Path, server: ImageServer, capsys: pytest.CaptureFixture[str]) -> None:
    server.files["/tiny.qcow2"] = tiny_qcow2(tmp_path / "t.qcow2")
    url = server.url("/tiny.qcow2")
    conf = host_yaml(tmp_path, grace="0s")
    assert cli.main(["images", "pull", url, "--host-config", conf]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{url} → sha256:")
    assert cli.main(["images", "ls", "-o", "json", "--host-config", conf]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["images"]
    assert entry["image"] == url
    assert entry["digest"] in out
    assert cli.main(["images", "ls", "--host-config", conf]) == 0
    assert "1 image(s)" in capsys.readouterr().out
    args = ["images", "prune", "--connect", "test:///default", "--host-config", conf]
    assert cli.main([*args, "--dry-run"]) == 0
    assert f"would remove {entry['file']}" in capsys.readouterr().out
    assert len(list((tmp_path / "store" / "sha256").iterdir())) == 1
    assert cli.main(args) == 0
    assert f"removed {entry['file']}" in capsys.readouterr().out
    assert list((tmp_path / "store" / "sha256").iterdir()) == []


def test_pull_refuses_a_hostile_image(
    tmp_path: Path, server: ImageServer, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = tmp_path / "evil.qcow2"
    qemu_img("create", "-q", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", str(evil))
    server.files["/evil.qcow2"] = evil.read_bytes()
    assert cli.main(["images", "pull", server.url("/evil.qcow2"), "--host-config", host_yaml(tmp_path)]) == 1
    assert "backing file" in capsys.readouterr().err


def test_an_image_a_domain_leads_to_is_kept(tmp_path: Path) -> None:
    clock = Clock()
    store = ImageStore(ImageStoreConfig(str(tmp_path / "store"), 1 << 30, 60.0), clock)
    base = store.put(incoming(store, tiny_qcow2(tmp_path / "b.qcow2")), "base")
    idle = store.put(incoming(store, b"I" * 8192), "idle")
    overlay = tmp_path / "vm.overlay.qcow2"
    qemu_img("create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base.path, str(overlay))
    xml = f"<domain><devices><disk type='file'><source file='{overlay}'/></disk></devices></domain>"
    assert base.path in referenced([xml])
    clock.now += 3600
    assert collect(store, [xml]) == [idle.path]
    assert store.lookup("base") is not None
