"""Hypervisor features: ``<features>`` (acpi, apic, smm, hyperv, kvm, pvspinlock).

Input: ``domain.features`` of the expanded spec. Output: the ``<features>``
element, plus CPU features a Hyper-V setting implies (evmcs -> vmx). Pure.
KubeVirt semantics: ACPI is on unless disabled; a present feature is enabled
unless ``enabled: false``; Hyper-V dependencies are filled in as KubeVirt's
defaults do (synic/ipi/tlbflush -> vpindex, synictimer -> synic, evmcs -> vapic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.render.context import DOMAIN, RenderContext
from reconciler.render.xml import sub

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Mapping

FEATURE_KEYS = ("acpi", "apic", "smm", "hyperv", "hypervPassthrough", "kvm", "pvspinlock")

# KubeVirt hyperv field -> libvirt element, in the order KubeVirt's converter writes them.
HYPERV: tuple[tuple[str, str], ...] = (
    ("relaxed", "relaxed"),
    ("vapic", "vapic"),
    ("spinlocks", "spinlocks"),
    ("vpindex", "vpindex"),
    ("runtime", "runtime"),
    ("synic", "synic"),
    ("synictimer", "stimer"),
    ("reset", "reset"),
    ("vendorid", "vendor_id"),
    ("frequencies", "frequencies"),
    ("reenlightenment", "reenlightenment"),
    ("tlbflush", "tlbflush"),
    ("ipi", "ipi"),
    ("evmcs", "evmcs"),
)
DEFAULT_SPINLOCKS = 4096
# (required feature, the feature requiring it), applied in this order.
HYPERV_DEPENDENCIES: tuple[tuple[str, str], ...] = (
    ("synic", "synictimer"),
    ("vpindex", "synic"),
    ("vpindex", "ipi"),
    ("vpindex", "tlbflush"),
    ("vapic", "evmcs"),
)


def _state(ctx: RenderContext, node: Mapping[str, Any], where: str, extra: tuple[str, ...] = ()) -> bool:
    ctx.known(node, where, ("enabled", *extra))
    return ctx.boolean(node, "enabled", where) is not False


def render_features(ctx: RenderContext, domain: ET.Element) -> list[tuple[str, str]]:
    """Adds ``<features>``; returns CPU features (name, policy) the settings require."""
    where = f"{DOMAIN}.features"
    f = ctx.mapping(ctx.domain, "features", DOMAIN) or {}
    ctx.known(f, where, FEATURE_KEYS)
    el = sub(domain, "features")
    cpu_features: list[tuple[str, str]] = []

    acpi = ctx.mapping(f, "acpi", where)
    if acpi is None or _state(ctx, acpi, f"{where}.acpi"):
        sub(el, "acpi")
    apic = ctx.mapping(f, "apic", where)
    if apic is not None and _state(ctx, apic, f"{where}.apic", ("endOfInterrupt",)):
        eoi = ctx.boolean(apic, "endOfInterrupt", f"{where}.apic")
        sub(el, "apic", eoi=None if eoi is None else ("on" if eoi else "off"))

    hv = ctx.mapping(f, "hyperv", where)
    passthrough = ctx.mapping(f, "hypervPassthrough", where)
    if passthrough is not None and _state(ctx, passthrough, f"{where}.hypervPassthrough"):
        if hv is not None:
            raise ctx.error(f"{where}.hypervPassthrough", "cannot be combined with features.hyperv")
        sub(el, "hyperv", mode="passthrough")
    elif hv is not None:
        cpu_features = _render_hyperv(ctx, el, hv, f"{where}.hyperv")

    kvm = ctx.mapping(f, "kvm", where)
    if kvm is not None:
        ctx.known(kvm, f"{where}.kvm", ("hidden",))
        hidden = ctx.boolean(kvm, "hidden", f"{where}.kvm")
        if hidden is not None:
            sub(sub(el, "kvm"), "hidden", state="on" if hidden else "off")
    pvspinlock = ctx.mapping(f, "pvspinlock", where)
    if pvspinlock is not None:
        sub(el, "pvspinlock", state="on" if _state(ctx, pvspinlock, f"{where}.pvspinlock") else "off")
    smm = ctx.mapping(f, "smm", where)
    if smm is not None:
        if _state(ctx, smm, f"{where}.smm"):
            sub(el, "smm")
        else:
            sub(el, "smm", state="off")
    return cpu_features


def _render_hyperv(
    ctx: RenderContext, features: ET.Element, hv: Mapping[str, Any], where: str
) -> list[tuple[str, str]]:
    ctx.known(hv, where, tuple(k for k, _ in HYPERV))
    extras = {
        "spinlocks": ("spinlocks",),
        "vendorid": ("vendorid",),
        "synictimer": ("direct",),
        "tlbflush": ("direct", "extended"),
    }
    state: dict[str, bool | None] = {}
    for key, _ in HYPERV:
        node = ctx.mapping(hv, key, where)
        state[key] = None if node is None else _state(ctx, node, f"{where}.{key}", extras.get(key, ()))

    # KubeVirt defaults (pkg/defaults/hyperv.go): fill what an enabled feature needs,
    # in table order (synictimer turns on synic, which then needs vpindex).
    for dep, by in HYPERV_DEPENDENCIES:
        if state[by] and state[dep] is None:
            state[dep] = True
    for dep, by in HYPERV_DEPENDENCIES:
        if state[by] and state[dep] is False:
            raise ctx.error(f"{where}.{dep}", f"is disabled but {by} requires it")

    el = sub(features, "hyperv", mode="custom")
    for key, tag in HYPERV:
        on = state[key]
        if on is None:
            continue
        node = ctx.mapping(hv, key, where) or {}
        s = "on" if on else "off"
        if key == "spinlocks":
            retries = ctx.integer(node, "spinlocks", f"{where}.spinlocks", minimum=4095)
            sub(el, tag, state=s, retries=str(retries or DEFAULT_SPINLOCKS) if on else None)
        elif key == "vendorid":
            value = ctx.string(node, "vendorid", f"{where}.vendorid")
            if on and not value:
                raise ctx.error(f"{where}.vendorid.vendorid", "a vendor id is required")
            if len(value) > 12:
                raise ctx.error(f"{where}.vendorid.vendorid", "at most 12 characters")
            sub(el, tag, state=s, value=value if on else None)
        elif key == "synictimer":
            t = sub(el, tag, state=s)
            direct = ctx.mapping(node, "direct", f"{where}.synictimer")
            if on and direct is not None:
                sub(t, "direct", state="on" if _state(ctx, direct, f"{where}.synictimer.direct") else "off")
        elif key == "tlbflush":
            t = sub(el, tag, state=s)
            for sub_key in ("direct", "extended"):
                sub_node = ctx.mapping(node, sub_key, f"{where}.tlbflush")
                if on and sub_node is not None:
                    sub(
                        t,
                        sub_key,
                        state="on" if _state(ctx, sub_node, f"{where}.tlbflush.{sub_key}") else "off",
                    )
        else:
            sub(el, tag, state=s)
    return [("vmx", "require")] if state["evmcs"] else []
