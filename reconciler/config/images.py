"""The host config's ``imageStore``: where a host keeps the images its VMs are made from.

Input: the ``imageStore`` mapping of a host config file (``dir``, ``maxBytes``,
``gracePeriod``) and the host's allowed directories. Output: an ``ImageStoreConfig`` (``settings.images``).
Pure; errors name the file and line (``ConfigError``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.model.units import QuantityError, parse_duration, quantity_bytes
from reconciler.settings.images import ImageStoreConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.manifests.config import ConfigReader


def read_image_store(
    r: ConfigReader, top: Any, inside: Callable[[str], bool], allowed: tuple[str, ...]
) -> ImageStoreConfig:
    """``imageStore`` of a host config: its directory must lie inside the allowed ones
    (``inside``), so the VMs' overlays may name its files as their backing."""
    node = r.mapping(top["imageStore"], "imageStore", ("dir", "maxBytes", "gracePeriod"), top, "imageStore")
    out = ImageStoreConfig()
    if (d := r.abspath(node, "dir", "imageStore")) is not None:
        if not inside(d + "/x"):
            raise r.fail(
                f"imageStore.dir: {d} is not inside allowedDirectories ({', '.join(allowed)})", node, "dir"
            )
        out = ImageStoreConfig(d, out.max_bytes, out.grace_s)
    if "maxBytes" in node:
        try:
            most = quantity_bytes(node["maxBytes"])
        except (QuantityError, ValueError) as err:
            raise r.fail(f"imageStore.maxBytes: {err}", node, "maxBytes") from None
        if most <= 0:
            raise r.fail("imageStore.maxBytes: must be more than zero", node, "maxBytes")
        out = ImageStoreConfig(out.dir, most, out.grace_s)
    if "gracePeriod" in node:
        try:
            grace = parse_duration(node["gracePeriod"])
        except ValueError as err:
            raise r.fail(f"imageStore.gracePeriod: {err}", node, "gracePeriod") from None
        out = ImageStoreConfig(out.dir, out.max_bytes, grace)
    return out


__all__ = ["read_image_store"]
