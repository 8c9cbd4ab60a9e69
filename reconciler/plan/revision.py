"""A revision's plan for one host: its errors alone when it has any, else the plan
with the notes a reviewer needs (newer instancetype revisions, a stale facts file).

Input: a ``Desired``, the live domains, a ``PlanPolicy``. Output: a ``Plan``. Pure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler.context import SERIAL
from reconciler.hostfacts import FactsError, HostFacts, facts_from_json, stable_view
from reconciler.model import (
    LiveDomain,
    Plan,
    SourceSnapshot,
)
from reconciler.plan.build import PlanPolicy, build_plan

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.compare.cache import CompareCache
    from reconciler.config.host import HostConfig
    from reconciler.context import Mapper
    from reconciler.desired import Desired


def plan_host(
    desired: Desired,
    live: Sequence[LiveDomain],
    policy: PlanPolicy,
    *,
    now: float | None = None,
    cache: CompareCache | None = None,
    mapper: Mapper = SERIAL,
) -> Plan:
    """The plan for one host. A revision with errors is not applied at all, so its plan
    is its errors alone: no VM is created, changed or (however broken the overlay)
    deleted on its account."""
    if desired.errors:
        by_name = {d.name: d for d in live}
        failed = tuple((n, by_name.get(n)) for n in sorted(set(desired.failed_names)))
        return Plan(revision=desired.revision, changes=(), errors=desired.all_errors, failed=failed)
    plan = build_plan(
        desired.revision,
        desired.rendered,
        live,
        policy,
        desired.all_errors,
        desired.failed_names,
        now=now,
        cache=cache,
        mapper=mapper,
    )
    newer = newer_revision_notes(desired, {c.name for c in plan.changes})
    return replace(plan, warnings=plan.warnings + newer) if newer else plan


def newer_revision_notes(desired: Desired, names: set[str]) -> tuple[str, ...]:
    """One line per VM of ``names`` pinned to an instancetype/preference revision older
    than the repository's (what ``diff`` reports as a revision change, said by plan too)."""
    out = []
    for vm in desired.expanded:
        if vm.newer_revisions and vm.name in names:
            what = ", ".join(f"{r.kind} {r.name}" for r in vm.newer_revisions)
            out.append(
                f"{vm.subject}: the repository holds a newer revision of {what} than the one captured "
                "for it; it moves there when its revisionName is changed or cleared, or with "
                "instancetypeRevisions: follow"
            )
    return tuple(out)


def facts_file_note(host: HostConfig, snapshot: SourceSnapshot, facts: HostFacts) -> str:
    """A plan line when the repository's copy of this host's facts (``factsFile``) is
    missing or no longer matches the host (figures that change while it runs aside)."""
    path = host.facts_file
    if not path:
        return ""
    refresh = f"refresh it with `reconciler host-facts --connect URI -o {path}`"
    try:
        kept = facts_from_json(snapshot.files.read(path), path)
    except (OSError, KeyError):
        return f"host {host.name}: factsFile {path} is not in the repository; {refresh}"
    except FactsError as err:
        return f"host {host.name}: {err}; {refresh}"
    ours, theirs = stable_view(kept), stable_view(facts)
    differ = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
    if not differ:
        return ""
    return (
        f"host {host.name}: {path} no longer matches this host (differs in {', '.join(differ)}): "
        f"CI checks against stale facts; {refresh}"
    )
