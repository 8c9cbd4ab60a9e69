"""Plan a revision for a host, then apply that very plan: the stages called in order.

Input: a source snapshot, an entry path, a host's target (``config.targets``), its
connection, the host's SOPS keys (none: an encrypted file fails the revision) and how
other commits are read for ``git:<commit>`` pins (the daemon: its mirror; by default the
local repository the snapshot names). Output: ``plan_revision`` reads the host and plans the revision into a
``PlannedRevision`` (a value: printed, saved, applied as it is); ``apply_planned``
applies one and returns the ``ReconcileStatus``; ``host_changes`` says what changed on
the host since a plan was made. The daemon, ``plan``, ``apply`` and ``apply FILE`` all
go through these; ``reconcile_once`` is the two in one call. A commit with any build,
expansion or render error, a VM of this host the host cannot run, or any other error
of its plan (a domain name another owner holds, a comparison that fails) is not applied
at all: the host keeps the last good state.
Nothing here plans twice: apply never lists the host or plans again. The status's message
words the revision's errors and the apply's failures (grouped by cause) through
``wording.problems``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler import source
from reconciler.context import Context
from reconciler.desired import PipelineCache, desired_state
from reconciler.desired.pins import git_catalog_at, pins_from_live
from reconciler.errors import ReconcilerError
from reconciler.images.stage import host_images
from reconciler.model import Problem, SourceSnapshot, VMKey
from reconciler.model.results import ApplyResult, Reason, ReconcileStatus
from reconciler.plan.planned import PlannedRevision, changed_since, touched_fingerprints
from reconciler.plan.revision import facts_file_note, plan_host
from reconciler.records import dataclass
from reconciler.render.interfaces import pod_network_note
from reconciler.render.placement import held_from_live
from reconciler.wording import problems, refusal

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.desired import Desired
    from reconciler.expand.pins import CatalogAt
    from reconciler.host.apply import InFlight
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.hostfacts import HostFacts
    from reconciler.manifests.sops.keys import Keys
    from reconciler.model import LiveDomain, RenderedDomain
    from reconciler.model.changes import Plan
    from reconciler.model.rollout import ReadySource, RolloutProgress
    from reconciler.settings.host import HostConfig
    from reconciler.settings.targets import HostTarget


def plan_revision(
    snapshot: SourceSnapshot,
    entry: str,
    target: HostTarget,
    hv: Hypervisor,
    *,
    clock: Callable[[], float] = time.time,
    cache: PipelineCache | None = None,
    context: Context | None = None,
    keys: Keys | None = None,
    read: Callable[[str], SourceSnapshot] | None = None,
    progress: RolloutProgress | None = None,
    ready: ReadySource | None = None,
    on_image_bytes: Callable[[int], None] | None = None,
) -> PlannedRevision:
    """Read the host, build the revision and plan it: nothing is changed.

    ``progress`` and ``ready``: the rollout kept from the last reconcile and the
    readiness source its restarts are paced by (``plan/pace.py``; None: none kept, and
    Ready = running).

    ``keys``: the host's SOPS keys (None: a revision with an encrypted file is an error).
    ``read``: how other commits of the repository are read, for ``revisionName:
    git:<commit>`` pins (the daemon's reads its mirror); by default the repository at
    ``snapshot.repo`` (a local path).

    ``on_image_bytes``: told the bytes of each image downloaded into the host's image
    store (the daemon's metric); images are resolved before render (``images.stage``).

    ``cache`` (kept by the caller per host) lets a resync skip what it already expanded,
    rendered and compared; ``context`` holds the caller's other caches and the mapper
    the expansion, rendering and comparisons go through.
    """
    ctx = context if context is not None else Context()
    started = clock()
    t0 = time.monotonic()
    host = _read_host(snapshot, entry, target, hv, ctx, keys, cache, on_image_bytes)
    catalog_at = git_catalog_at(read or source.snapshot_reader(snapshot.repo), entry, ctx, keys)
    desired = _desired(snapshot, entry, target, host, catalog_at, cache, ctx, keys)
    plan = plan_host(
        desired,
        host.live,
        target.policy,
        now=started,
        cache=cache.plan if cache else None,
        mapper=ctx.mapper,
        progress=progress,
        ready=ready,
    )
    plan = _noted(plan, snapshot, target, desired, host)
    return _planned(plan, snapshot, entry, target, hv, host, desired, started, t0)


@dataclass(frozen=True, slots=True)
class _HostRead:
    """What a plan reads of the host: its domains, its config with the revision's images
    resolved into its store (and the images that could not be), and its facts."""

    live: list[LiveDomain]
    config: HostConfig
    image_errors: tuple[Problem, ...]
    facts: HostFacts


def _read_host(
    snapshot: SourceSnapshot,
    entry: str,
    target: HostTarget,
    hv: Hypervisor,
    ctx: Context,
    keys: Keys | None,
    cache: PipelineCache | None,
    on_image_bytes: Callable[[int], None] | None,
) -> _HostRead:
    """The host's domains, then its images resolved (downloads happen here, before
    render), then its facts."""
    live = hv.list_domains()
    config, image_errors = host_images(
        snapshot.files,
        entry,
        target.config,
        ctx,
        keys,
        cache.host if cache is not None else None,
        on_image_bytes,
    )
    images = (img.path for img in target.config.images.values())
    facts = hv.host_facts(images, config.allowed_dirs, devices=bool(config.host_devices))
    return _HostRead(live, config, image_errors, facts)


def _desired(
    snapshot: SourceSnapshot,
    entry: str,
    target: HostTarget,
    host: _HostRead,
    catalog_at: CatalogAt,
    cache: PipelineCache | None,
    ctx: Context,
    keys: Keys | None,
) -> Desired:
    """The revision rendered for the host, its VMs at the instancetype revisions their
    domains were made with (but those rolled forward)."""
    pins = pins_from_live(host.live)
    for name in target.policy.roll_forward:  # rolled forward: the repository's revisions
        pins.pop(VMKey.from_domain(name), None)
    return desired_state(
        snapshot,
        entry,
        host.config,
        host.facts.caps,
        pins,
        host.config.instancetype_revisions == "follow",
        catalog_at,
        cache,
        host.facts,
        held=held_from_live(host.live),
        context=ctx,
        keys=keys,
    )


def _noted(
    plan: Plan, snapshot: SourceSnapshot, target: HostTarget, desired: Desired, host: _HostRead
) -> Plan:
    """``plan`` with the errors of VMs to roll forward not in the revision and of images
    not resolved, and the warnings of the pod network and the facts file."""
    unknown = (
        target.policy.roll_forward - {d.name for d in desired.rendered} - {k.domain for k in desired.failed}
    )
    if unknown:
        missing = tuple(
            Problem(f"--roll-forward: no such VM in revision {snapshot.commit[:12]}", vm=VMKey.from_domain(n))
            for n in sorted(unknown)
        )
        plan = replace(plan, errors=(*plan.errors, *missing))
    if host.image_errors:
        plan = replace(plan, errors=(*plan.errors, *host.image_errors))
    notes = (
        pod_network_note(host.config, host.facts.caps),
        facts_file_note(host.config, snapshot, host.facts),
    )
    if any(notes):
        plan = replace(plan, warnings=(*plan.warnings, *(n for n in notes if n is not None)))
    return plan


def _planned(
    plan: Plan,
    snapshot: SourceSnapshot,
    entry: str,
    target: HostTarget,
    hv: Hypervisor,
    host: _HostRead,
    desired: Desired,
    started: float,
    t0: float,
) -> PlannedRevision:
    """The planned revision: ``plan`` with what apply checks and applies it by (the
    fingerprints of the domains it touches, the host config and policy), planned at
    ``started`` (the clock) in the time since ``t0`` (monotonic)."""
    return PlannedRevision(
        plan=plan,
        uri=target.uri,
        host=target.policy.host or hv.hostname(),
        config=host.config,
        policy=target.policy,
        revision=snapshot.commit,
        entry=entry,
        repo=snapshot.repo,
        live=touched_fingerprints(plan, host.live),
        planned_at=started,
        plan_ms=int((time.monotonic() - t0) * 1000),
        errors=plan.errors,  # the revision's, and what this host meets (a name taken, a conflict)
        reason=desired.reason if desired.errors or not plan.errors else Reason.RENDER_FAILED,
        host_errors=desired.host_errors,
    )


def _status(
    planned: PlannedRevision,
    reason: Reason,
    results: tuple[ApplyResult, ...] = (),
    message: str = "",
    *,
    applied: bool,
    apply_ms: int = 0,
    found: tuple[Problem, ...] = (),
    first: str = "",
) -> ReconcileStatus:
    revision = planned.revision
    return ReconcileStatus(
        reason=reason,
        attempted_revision=revision,
        applied_revision=revision if reason == Reason.SUCCEEDED and applied else "",
        started_at=planned.planned_at,
        duration_ms=planned.plan_ms + apply_ms,
        results=results,
        message=message,
        problems=found,
        first_error=first,
    )


def _words(found: tuple[Problem, ...]) -> str:
    return problems.joined(map(problems.words, found))


def planned_status(planned: PlannedRevision) -> ReconcileStatus:
    """The status of a plan that is shown, not applied (``plan``)."""
    if planned.errors:
        first = problems.headline(problems.words(planned.errors[0]))
        return _status(planned, planned.reason, message=_words(planned.errors), applied=False,
                       found=planned.errors, first=first)  # fmt: skip
    return _status(planned, Reason.SUCCEEDED, applied=False)


def apply_planned(
    planned: PlannedRevision,
    hv: Hypervisor,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.time,
    progress: Callable[[int, int, str], None] | None = None,
    inflight: InFlight | None = None,
) -> ReconcileStatus:
    """Apply ``planned.plan`` as it is (a revision with errors: nothing) and say how it went.
    ``inflight`` (the daemon's, per host): graceful stops run on there after this returns."""
    if planned.errors:
        return planned_status(planned)
    from reconciler.host import apply as apply_stage  # here: validate and diff never load the apply stage

    t0 = time.monotonic()

    def status(
        reason: Reason, results: tuple[ApplyResult, ...] = (), message: str = "", first: str = "",
        found: tuple[Problem, ...] = (),
    ) -> ReconcileStatus:  # fmt: skip
        ms = int((time.monotonic() - t0) * 1000)
        return _status(planned, reason, results, message, applied=True, apply_ms=ms, found=found, first=first)

    plan = planned.plan
    try:
        results = apply_stage.apply_plan(
            plan, hv, apply_stage.HostResources(planned.config), should_stop, clock, progress, inflight
        )
    except ReconcilerError as err:
        return status(Reason.APPLY_FAILED, message=str(err), first=problems.headline(str(err)))
    failed = [r for r in results if not r.ok]
    if failed:
        found = tuple(r.problem for r in failed if r.problem is not None)
        first = problems.first_cause(failed)
        return status(Reason.APPLY_FAILED, results, problems.summarize(failed), first, found)
    if plan.prune_refused is not None:  # the rest is applied; the revision is not, until the prunes may go
        refused = refusal.said(plan.prune_refused)
        return status(Reason.PRUNE_FAILED, results, refused, problems.headline(refused))
    return status(Reason.SUCCEEDED, results)


def read_touched(planned: PlannedRevision, hv: Hypervisor) -> dict[str, LiveDomain | None]:
    """The domains the plan's changes touch, each read again by name (``None``: no such
    domain now); the others are not read."""
    return {name: hv.get_domain(name) for name in sorted(planned.live)}


def host_changes(planned: PlannedRevision, hv: Hypervisor) -> tuple[str, ...]:
    """What changed on the host, since the plan, of the domains its changes touch
    (one line each; empty when the host still matches the plan)."""
    return changed_since(planned, read_touched(planned, hv))


def rendered_again(
    planned: PlannedRevision, snapshot: SourceSnapshot, hv: Hypervisor, keys: Keys | None = None
) -> dict[str, RenderedDomain]:
    """The domains of ``planned``'s revision rendered again for its host, by name: where
    a saved plan's ISOs take the build's Secret values (the file holds none)."""
    from reconciler.settings.targets import HostTarget

    target = HostTarget(planned.uri, planned.config, planned.policy)
    again = plan_revision(snapshot, planned.entry, target, hv, keys=keys)
    return {c.name: c.desired for c in again.plan.changes if c.desired is not None}


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
    keys: Keys | None = None,
) -> tuple[Plan, ReconcileStatus]:
    """One pass: ``plan_revision``, then (unless ``dry_run``) ``apply_planned`` of that plan."""
    planned = plan_revision(snapshot, entry, target, hv, clock=clock, cache=cache, context=context, keys=keys)
    if dry_run:
        return planned.plan, planned_status(planned)
    return planned.plan, apply_planned(planned, hv, should_stop=should_stop, clock=clock, progress=progress)
