"""reconcile_once(): call the stages in order, nothing else.

Input: a source snapshot, an entry path, a host connection and its settings.
Output: the ``Plan`` and a ``ReconcileStatus``. A commit with any build, expansion or
render error is not applied at all: the host keeps the last good state.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler.context import Context
from reconciler.desired import (
    PipelineCache,
    desired_state,
    git_catalog_at,
    pins_from_live,
)
from reconciler.errors import ReconcilerError
from reconciler.model import (
    ApplyResult,
    Plan,
    Reason,
    ReconcileStatus,
    SourceSnapshot,
)
from reconciler.plan.revision import facts_file_note, plan_host
from reconciler.render.interfaces import pod_network_note
from reconciler.render.placement import held_from_live
from reconciler.wording.causes import summarize as summarize_failures

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.config.targets import HostTarget
    from reconciler.host.hypervisor import Hypervisor


def reconcile_once(
    snapshot: SourceSnapshot,
    entry: str,
    target: HostTarget,
    hv: Hypervisor,
    dry_run: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.time,
    cache: PipelineCache | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    context: Context | None = None,
) -> tuple[Plan, ReconcileStatus]:
    """One pass: read the host, build the revision, plan, and (unless ``dry_run``) apply.

    ``cache`` (kept by the caller per host) lets a resync skip what it already expanded,
    rendered and compared; ``context`` holds the caller's other caches and the mapper
    the expansion, rendering and comparisons go through.
    """
    ctx = context if context is not None else Context()
    started = clock()
    t0 = time.monotonic()
    live = hv.list_domains()
    config = target.config
    images = (img.path for img in config.images.values())
    facts = hv.host_facts(images, config.allowed_dirs, devices=bool(config.host_devices))
    follow = target.config.instancetype_revisions == "follow"
    catalog_at = git_catalog_at(snapshot.repo, entry, ctx)
    desired = desired_state(
        snapshot,
        entry,
        target.config,
        facts.caps,
        pins_from_live(live),
        follow,
        catalog_at,
        cache,
        facts,
        held=held_from_live(live),
        context=ctx,
    )
    plan = plan_host(
        desired, live, target.policy, now=started, cache=cache.plan if cache else None, mapper=ctx.mapper
    )
    notes = (pod_network_note(target.config, facts.caps), facts_file_note(target.config, snapshot, facts))
    if any(notes):
        plan = replace(plan, warnings=(*plan.warnings, *(n for n in notes if n)))

    def status(reason: Reason, results: tuple[ApplyResult, ...] = (), message: str = "") -> ReconcileStatus:
        applied = snapshot.commit if reason == Reason.SUCCEEDED and not dry_run else ""
        return ReconcileStatus(
            reason=reason,
            attempted_revision=snapshot.commit,
            applied_revision=applied,
            started_at=started,
            duration_ms=int((time.monotonic() - t0) * 1000),
            results=results,
            message=message,
        )

    if desired.errors:
        return plan, status(desired.reason, message="; ".join(desired.errors))
    unrunnable = "; ".join(desired.host_errors)
    if dry_run:
        return plan, status(Reason.RENDER_FAILED if unrunnable else Reason.SUCCEEDED, message=unrunnable)
    from reconciler.host import apply as apply_stage  # here: validate and diff never load the apply stage

    try:
        results = apply_stage.apply_plan(
            plan, hv, apply_stage.HostResources(target.config), should_stop, clock, progress
        )
    except ReconcilerError as err:
        return plan, status(Reason.APPLY_FAILED, message=str(err))
    failed = [r for r in results if not r.ok]
    if failed:
        message = "; ".join(m for m in (summarize_failures(failed), unrunnable) if m)
        return plan, status(Reason.APPLY_FAILED, results, message)
    if unrunnable:  # the other VMs are applied; these wait for a change of git or host
        return plan, status(Reason.RENDER_FAILED, results, unrunnable)
    if plan.prune_refused:  # the rest is applied; the revision is not, until the prunes may go
        return plan, status(Reason.PRUNE_FAILED, results, plan.prune_refused)
    return plan, status(Reason.SUCCEEDED, results)
