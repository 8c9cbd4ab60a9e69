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
runtime unpacks them. Each layer is read once after its digest is checked: the files
under ``disk/`` are written as they stream by (at most the budget), into a temporary
directory removed whatever happens. KubeVirt's contract: ``/disk/`` then holds exactly one regular file,
``*.qcow2``, ``*.raw`` or ``*.img``; its format is read from its first bytes.
"""

from __future__ import annotations

import hashlib
import posixpath
import tarfile
import tempfile
import zlib
from pathlib import Path
from typing import IO, TYPE_CHECKING, BinaryIO

from reconciler.images.manifest import LAYER_TYPES, ImageManifest, image_manifest, manifest_digest
from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Iterator

DISK_DIR = "disk"
DISK_SUFFIXES = (".qcow2", ".raw", ".img")
QCOW2_MAGIC = b"QFI\xfb"
CHUNK = 1 << 20


# What reading a layer that is no good tar stream raises (tarfile's stream reader meets
# a cut gzip header with a TypeError; zlib's errors are its own).
UNREADABLE = (tarfile.TarError, EOFError, OSError, zlib.error, TypeError)


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
    except UNREADABLE as err:
        raise ContractError(f"layer {layer} is not a readable tar stream ({err})") from err


def _copy_out(src: IO[bytes] | None, dst: Path, name: str, layer: int, size: int) -> None:
    if src is None:
        raise ContractError(f"layer {layer}: {name!r} cannot be read")
    written = 0
    with dst.open("wb") as out:
        while True:
            try:
                chunk = src.read(CHUNK)
            except UNREADABLE as err:
                raise ContractError(f"layer {layer}: {name!r} cannot be read ({err})") from err
            if not chunk:
                break
            written += len(chunk)
            out.write(chunk)
    if written != size:
        raise ContractError(f"layer {layer}: {name!r} is shorter than its header says")


def _unpack_disk_dir(
    layout: Path, manifest: ImageManifest, work: Path, max_bytes: int
) -> dict[str, Path | None]:
    """``disk/NAME`` -> its bytes in ``work`` (None: not a disk file's name) of the files the
    unpacked image holds there, in one pass over each layer; at most ``max_bytes`` written."""
    files: dict[str, Path | None] = {}
    written = 0

    def drop(key: str) -> None:
        if (old := files.pop(key, None)) is not None:
            old.unlink()

    for i, blob in enumerate(manifest.layers):
        with _blob_path(layout, blob.digest).open("rb") as f:
            for name, member, tar in _members(f, i, max_bytes):
                head, base = posixpath.split(name)
                if base == ".wh..wh..opq":
                    for key in [k for k in files if posixpath.dirname(k) == head]:
                        drop(key)
                elif base.startswith(".wh."):
                    drop(posixpath.join(head, base.removeprefix(".wh.")))
                elif head == DISK_DIR and member.isfile():
                    drop(name)  # a later entry of the same name wins
                    files[name] = None
                    if name.endswith(DISK_SUFFIXES):
                        written += member.size
                        if written > max_bytes:
                            raise ContractError(f"/disk/ holds more than the budget of {max_bytes} bytes")
                        dest = work / f"{i}-{len(files)}-{base}"
                        files[name] = dest
                        _copy_out(tar.extractfile(member), dest, name, i, member.size)
                elif name.startswith(DISK_DIR + "/") and member.isfile():
                    raise ContractError(
                        f"layer {i}: {name!r} is below /disk/, where only the disk file belongs"
                    )
    return files


def extract_disk(layout: Path, digest: str, out_dir: Path, max_bytes: int) -> ContainerDisk:
    """The containerDisk of the pulled image in ``layout``, written to ``out_dir``."""
    manifest = verified_manifest(layout, digest, max_bytes)
    with tempfile.TemporaryDirectory(prefix=".unpack-", dir=out_dir) as tmp:
        files = _unpack_disk_dir(layout, manifest, Path(tmp), max_bytes)
        if len(files) != 1:
            found = ", ".join(sorted(files)) or "nothing"
            raise ContractError(
                f"/disk/ must hold exactly one disk file (qcow2, raw or img); it holds {found}"
            )
        ((name, path),) = files.items()
        if path is None:
            raise ContractError(f"/{name} is not a .qcow2, .raw or .img file")
        target = out_dir / posixpath.basename(name)
        path.replace(target)
    with target.open("rb") as f:
        fmt = "qcow2" if f.read(4) == QCOW2_MAGIC else "raw"
    return ContainerDisk(target, fmt, digest, target.stat().st_size)


__all__: list[str] = [
    "DISK_SUFFIXES",
    "LAYER_TYPES",
    "ContainerDisk",
    "ContractError",
    "extract_disk",
    "verified_manifest",
]
