"""vCPUs and CPU model: ``<vcpu>``, ``<cpu>`` (mode, model, topology, features, NUMA cell).

Input: ``domain.cpu`` of the expanded spec (topology already set by expansion),
the host default CPU model. Output: elements, and for ``dedicatedCpuPlacement`` the
``CpuNeed`` the host's placement (``render.cputune``) fills from the host config's
``dedicatedCpus``. Pure. ``maxSockets`` gives a vCPU maximum (``<vcpu current=...>``)
for hot-plug. KubeVirt's rules hold: ``isolateEmulatorThread``, ``realtime`` and
``numa.guestMappingPassthrough`` need dedicated CPUs, NUMA passthrough needs hugepages.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.manifests import limits
from reconciler.model import CpuNeed
from reconciler.render.context import DOMAIN, RenderContext
from reconciler.render.xml import sub

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Mapping

CPU_KEYS = (
    "sockets",
    "cores",
    "threads",
    "model",
    "features",
    "maxSockets",
    "dedicatedCpuPlacement",
    "isolateEmulatorThread",
    "numa",
    "realtime",
)
FEATURE_POLICIES = ("force", "require", "optional", "disable", "forbid")
MODES = MappingProxyType({"host-model": "host-model", "host-passthrough": "host-passthrough"})


def render_cpu(ctx: RenderContext, domain: ET.Element, extra_features: list[tuple[str, str]]) -> None:
    where = f"{DOMAIN}.cpu"
    cpu = ctx.mapping(ctx.domain, "cpu", DOMAIN) or {}
    ctx.known(cpu, where, CPU_KEYS)
    sockets = ctx.integer(cpu, "sockets", where) or 1
    cores = ctx.integer(cpu, "cores", where) or 1
    threads = ctx.integer(cpu, "threads", where) or 1
    max_sockets = ctx.integer(cpu, "maxSockets", where) or sockets
    if max_sockets < sockets:
        raise ctx.error(f"{where}.sockets", f"{sockets} sockets exceed maxSockets {max_sockets}")
    current = sockets * cores * threads
    maximum = max_sockets * cores * threads
    if problem := limits.vcpu_problem(maximum):
        raise ctx.error(where, f"{max_sockets} sockets x {cores} cores x {threads} threads: {problem}")
    ctx.vcpus, ctx.max_vcpus = current, maximum
    ctx.cpu_need = _dedicated(ctx, cpu, where, current, maximum)
    if maximum != current:
        sub(domain, "vcpu", str(maximum), placement="static", current=str(current))
    else:
        sub(domain, "vcpu", str(current), placement="static")

    model = ctx.string(cpu, "model", where) or ctx.host.cpu_model
    if model in MODES:
        el = sub(domain, "cpu", mode=MODES[model])
    else:
        el = sub(domain, "cpu", mode="custom", match="exact")
        sub(el, "model", model, fallback="forbid")
    sub(el, "topology", sockets=str(max_sockets), cores=str(cores), threads=str(threads))
    seen: set[str] = set()
    for i, feat in enumerate(ctx.items(cpu, "features", where)):
        fwhere = f"{where}.features[{i}]"
        ctx.known(feat, fwhere, ("name", "policy"))
        name = ctx.string(feat, "name", fwhere)
        if not name:
            raise ctx.error(f"{fwhere}.name", "a CPU feature needs a name")
        if name in seen:
            raise ctx.error(f"{fwhere}.name", f"CPU feature {name!r} is listed twice")
        seen.add(name)
        sub(
            el, "feature", policy=ctx.string(feat, "policy", fwhere, FEATURE_POLICIES) or "require", name=name
        )
    for name, policy in extra_features:
        if name not in seen:
            seen.add(name)
            sub(el, "feature", policy=policy, name=name)


def _dedicated(
    ctx: RenderContext, cpu: Mapping[str, Any], where: str, vcpus: int, maximum: int
) -> CpuNeed | None:
    """What ``dedicatedCpuPlacement`` asks of the host, checked as KubeVirt checks it."""
    dedicated = ctx.boolean(cpu, "dedicatedCpuPlacement", where) or False
    isolate = ctx.boolean(cpu, "isolateEmulatorThread", where) or False
    realtime = ctx.mapping(cpu, "realtime", where)  # ``realtime: {}`` enables it
    numa = ctx.mapping(cpu, "numa", where)
    passthrough = False
    if numa is not None:
        ctx.known(numa, f"{where}.numa", ("guestMappingPassthrough",))
        passthrough = ctx.mapping(numa, "guestMappingPassthrough", f"{where}.numa") is not None
    needs = (
        ("isolateEmulatorThread", isolate),
        ("realtime", realtime is not None),
        ("numa", passthrough),
    )
    for key, wanted in needs:
        if wanted and not dedicated:
            raise ctx.error(f"{where}.{key}", f"{key} needs dedicatedCpuPlacement: true, as in KubeVirt")
    if not dedicated:
        return None
    if maximum != vcpus:
        raise ctx.error(
            f"{where}.maxSockets",
            "dedicated CPUs are pinned one per vCPU: CPU hot-plug (maxSockets) is not possible",
        )
    if not ctx.host.dedicated_cpus:
        raise ctx.error(
            f"{where}.dedicatedCpuPlacement",
            f"host {ctx.host.name} dedicates no CPUs: name the ones VMs may have to themselves "
            'in the host config (dedicatedCpus: "2-7")',
        )
    if (
        passthrough
        and ctx.mapping(ctx.mapping(ctx.domain, "memory", DOMAIN) or {}, "hugepages", where) is None
    ):
        raise ctx.error(
            f"{where}.numa.guestMappingPassthrough",
            "passing the host's NUMA topology through needs hugepages (memory.hugepages), as in KubeVirt",
        )
    mask: tuple[int, ...] = ()
    if realtime is not None:
        ctx.known(realtime, f"{where}.realtime", ("mask",))
        text = ctx.string(realtime, "mask", f"{where}.realtime")
        try:
            mask = realtime_vcpus(text, vcpus)
        except ValueError as err:
            raise ctx.error(f"{where}.realtime.mask", str(err)) from err
    return CpuNeed(vcpus, emulator=isolate, realtime=mask, numa=passthrough)


def realtime_vcpus(mask: str | None, vcpus: int) -> tuple[int, ...]:
    """KubeVirt's ``realtime.mask`` (``"0-3,^1"``: ranges, ``^`` excludes) -> vCPU ids;
    no mask: every vCPU."""
    if not mask:
        return tuple(range(vcpus))
    chosen: set[int] = set()
    excluded: set[int] = set()
    for part in mask.split(","):
        part = part.strip()
        target = excluded if part.startswith("^") else chosen
        first, dash, last = part.lstrip("^").partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"{mask!r} is not a vCPU mask (e.g. 0-3,^1)")
        lo, hi = int(first), int(last) if dash else int(first)
        if lo > hi or hi >= vcpus:
            raise ValueError(f"{part!r}: the VM has vCPUs 0-{vcpus - 1}")
        target.update(range(lo, hi + 1))
    if not chosen:
        chosen = set(range(vcpus))
    return tuple(sorted(chosen - excluded))
