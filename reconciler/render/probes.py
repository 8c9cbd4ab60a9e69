"""A VM's readiness and liveness probes, read as KubeVirt reads them.

Input: the render context (``spec.template.spec``: ``readinessProbe``, ``livenessProbe``,
the interfaces' named ports). Output: ``Probes`` (``model/health.py``), KubeVirt's
defaults applied (a period of 10 s, a timeout of 1 s, 3 failures, 1 success; a 0 is the
default, as the kubelet defaults it). Refused at the field, as KubeVirt and the
kubelet refuse it: a negative number, a liveness probe with ``successThreshold`` other
than 1, a port outside 1-65535 or a named port no interface declares, an HTTP scheme
other than HTTP or HTTPS. The one action per probe and the pod network a network probe
needs are KubeVirt's admission rules (``catalog/admission.py``). Pure. The probes add
nothing to the domain XML: changing one never changes the domain.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.model.health import (
    FAILURE_THRESHOLD,
    PERIOD_S,
    SUCCESS_THRESHOLD,
    TIMEOUT_S,
    Probe,
    ProbeAction,
    Probes,
)
from reconciler.render.context import SPEC

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.render.context import RenderContext

MAX_PORT = 65535


def render_probes(ctx: RenderContext) -> Probes:
    """The VM's probes (``NO_PROBES`` when it sets none)."""
    return Probes(
        readiness=_probe(ctx, "readinessProbe", liveness=False),
        liveness=_probe(ctx, "livenessProbe", liveness=True),
    )


def _probe(ctx: RenderContext, key: str, *, liveness: bool) -> Probe | None:
    node = ctx.mapping(ctx.spec, key, SPEC)
    if node is None:
        return None
    where = f"{SPEC}.{key}"
    actions = [a for a in ProbeAction if node.get(str(a)) is not None]
    if len(actions) != 1:  # admission refuses it first; kept for a spec that skipped it
        raise ctx.error(where, "must have exactly one probe type set")
    action = actions[0]
    timing = Probe(
        action,
        initial_delay_s=_count(ctx, node, "initialDelaySeconds", where, 0),
        period_s=_count(ctx, node, "periodSeconds", where, PERIOD_S),
        timeout_s=_count(ctx, node, "timeoutSeconds", where, TIMEOUT_S),
        failure_threshold=_count(ctx, node, "failureThreshold", where, FAILURE_THRESHOLD),
        success_threshold=_count(ctx, node, "successThreshold", where, SUCCESS_THRESHOLD),
    )
    if liveness and timing.success_threshold != 1:
        raise ctx.error(f"{where}.successThreshold", "must be 1 for a livenessProbe")
    at = f"{where}.{action}"
    body = ctx.mapping(node, str(action), where) or {}
    if action == ProbeAction.GUEST_AGENT_PING:
        return timing
    if action == ProbeAction.EXEC:
        command = body.get("command")
        if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
            raise ctx.error(f"{at}.command", "expected a non-empty list of strings")
        return replace(timing, command=tuple(command))
    port = _port(ctx, body, at)
    host = ctx.string(body, "host", at)
    if action == ProbeAction.TCP_SOCKET:
        return replace(timing, host=host, port=port)
    headers = []
    for i, h in enumerate(ctx.items(body, "httpHeaders", at)):
        name, value = h.get("name"), h.get("value")
        if not isinstance(name, str) or not name or not isinstance(value, str):
            raise ctx.error(f"{at}.httpHeaders[{i}]", "expected a name and a value")
        headers.append((name, value))
    path = ctx.string(body, "path", at) or "/"
    scheme = ctx.string(body, "scheme", at, ("HTTP", "HTTPS")) or "HTTP"
    return replace(timing, host=host, port=port, path=path, scheme=scheme, headers=tuple(headers))


def _count(ctx: RenderContext, node: Mapping[str, Any], field: str, where: str, default: int) -> int:
    value = ctx.integer(node, field, where, minimum=0)
    return value or default


def _port(ctx: RenderContext, body: Mapping[str, Any], at: str) -> int:
    """A port by number, or by the name an interface's ``ports`` gives it (as the pod's
    container ports name them in KubeVirt)."""
    port = body.get("port")
    if isinstance(port, str) and not port.isdigit():
        for iface in ctx.items(ctx.devices, "interfaces", "devices"):
            for p in ctx.items(iface, "ports", "interfaces"):
                if p.get("name") == port and isinstance(p.get("port"), int):
                    return int(p["port"])
        raise ctx.error(f"{at}.port", f"no interface declares a port named {port!r}")
    number = int(port) if isinstance(port, str) else port
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_PORT:
        raise ctx.error(f"{at}.port", f"expected a port number between 1 and {MAX_PORT} or a port name")
    return number
