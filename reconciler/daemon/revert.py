"""``policy.onFailure: revert``: the VMs of a halted rollout back to the last revision
that was healthy on the host, through a plan like any other.

Input: the host's runner as ``Reverting`` says (its name, target, clock and the held
revision's cache; the runner, ``daemon/runner.py``, is one and imports this module), the
head's plan (halted), the last healthy revision and the VMs of the halted batch
(``plan.pace.reverting``), the hypervisor, how the runner plans (its path, the reader of
older revisions, its context, keys and reader of pins) and how it applies. Output: the
last healthy revision planned for those VMs alone, their restarts forced (they are not
Ready: that is why the rollout halted) and applied by the runner's apply (logged as
every apply is); the head's plan returned saying they were reverted
(``RolloutProgress.reverted``: state.json, status). I/O: libvirt through the runner.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from reconciler.daemon.books import Runner, new_cache
from reconciler.model.rollout import ReadySource
from reconciler.plan.pace import reverted
from reconciler.reconcile import plan_revision
from reconciler.wording import rollout as words

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.desired import PipelineCache
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.model import VMKey
    from reconciler.plan.planned import PlannedRevision

log = structlog.get_logger("reconciler.daemon")


class Reverting(Runner, Protocol):
    """What a revert needs of a host's runner: its name, target, clock and the held
    revision's pipeline cache (made here when it has none)."""

    hold_cache: PipelineCache | None


def revert(
    h: Reverting,
    planned: PlannedRevision,
    back: tuple[str, tuple[VMKey, ...]],
    hv: Hypervisor,
    how: tuple[Any, ...],
    apply: Callable[[PlannedRevision], object],
) -> PlannedRevision:
    """Send the VMs of ``back`` to its revision on ``h``; ``how``: (path, the reader of
    older revisions, context, keys, the reader of pins), as the runner plans; ``apply``:
    the runner's apply (on ``hv``, stopping when the daemon stops)."""
    revision, vms = back
    path, held, context, keys, read = how
    snapshot = held(revision)
    paced = planned.plan.pacing
    if snapshot is None or paced is None:
        log.error("cannot read the last healthy revision to revert to", host=h.name, revision=revision[:12])
        return planned
    policy = replace(h.target.policy, restart_now=True, restart_staged=True)
    h.hold_cache = h.hold_cache or new_cache()
    back_plan = plan_revision(
        snapshot,
        path,
        replace(h.target, policy=policy),
        hv,
        clock=h.clock.time,
        cache=h.hold_cache,
        context=context,
        keys=keys,
        read=read,
        ready=ReadySource(lambda k: False),  # halted: not Ready, so every restart of theirs goes now
    )
    back_plan = replace(back_plan, plan=reverted(back_plan.plan, vms))
    log.warning(words.reverting(vms, revision), host=h.name, revision=planned.revision[:12])
    apply(back_plan)
    progress = replace(paced.progress, reverted=vms)
    return replace(planned, plan=replace(planned.plan, pacing=replace(paced, progress=progress)))
