"""The containerDisk contract and the checks before use (``images.containerdisk``, ``images.manifest``).

Covers: a layout of one layer with ``disk/tiny.qcow2`` gives that file, its format read
from its bytes (qcow2 or raw) and the digest; a gzip layer is read too; a later layer's
file replaces an earlier one and whiteouts hide files of lower layers; refused, with
nothing written: a manifest whose sha256 is not the digest, a blob whose bytes do not
match its digest, a missing blob, a declared size over the budget, a layer unpacking to
more than the budget, entries with ``..``, an absolute path, a symbolic or hard link, a
FIFO, a file below ``disk/``'s top, no disk file, two disk files, a wrong suffix; a
manifest list gives its linux/amd64 image, and without one says so; unsupported
manifest and layer types are named; a gzip layer cut short anywhere (its bytes matching
their digest) is refused, never an unexpected exception.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from typing import TYPE_CHECKING

import pytest

from reconciler.images.containerdisk import ContractError, extract_disk
from reconciler.images.manifest import image_manifest, is_list, platform_digest
from tests.helpers.registry import Entry, disk_layer, image_layout, tar_layer

if TYPE_CHECKING:
    from pathlib import Path

QCOW2 = b"QFI\xfb" + b"\0" * 2044
BUDGET = 1 << 20


def layout(tmp_path: Path, *layers: bytes) -> tuple[Path, str]:
    path = tmp_path / "layout"
    return path, image_layout(path, list(layers))


def extract(tmp_path: Path, *layers: bytes, budget: int = BUDGET) -> Path:
    path, digest = layout(tmp_path, *layers)
    out = tmp_path / "out"
    out.mkdir()
    disk = extract_disk(path, digest, out, budget)
    assert disk.digest == digest
    return disk.path


def refused(tmp_path: Path, *layers: bytes, match: str, budget: int = BUDGET) -> None:
    with pytest.raises(ContractError, match=match):
        extract(tmp_path, *layers, budget=budget)
    assert list((tmp_path / "out").iterdir()) == []


def test_the_disk_file_is_extracted(tmp_path: Path) -> None:
    path, digest = layout(tmp_path, disk_layer(QCOW2))
    disk = extract_disk(path, digest, tmp_path, BUDGET)
    assert disk.path == tmp_path / "tiny.qcow2"
    assert disk.path.read_bytes() == QCOW2
    assert (disk.format, disk.size, disk.digest) == ("qcow2", len(QCOW2), digest)


def test_raw_format_and_gzip_layer(tmp_path: Path) -> None:
    path = tmp_path / "layout"
    layer = gzip.compress(disk_layer(b"\0" * 4096, "disk.img"))
    digest = image_layout(path, [layer])
    manifest = json.loads((path / "manifest.json").read_bytes())
    manifest["layers"][0]["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
    raw = json.dumps(manifest).encode()
    (path / "manifest.json").write_bytes(raw)
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    disk = extract_disk(path, digest, tmp_path, BUDGET)
    assert (disk.path.name, disk.format, disk.size) == ("disk.img", "raw", 4096)


def test_layers_stack_with_whiteouts(tmp_path: Path) -> None:
    first = tar_layer([Entry("disk", kind="dir"), Entry("disk/old.qcow2", b"old")])
    second = tar_layer([Entry("disk/.wh.old.qcow2"), Entry("disk/new.qcow2", QCOW2)])
    assert extract(tmp_path, first, second).read_bytes() == QCOW2


def test_opaque_whiteout_and_replacement(tmp_path: Path) -> None:
    first = tar_layer([Entry("disk/a.qcow2", b"a"), Entry("disk/b.qcow2", b"b")])
    second = tar_layer([Entry("disk/.wh..wh..opq"), Entry("disk/b.qcow2", QCOW2)])
    assert extract(tmp_path, first, second).read_bytes() == QCOW2


def test_wrong_manifest_digest(tmp_path: Path) -> None:
    path, _ = layout(tmp_path, disk_layer(QCOW2))
    (tmp_path / "out").mkdir()
    with pytest.raises(ContractError, match="the manifest pulled is not sha256:0000"):
        extract_disk(path, "sha256:" + "0" * 64, tmp_path / "out", BUDGET)


def test_wrong_blob_digest(tmp_path: Path) -> None:
    path, digest = layout(tmp_path, disk_layer(QCOW2))
    layer = image_manifest((path / "manifest.json").read_bytes()).layers[0]
    blob = path / layer.digest.removeprefix("sha256:")
    data = bytearray(blob.read_bytes())
    data[-1] ^= 1
    blob.write_bytes(bytes(data))
    (tmp_path / "out").mkdir()
    with pytest.raises(ContractError, match=f"blob {layer.digest} does not match its digest"):
        extract_disk(path, digest, tmp_path / "out", BUDGET)
    assert list((tmp_path / "out").iterdir()) == []


def test_missing_blob(tmp_path: Path) -> None:
    path, digest = layout(tmp_path, disk_layer(QCOW2))
    layer = image_manifest((path / "manifest.json").read_bytes()).layers[0]
    (path / layer.digest.removeprefix("sha256:")).unlink()
    with pytest.raises(ContractError, match="is missing"):
        extract_disk(path, digest, tmp_path, BUDGET)


def test_declared_size_over_budget(tmp_path: Path) -> None:
    refused(tmp_path, disk_layer(QCOW2), match="declare .* bytes, over the budget of 1000", budget=1000)


def test_unpacked_size_over_budget(tmp_path: Path) -> None:
    # a gzip layer of 64 KiB that unpacks to 8 MiB: the declared size is no defence
    bomb = gzip.compress(disk_layer(b"\0" * (8 << 20)))
    path = tmp_path / "layout"
    image_layout(path, [bomb])
    manifest = json.loads((path / "manifest.json").read_bytes())
    manifest["layers"][0]["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
    raw = json.dumps(manifest).encode()
    (path / "manifest.json").write_bytes(raw)
    with pytest.raises(ContractError, match="unpacks to more than the budget"):
        extract_disk(path, "sha256:" + hashlib.sha256(raw).hexdigest(), tmp_path, BUDGET)
    assert not (tmp_path / "tiny.qcow2").exists()


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ([Entry("disk/../../etc/cron.d/x", b"x")], "climbs out with '..'"),
        ([Entry("../x", b"x"), Entry("disk/tiny.qcow2", QCOW2)], "climbs out with '..'"),
        ([Entry("/disk/tiny.qcow2", QCOW2)], "absolute path"),
        ([Entry("disk/tiny.qcow2", kind="symlink", target="/etc/passwd")], "is a link"),
        ([Entry("etc/x", kind="symlink", target="/"), Entry("disk/tiny.qcow2", QCOW2)], "is a link"),
        ([Entry("disk/tiny.qcow2", kind="hardlink", target="etc/shadow")], "is a link"),
        ([Entry("disk/tiny.qcow2", kind="fifo")], "FIFO"),
        ([Entry("disk/sub/tiny.qcow2", QCOW2)], "below /disk/"),
        ([Entry("disk", kind="dir")], "exactly one disk file .* it holds nothing"),
        ([Entry("disk/a.qcow2", QCOW2), Entry("disk/b.raw", b"")], "holds disk/a.qcow2, disk/b.raw"),
        ([Entry("disk/tiny.vmdk", QCOW2)], "is not a .qcow2, .raw or .img file"),
    ],
)
def test_hostile_layers_refused(tmp_path: Path, entries: list[Entry], match: str) -> None:
    refused(tmp_path, tar_layer(entries), match=match)


def test_manifest_lists(tmp_path: Path) -> None:
    entries = [
        {"digest": "sha256:" + "1" * 64, "size": 1, "platform": {"os": "linux", "architecture": "arm64"}},
        {"digest": "sha256:" + "2" * 64, "size": 1, "platform": {"os": "linux", "architecture": "amd64"}},
    ]
    index = json.dumps({"schemaVersion": 2, "manifests": entries}).encode()
    assert is_list(index)
    assert platform_digest(index) == "sha256:" + "2" * 64
    arm_only = json.dumps({"schemaVersion": 2, "manifests": entries[:1]}).encode()
    with pytest.raises(ValueError, match="no linux/amd64 image in the manifest list"):
        platform_digest(arm_only)


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({"mediaType": "application/vnd.docker.distribution.manifest.v1+json"}, "unsupported manifest type"),
        (
            {
                "schemaVersion": 2,
                "config": {"digest": "sha256:" + "1" * 64, "size": 1},
                "layers": [{"digest": "sha256:" + "1" * 64, "size": 1, "mediaType": "x/zstd"}],
            },
            "unsupported layer type 'x/zstd'",
        ),
        ({"schemaVersion": 2, "config": {"digest": "sha256:1", "size": 1}, "layers": []}, "no sha256 digest"),
    ],
)
def test_unsupported_manifests(doc: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        image_manifest(json.dumps(doc).encode())


@pytest.mark.parametrize("cut", [3, 40, 2000, 40000], ids=["header", "tar-header", "entry", "data"])
def test_a_broken_gzip_layer_is_refused(tmp_path: Path, cut: int) -> None:
    """Bytes that match their digest but are no whole gzip tar stream: refused, not a crash."""
    noise = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(4096))  # does not compress
    layer = gzip.compress(disk_layer(QCOW2 + noise))
    assert len(layer) > 2 * cut
    path = tmp_path / "layout"
    image_layout(path, [layer[:cut]])
    manifest = json.loads((path / "manifest.json").read_bytes())
    manifest["layers"][0]["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
    raw = json.dumps(manifest).encode()
    (path / "manifest.json").write_bytes(raw)
    (tmp_path / "out").mkdir()
    with pytest.raises(
        ContractError, match=r"layer 0(: .*)? (is not a readable tar stream|cannot be read|is shorter)"
    ):
        extract_disk(path, "sha256:" + hashlib.sha256(raw).hexdigest(), tmp_path / "out", BUDGET)
    assert list((tmp_path / "out").iterdir()) == []


def test_a_deeply_nested_manifest_is_refused() -> None:
    with pytest.raises(ValueError, match="the manifest is not JSON"):
        image_manifest(b"[" * 100_000 + b"]" * 100_000)
