"""Paced restarts: which of a plan's restarts go now, which wait, and a halted rollout.

Input: a ``Plan`` (its ``restart`` changes are every restart the reconciler causes:
rollout Restart, restart windows, ``--restart-now``, roll-forward), the host's
``Pacing``, the ``RolloutProgress`` kept from the last reconcile (None: nothing kept, as
for the CLI), the time, and a readiness source (``VMKey -> bool | None``; by default a
VM is Ready when it runs, as KubeVirt's VMI without a readiness probe). Output: the same
plan with the restarts that wait turned into ``wait`` changes (the domain untouched: it
keeps its running and its persistent definition, and the next plan finds the restart
again), a pool's restarts under ``updateStrategy`` opportunistic or unmanaged staged
(RestartRequired), and ``Plan.pacing``: the batches, the progress to keep and the
revision's ``Health``. Pure, level-based: run on every reconcile.

The rules (KubeVirt's pool controller, a Deployment's rolling update):
- a pool's replicas are paced by its ``maxUnavailable`` (default 100%), other VMs by
  the host's ``policy.maxUnavailable`` (default 25%), or the limit of their annotation
  ``reconciler.kubevirt.io/max-unavailable`` (VMs of one limit pace together); a
  percentage is of the group's size, rounded down, and at least 1;
- VMs of the group already not Ready count against the limit; a restart of a VM not
  Ready costs nothing and goes first (KubeVirt's ``handleUnhealthyVMIs``);
- a pool's replicas go in its ``selectionPolicy`` order (``order``), other VMs by name;
- the next batch starts only when every VM of the batch in flight runs its new
  definition and is Ready; a batch not Ready within ``progressDeadline`` halts the
  rollout: no restart goes until a new commit (``policy.onFailure: revert``: the
  caller plans the halted VMs at the last healthy revision).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from reconciler.model.changes import Action, Change, Plan
from reconciler.model.reasons import ChangeReason, Why
from reconciler.model.rollout import (
    Batch,
    Halt,
    Health,
    OnFailure,
    Paced,
    PaceGroup,
    Pacing,
    ReadySource,
    RolloutProgress,
    UpdateStrategy,
    scaled_limit,
)
from reconciler.plan.power import KEEP_RUNNING
from reconciler.wording import rollout as words

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from reconciler.model import LiveDomain
    from reconciler.model.keys import VMKey

NO_GROUP = PaceGroup()


def pace_plan(
    plan: Plan,
    pacing: Pacing,
    progress: RolloutProgress | None,
    *,
    now: float,
    ready: ReadySource | None = None,
) -> Plan:
    """``plan`` paced (see the module's rules): ``Plan.pacing`` says what it made of it."""
    here = [c for c in plan.changes if c.desired is not None and c.action != Action.DELETE]
    by_key = {c.key: c for c in here}
    is_ready = partial(_ready_now, ready)
    restarts = [c for c in here if c.action == Action.RESTART]
    staged = [c for c in restarts if _group(c).strategy != UpdateStrategy.PROACTIVE]
    restarts = [c for c in restarts if _group(c).strategy == UpdateStrategy.PROACTIVE]

    prog = progress if progress is not None and progress.revision == plan.revision else None
    prog = prog or RolloutProgress(revision=plan.revision, healthy=progress.healthy if progress else "")
    prog, now_keys = _in_flight(prog, by_key, {c.key for c in restarts}, pacing, now, ready)
    prog, now_keys, schedule = _scheduled(prog, now_keys, here, restarts, pacing, now, is_ready)
    batches = tuple(
        Batch(keys, _waits(keys, partial(_ready_kind, by_key, ready))) for keys in schedule if keys
    )
    waiting = tuple(c.key for c in restarts if c.key not in now_keys)
    after = tuple(sorted(now_keys or set(prog.batch), key=lambda k: k.domain))
    changed: dict[VMKey, Change] = {}
    for c in staged:
        why = ChangeReason(Why.PACE_STAGED, str(_group(c).strategy))
        changed[c.key] = replace(c, action=Action.UPDATE, restart_required=True, reasons=(*c.reasons, why))
    for c in restarts:
        if c.key not in now_keys:
            changed[c.key] = _waiting(c, prog.halt, batches, after)
    not_ready = tuple(
        c.key
        for c in here
        if (c.desired is not None and c.desired.run_strategy in KEEP_RUNNING) and not is_ready(c)
    )
    paced = Paced(
        batches=batches,
        waiting=waiting,
        staged=tuple(c.key for c in staged),
        progress=prog,
        health=_health(prog, bool(waiting or now_keys), not_ready),
        not_ready=not_ready,
    )
    out = tuple(changed.get(c.key, c) for c in plan.changes)
    return replace(plan, changes=out, pacing=paced)


def _ready_now(ready: ReadySource | None, c: Change) -> bool:
    """Whether the VM of ``c`` is Ready now: it runs and, when its new definition has a
    readiness probe, the prober said so during this run (not the one a restart ended)."""
    running = c.live is not None and c.live.active and not c.stop
    if not running:  # no guest runs (a restart's stop done, its start not yet): not Ready
        return False
    answer = ready.ready(c.key) if ready is not None else None
    if answer is None:  # no prober's word (yet): Ready = running, unless a readiness probe must pass
        return ready is None or c.desired is None or c.desired.probes.readiness is None
    if answer and ready is not None and c.desired is not None and c.desired.probes.readiness is not None:
        started = c.live.mark.last_start if c.live is not None and c.live.mark is not None else 0.0
        return ready.since(c.key) >= started  # an answer of this run, not of the one a restart ended
    return answer


def _in_flight(
    prog: RolloutProgress,
    by_key: Mapping[VMKey, Change],
    restarting: set[VMKey],
    pacing: Pacing,
    now: float,
    ready: ReadySource | None,
) -> tuple[RolloutProgress, set[VMKey]]:
    """The batch in flight judged: done (the progress without it), past its deadline (the
    rollout halted), or still going (its restarts not yet done, asked again)."""
    if prog.halt is not None or not prog.batch:
        return prog, set()
    is_ready = partial(_ready_now, ready)
    pending = [k for k in prog.batch if k in by_key and not _restarted(by_key[k], restarting, is_ready)]
    if not pending:
        return replace(prog, batch=(), started_at=0.0), set()
    if now - prog.started_at >= pacing.progress_deadline_s:
        first, c = pending[0], by_key[pending[0]]
        done = c.key not in restarting and not c.restart_required
        state = str(c.live.state) if c.live is not None else "absent"
        cause = (ready.cause(first) if ready else "") or words.unready_cause(done, state)
        return replace(prog, halt=Halt(first, now - prog.started_at, cause, now)), set()
    return prog, {k for k in pending if k in restarting}  # a restart not yet done: asked again


def _scheduled(
    prog: RolloutProgress,
    now_keys: set[VMKey],
    here: Sequence[Change],
    restarts: Sequence[Change],
    pacing: Pacing,
    now: float,
    is_ready: Callable[[Change], bool],
) -> tuple[RolloutProgress, set[VMKey], list[tuple[VMKey, ...]]]:
    """The batches of the restarts (none while halted): with no batch in flight, the first
    goes now and is the batch in flight; else the one in flight, then the rest."""
    if prog.halt is not None:
        return prog, now_keys, []
    if not prog.batch:
        schedule = _schedule(here, restarts, pacing, is_ready)
        if schedule and schedule[0]:
            return replace(prog, batch=schedule[0], started_at=now), set(schedule[0]), schedule
        return prog, now_keys, schedule
    later = [c for c in restarts if c.key not in now_keys]
    schedule = [
        tuple(sorted(now_keys, key=lambda k: k.domain)),
        *_schedule(here, later, pacing, lambda c: True),
    ]
    return prog, now_keys, schedule


def _ready_kind(by_key: Mapping[VMKey, Change], ready: ReadySource | None, k: VMKey) -> str:
    """What Ready means for ``k``: its new definition's readiness probe, else what the
    readiness source waits for (running without one)."""
    d = by_key[k].desired if k in by_key else None
    probe = d.probes.readiness if d is not None else None
    if probe is not None:
        return str(probe.action)
    return ready.waits_for(k) if ready is not None else "running"


def _waiting(c: Change, halt: Halt | None, batches: Sequence[Batch], after: tuple[VMKey, ...]) -> Change:
    """The restart ``c`` turned into a wait (the domain untouched): the rollout halted, or
    its batch's turn not come (after the VMs ``after``)."""
    if halt is not None:
        why = ChangeReason(Why.PACE_HALTED, halt=halt)
    else:
        number = next((i + 1 for i, b in enumerate(batches) if c.key in b.keys), len(batches))
        why = ChangeReason(Why.PACE_WAITING, count=number, total=len(batches), keys=after)
    return replace(
        c,
        action=Action.WAIT,
        reasons=(*c.reasons, why),
        definition=None,
        live_ops=(),
        restart_required=True,
        redefine=False,
        start=False,
    )


def _health(prog: RolloutProgress, restarting: bool, not_ready: Sequence[VMKey]) -> Health:
    """The revision's health: Halted, Progressing (a batch in flight or restarts to go),
    Degraded (a VM that should run not Ready), else Healthy."""
    if prog.halt is not None:
        return Health.HALTED
    if prog.batch or restarting:
        return Health.PROGRESSING
    return Health.DEGRADED if not_ready else Health.HEALTHY


def _restarted(c: Change, restarting: set[VMKey], is_ready: Callable[[Change], bool]) -> bool:
    """Whether a VM of the batch in flight is done: it runs its new definition (no restart
    asked or staged: a graceful stop still under way leaves the old one running) and is Ready."""
    return c.key not in restarting and not c.restart_required and is_ready(c)


def _group(c: Change) -> PaceGroup:
    d = c.desired
    return d.pace if d is not None and d.pace is not None else NO_GROUP


def _group_id(c: Change, pacing: Pacing) -> tuple[str, str]:
    g = _group(c)
    return g.group, g.max_unavailable or pacing.max_unavailable


def _schedule(
    here: Sequence[Change],
    restarts: Iterable[Change],
    pacing: Pacing,
    is_ready: Callable[[Change], bool],
) -> list[tuple[VMKey, ...]]:
    """The batches of ``restarts``: the first as the groups' limits and readiness allow
    now, the rest as they would go with every VM Ready."""
    members: dict[tuple[str, str], list[Change]] = defaultdict(list)
    for c in here:
        if c.desired is not None and (c.desired.run_strategy in KEEP_RUNNING or c.action == Action.RESTART):
            members[_group_id(c, pacing)].append(c)
    rounds: dict[int, list[VMKey]] = defaultdict(list)
    queued: dict[tuple[str, str], list[Change]] = defaultdict(list)
    for c in restarts:
        queued[_group_id(c, pacing)].append(c)
    for gid, todo in queued.items():
        group = members[gid] or todo
        size = _group(todo[0]).size or len(group)
        limit = scaled_limit(gid[1], size)
        todo.sort(key=lambda c: (_group(c).order, c.key.domain))
        unready = [c for c in todo if not is_ready(c)]  # free: they are unavailable already
        rest = [c for c in todo if is_ready(c)]
        slots = max(limit - sum(1 for c in group if not is_ready(c)), 0)
        first = unready + rest[:slots]
        rounds[0].extend(c.key for c in first)
        rest = rest[slots:]
        for i in range(0, len(rest), limit):
            rounds[1 + i // limit].extend(c.key for c in rest[i : i + limit])
    return [tuple(rounds[i]) for i in sorted(rounds)]


def _waits(keys: Sequence[VMKey], kind: Callable[[VMKey], str]) -> str:
    found = sorted({kind(k) for k in keys})
    return ", ".join(found) if found else "running"


def assessed(plan: Plan, after: Sequence[LiveDomain], ready: ReadySource | None = None) -> Plan:
    """``plan`` with its revision's health judged on the domains after its apply
    (``after``; Ready = running without a readiness source): Halted stays, restarts that
    wait or a batch not Ready yet are Progressing, then Degraded or Healthy."""
    paced = plan.pacing
    if paced is None:
        return plan
    running = {d.key for d in after if d.active}
    just = {c.key for c in plan.changes if c.action == Action.RESTART}  # judged at the next plan

    probed = {c.key for c in plan.changes if c.desired is not None and c.desired.probes.readiness is not None}

    def is_ready(k: VMKey) -> bool:
        answer = ready.ready(k) if ready is not None else None
        if answer is None:  # no prober's word (yet): Ready = running, unless a readiness probe must pass
            return k in running and (ready is None or k not in probed)
        return answer

    wanted = [c.key for c in plan.changes if c.desired is not None and c.desired.run_strategy in KEEP_RUNNING]
    not_ready = tuple(k for k in wanted if not is_ready(k))
    if paced.progress.halt is not None:
        health = Health.HALTED
    elif paced.waiting or any(k in just or not is_ready(k) for k in paced.progress.batch):
        health = Health.PROGRESSING
    else:
        health = Health.DEGRADED if not_ready else Health.HEALTHY
    progress = paced.progress
    if health == Health.HEALTHY:  # what a later halt reverts to (policy.onFailure: revert)
        progress = replace(progress, healthy=plan.revision)
    return replace(plan, pacing=replace(paced, health=health, not_ready=not_ready, progress=progress))


def reverting(plan: Plan, pacing: Pacing) -> tuple[str, tuple[VMKey, ...]] | None:
    """Under ``onFailure: revert``, a halted rollout's (last healthy revision, the VMs of
    the halted batch to send back to it); None: nothing to revert."""
    paced = plan.pacing
    if paced is None or paced.progress.halt is None or pacing.on_failure != OnFailure.REVERT:
        return None
    progress = paced.progress
    if not progress.healthy or progress.healthy == plan.revision or not progress.batch:
        return None
    return progress.healthy, progress.batch


def reverted(plan: Plan, keys: Sequence[VMKey]) -> Plan:
    """``plan`` (of the last healthy revision) for the VMs ``keys`` alone: nothing else
    of that revision is applied, and no prune."""
    wanted = set(keys)
    return replace(plan, changes=tuple(c for c in plan.changes if c.key in wanted), pacing=None)
