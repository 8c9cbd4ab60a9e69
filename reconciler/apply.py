"""Execute a Plan through the hypervisor: the only writer to a host.

Input: a ``Plan`` (already fully rendered: nothing is rendered here) and a
``Hypervisor``. Output: one ``ApplyResult`` per change. One domain's failure never
stops the others; each domain is (re)defined in one ``defineXML`` call carrying the
ownership mark, so a domain is never half-defined.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from reconciler import inventory
from reconciler.errors import HypervisorError, ReconcilerError
from reconciler.hypervisor import Hypervisor
from reconciler.model import Action, ApplyResult, Change, OwnershipMark, Plan, RenderedDomain

log = structlog.get_logger("reconciler.apply")

# Called before a domain is defined; provisions the host resources it needs.
Provisioner = Callable[[RenderedDomain, Hypervisor], None]


def mark_for(d: RenderedDomain, commit: str) -> OwnershipMark:
    return OwnershipMark(
        commit=commit,
        path=d.source_path,
        spec_hash=d.spec_hash,
        revisions=d.revisions,
        presets=d.presets,
        prune=d.prune,
        run_strategy=str(d.run_strategy),
        ephemeral=tuple(v.path for v in d.volumes if v.ephemeral),
    )


def _define(c: Change, hv: Hypervisor, commit: str, provision: Provisioner | None) -> None:
    assert c.desired is not None
    if provision is not None:
        provision(c.desired, hv)
    hv.define(inventory.with_mark(c.desired.xml, mark_for(c.desired, commit)), c.name)


def apply_change(c: Change, hv: Hypervisor, commit: str, provision: Provisioner | None = None) -> ApplyResult:
    grace = float(c.desired.grace_period_s if c.desired else 180)
    if c.action in (Action.CREATE, Action.UPDATE, Action.ADOPT, Action.RESTART):
        _define(c, hv, commit, provision)
    if c.action == Action.RESTART:
        hv.stop(c.name, grace)
        hv.start(c.name)
    if c.stop:
        hv.stop(c.name, grace)
    if c.start:
        hv.start(c.name)
    if c.action == Action.DELETE:
        hv.stop(c.name, grace)
        hv.undefine(c.name)
    return ApplyResult(c.subject, c.action, True, c.reason)


def apply_plan(
    plan: Plan,
    hv: Hypervisor,
    provision: Provisioner | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> tuple[ApplyResult, ...]:
    """Run every change; ``should_stop`` is checked between changes (SIGTERM)."""
    results: list[ApplyResult] = []
    for c in plan.changes:
        if c.is_noop:
            results.append(ApplyResult(c.subject, c.action, True, c.reason))
            continue
        if should_stop():
            results.append(ApplyResult(c.subject, Action.SKIPPED, False, "interrupted before this change", True))
            continue
        try:
            result = apply_change(c, hv, plan.revision, provision)
            log.info(c.action.past, subject=c.subject, action=str(c.action), reason=c.reason, revision=plan.revision)
        except (HypervisorError, ReconcilerError, OSError) as err:
            transient = bool(getattr(err, "transient", False))
            result = ApplyResult(c.subject, c.action, False, f"{c.action} failed: {err}", transient)
            log.error("apply failed", subject=c.subject, action=str(c.action), error=str(err), revision=plan.revision)
        results.append(result)
    return tuple(results)
