"""vCPUs and CPU model: ``<vcpu>``, ``<cpu>`` (mode, model, topology, features, NUMA cell).

Input: ``domain.cpu`` of the expanded spec (topology already set by expansion),
the host default CPU model. Output: elements. Pure. ``maxSockets`` gives a vCPU
maximum (``<vcpu current=...>``) for hot-plug. Host-specific placement
(dedicated CPUs, realtime, NUMA passthrough) is rejected, not dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler import limits
from reconciler.render.context import DOMAIN, RenderContext
from reconciler.render.xml import sub

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

CPU_KEYS = ("sockets", "cores", "threads", "model", "features", "maxSockets")
CPU_UNSUPPORTED = ("dedicatedCpuPlacement", "isolateEmulatorThread", "numa", "realtime")
FEATURE_POLICIES = ("force", "require", "optional", "disable", "forbid")
MODES = {"host-model": "host-model", "host-passthrough": "host-passthrough"}


def render_cpu(ctx: RenderContext, domain: ET.Element, extra_features: list[tuple[str, str]]) -> None:
    where = f"{DOMAIN}.cpu"
    cpu = ctx.mapping(ctx.domain, "cpu", DOMAIN) or {}
    if cpu.get("realtime") is not None:  # ``realtime: {}`` enables it
        raise ctx.error(
            f"{where}.realtime",
            "realtime vCPUs need dedicated CPUs (dedicatedCpuPlacement), which a libvirt host does not offer yet",
        )
    for key in CPU_UNSUPPORTED:
        value = cpu.get(key)
        if value not in (None, False, {}):
            raise ctx.error(
                f"{where}.{key}", "host-specific CPU placement is not supported on a libvirt host"
            )
    ctx.known(cpu, where, CPU_KEYS, CPU_UNSUPPORTED)
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
