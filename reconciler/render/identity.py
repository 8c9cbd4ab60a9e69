"""Identity and lifecycle: domain name, UUID, SMBIOS serial, run strategy, annotations.

Input: the expanded VM (its key, made and checked once by the catalog, and its object)
and the render's ``RenderContext``. Output, in one call (``render_identity``): the
``<name>``, ``<uuid>`` and ``<sysinfo>`` elements, where the domain's files go on the
host (set on the context, so the area modules never see the VM's name), and an
``Identity``: the ``Guest`` handed to the modules that render identity, the lifecycle
settings and restart windows of ``RenderedDomain``. Pure. The UUID is ``firmware.uuid``
when given, else UUID v5 of the domain name in KubeVirt's firmware namespace (for a VM
in ``default`` this equals KubeVirt's own value).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import uuid
import xml.etree.ElementTree as ET
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from reconciler.model import RestartWindow, Rollout, RunStrategy
from reconciler.model import annotation_names as vm_annotations
from reconciler.model.identifiers import parse_uuid
from reconciler.model.rollout import Autohealing, PaceGroup, UpdateStrategy, valid_limit
from reconciler.render.context import DOMAIN, SPEC, Guest, RenderContext
from reconciler.render.xml import sub

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.model import ExpandedVM

# pkg/virt-controller/watch/vm/firmware.go
KUBEVIRT_FIRMWARE_NS = uuid.UUID("6a1a24a1-4061-4607-8bf4-a3963d0c5895")
_FIRMWARE_NS_BYTES = KUBEVIRT_FIRMWARE_NS.bytes

ANNOTATION_ROLLOUT = vm_annotations.ROLLOUT
ANNOTATION_ADOPT = vm_annotations.ADOPT
ANNOTATION_PRUNE = vm_annotations.PRUNE
HOSTNAME_LABEL = "kubernetes.io/hostname"
DEFAULT_GRACE_PERIOD_S = 180


class Lifecycle(NamedTuple):  # named tuples: one of each per VM rendered, made cheaply
    run_strategy: RunStrategy
    rollout: Rollout | None
    adopt: bool
    prune: bool
    grace_period_s: int
    hostname: str


class Identity(NamedTuple):
    """What ``render_identity`` works out of the VM's identity and metadata."""

    guest: Guest
    lifecycle: Lifecycle
    restart_windows: tuple[RestartWindow, ...]
    restart_now: bool
    pace: PaceGroup | None = None


RESTART_POLICIES = MappingProxyType(
    {
        "always": RunStrategy.ALWAYS,
        "onfailure": RunStrategy.RERUN_ON_FAILURE,
        "never": RunStrategy.ONCE,
    }
)


def strategy_from_restart_policy(policy: object) -> RunStrategy:
    """The design notes' ``spec.restartPolicy`` (any case): ``Always`` -> Always,
    ``OnFailure`` -> RerunOnFailure, ``Never`` -> Once (a one-off VM)."""
    key = policy.strip().lower() if isinstance(policy, str) else None
    if key is None or key not in RESTART_POLICIES:
        raise ValueError(f"unsupported restartPolicy {policy!r} (supported: Always, OnFailure, Never)")
    return RESTART_POLICIES[key]


def render_identity(ctx: RenderContext, domain: ET.Element, vm: ExpandedVM) -> Identity:
    """The domain's ``<name>`` (the key's domain name: checked where the catalog made the
    key), ``<uuid>`` and SMBIOS serial; the domain's files on the host (on ``ctx``); the
    lifecycle settings and restart windows of the VM's metadata."""
    key = vm.key
    life = _lifecycle(ctx, vm.vm)
    windows, now = _restart_window(ctx, vm.vm)
    fw = ctx.mapping(ctx.domain, "firmware", DOMAIN) or {}
    dom_uuid = ctx.uuid = _given_uuid(ctx, fw) or derived_uuid(key.domain)
    ctx.artefact_dir = posixpath.join(ctx.host.volume_dir, key.domain)
    ctx.nvram_file = posixpath.join(ctx.host.nvram_dir, f"{key.domain}_VARS.fd")
    ET.SubElement(domain, "name").text = key.domain
    ET.SubElement(domain, "uuid").text = dom_uuid
    serial = ctx.string(fw, "serial", f"{DOMAIN}.firmware")
    if serial:
        sysinfo = sub(domain, "sysinfo", type="smbios")
        system = sub(sysinfo, "system")
        sub(system, "entry", dom_uuid, name="uuid")
        sub(system, "entry", serial, name="serial")
    return Identity(Guest(key, dom_uuid), life, windows, now, _pace(ctx, vm.vm))


def derived_uuid(domain: str) -> str:
    """The UUID of a domain whose VM names no ``firmware.uuid`` (KubeVirt's: from its name)."""
    # ``str(uuid.uuid5(KUBEVIRT_FIRMWARE_NS, domain))``, without making the UUID object
    # (a test holds them equal): SHA-1 of namespace and name, version 5, RFC 4122 variant.
    h = bytearray(hashlib.sha1(_FIRMWARE_NS_BYTES + domain.encode(), usedforsecurity=False).digest()[:16])
    h[6] = (h[6] & 0x0F) | 0x50
    h[8] = (h[8] & 0x3F) | 0x80
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def _given_uuid(ctx: RenderContext, fw: Mapping[str, Any]) -> str:
    """``firmware.uuid``, canonical ("" when not given)."""
    given = ctx.string(fw, "uuid", f"{DOMAIN}.firmware")
    if not given:
        return ""
    parsed = parse_uuid(given)
    if parsed is None:
        raise ctx.error(f"{DOMAIN}.firmware.uuid", f"{given!r} is not a UUID")
    return parsed


def _lifecycle(ctx: RenderContext, vm: Mapping[str, Any]) -> Lifecycle:
    raw_spec = vm.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    running = spec.get("running")
    strategy = spec.get("runStrategy")
    restart_policy = spec.get("restartPolicy")
    if running is not None and strategy is not None:
        raise ctx.error("spec.runStrategy", "Running and RunStrategy are mutually exclusive")
    if restart_policy is not None:
        other = "runStrategy" if strategy is not None else "running" if running is not None else ""
        if other:
            raise ctx.error("spec.restartPolicy", f"restartPolicy and {other} are mutually exclusive")
        try:
            run_strategy = strategy_from_restart_policy(restart_policy)
        except ValueError as err:
            raise ctx.error("spec.restartPolicy", str(err)) from err
    elif strategy is not None:
        try:
            run_strategy = RunStrategy(strategy)
        except ValueError as err:
            raise ctx.error(
                "spec.runStrategy",
                f"unsupported run strategy {strategy!r} (supported: {', '.join(s.value for s in RunStrategy)})",
            ) from err
    elif running is not None:
        if not isinstance(running, bool):
            raise ctx.error("spec.running", "expected true or false")
        run_strategy = RunStrategy.ALWAYS if running else RunStrategy.HALTED
    else:
        # KubeVirt's VirtualMachine.RunStrategy(): neither field -> Halted.
        run_strategy = RunStrategy.HALTED

    annotations = (vm.get("metadata") or {}).get("annotations") or {}
    rollout: Rollout | None = None
    if ANNOTATION_ROLLOUT in annotations:
        value = annotations[ANNOTATION_ROLLOUT]
        try:
            rollout = Rollout(value)
        except ValueError as err:
            raise ctx.error(
                f"metadata.annotations[{ANNOTATION_ROLLOUT}]", f"{value!r} is not Stage or Restart"
            ) from err
    adopt = _bool_annotation(ctx, annotations, ANNOTATION_ADOPT, default=False)
    prune = _bool_annotation(ctx, annotations, ANNOTATION_PRUNE, default=True)

    tmpl_spec = ctx.spec
    grace = ctx.integer(tmpl_spec, "terminationGracePeriodSeconds", SPEC)
    node_selector = ctx.mapping(tmpl_spec, "nodeSelector", SPEC) or {}
    hostname = node_selector.get(HOSTNAME_LABEL, "")
    if not isinstance(hostname, str):
        raise ctx.error(f"{SPEC}.nodeSelector[{HOSTNAME_LABEL}]", "expected a string")
    return Lifecycle(
        run_strategy=run_strategy,
        rollout=rollout,
        adopt=adopt,
        prune=prune,
        grace_period_s=DEFAULT_GRACE_PERIOD_S if grace is None else grace,
        hostname=hostname,
    )


def _bool_annotation(ctx: RenderContext, annotations: dict[str, object], key: str, default: bool) -> bool:
    if key not in annotations:
        return default
    value = annotations[key]
    if value in ("true", True):
        return True
    if value in ("false", False):
        return False
    raise ctx.error(f"metadata.annotations[{key}]", f'{value!r} is not "true" or "false"')


def _restart_window(ctx: RenderContext, vm: Mapping[str, Any]) -> tuple[tuple[RestartWindow, ...], bool]:
    """The VM's ``reconciler.kubevirt.io/restart-window`` annotation: (windows, restart now)."""
    from reconciler.settings import windows

    annotations = (vm.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(windows.ANNOTATION)
    if value is None:
        return (), False
    if value == windows.NOW:
        return (), True
    try:
        return (windows.parse_annotation(value),), False
    except ValueError as err:
        raise ctx.error(f"metadata.annotations[{windows.ANNOTATION}]", str(err)) from err


def _pace(ctx: RenderContext, vm: Mapping[str, Any]) -> PaceGroup | None:
    """What the VM's restarts are paced with: its pool (the catalog's annotation on a
    pool's replicas), else the limit of its ``reconciler.kubevirt.io/max-unavailable``
    (None: the host's ``policy.maxUnavailable``)."""
    annotations = (vm.get("metadata") or {}).get("annotations") or {}
    own = annotations.get(vm_annotations.MAX_UNAVAILABLE)
    if own is not None and not (isinstance(own, str) and valid_limit(own)):
        raise ctx.error(
            f"metadata.annotations[{vm_annotations.MAX_UNAVAILABLE}]",
            f'{own!r} is not a count or a percentage ("1", "25%")',
        )
    pool = annotations.get(vm_annotations.POOL)
    if pool is None:
        return None if own is None else PaceGroup(max_unavailable=own)
    try:
        p = json.loads(pool)
        return PaceGroup(
            group=f"pool/{p['pool']}",
            max_unavailable=str(p["maxUnavailable"]),
            size=int(p["replicas"]),
            strategy=UpdateStrategy(p["updateStrategy"]),
            order=int(p["order"]),
            autohealing=_autohealing(p.get("autohealing")),
        )
    except (ValueError, KeyError, TypeError) as err:
        raise ctx.error(
            f"metadata.annotations[{vm_annotations.POOL}]", "set by the catalog on a pool's replicas only"
        ) from err


def _autohealing(carried: Any) -> Autohealing | None:
    """A pool's ``autohealing`` as the catalog carries it on its replicas (None: not set)."""
    if carried is None:
        return None
    return Autohealing(int(carried["startUpFailureThreshold"]), float(carried["minFailingToStartSeconds"]))
