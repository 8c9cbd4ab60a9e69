"""Every file the store keeps is checked first: what CDI checks of an imported image.

Input: a downloaded or fetched file, the budget in bytes. Output: a plain disk image
(``qcow2`` or ``raw``) in the same directory, or ``ImageError`` with the reason:

- gzip and xz are decompressed (stdlib, streamed, stopped at the budget);
- the format is detected as CDI does (``qemu-img info``); vmdk, vdi, vhd and vhdx are
  converted to qcow2 with ``qemu-img convert``; any other format is refused;
- a qcow2 with a backing file or an external data file is refused (it would make QEMU
  open a host file the image names, ``/etc/passwd``): read from the qcow2 header
  before ``qemu-img`` opens the file, and again from ``qemu-img info``.
"""

from __future__ import annotations

import gzip
import json
import lzma
import struct
import subprocess
from typing import IO, TYPE_CHECKING

from reconciler.images.sources import ImageError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

QEMU_IMG_TIMEOUT_S = 120.0
CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
QCOW2_MAGIC = b"QFI\xfb"
QCOW2_DATA_FILE_BIT = 1 << 2  # incompatible feature: an external data file
CONVERTED = ("vmdk", "vdi", "vpc", "vhdx")  # vpc = vhd
KEPT = ("qcow2", "raw")


def qcow2_header_refusal(path: Path) -> str:
    """Why a qcow2 file's header makes it unsafe ("" = it does not, or it is no qcow2)."""
    with path.open("rb") as f:
        head = f.read(104)
    if head.lstrip().startswith(b"# Disk DescriptorFile"):
        return "a vmdk descriptor is refused (its extents name files of the host)"
    if len(head) < 72 or head[:4] != QCOW2_MAGIC:
        return ""
    version, backing_offset, backing_size = struct.unpack(">IQI", head[4:20])
    if backing_offset or backing_size:
        return "a qcow2 with a backing file is refused (it would open a file of the host)"
    if version >= 3 and len(head) >= 80:
        (incompatible,) = struct.unpack(">Q", head[72:80])
        if incompatible & QCOW2_DATA_FILE_BIT:
            return "a qcow2 with an external data file is refused (it would open a file of the host)"
    return ""


def qemu_img_info(path: Path) -> dict[str, object]:
    """``qemu-img info --output=json`` of one file, its backing chain not opened."""
    try:
        done = subprocess.run(
            ["qemu-img", "info", "--output=json", "-U", str(path)],
            capture_output=True,
            text=True,
            timeout=QEMU_IMG_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ImageError(f"qemu-img info failed: {err}") from None
    if done.returncode != 0:
        raise ImageError(f"qemu-img cannot read the image: {done.stderr.strip()[:300]}")
    info = json.loads(done.stdout)
    if not isinstance(info, dict):
        raise ImageError("qemu-img info gave no record")
    return info


def info_refusal(info: dict[str, object]) -> str:
    """Why ``qemu-img info`` says an image is unsafe ("" = it does not)."""
    if info.get("backing-filename") or info.get("full-backing-filename"):
        return f"a {info.get('format')} with a backing file is refused (it would open a file of the host)"
    specific = info.get("format-specific")
    data = specific.get("data") if isinstance(specific, dict) else None
    if isinstance(data, dict) and data.get("data-file"):
        return "a qcow2 with an external data file is refused (it would open a file of the host)"
    return ""


def _decompress(src: Path, opener: Callable[[Path], gzip.GzipFile | lzma.LZMAFile], budget: int) -> Path:
    out = src.with_name(src.name + ".unpacked")
    total = 0
    try:
        with opener(src) as fin, out.open("wb") as fout:
            while chunk := fin.read(CHUNK):
                total += len(chunk)
                if total > budget:
                    raise ImageError(f"decompressed, the image exceeds the store's budget of {budget} bytes")
                fout.write(chunk)
    except (OSError, EOFError, lzma.LZMAError) as err:
        out.unlink(missing_ok=True)
        raise ImageError(f"the image cannot be decompressed: {err}") from None
    except ImageError:
        out.unlink(missing_ok=True)
        raise
    src.unlink()
    out.rename(src)
    return src


def decompressed(path: Path, budget: int) -> Path:
    """``path`` itself, gzip or xz undone in place (bounded by ``budget``)."""
    with path.open("rb") as f:
        magic = f.read(6)
    if magic.startswith(GZIP_MAGIC):
        return _decompress(path, lambda p: gzip.open(p, "rb"), budget)
    if magic.startswith(XZ_MAGIC):
        return _decompress(path, lambda p: lzma.open(p, "rb"), budget)
    return path


def checked(path: Path, budget: int) -> tuple[Path, str]:
    """The file made a safe plain image in place: (path, "qcow2" | "raw")."""
    path = decompressed(path, budget)
    if why := qcow2_header_refusal(path):
        raise ImageError(why)
    info = qemu_img_info(path)
    if why := info_refusal(info):
        raise ImageError(why)
    fmt = str(info.get("format", ""))
    if fmt in KEPT:
        return path, fmt
    if fmt not in CONVERTED:
        raise ImageError(f"image format {fmt!r} is not one of qcow2, raw, vmdk, vdi, vhd, vhdx")
    out = path.with_name(path.name + ".qcow2")
    try:
        done = subprocess.run(
            ["qemu-img", "convert", "-q", "-f", fmt, "-O", "qcow2", str(path), str(out)],
            capture_output=True,
            text=True,
            timeout=QEMU_IMG_TIMEOUT_S * 10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        out.unlink(missing_ok=True)
        raise ImageError(f"qemu-img convert failed: {err}") from None
    if done.returncode != 0:
        out.unlink(missing_ok=True)
        raise ImageError(f"qemu-img cannot convert the {fmt} image: {done.stderr.strip()[:300]}")
    if out.stat().st_size > budget:
        out.unlink()
        raise ImageError(f"converted, the image exceeds the store's budget of {budget} bytes")
    out.replace(path)
    return path, "qcow2"


def copy_bounded(src: IO[bytes], dest: IO[bytes], budget: int) -> int:
    """Copy ``src`` to ``dest``, at most ``budget`` bytes, and return the count."""
    total = 0
    while chunk := src.read(CHUNK):
        total += len(chunk)
        if total > budget:
            raise ImageError(f"the image exceeds the store's budget of {budget} bytes")
        dest.write(chunk)
    return total


__all__ = ["checked", "copy_bounded", "info_refusal", "qcow2_header_refusal", "qemu_img_info"]
