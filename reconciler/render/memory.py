"""Guest memory: ``<memory>``, ``<currentMemory>``, ``<memoryBacking>``.

Input: ``domain.memory`` and ``domain.resources`` of the expanded spec. Output:
elements in bytes (``unit="b"``), exactly as KubeVirt's converter sizes them.
Pure. A VM without any memory amount is rejected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.manifests.limits import memory_problem
from reconciler.render.context import DOMAIN, RenderContext
from reconciler.render.xml import sub

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

MEMORY_KEYS = ("guest", "maxGuest", "hugepages")
RESOURCES_KEYS = ("requests", "limits")
RESOURCES_NO_EFFECT = ("overcommitGuestOverhead",)


def guest_memory(ctx: RenderContext) -> int:
    mem = ctx.mapping(ctx.domain, "memory", DOMAIN) or {}
    res = ctx.mapping(ctx.domain, "resources", DOMAIN) or {}
    ctx.known(mem, f"{DOMAIN}.memory", MEMORY_KEYS)
    ctx.known(res, f"{DOMAIN}.resources", RESOURCES_KEYS, RESOURCES_NO_EFFECT)
    requests = ctx.mapping(res, "requests", f"{DOMAIN}.resources") or {}
    limits = ctx.mapping(res, "limits", f"{DOMAIN}.resources") or {}
    for name, value in (
        ("memory.guest", ctx.quantity(mem, "guest", f"{DOMAIN}.memory")),
        ("resources.requests.memory", ctx.quantity(requests, "memory", f"{DOMAIN}.resources.requests")),
        ("resources.limits.memory", ctx.quantity(limits, "memory", f"{DOMAIN}.resources.limits")),
    ):
        if value is not None:
            if value <= 0:
                raise ctx.error(f"{DOMAIN}.{name}", "memory must be positive")
            if problem := memory_problem(value):
                raise ctx.error(f"{DOMAIN}.{name}", problem)
            return value
    raise ctx.error(
        f"{DOMAIN}.memory.guest",
        "no memory requested, at least one of 'domain.memory.guest', "
        "'domain.resources.requests.memory' or 'domain.resources.limits.memory' must be set",
    )


def render_memory(ctx: RenderContext, domain: ET.Element) -> int:
    """Adds the memory elements; returns the guest memory in bytes."""
    guest = guest_memory(ctx)
    mem = ctx.mapping(ctx.domain, "memory", DOMAIN) or {}
    max_guest = ctx.quantity(mem, "maxGuest", f"{DOMAIN}.memory")
    total = guest
    if max_guest is not None and max_guest != guest:
        if max_guest < guest:
            raise ctx.error(f"{DOMAIN}.memory.maxGuest", "must not be less than memory.guest")
        if problem := memory_problem(max_guest):
            raise ctx.error(f"{DOMAIN}.memory.maxGuest", problem)
        # The guest boots with maxGuest and the balloon holds it at guest: a change of
        # guest within maxGuest is a live balloon change, never a restart.
        total = max_guest
    sub(domain, "memory", str(total), unit="b")
    sub(domain, "currentMemory", str(guest), unit="b")
    hp = ctx.mapping(mem, "hugepages", f"{DOMAIN}.memory")
    if hp is not None:
        ctx.known(hp, f"{DOMAIN}.memory.hugepages", ("pageSize",))
        size = ctx.quantity(hp, "pageSize", f"{DOMAIN}.memory.hugepages")
        backing = sub(domain, "memoryBacking")
        pages = sub(backing, "hugepages")
        if size is not None:
            if size % 1024:
                raise ctx.error(f"{DOMAIN}.memory.hugepages.pageSize", "must be a whole number of KiB")
            sub(pages, "page", size=str(size // 1024), unit="KiB")
    return guest
