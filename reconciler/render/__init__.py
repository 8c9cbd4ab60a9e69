"""Render: an expanded VM plus the host configuration -> libvirt domain XML and volumes.

Input: ``ExpandedVM`` (``spec.template.spec`` already expanded), ``HostConfig``,
``HostCaps``. Output: ``RenderedDomain`` (deterministic XML, its sha256, lifecycle
settings, and the ``VolumeSpec`` records apply must provision). Pure and
deterministic to the byte: no clock, no host access, no ``<metadata>`` of its own (the
plan adds the ownership mark to the final definition; a pass-through may keep other
applications' elements there). A field that cannot be rendered raises
``RenderError``; nothing is dropped silently. One module per area of ``<domain>``;
``xml.py`` fixes the element order; ``passthrough.py`` merges the XML a VM keeps beside
its spec (an annotation, checked against an allowlist) last. docs/mapping.md lists
every mapped field, docs/passthrough.md the pass-through.

Three phases, one element tree per domain, never parsed back: ``render_draft`` builds
the tree of what the VM alone decides (per VM, cacheable); the host's placement
(``render.placement``) hands out dedicated CPUs and mediated devices as ``Placed``
records; ``finish`` adds them to the tree (``render.cputune``, ``render.mdev``) and
serializes it once. A VM that wants no host resources has nothing to place: its draft is
serialized as it is drafted. ``render_domain`` is the three for a VM placed nowhere.
"""

from __future__ import annotations

import copy
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler.errors import RenderError
from reconciler.model import ExpandedVM, Problem, RenderedDomain, RevisionInfo, Severity, VolumeSpec
from reconciler.records import dataclass
from reconciler.render import cputune, mdev
from reconciler.render.caps import HostCaps, parse_host_caps
from reconciler.render.clock import render_clock
from reconciler.render.cloudinit import (
    CONFIGDRIVE_LABEL,
    NOCLOUD_LABEL,
    check_access_credentials,
    parse_payload,
)
from reconciler.render.context import DOMAIN, SPEC, RenderContext, SpecError
from reconciler.render.cpu import render_cpu
from reconciler.render.devices import render_devices
from reconciler.render.disks import render_disks
from reconciler.render.features import render_features
from reconciler.render.firmware import render_os
from reconciler.render.identity import render_identity
from reconciler.render.interfaces import render_interfaces, stable_mac
from reconciler.render.memory import render_memory
from reconciler.render.passthrough import render_passthrough
from reconciler.render.ports import render_hotplug_ports
from reconciler.render.probes import render_probes
from reconciler.render.testdriver import TEST_DOMAIN_TYPE, fit_test_driver
from reconciler.render.xml import serialize_hashed, spec_hash, sub

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from reconciler.render.identity import Identity
    from reconciler.render.passthrough import Kept
    from reconciler.settings.host import HostConfig

__all__ = [
    "Draft",
    "HostCaps",
    "Placed",
    "RenderError",
    "describe_volume",
    "finish",
    "parse_host_caps",
    "render_domain",
    "render_draft",
    "spec_hash",
    "stable_mac",
]

SPEC_KEYS = (
    "domain",
    "volumes",
    "networks",
    "architecture",
    "terminationGracePeriodSeconds",
    "nodeSelector",
    "readinessProbe",
    "livenessProbe",
    "startStrategy",
    "accessCredentials",
)
# Kubernetes scheduling and pod knobs: accepted, no effect on a libvirt host.
SPEC_NO_EFFECT = (
    "evictionStrategy",
    "affinity",
    "tolerations",
    "schedulerName",
    "priorityClassName",
    "hostname",
    "subdomain",
    "dnsConfig",
    "dnsPolicy",
    "topologySpreadConstraints",
)
DOMAIN_KEYS = (
    "resources",
    "cpu",
    "memory",
    "machine",
    "firmware",
    "clock",
    "features",
    "devices",
    "ioThreadsPolicy",
)


@dataclass(frozen=True, slots=True)
class Draft:
    """One VM's domain rendered up to placement: the element tree of everything the VM
    alone decides, and its record (``domain``). A VM that wants no host resources is
    serialized as it is drafted (``domain`` is final); for one that does, ``domain.xml``
    and ``domain.spec_hash`` stay empty until ``finish`` serializes the tree with its
    placement. Nothing but serialization's fixed element order edits ``tree`` after
    ``render_draft``: ``finish`` places resources on a copy."""

    tree: ET.Element
    domain: RenderedDomain

    @property
    def wants_placement(self) -> bool:
        """Whether the host hands this domain resources (dedicated CPUs, mediated devices)."""
        return self.domain.cpu_need is not None or bool(self.domain.mdev_needs)


@dataclass(frozen=True, slots=True)
class Placed:
    """What a host's placement handed one domain: its dedicated CPUs (the vCPUs' in
    order, then the emulator's), the host's NUMA cells (for NUMA passthrough) and the
    UUIDs of its mediated devices (in the order of its ``<hostdev type="mdev">``)."""

    cpus: tuple[int, ...] = ()
    cells: tuple[tuple[int, tuple[int, ...]], ...] = ()
    mdevs: tuple[str, ...] = ()


def render_domain(vm: ExpandedVM, host: HostConfig, caps: HostCaps) -> RenderedDomain:
    """The domain of a VM no host placed resources for (``finish`` of its draft)."""
    return finish(render_draft(vm, host, caps))


def render_draft(vm: ExpandedVM, host: HostConfig, caps: HostCaps) -> Draft:
    """The VM's element tree and record, before placement (serialized at once when it
    wants no host resources).

    The VM is taken apart here: its identity and metadata go to ``render_identity`` alone,
    which hands back the ``Guest`` for the modules that render identity (interfaces,
    disks); every other area module gets the context, which holds the parts of the spec
    it renders and no identity. A ``SpecError`` of any module becomes the ``RenderError``
    naming the VM."""
    try:
        return _draft(vm, host, caps)
    except SpecError as err:
        raise RenderError(vm.key, err.message, err.field) from None


def _draft(vm: ExpandedVM, host: HostConfig, caps: HostCaps) -> Draft:
    ctx = _context(vm, host, caps)
    # startStrategy Paused: every start of the domain leaves its vCPUs paused (KubeVirt's
    # VMI starts paused; `virsh resume` / `virtctl unpause` runs it).
    start_paused = ctx.string(ctx.spec, "startStrategy", SPEC, ("Paused",)) == "Paused"
    probes = render_probes(ctx)
    domain, ident, kept = _tree(ctx, vm)
    xml, hashed = _serialized(ctx, domain, vm.vm)
    life = ident.lifecycle
    revisions: tuple[RevisionInfo, ...] = tuple(r for r in (vm.instancetype, vm.preference) if r is not None)
    record = RenderedDomain(
        key=vm.key,
        uuid=ident.guest.uuid,
        xml_data=xml,
        spec_hash=hashed,
        run_strategy=life.run_strategy,
        source_path=sys.intern(vm.source.path),  # one copy with the ownership mark read back
        volumes=tuple(ctx.volumes),
        rollout=life.rollout,
        adopt=life.adopt,
        prune=life.prune,
        grace_period_s=life.grace_period_s,
        hostname=life.hostname,
        revisions=revisions,
        presets=vm.presets,
        warnings=_warnings(vm, ctx),
        macs=tuple(ctx.macs),
        derived_macs=tuple(ctx.derived_macs),
        host_devices=tuple(ctx.host_devices),
        restart_windows=ident.restart_windows,
        restart_now=ident.restart_now,
        pace=ident.pace,
        start_paused=start_paused,
        probes=probes,
        cpu_need=ctx.cpu_need,
        mdev_needs=tuple(ctx.mdev_needs),
        config=tuple(ctx.config),
        passthrough=kept.paths,
        passthrough_omitted=kept.omitted,
    )
    return Draft(domain, record)


def _warnings(vm: ExpandedVM, ctx: RenderContext) -> tuple[Problem, ...]:
    """The expanded VM's warnings and the rendering's: the very tuple of the expanded VM's
    when the rendering adds none (a daemon keeps both records' for good)."""
    if not ctx.warnings:
        return vm.warnings
    return (
        *vm.warnings,
        *(Problem(m, vm=vm.key, field=f, severity=Severity.WARNING) for f, m in ctx.warnings),
    )


def _context(vm: ExpandedVM, host: HostConfig, caps: HostCaps) -> RenderContext:
    """The render context of the VM: the parts of its spec the area modules read (its
    top-level keys and the domain's checked), the host and its capabilities."""
    top = vm.vm.get("spec")
    top = top if isinstance(top, dict) else {}
    tmpl = top.get("template") or {}
    spec = tmpl.get("spec") if isinstance(tmpl, dict) else None
    meta = tmpl.get("metadata") if isinstance(tmpl, dict) else None
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    ctx = RenderContext(
        spec=spec if isinstance(spec, dict) else {},
        host=host,
        caps=caps,
        namespace=vm.key.namespace,
        annotations=annotations if isinstance(annotations, dict) else {},
        vm_spec=top,
        config_maps=vm.config_maps,
        hashed_names=vm.hashed_names,
        secrets=vm.secrets,
    )
    ctx.known(ctx.spec, SPEC, SPEC_KEYS, SPEC_NO_EFFECT)
    ctx.known(ctx.domain, DOMAIN, DOMAIN_KEYS)
    return ctx


def _tree(ctx: RenderContext, vm: ExpandedVM) -> tuple[ET.Element, Identity, Kept]:
    """The ``<domain>`` element tree, area by area, with the VM's identity and what its
    pass-through kept."""
    host, caps = ctx.host, ctx.caps
    dom_type = host.domain_type or caps.domain_type
    domain = ET.Element("domain", {"type": dom_type})
    ident = render_identity(ctx, domain, vm)
    render_memory(ctx, domain)
    cpu_features = render_features(ctx, domain)
    render_cpu(ctx, domain, cpu_features)
    render_os(ctx, domain)
    render_clock(ctx, domain)
    devices = sub(domain, "devices")
    sub(devices, "emulator", host.emulator or caps.emulator)
    check_access_credentials(ctx)
    render_disks(ctx, domain, devices, ident.guest)
    render_interfaces(ctx, devices, ident.guest)
    render_devices(ctx, devices)
    kept = render_passthrough(ctx, domain)
    render_hotplug_ports(domain, ctx.devices, ctx.annotations)
    if dom_type == TEST_DOMAIN_TYPE:
        fit_test_driver(domain)
    return domain, ident, kept


def _serialized(ctx: RenderContext, domain: ET.Element, obj: Mapping[str, Any]) -> tuple[str, str]:
    """The domain's XML and spec hash; both empty for one that wants host resources (``finish``
    serializes it with its placement). Either way, checked for characters XML cannot carry."""
    if any(XML_INVALID.search(c.label) for c in ctx.config):
        raise _unwritable(ctx, obj)
    if ctx.cpu_need is not None or ctx.mdev_needs:  # serialized by finish, with its placement
        if not _writable(domain):
            raise _unwritable(ctx, obj)
        return "", ""
    xml, hashed = serialize_hashed(domain, tuple(ctx.config))
    if _xml_invalid(xml):
        raise _unwritable(ctx, obj)
    return xml, hashed


def finish(draft: Draft, placed: Placed | None = None) -> RenderedDomain:
    """The domain with what the host ``placed`` for it (``None``: nothing, e.g. a VM of
    another host), serialized once: its XML and spec hash."""
    d = draft.domain
    if not draft.wants_placement:
        return d  # nothing to place: serialized as it was drafted
    tree = draft.tree
    if placed is not None:
        tree = copy.deepcopy(tree)  # the draft stays as rendered (the pipeline cache keeps it)
        if d.cpu_need is not None and placed.cpus:
            cputune.pin(tree, d.cpu_need, placed.cpus, placed.cells)
        if d.mdev_needs and placed.mdevs:
            mdev.assign(tree, placed.mdevs)
    # Reorders the tree's children into the fixed element order: a draft's tree (not
    # copied) is already in it after its first serialization, so this never changes it.
    xml, hashed = serialize_hashed(tree, d.config)
    return replace(d, xml_data=xml, spec_hash=hashed)


# Characters XML 1.0 cannot carry, not even escaped: libvirt would refuse the domain.
XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# The ASCII characters XML 1.0 carries: tab, newline, carriage return, 0x20 to 0x7f.
_XML_ASCII = bytes([0x09, 0x0A, 0x0D, *range(0x20, 0x80)])


def _xml_invalid(text: str) -> bool:
    """Whether ``text`` holds a character of ``XML_INVALID``. An ASCII text (a domain's
    XML, nearly always) is checked in one pass in C, deleting the bytes XML carries: the
    regular expression reads a few thousand characters ten times slower."""
    if text.isascii():
        return bool(text.encode().translate(None, _XML_ASCII))
    return XML_INVALID.search(text) is not None


def _writable(tree: ET.Element) -> bool:
    """Whether every text and attribute value of the tree is something XML can carry."""
    parts: list[str] = []
    for el in tree.iter():
        if el.text:
            parts.append(el.text)
        parts.extend(el.attrib.values())
    return not _xml_invalid("\n".join(parts))


def _unwritable(ctx: RenderContext, vm: Mapping[str, Any]) -> SpecError:
    """The field whose string put a character XML cannot carry into the domain."""
    stack: list[tuple[str, object]] = [
        ("spec", vm.get("spec")),
        ("metadata", vm.get("metadata")),
    ]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str) and XML_INVALID.search(node):
            bad = XML_INVALID.search(node)
            assert bad is not None
            return ctx.error(where, f"holds {bad.group()!r}, a character XML cannot carry")
        if isinstance(node, dict):
            stack.extend((f"{where}.{k}", v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(node))))
    return ctx.error("spec", "the domain XML would hold a character XML cannot carry")


def describe_volume(vol: VolumeSpec) -> str:
    """One line for ``reconciler render``: what apply would provision for this volume."""
    if vol.kind == "pool-volume":
        where = f"pool {vol.pool} volume {vol.path}"
    else:
        where = vol.path
    if vol.must_exist:
        what = "must exist"
    elif vol.kind == "nvram":
        what = f"NVRAM from template {vol.backing}"
    elif vol.kind == "overlay" and vol.image and not vol.backing:
        what = f"qcow2 overlay over image {vol.image} (resolved by the host, read-only)"
    elif vol.kind == "overlay":
        what = f"qcow2 overlay over {vol.backing} ({vol.backing_format}, read-only)"
    elif vol.kind == "cloudinit-iso":
        label = parse_payload(vol.content)[0]
        what = (
            "cloud-init ISO" if label in (NOCLOUD_LABEL, CONFIGDRIVE_LABEL) else f"config ISO, label {label}"
        )
    elif vol.clone:
        what = f"{vol.format} {vol.capacity} bytes, a copy of pool volume {vol.clone}"
    elif vol.image and not vol.backing:
        what = f"{vol.format} {vol.capacity} bytes, from image {vol.image} (resolved by the host)"
    elif vol.backing:
        what = f"{vol.format} {vol.capacity} bytes, cloned from {vol.backing}"
    else:
        what = f"{vol.format} {vol.capacity} bytes, sparse"
    flags = ", ephemeral" if vol.ephemeral else ""
    return f"{vol.kind} {where}: {what}{flags}"
