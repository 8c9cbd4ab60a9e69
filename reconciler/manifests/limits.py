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

Budgets: what a small file may make the reconciler do is bounded where the input
enters, so a commit can never take the daemon down (a 300-byte pool of 2^31 replicas,
a VM naming 200 Secrets, a 20 MB VM):

- one file at most ``MAX_FILE_BYTES``, read by ``read_regular_file`` only (no device,
  FIFO or directory), one YAML document at most ``MAX_DOCUMENT_BYTES`` (the 1.5 MiB of
  an object the Kubernetes API server stores: etcd's request limit);
- a VirtualMachinePool at most ``MAX_POOL_REPLICAS`` replicas; a revision at most
  ``MAX_REVISION_OBJECTS`` objects (documents and pool replicas) and
  ``MAX_REVISION_BYTES`` of them (``object_size``: each replica counts its template);
- a VM names at most ``MAX_SECRETS_PER_VM`` Secrets, a revision holds at most
  ``MAX_SECRETS_PER_REVISION`` (each Secret's digest is a memory-hard key derivation,
  about a millisecond, paid once per value: ``model.secretdata``; ``bench/budgets``
  builds the worst case);
- KubeVirt's schema reports at most ``MAX_SCHEMA_ERRORS`` problems of one document,
  the rest summarised.
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
from reconciler.model.units import format_bytes

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

T = TypeVar("T")

MAX_FILE_NAME = 255  # bytes (NAME_MAX) of a file the reconciler creates for a volume
MAX_MEMORY_BYTES = 1 << 52  # 4 PiB
MAX_VCPUS = 4096
MAX_INT = 2**31 - 1  # counts, indexes and seconds: libvirt's (and Kubernetes') int32
MAX_DISK_BYTES = 1 << 51  # 2 PiB
MAX_FILE_BYTES = 64 << 20  # one YAML file of the repository (a 1000-VM fleet in one file is ~2 MiB)
MAX_DOCUMENT_BYTES = 3 << 19  # 1.5 MiB: one YAML document (the API server's object limit)
MAX_POOL_REPLICAS = 1000  # replicas of one VirtualMachinePool
MAX_REVISION_OBJECTS = 20_000  # documents and pool replicas of one revision
MAX_REVISION_BYTES = 256 << 20  # their size (``object_size``), replicas counting their template
MAX_SECRETS_PER_VM = 32  # Secrets one VM names (volumes, cloud-init refs, access credentials)
MAX_SECRETS_PER_REVISION = 4096  # Secrets of one revision (a key derivation each: ~1 ms)
MAX_SCHEMA_ERRORS = 20  # schema problems of one document worded; the rest counted as "more"


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


def object_size(obj: object) -> int:
    """About the bytes ``obj`` takes as YAML: its strings' lengths, 8 per other node.
    Linear in the object (its nesting is bounded by the reader's ``MAX_DEPTH``)."""
    size = 0
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            size += len(node) + 2
        elif isinstance(node, dict):
            size += 8
            for k, v in node.items():
                size += len(k) + 2 if isinstance(k, str) else 8
                stack.append(v)
        elif isinstance(node, list):
            size += 8
            stack.extend(node)
        else:
            size += 8
    return size


class RevisionBudget:
    """What one revision has spent of ``MAX_REVISION_OBJECTS`` and ``MAX_REVISION_BYTES``.
    ``spend`` returns why it is over ("" while within); the caller raises at the line."""

    __slots__ = ("bytes", "objects", "secrets")

    def __init__(self) -> None:
        self.objects = 0
        self.bytes = 0
        self.secrets = 0

    def spend(self, objects: int, size: int) -> str:
        self.objects += objects
        self.bytes += size
        if self.objects > MAX_REVISION_OBJECTS:
            return (
                f"the revision holds more than the {MAX_REVISION_OBJECTS} objects (documents and pool "
                "replicas) one revision may hold"
            )
        if self.bytes > MAX_REVISION_BYTES:
            return (
                f"the revision's objects (pool replicas counting their template) come to more than "
                f"{MAX_REVISION_BYTES >> 20} MiB, the most one revision may hold"
            )
        return ""

    def secret(self) -> str:
        self.secrets += 1
        if self.secrets > MAX_SECRETS_PER_REVISION:
            return (
                f"the revision holds more than the {MAX_SECRETS_PER_REVISION} Secrets one revision may hold"
            )
        return ""


def replicas_problem(replicas: int) -> str:
    if replicas > MAX_POOL_REPLICAS:
        # str() of more than 4300 digits raises: a huge count is shown by its size
        shown = (
            str(replicas)
            if replicas < 10**12
            else f"a number of about {replicas.bit_length() * 30103 // 100000} digits of"
        )
        return f"{shown} replicas is more than the {MAX_POOL_REPLICAS} one pool may have"
    return ""


def duplicates(items: Iterable[tuple[str, T]]) -> Iterator[tuple[str, T, T]]:
    """``(value, owner)`` pairs -> ``(value, first owner, later owner)`` for every repeat."""
    first: dict[str, T] = {}
    for value, owner in items:
        if value in first:
            yield value, first[value], owner
        else:
            first[value] = owner


def read_regular_file(
    path: str | os.PathLike[str],
    name: str | None = None,
    limit: int = MAX_FILE_BYTES,
    error: type[ManifestError] = ManifestError,
) -> bytes:
    """A regular file's bytes, at most ``limit``: the one reader of every file the
    reconciler reads (repository files, configs, host facts, state, keys). A FIFO, a
    device (``/dev/zero``), a directory or an oversized file is an ``error`` (a
    ``ManifestError``, or the ``ConfigError`` of a config) naming it (``name``: the path
    to show), never a hang or a MemoryError; a missing file stays ``FileNotFoundError``
    and other ``OSError`` (permissions, a symlink loop) propagate for the caller to word."""
    shown = name if name is not None else os.fspath(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO opens without a writer
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error("not a regular file (a device, FIFO or directory is never read)", shown)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            # Ask for the size fstat gave (plus one, to see a file that grew past the cap):
            # a read of the cap itself would allocate the whole cap per file.
            data = fh.read(min(st.st_size, limit) + 1)
            if len(data) > st.st_size:  # it grew while being read: the rest, up to the cap
                data += fh.read(limit + 1 - len(data))
    finally:
        os.close(fd)
    if problem := blob_problem(len(data), limit):
        raise error(problem, shown)
    return data


def blob_problem(size: int, limit: int = MAX_FILE_BYTES) -> str:
    if size > limit:
        return f"more than the {limit} bytes ({format_bytes(limit)}) one file may hold"
    return ""
