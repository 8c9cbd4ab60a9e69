"""What the image store may remove: the files no domain of the host leads to.

Input: the XML of every domain of the host (of any owner, managed or not), the store.
Output: the paths the domains' disks lead to, backing chains followed through the
qcow2 headers (an overlay names its base), and ``collect``: the store's ``prune`` with
them (an image unused for the grace period, and referenced by no domain, is removed).
Reads file headers only; never opens a file for writing.
"""

from __future__ import annotations

import os
import struct
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.images.safety import QCOW2_MAGIC

if TYPE_CHECKING:
    from collections.abc import Iterable

    from reconciler.images.store import ImageStore

MAX_CHAIN = 16  # backing files followed per disk
MAX_BACKING_NAME = 1023  # qcow2's own limit


def qcow2_backing(path: Path) -> str:
    """The backing file a qcow2 header names ("" = none, or no qcow2)."""
    try:
        with path.open("rb") as f:
            head = f.read(20)
            if len(head) < 20 or head[:4] != QCOW2_MAGIC:
                return ""
            offset, size = struct.unpack(">QI", head[8:20])
            if not offset or not size or size > MAX_BACKING_NAME:
                return ""
            f.seek(offset)
            name = f.read(size).decode("utf-8", "replace")
    except OSError:
        return ""
    return name if name.startswith("/") else str(path.parent / name)


def disk_files(xml: str) -> list[str]:
    """Every file a domain's disks name: sources and the backing stores libvirt shows."""
    try:
        root = ET.fromstring(xml)  # libvirt's own XML of this host
    except ET.ParseError:
        return []
    return [s.get("file", "") for s in root.iter("source") if s.get("file")]


def referenced(domain_xmls: Iterable[str]) -> set[str]:
    """The real paths every domain's disks lead to, backing chains followed."""
    out: set[str] = set()
    for xml in domain_xmls:
        for f in disk_files(xml):
            path, depth = f, 0
            while path and depth < MAX_CHAIN and os.path.realpath(path) not in out:
                out.add(os.path.realpath(path))
                path, depth = qcow2_backing(Path(path)), depth + 1
    return out


def collect(store: ImageStore, domain_xmls: Iterable[str], dry_run: bool = False) -> list[str]:
    """Remove (or, dry, name) the stored images no domain references, past the grace period."""
    return store.prune(referenced(domain_xmls), dry_run=dry_run)


__all__ = ["collect", "disk_files", "qcow2_backing", "referenced"]
