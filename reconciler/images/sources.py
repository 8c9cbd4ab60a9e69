"""What an image source hands the store: the interface every source implements.

Input: an ``ImageRef`` (a reference as the VM writes it: a containerDisk image, a
DataVolume's ``http`` or ``registry`` URL), the pull policy and the credentials read
from the repository or the host. Output: a ``Resolved`` record (the digest the bytes are
known by, and what is known of them before they are fetched) and, on ``fetch``, one
local file holding the disk image, in the directory the store gives (the store then
checks it, ``safety``, and keeps it under its sha256).

A source is a ``Resolver``; ``http`` is this package's (``images/http.py``), the
registry's (containerDisk images and DataVolume ``registry`` URLs, pulled with
skopeo) implements the same protocol. A resolver raises
``ImageError`` with the reason alone; the caller names the VM and the image.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Literal, Protocol

from reconciler.records import dataclass

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

# KubeVirt's imagePullPolicy: Always resolves the tag again at each reconcile,
# IfNotPresent uses the digest the store's index holds for the reference, Never uses
# only what the store holds (a reference it lacks is an error).
PullPolicy = Literal["Always", "IfNotPresent", "Never"]
PULL_POLICIES: tuple[PullPolicy, ...] = ("Always", "IfNotPresent", "Never")

# The kind of a reference: a containerDisk image, a DataVolume's source.
RefKind = Literal["containerDisk", "registry", "http"]


class ImageError(Exception):
    """A reference that cannot be resolved, fetched or kept; the message is the reason
    (no VM, no credential), the caller adds the VM and the image. ``transient``: a
    failure of the network or a registry that may pass (the daemon retries it)."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True, slots=True)
class ImageRef:
    """One image reference as the repository writes it."""

    kind: RefKind
    ref: str  # the image (``quay.io/containerdisks/fedora:40``) or the URL, as written
    policy: PullPolicy = "IfNotPresent"


@dataclass(frozen=True, slots=True, repr=False)
class Auth:
    """Credentials for one reference; never printed (``repr`` names none of them).

    ``username``/``password``: basic auth (a registry's, or CDI's ``accessKeyId`` /
    ``secretKey`` of an ``http`` source's ``secretRef``); ``headers``: extra request
    headers (``extraHeaders`` and ``secretExtraHeaders``), ``ca_bundle``: PEM text of the
    CAs to trust besides the system's (``certConfigMap``); ``auth_file``: a
    containers-auth.json / dockerconfigjson file on the host (``registries.authFile``);
    ``config_json``: the ``.dockerconfigjson`` document of a containerDisk's ``imagePullSecret``.
    """

    username: str = ""
    password: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    ca_bundle: str = ""
    auth_file: str = ""
    config_json: str = ""  # a registry's: the ``.dockerconfigjson`` of an ``imagePullSecret``

    def __repr__(self) -> str:
        return "Auth(<hidden>)"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class Resolved:
    """A reference resolved: the bytes it names, by digest.

    ``digest`` ("sha256:<hex>") is what the source knows them by: a registry's manifest
    digest, an http source's sha256 of the bytes served ("" until downloaded once).
    ``file_digest`` is the sha256 of the file ``fetch`` returns when known before it is
    fetched (the store verifies it: a mismatch is an error and nothing is kept);
    ``size`` the declared size in bytes when known before the fetch (checked against the
    store's budget before any byte is read).
    """

    ref: str
    kind: RefKind
    digest: str
    file_digest: str = ""
    size: int | None = None
    pinned: str = ""  # the reference by digest (``host/repo@sha256:...``), "" when none


class Resolver(Protocol):
    """An image source: resolves references and fetches what they name."""

    def resolve(self, ref: ImageRef, policy: PullPolicy, auth: Auth | None) -> Resolved:
        """The digest ``ref`` names now (a network call for tags under ``Always``)."""
        ...

    def fetch(self, resolved: Resolved, dest_dir: Path, auth: Auth | None) -> Path:
        """The disk image of ``resolved`` as one file in ``dest_dir`` (qcow2, raw,
        compressed or not: the store detects, checks and converts it)."""
        ...


@dataclass(frozen=True, slots=True)
class StoredImage:
    """An image in the store: the file a VM's overlay or volume is made from."""

    ref: str
    digest: str  # the source's digest (``Resolved.digest``)
    path: str  # <store>/sha256/<hex of the file>
    format: str  # "qcow2" | "raw"
    file_digest: str  # "sha256:<hex>" of the stored file


__all__ = [
    "PULL_POLICIES",
    "Auth",
    "ImageError",
    "ImageRef",
    "PullPolicy",
    "RefKind",
    "Resolved",
    "Resolver",
    "StoredImage",
]
