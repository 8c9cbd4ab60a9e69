"""A revision's plan for one host: its errors alone when it has any (its VMs this host
cannot run included), else the plan
with the notes a reviewer needs (newer instancetype revisions, a stale facts file).
Either way the plan carries the revision's warnings, the ones ``validate`` shows
(catalog and expansion: deprecations, fields without effect, newer revisions), before
its own.

A VM pinned to an older instancetype or preference revision than the repository's
(its expansion's warning, ``Notice.PINNED_REVISION``, with how to roll it forward) is
said by the plan of the host it runs on.

Input: a ``Desired``, the live domains, a ``PlanPolicy``. Output: a ``Plan``, its
errors and warnings ``Problem`` records. Pure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler.context import SERIAL
from reconciler.hostfacts import FactsError, HostFacts, facts_from_json, stable_view
from reconciler.model import LiveDomain, Problem, Severity, SourceSnapshot
from reconciler.model.changes import Plan
from reconciler.model.plan_errors import PlanError, Unplanned
from reconciler.model.problems import Notice
from reconciler.plan.build import build_plan
from reconciler.plan.pace import pace_plan
from reconciler.wording import plan_errors

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.compare.cache import CompareCache
    from reconciler.context import Mapper
    from reconciler.desired import Desired
    from reconciler.model.rollout import ReadySource, RolloutProgress
    from reconciler.settings.host import HostConfig
    from reconciler.settings.policy import PlanPolicy


def plan_host(
    desired: Desired,
    live: Sequence[LiveDomain],
    policy: PlanPolicy,
    *,
    now: float | None = None,
    cache: CompareCache | None = None,
    mapper: Mapper = SERIAL,
    progress: RolloutProgress | None = None,
    ready: ReadySource | None = None,
) -> Plan:
    """The plan for one host. A revision with errors is not applied at all, so its plan
    is its errors alone: no VM is created, changed or (however broken the overlay)
    deleted on its account. A VM of this host that this host cannot run (its facts,
    its free resources) is an error of the revision here like any other: one rule for
    a revision with errors, in ``plan``, ``apply``, the PR diff, the daemon and status
    (the daemon holds the host at the last applied revision meanwhile).

    Its restarts are paced (``plan/pace.py``): ``progress``, the rollout the caller kept
    (None: none, as for the CLI); ``ready``, the readiness source (None: Ready = running)."""
    warnings = desired.warnings
    if desired.errors or desired.host_errors:
        by_key = {d.key: d for d in live}
        failed = tuple((k, by_key.get(k)) for k in sorted(set(desired.failed), key=lambda k: k.domain))
        return Plan(
            revision=desired.revision,
            changes=(),
            errors=desired.all_errors,
            warnings=warnings,
            failed=failed,
        )
    plan = build_plan(
        desired.revision,
        desired.rendered,
        live,
        policy,
        desired.all_errors,
        desired.failed,
        now=now,
        away=desired.away,
        cache=cache,
        mapper=mapper,
    )
    # A VM pinned to an older revision than the repository's is said where it runs.
    here = {c.key for c in plan.changes}
    warnings = tuple(w for w in warnings if w.notice != Notice.PINNED_REVISION or w.vm in here)
    plan = pace_plan(plan, policy.pacing, progress, now=now or 0.0, ready=ready)
    return replace(plan, warnings=warnings + plan.warnings)


def facts_file_note(host: HostConfig, snapshot: SourceSnapshot, facts: HostFacts) -> Problem | None:
    """A plan warning when the repository's copy of this host's facts (``factsFile``) is
    missing or no longer matches the host (figures that change while it runs aside)."""
    path = host.facts_file
    if not path:
        return None

    def note(error: PlanError) -> Problem:
        return Problem(plan_errors.said(error), subject=f"host {host.name}", severity=Severity.WARNING)

    try:
        kept = facts_from_json(snapshot.files.read(path), path)
    except (OSError, KeyError):
        return note(PlanError(Unplanned.FACTS_MISSING, path=path))
    except FactsError as err:
        return note(PlanError(Unplanned.FACTS_UNREADABLE, path=path, detail=str(err)))
    ours, theirs = stable_view(kept), stable_view(facts)
    differ = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
    if not differ:
        return None
    return note(PlanError(Unplanned.FACTS_STALE, path=path, names=tuple(differ)))
