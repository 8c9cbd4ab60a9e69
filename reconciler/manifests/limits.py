"""Input limits: what a commit may ask for, checked before anything touches a host.

Input: names, quantities and rendered domains. Output: nothing, or an error message.
Pure. The limits are what KubeVirt and libvirt/QEMU accept, so a revision that passes
``validate`` can be defined on a host, and one that cannot is refused whole, with the
file and line, instead of half-applied:

- a VM name is a string and a DNS-1123 subdomain (at most 253 characters: lower-case
  letters, digits, ``-`` and ``.``, each dot-separated label starting and ending with a
  letter or digit), a namespace a DNS-1123 label (at most 63), as the Kubernetes API
  server requires; a YAML number (``name: 010``) is refused, never turned into ``10``;
- the libvirt domain name (``<namespace>_<name>`` outside ``default``) is at most
  ``MAX_DOMAIN_NAME`` characters (these three are checked where a VM's key is made,
  ``model.keys.VMKey.checked``), so that the files named after it on the host
  (``<domain>_VARS.fd``, libvirt's ``<domain>.xml`` and ``.log``) stay within the
  255-byte file-name limit;
- guest memory at most ``MAX_MEMORY_BYTES`` (4 PiB, the x86-64 physical address
  space QEMU can give a guest); vCPUs at most ``MAX_VCPUS`` (the largest ``maxcpus``
  of any QEMU x86 machine type); disk capacities at most ``MAX_DISK_BYTES`` (2 PiB,
  the largest qcow2 image ``qemu-img`` creates with its default 64 KiB clusters);
- every other count, index or number of seconds at most ``MAX_INT`` (2^31 - 1), the
  int32 libvirt's XML attributes (and Kubernetes' API) hold;
- no two VMs of one revision share a UUID or a MAC address (libvirt refuses the
  second domain of a UUID; two guests with one MAC break each other's network).
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, TypeVar

from reconciler.errors import ManifestError

# A VM's name and namespace are checked (and worded) where its key is made.
from reconciler.model.keys import MAX_DOMAIN_NAME as MAX_DOMAIN_NAME
from reconciler.model.keys import name_problem as name_problem
from reconciler.model.keys import namespace_problem as namespace_problem

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

T = TypeVar("T")

MAX_FILE_NAME = 255  # bytes (NAME_MAX) of a file the reconciler creates for a volume
MAX_MEMORY_BYTES = 1 << 52  # 4 PiB
MAX_VCPUS = 4096
MAX_INT = 2**31 - 1  # counts, indexes and seconds: libvirt's (and Kubernetes') int32
MAX_DISK_BYTES = 1 << 51  # 2 PiB
MAX_FILE_BYTES = 64 << 20  # one YAML file of the repository (a 1000-VM fleet in one file is ~2 MiB)


def memory_problem(value: int) -> str:
    if value > MAX_MEMORY_BYTES:
        return f"{value} bytes is more than the 4 PiB ({MAX_MEMORY_BYTES} bytes) a QEMU guest can address"
    return ""


def vcpu_problem(count: int) -> str:
    if count > MAX_VCPUS:
        return f"{count} vCPUs is more than the {MAX_VCPUS} any QEMU machine type accepts"
    return ""


def disk_problem(value: int) -> str:
    if value > MAX_DISK_BYTES:
        return f"{value} bytes is more than the {MAX_DISK_BYTES} bytes a disk image can hold"
    return ""


def duplicates(items: Iterable[tuple[str, T]]) -> Iterator[tuple[str, T, T]]:
    """``(value, owner)`` pairs -> ``(value, first owner, later owner)`` for every repeat."""
    first: dict[str, T] = {}
    for value, owner in items:
        if value in first:
            yield value, first[value], owner
        else:
            first[value] = owner


def read_regular_file(path: str | os.PathLike[str], name: str | None = None) -> bytes:
    """A regular file's bytes, at most ``MAX_FILE_BYTES``. A FIFO, a device (``/dev/zero``),
    a directory or an oversized file is a ``ManifestError`` naming it (``name``: the
    path to show), never a hang; a missing file stays ``FileNotFoundError``."""
    shown = name if name is not None else os.fspath(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO opens without a writer
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ManifestError("not a regular file (a device, FIFO or directory is never read)", shown)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            # Ask for the size fstat gave (plus one, to see a file that grew past the cap):
            # a read of the cap itself would allocate 64 MiB per file.
            data = fh.read(min(st.st_size, MAX_FILE_BYTES) + 1)
            if len(data) > st.st_size:  # it grew while being read: the rest, up to the cap
                data += fh.read(MAX_FILE_BYTES + 1 - len(data))
    finally:
        os.close(fd)
    if problem := blob_problem(len(data)):
        raise ManifestError(problem, shown)
    return data


def blob_problem(size: int) -> str:
    if size > MAX_FILE_BYTES:
        return f"more than the {MAX_FILE_BYTES} bytes ({MAX_FILE_BYTES >> 20} MiB) one file may hold"
    return ""
