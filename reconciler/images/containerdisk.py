"""The containerDisk contract: the one disk file under ``/disk/`` of an image's layers.

Input: a directory in skopeo's ``dir:`` layout (``manifest.json`` and one file per blob,
named by its sha256 in hex), the manifest digest the reference resolved to, and a byte
budget. Output: a ``ContainerDisk`` (the disk file written into the output directory, its
format, the manifest digest). Reads and writes files only; runs nothing.

Nothing is used before it is checked: the manifest's sha256 must be the digest resolved,
each blob's sha256 and size the manifest's; every tar entry of every layer is refused
when its name is absolute or holds ``..``, or when it is a link (symbolic or hard), a
device or a FIFO; a layer unpacking to more than the budget is refused while it is read.
Whiteouts (``.wh.NAME``, ``.wh..wh..opq``) hide the files of lower layers, as the
runtime unpacks them. KubeVirt's contract: ``/disk/`` then holds exactly one regular file,
``*.qcow2``, ``*.raw`` or ``*.img``; its format is read from its first bytes.
"""

from __future__ import annotations

import hashlib
import posixpath
import tarfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

from reconciler.images.manifest import LAYER_TYPES, ImageManifest, image_manifest, manifest_digest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

DISK_DIR = "disk"
DISK_SUFFIXES = (".qcow2", ".raw", ".img")
QCOW2_MAGIC = b"QFI\xfb"
CHUNK = 1 << 20


class ContractError(ValueError):
    """The image breaks the containerDisk contract or does not match its digests."""


@dataclass(frozen=True, slots=True)
class ContainerDisk:
    path: Path  # the disk file, written into the output directory
    format: str  # "qcow2" | "raw"
    digest: str  # the manifest digest it came from
    size: int  # bytes of the disk file


def _sha256_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return "sha256:" + h.hexdigest(), size


def _blob_path(layout: Path, digest: str) -> Path:
    return layout / digest.removeprefix("sha256:")


def verified_manifest(layout: Path, digest: str, max_bytes: int) -> ImageManifest:
    """The layout's manifest, checked against ``digest``, the budget and every blob."""
    raw_path = layout / "manifest.json"
    if raw_path.stat().st_size > 4 << 20:
        raise ContractError("the manifest is over 4 MiB")
    raw = raw_path.read_bytes()
    if manifest_digest(raw) != digest:
        raise ContractError(f"the manifest pulled is not {digest} (its sha256 is {manifest_digest(raw)})")
    try:
        manifest = image_manifest(raw)
    except ValueError as err:
        raise ContractError(str(err)) from err
    if manifest.declared_size > max_bytes:
        raise ContractError(
            f"its layers declare {manifest.declared_size} bytes, over the budget of {max_bytes}"
        )
    for blob in (manifest.config, *manifest.layers):
        path = _blob_path(layout, blob.digest)
        if not path.is_file():
            raise ContractError(f"blob {blob.digest} is missing from the pulled image")
        got, size = _sha256_file(path)
        if got != blob.digest or size != blob.size:
            raise ContractError(f"blob {blob.digest} does not match its digest (sha256 {got}, {size} bytes)")
    return manifest


def _entry_name(member: tarfile.TarInfo, layer: int) -> str:
    """The entry's normalized name; refused when it is absolute, climbs out or is no
    regular file or directory."""
    name = member.name
    if name.startswith("/") or "\x00" in name:
        raise ContractError(f"layer {layer}: entry {name!r} has an absolute path")
    if ".." in name.split("/"):
        raise ContractError(f"layer {layer}: entry {name!r} climbs out with '..'")
    if member.issym() or member.islnk():
        raise ContractError(f"layer {layer}: entry {name!r} is a link, which a containerDisk may not hold")
    if not (member.isfile() or member.isdir()):
        raise ContractError(f"layer {layer}: entry {name!r} is a device, FIFO or other special file")
    norm = posixpath.normpath(name)
    return "" if norm == "." else norm


def _members(
    fileobj: BinaryIO, layer: int, max_bytes: int
) -> Iterator[tuple[str, tarfile.TarInfo, tarfile.TarFile]]:
    """Each entry of one layer, checked, streamed (gzip or plain), within the budget."""
    total = 0
    try:
        with tarfile.open(fileobj=fileobj, mode="r|*") as tar:
            for member in tar:
                name = _entry_name(member, layer)
                total += member.size
                if total > max_bytes:
                    raise ContractError(f"layer {layer} unpacks to more than the budget of {max_bytes} bytes")
                yield name, member, tar
    except (tarfile.TarError, EOFError, OSError) as err:
        raise ContractError(f"layer {layer} is not a readable tar stream ({err})") from err


def _disk_files(layout: Path, manifest: ImageManifest, max_bytes: int) -> dict[str, tuple[int, int]]:
    """``disk/NAME`` -> (layer index, size) of the files the unpacked image holds there."""
    files: dict[str, tuple[int, int]] = {}
    for i, blob in enumerate(manifest.layers):
        with _blob_path(layout, blob.digest).open("rb") as f:
            for name, member, _ in _members(f, i, max_bytes):
                head, base = posixpath.split(name)
                if base == ".wh..wh..opq":
                    files = {k: v for k, v in files.items() if posixpath.dirname(k) != head}
                elif base.startswith(".wh."):
                    files.pop(posixpath.join(head, base.removeprefix(".wh.")), None)
                elif head == DISK_DIR and member.isfile():
                    files[name] = (i, member.size)
                elif name.startswith(DISK_DIR + "/") and member.isfile():
                    raise ContractError(
                        f"layer {i}: {name!r} is below /disk/, where only the disk file belongs"
                    )
    return files


def extract_disk(layout: Path, digest: str, out_dir: Path, max_bytes: int) -> ContainerDisk:
    """The containerDisk of the pulled image in ``layout``, written to ``out_dir``."""
    manifest = verified_manifest(layout, digest, max_bytes)
    files = _disk_files(layout, manifest, max_bytes)
    if len(files) != 1:
        found = ", ".join(sorted(files)) or "nothing"
        raise ContractError(f"/disk/ must hold exactly one disk file (qcow2, raw or img); it holds {found}")
    ((name, (layer, size)),) = files.items()
    if not name.endswith(DISK_SUFFIXES):
        raise ContractError(f"/{name} is not a .qcow2, .raw or .img file")
    target = out_dir / posixpath.basename(name)
    with _blob_path(layout, manifest.layers[layer].digest).open("rb") as f:
        for entry, member, tar in _members(f, layer, max_bytes):
            if entry != name or not member.isfile():
                continue
            src = tar.extractfile(member)
            if src is None:
                raise ContractError(f"layer {layer}: {name!r} cannot be read")
            written = 0
            with target.open("wb") as dst:  # a later entry of the same name wins
                while chunk := src.read(CHUNK):
                    written += len(chunk)
                    dst.write(chunk)
            if written != size:
                raise ContractError(f"layer {layer}: {name!r} is shorter than its header says")
    with target.open("rb") as f:
        fmt = "qcow2" if f.read(4) == QCOW2_MAGIC else "raw"
    return ContainerDisk(target, fmt, digest, size)


__all__: list[str] = [
    "DISK_SUFFIXES",
    "LAYER_TYPES",
    "ContainerDisk",
    "ContractError",
    "extract_disk",
    "verified_manifest",
]
