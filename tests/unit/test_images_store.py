"""The image store and the checks every stored file passes (``images/store.py``,
``images/safety.py``), with real files and the real ``qemu-img``.

Covers: a qcow2 whose backing file is ``/etc/passwd`` is refused ("backing file"),
as is one with an external data file ("data file") and a vmdk descriptor, and nothing
is kept; a wrong digest is an error and nothing is kept; gzip and xz are undone; a
vmdk is converted to qcow2; a stored file is read-only, named by its sha256, kept once
for two references; a declared size over the budget is refused before any download,
and a decompressed image over it too; the index survives a new store object; prune
keeps what a domain references or was used within the grace period.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
from typing import TYPE_CHECKING

import pytest

from reconciler.images.sources import ImageError
from reconciler.images.store import ImageStore
from reconciler.settings.images import ImageStoreConfig
from tests.helpers.images import Clock, incoming, qemu_img, store_at, tiny_qcow2

if TYPE_CHECKING:
    from pathlib import Path


def blobs(store: ImageStore) -> list[str]:
    d = store.root / "sha256"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def test_a_backing_file_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    evil = tmp_path / "evil.qcow2"
    qemu_img("create", "-q", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", str(evil))
    store = store_at(tmp_path)
    with pytest.raises(ImageError, match="backing file"):
        store.put(incoming(store, evil.read_bytes()), "http://x/evil.qcow2")
    assert blobs(store) == []
    assert store.lookup("http://x/evil.qcow2") is None
    assert list(store.partial_dir().iterdir()) == []


def test_a_compressed_backing_file_is_refused_too(tmp_path: Path) -> None:
    evil = tmp_path / "evil.qcow2"
    qemu_img("create", "-q", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", str(evil))
    store = store_at(tmp_path)
    with pytest.raises(ImageError, match="backing file"):
        store.put(incoming(store, gzip.compress(evil.read_bytes())), "evil.gz")


def test_an_external_data_file_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "df.qcow2"
    qemu_img("create", "-q", "-f", "qcow2", "-o", f"data_file={tmp_path / 'data.raw'}", str(bad), "1M")
    store = store_at(tmp_path)
    with pytest.raises(ImageError, match="data file"):
        store.put(incoming(store, bad.read_bytes()), "df")
    assert blobs(store) == []


def test_a_vmdk_descriptor_is_refused(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    text = b'# Disk DescriptorFile\nversion=1\nRW 2048 FLAT "/etc/shadow" 0\n'
    with pytest.raises(ImageError, match="vmdk descriptor"):
        store.put(incoming(store, text), "d")


def test_a_wrong_digest_is_an_error_and_nothing_is_kept(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    data = tiny_qcow2(tmp_path / "t.qcow2")
    wrong = "sha256:" + "0" * 64
    with pytest.raises(ImageError, match="digest mismatch"):
        store.put(incoming(store, data), "t", expected_digest=wrong)
    assert blobs(store) == []
    right = "sha256:" + hashlib.sha256(data).hexdigest()
    assert store.put(incoming(store, data), "t", expected_digest=right).digest == right


def test_stored_once_read_only_and_named_by_sha256(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    data = tiny_qcow2(tmp_path / "t.qcow2")
    a = store.put(incoming(store, data), "http://a/t.qcow2")
    b = store.put(incoming(store, data), "http://b/t.qcow2")
    assert a.path == b.path
    assert a.format == "qcow2"
    assert blobs(store) == [hashlib.sha256(data).hexdigest()]
    assert (store.root / "sha256" / blobs(store)[0]).stat().st_mode & 0o777 == 0o444
    again = ImageStore(ImageStoreConfig(str(store.root)), Clock())
    found = again.lookup("http://a/t.qcow2")
    assert found is not None
    assert found.digest == a.digest == "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("pack", [gzip.compress, lzma.compress], ids=["gzip", "xz"])
def test_compressed_images_are_undone(tmp_path: Path, pack: object) -> None:
    store = store_at(tmp_path)
    data = tiny_qcow2(tmp_path / "t.qcow2")
    packed = pack(data)  # type: ignore[operator]
    got = store.put(incoming(store, packed), "t.gz")
    assert got.format == "qcow2"
    assert got.digest == "sha256:" + hashlib.sha256(packed).hexdigest()  # the bytes served
    assert got.file_digest == "sha256:" + hashlib.sha256(data).hexdigest()  # the bytes kept


def test_a_raw_image_stays_raw_and_a_vmdk_becomes_qcow2(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    raw = b"RAW-DISK" + b"\0" * 65536
    assert store.put(incoming(store, raw), "raw").format == "raw"
    vmdk = tmp_path / "t.vmdk"
    (tmp_path / "t.raw").write_bytes(b"VMDK-DISK" + b"\0" * 65536)
    qemu_img("convert", "-q", "-f", "raw", "-O", "vmdk", str(tmp_path / "t.raw"), str(vmdk))
    got = store.put(incoming(store, vmdk.read_bytes()), "vmdk")
    assert got.format == "qcow2"
    out = tmp_path / "back.raw"
    qemu_img("convert", "-q", "-f", "qcow2", "-O", "raw", got.path, str(out))
    assert out.read_bytes().startswith(b"VMDK-DISK")


def test_the_budget_refuses_a_declared_size_and_a_decompressed_one(tmp_path: Path) -> None:
    store = store_at(tmp_path, max_bytes=200_000)
    with pytest.raises(ImageError, match="declared size"):
        store.check_room(10**9)
    bomb = gzip.compress(b"\0" * 1_000_000)
    with pytest.raises(ImageError, match="budget"):
        store.put(incoming(store, bomb), "bomb")
    assert blobs(store) == []


def test_prune_keeps_what_is_referenced_or_recent(tmp_path: Path) -> None:
    clock = Clock()
    store = store_at(tmp_path, clock=clock)
    used = store.put(incoming(store, b"A" * 4096), "a")
    idle = store.put(incoming(store, b"B" * 4096), "b")
    assert store.prune([used.path], dry_run=True) == []  # both within the grace period
    clock.now += 7200
    assert store.prune([used.path], dry_run=True) == [idle.path]
    assert len(blobs(store)) == 2  # a dry run removes nothing
    assert store.prune([used.path]) == [idle.path]
    assert store.lookup("b") is None
    assert store.lookup("a") is not None
