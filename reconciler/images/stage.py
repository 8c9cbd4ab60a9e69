"""The image stage of a host's plan: the revision's references resolved into the
host's store before render (``reconcile.plan_revision`` calls it).

Input: the revision's files and entry, the host config, the caller's context and SOPS
keys, the host config the last plan of this host rendered with (its identity keeps the
per-host render cache warm while nothing moved). Output: the host config render takes
(``images`` holding every reference, ``images_resolved`` set) and the errors of the
references that could not be resolved (``resolve.resolve_images``). A revision with no
reference outside the host config's ``images`` table never opens the store.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from reconciler.desired.pins import build_catalog_at
from reconciler.errors import ReconcilerError
from reconciler.images.http import HttpSource
from reconciler.images.registry_source import RegistrySource
from reconciler.images.resolve import references, resolve_images
from reconciler.images.store import ImageStore

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from reconciler.catalog import Catalog
    from reconciler.context import Context
    from reconciler.images.sources import Resolver
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import FileView, Obj, Problem
    from reconciler.settings.host import HostConfig


def sources_for(
    store: ImageStore, host: HostConfig, on_bytes: Callable[[int], None] | None = None
) -> Mapping[str, Resolver]:
    """The image sources of a host, by ``ImageRef.kind``."""
    http = HttpSource(room=store.room) if on_bytes is None else HttpSource(room=store.room, on_bytes=on_bytes)
    reg = (
        RegistrySource(host.registries, room=store.room)
        if on_bytes is None
        else RegistrySource(host.registries, room=store.room, on_bytes=on_bytes)
    )
    return {"http": http, "containerDisk": reg, "registry": reg}


def wanted(catalog: Catalog, host: HostConfig) -> bool:
    """Whether any reference of the revision lies outside the host config's table."""
    return any(key not in host.images for m in catalog.vms for key in catalog.fact(m, "images", _image_keys))


def _image_keys(vm: Obj) -> tuple[str, ...]:
    """The keys of the VM's image references (kept per document by the catalog cache)."""
    return tuple(u.key for u in references(vm))


def host_images(
    files: FileView,
    entry: str,
    host: HostConfig,
    context: Context,
    keys: Keys | None,
    previous: HostConfig | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> tuple[HostConfig, tuple[Problem, ...]]:
    """The host config with the revision's images resolved, and what could not be."""
    try:
        catalog = build_catalog_at(files, entry, context, keys)
    except (ReconcilerError, RecursionError):
        return host, ()  # the build's error is the revision's (``desired``)
    found: tuple[Problem, ...] = ()
    if wanted(catalog, host):
        store = ImageStore(host.image_store)
        resolved, found = resolve_images(catalog, host, store, sources_for(store, host, on_bytes))
    else:
        resolved = dataclasses.replace(host, images_resolved=True)
    if previous is not None and previous == resolved:
        return previous, found
    return resolved, found


__all__ = ["host_images", "sources_for", "wanted"]
