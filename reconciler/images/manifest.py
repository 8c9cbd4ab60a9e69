"""Registry manifests read: a manifest list's linux/amd64 entry, an image's layers.

Input: the raw bytes of a manifest (as ``skopeo inspect --raw`` prints them). Output:
``ManifestList`` entries or an ``ImageManifest`` (config and layers with digest, size and
media type, and the declared size: their sum). Pure; ``ValueError`` says what is wrong.
The digest of a manifest is the sha256 of these exact bytes (``manifest_digest``).
"""

from __future__ import annotations

import hashlib
import json
from types import MappingProxyType
from typing import Any

from reconciler.images.reference import is_digest
from reconciler.records import dataclass

MAX_MANIFEST = 4 << 20  # distribution's own limit on a manifest
LIST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
IMAGE_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
# Layer media types whose bytes are a tar stream (plain or gzip) that ``tarfile`` reads.
LAYER_TYPES = MappingProxyType(
    {
        "application/vnd.oci.image.layer.v1.tar": "tar",
        "application/vnd.oci.image.layer.v1.tar+gzip": "tar+gzip",
        "application/vnd.docker.image.rootfs.diff.tar.gzip": "tar+gzip",
        "application/vnd.oci.image.layer.nondistributable.v1.tar": "tar",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip": "tar+gzip",
    }
)
PLATFORM = ("linux", "amd64")


@dataclass(frozen=True, slots=True)
class Blob:
    digest: str
    size: int
    media_type: str


@dataclass(frozen=True, slots=True)
class ImageManifest:
    config: Blob
    layers: tuple[Blob, ...]

    @property
    def declared_size(self) -> int:
        """What the manifest says its blobs weigh: checked against the budget before download."""
        return self.config.size + sum(b.size for b in self.layers)


def manifest_digest(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _document(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_MANIFEST:
        raise ValueError(f"the manifest is over {MAX_MANIFEST} bytes")
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ValueError("the manifest is not JSON") from err
    if not isinstance(doc, dict):
        raise ValueError("the manifest is not a JSON object")
    return doc


def media_type(raw: bytes) -> str:
    """The manifest's media type (from ``mediaType``; an OCI index or image may omit it)."""
    doc = _document(raw)
    kind = doc.get("mediaType")
    if isinstance(kind, str) and kind:
        return kind
    if "manifests" in doc:
        return LIST_TYPES[0]
    if "layers" in doc:
        return IMAGE_TYPES[0]
    return ""


def is_list(raw: bytes) -> bool:
    return media_type(raw) in LIST_TYPES


def _blob(node: Any, where: str) -> Blob:
    if not isinstance(node, dict):
        raise ValueError(f"{where} is not an object")
    digest, size, kind = node.get("digest"), node.get("size"), node.get("mediaType", "")
    if not isinstance(digest, str) or not is_digest(digest):
        raise ValueError(f"{where} has no sha256 digest")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"{where} has no size")
    if not isinstance(kind, str):
        raise ValueError(f"{where} has a mediaType that is not a string")
    return Blob(digest, size, kind)


def platform_digest(raw: bytes) -> str:
    """The digest of the linux/amd64 image of a manifest list (the first one listed)."""
    entries = _document(raw).get("manifests")
    if not isinstance(entries, list):
        raise ValueError("the manifest list has no manifests")
    for i, entry in enumerate(entries):
        blob = _blob(entry, f"manifests[{i}]")
        plat = entry.get("platform") or {}
        if isinstance(plat, dict) and (plat.get("os"), plat.get("architecture")) == PLATFORM:
            return blob.digest
    raise ValueError("no linux/amd64 image in the manifest list")


def image_manifest(raw: bytes) -> ImageManifest:
    """An image manifest (OCI or docker v2 schema 2) read: its config and layers."""
    kind = media_type(raw)
    if kind not in IMAGE_TYPES:
        raise ValueError(
            f"unsupported manifest type {kind or 'unknown'!r} (expected an OCI or docker v2 image)"
        )
    doc = _document(raw)
    config = _blob(doc.get("config"), "config")
    layers = doc.get("layers")
    if not isinstance(layers, list) or not layers:
        raise ValueError("the image has no layers")
    out = tuple(_blob(layer, f"layers[{i}]") for i, layer in enumerate(layers))
    for i, blob in enumerate(out):
        if blob.media_type not in LAYER_TYPES:
            raise ValueError(
                f"layers[{i}]: unsupported layer type {blob.media_type!r} (expected tar or tar+gzip)"
            )
    return ImageManifest(config, out)


__all__: list[str] = [
    "Blob",
    "ImageManifest",
    "image_manifest",
    "is_list",
    "manifest_digest",
    "media_type",
    "platform_digest",
]
