"""The plan of one domain that exists on the host: its field, config and running
changes, its restart and power decisions, and its final definition.

Input: the rendered domain of a VM, the live domain of its key (ours, or one the VM
adopts), the host's ``PlanPolicy``, the ``CompareCache``, the time (crash-loop
back-off, restart windows), the revision, and whether the domain's owner was renamed.
Output: one ``Change``: ``adopt``, ``update``, ``restart``, ``start``, ``stop`` or
``unchanged``, with its reason, the fields that differ (in the persistent definition,
in the running domain, and the generated ISOs whose content moved) and their class,
the live operations apply runs, whether a restart is staged (RestartRequired, or
waiting for a restart window), drift (reverted with ``selfHeal``, reported otherwise)
and, when apply defines the domain, its final ``Definition``.

Pure: no libvirt, no clock (``now`` is passed in); the rendered and live XML are
parsed at most once, by the comparison, and shared with the definition.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from reconciler import ownership
from reconciler.compare import provenance
from reconciler.compare.cache import CompareCache, compare_parsed
from reconciler.compare.changes import RunningDiff, config_changes, reserved_port_field
from reconciler.compare.definition import Documents
from reconciler.model import (
    ConfigDigest,
    LiveDomain,
    PowerState,
    RenderedDomain,
    RestartWindow,
    Rollout,
    RunStrategy,
)
from reconciler.model.changes import Action, Change, ChangeClass, FieldChange, LiveOp
from reconciler.model.reasons import ChangeReason, Why
from reconciler.plan import intents
from reconciler.plan.power import RESTARTABLE, Backoff, decide_power
from reconciler.plan.running import pending_unplugs, refused_ops
from reconciler.records import dataclass
from reconciler.settings import windows

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from reconciler.model import OwnershipMark
    from reconciler.model.changes import Definition
    from reconciler.plan.power import PowerDecision
    from reconciler.settings.policy import PlanPolicy

# The reason of a domain in sync, one per run strategy and state: most of a plan's VMs
# say it, and a record made once is shared by all of them.
_IN_SYNC: Mapping[tuple[str, str], ChangeReason] = MappingProxyType(
    {
        (rs, ps): ChangeReason(Why.IN_SYNC, text=str(rs), other=str(ps))
        for rs in RunStrategy
        for ps in PowerState
    }
)


def _in_sync(d: RenderedDomain, live: LiveDomain) -> ChangeReason:
    """The reason of a domain in sync: the shared record of its run strategy and state."""
    shared = _IN_SYNC.get((d.run_strategy, live.state))
    return shared or ChangeReason(Why.IN_SYNC, text=str(d.run_strategy), other=str(live.state))


def _config_fields(
    d: RenderedDomain,
    live: LiveDomain,
    recorded: tuple[ConfigDigest, ...],
    fields: tuple[FieldChange, ...],
    rd: RunningDiff | None,
) -> tuple[tuple[FieldChange, ...], RunningDiff | None]:
    """Generated ISOs whose content moved: against the definition's mark (a change to
    apply) and, on a running domain, against the mark it booted with (staged until the
    next cold boot, which builds the ISO anew)."""
    if recorded != d.config:
        fields = fields + config_changes(recorded, d.config)
    # Cheap first: a running domain whose XML holds every digest booted with them.
    if rd is not None and live.live_xml and not all(c.digest in live.live_xml for c in d.config):
        booted = ownership.read_mark(live.live_xml)
        staged = config_changes(booted.config, d.config) if booted is not None else ()
        if staged:
            rd = RunningDiff(rd.live, rd.restart + staged, rd.ops, rd.notes)
    return fields, rd


def _names(fields: Sequence[FieldChange], d: RenderedDomain) -> tuple[str, ...]:
    """The fields in the VM's own terms (KubeVirt paths, as every report names them)."""
    return tuple(provenance.field_names(fields, d.sized_by_instancetype))


class _Judged(NamedTuple):
    """How the host's domain stands against git: what moved, and whether it is healed
    (a tuple: one is made for every VM of every plan)."""

    spec_moved: bool  # the rendering differs from the one the mark records (or none does)
    mark_stale: bool  # the mark is to be written again (renamed owner, old format, other owner)
    config_drift: bool  # the persistent definition changed although git did not
    live_drift: bool  # the running domain changed although git did not
    transient: bool  # the definition was undefined under a running domain
    heal: bool  # what differs is corrected (selfHeal, no drift, or a new spec)

    @property
    def drifted(self) -> bool:
        return self.config_drift or self.live_drift


@dataclass(frozen=True, slots=True)
class _Restart:
    """The verdict on restart-class changes of a running domain."""

    restart: bool = False  # a graceful restart now
    required: bool = False  # RestartRequired: staged (until a window or the next cold boot)
    window: str = ""  # the restart window a staged restart waits for
    wait_s: float = 0.0  # when to plan again (a crash restart, a window opening)
    reason: ChangeReason | None = None


def plan_existing(
    d: RenderedDomain,
    live: LiveDomain,
    policy: PlanPolicy,
    cache: CompareCache,
    now: float | None,
    revision: str,
    define: bool = True,
    renamed: bool = False,
) -> Change:
    """The change of ``d``'s domain ``live`` on this host (``define``: with its final
    definition when apply defines it; ``renamed``: its mark is a former owner's)."""
    (compared, rd), docs = compare_parsed(d, live, cache)
    mark = live.mark if not ownership.foreign(live.mark, policy.owner) else None  # adopting
    fields, rd = _held_back(d, live, mark, tuple(compared), rd)
    judged = _judge(d, live, policy, mark, fields, rd, renamed)
    reasons = _state_reasons(d, live, policy, mark, fields, rd, judged, renamed)
    redefine = judged.heal and (bool(fields) or judged.spec_moved or judged.mark_stale or judged.transient)
    ops: tuple[LiveOp, ...] = rd.ops if (rd is not None and judged.heal) else ()
    new_restart, staged = _restart_fields(fields, rd, judged)
    power = _power(d, live, policy, now)
    resume = intents.resumed(mark, live, d, policy, bool(new_restart or staged), power)
    if resume is not None and resume.stale:
        redefine = redefine or judged.heal  # the mark written again without the intent
        reasons.append(resume.reason)
    verdict = _Restart(wait_s=power.wait_s)
    if live.active and (new_restart or staged) and not power.stop:
        verdict = _decide_restart(d, policy, now, resume, new_restart, staged, power.wait_s)
        if verdict.reason is not None:
            reasons.append(verdict.reason)
    reasons.extend(_power_reasons(ops, rd, judged, power, verdict.restart))
    start = power.start or (resume is not None and resume.start)
    if resume is not None and resume.start:
        reasons.append(resume.reason)
    if verdict.restart or power.stop:
        ops = ()  # the cold boot applies everything; a domain being stopped needs nothing live
    action = _action(mark, verdict.restart, power.stop, start, redefine, ops)
    if not reasons:
        reasons.append(_in_sync(d, live))
    definition = None
    if define and (action.defines or redefine):
        definition = _definition(d, live, docs, action, policy, revision)
    return Change(
        key=d.key,
        action=action,
        reasons=tuple(reasons),
        fields=_shown(fields, rd),
        desired=d,
        live=live,
        start=start,
        stop=power.stop,
        restart_required=verdict.required,
        live_ops=ops,
        drift=judged.drifted or judged.transient or power.drift,
        restarts=power.restarts,
        requeue_after_s=verdict.wait_s,
        definition=definition,
        restart_window=verdict.window,
        redefine=redefine and not action.defines,
    )


def _power(d: RenderedDomain, live: LiveDomain, policy: PlanPolicy, now: float | None) -> PowerDecision:
    """Start, stop or leave the domain, as its run strategy and the crash back-off say."""
    backoff = Backoff(policy.crash_backoff_s, policy.crash_backoff_max_s, policy.crash_reset_s)
    return decide_power(d.run_strategy, live, policy.self_heal, now, backoff)


def _held_back(
    d: RenderedDomain,
    live: LiveDomain,
    mark: OwnershipMark | None,
    fields: tuple[FieldChange, ...],
    rd: RunningDiff | None,
) -> tuple[tuple[FieldChange, ...], RunningDiff | None]:
    """The comparison with what the running domain holds back: unplugs still pending and
    live operations it refused (as the mark records them), fields live in the definition
    that the running domain cannot take (restart class), and generated ISOs that moved."""
    if rd is not None and mark is not None and mark.unplugs:
        rd = pending_unplugs(rd, mark.unplugs)
    if rd is not None and mark is not None and mark.refused:
        rd = refused_ops(rd, mark.refused)
    if rd is not None and rd.restart:  # live in the definition, but the running domain cannot take it
        held = {f.path for f in rd.restart}
        fields = tuple(
            FieldChange(f.path, f.old, f.new, ChangeClass.RESTART) if f.path in held else f for f in fields
        )
    if mark is not None and d.config:
        fields, rd = _config_fields(d, live, mark.config, fields, rd)
    return fields, rd


def _judge(
    d: RenderedDomain,
    live: LiveDomain,
    policy: PlanPolicy,
    mark: OwnershipMark | None,
    fields: tuple[FieldChange, ...],
    rd: RunningDiff | None,
    renamed: bool,
) -> _Judged:
    """What moved, in git or out of band, and whether what differs is corrected."""
    spec_moved = mark is None or mark.spec_hash != d.spec_hash
    mark_stale = mark is not None and (
        renamed or not ownership.mark_current(mark, d) or mark.owner != policy.owner
    )
    # Out-of-band changes: the host differs although git did not move.
    # (root ports reserved for hotplug that a definition of an earlier version lacks are
    # expected, not drift: they come with the next definition)
    config_drift = any(not reserved_port_field(f) for f in fields) and not spec_moved
    live_drift = rd is not None and bool(rd.live) and not spec_moved and not fields
    # ``virsh undefine`` of a running domain leaves it transient: its definition is gone
    # and the next stop loses the domain.
    transient = mark is not None and not live.persistent
    drift = config_drift or live_drift or transient
    heal = policy.self_heal or not drift or spec_moved  # a new spec is defined (persistent) anyway
    return _Judged(spec_moved, mark_stale, config_drift, live_drift, transient, heal)


def _state_reasons(
    d: RenderedDomain,
    live: LiveDomain,
    policy: PlanPolicy,
    mark: OwnershipMark | None,
    fields: tuple[FieldChange, ...],
    rd: RunningDiff | None,
    judged: _Judged,
    renamed: bool,
) -> list[ChangeReason]:
    """Why the definition differs: adoption, a spec change, drift, reserved root ports,
    a refreshed ownership record, or a transient domain."""
    reasons: list[ChangeReason] = []
    if mark is None:
        owner = live.mark.owner if live.mark is not None else ""
        reasons.append(ChangeReason(Why.ADOPT, text=owner, flag=live.mark is not None))
    elif fields and not judged.spec_moved and not judged.drifted:  # reserved root ports alone
        ports = len({f.path.split("@", 1)[0] for f in fields})
        reasons.append(ChangeReason(Why.PORTS_RESERVED, count=ports))
    elif fields and not judged.drifted:
        reasons.append(ChangeReason(Why.SPEC_CHANGED, names=_names(fields, d)))
    elif judged.drifted:
        drifted = fields or (rd.live if rd is not None else ())
        reasons.append(ChangeReason(Why.DRIFT, names=_names(drifted, d), flag=policy.self_heal))
    elif renamed:  # (the owner seeds derived MACs: its rendering moves with it, no field differs)
        reasons.append(ChangeReason(Why.OWNER_RENAMED, text=policy.owner))
    elif (judged.spec_moved or judged.mark_stale) and not judged.transient:
        reasons.append(ChangeReason(Why.MARK_REFRESHED))
    if judged.transient:
        reasons.append(ChangeReason(Why.TRANSIENT, flag=policy.self_heal))
    return reasons


def _restart_fields(
    fields: tuple[FieldChange, ...], rd: RunningDiff | None, judged: _Judged
) -> tuple[list[FieldChange], list[FieldChange]]:
    """Restart-class changes on the running domain: (new ones now, staged before). Drift
    is judged on the definition it happened to: an edit of the persistent definition
    alone is corrected there (the redefinition), and the guest restarts only for what
    it runs differently from git (the running diff)."""
    if judged.drifted:
        new_restart = list(rd.restart) if judged.heal and rd is not None else []
    else:
        new_restart = [f for f in fields if f.change_class == ChangeClass.RESTART] if judged.heal else []
    staged = list(rd.restart) if rd is not None else []
    return new_restart, staged


def _decide_restart(
    d: RenderedDomain,
    policy: PlanPolicy,
    now: float | None,
    resume: intents.Resumed | None,
    new_restart: Sequence[FieldChange],
    staged: Sequence[FieldChange],
    wait_s: float,
) -> _Restart:
    """A running domain with restart-class changes: restart it now, or stage the restart
    (until a restart window opens, or until its next cold boot)."""
    rollout = d.rollout or policy.rollout
    forced = policy.restart_now  # the operator's --restart-now: whatever the rollout and windows
    restartable = (rollout == Rollout.RESTART or forced) and d.run_strategy in RESTARTABLE
    vm_windows = d.restart_windows or policy.restart_windows
    gate = windows.gate(() if (d.restart_now or forced) else vm_windows, now)
    if resume is not None and resume.restart:  # decided before, the daemon stopped half-way
        return _Restart(restart=True, wait_s=wait_s, reason=resume.reason)
    if restartable and vm_windows and not gate.open:  # live changes go ahead; the restart waits
        if gate.opens_at is not None and now is not None:
            wait_s = min(wait_s, gate.opens_at - now) if wait_s else gate.opens_at - now
        why = ChangeReason(Why.RESTART_IN_WINDOW, text=gate.text)
        return _Restart(required=True, window=gate.text, wait_s=wait_s, reason=why)
    if not restartable:
        return _Restart(required=True, wait_s=wait_s, reason=_staged_reason(d, rollout, new_restart, staged))
    if forced:  # staged ones too
        why = ChangeReason(Why.RESTART_REQUESTED)
        return _Restart(restart=True, wait_s=wait_s, reason=why)
    if vm_windows:  # inside a window (or the VM's "now"): staged ones too
        requested = gate.open and not vm_windows_open(vm_windows, now)
        why = ChangeReason(Why.RESTART_WINDOW_NOW, flag=requested)
        return _Restart(restart=True, wait_s=wait_s, reason=why)
    if policy.restart_staged and not new_restart:
        why = ChangeReason(Why.RESTART_DIFFERS, names=_names(staged, d))
        return _Restart(restart=True, wait_s=wait_s, reason=why)
    if new_restart:
        why = ChangeReason(Why.RESTART_NOW)
        return _Restart(restart=True, wait_s=wait_s, reason=why)
    return _Restart(required=True, wait_s=wait_s, reason=_staged_reason(d, rollout, new_restart, staged))


def _staged_reason(
    d: RenderedDomain, rollout: Rollout, new_restart: Sequence[FieldChange], staged: Sequence[FieldChange]
) -> ChangeReason:
    """Why a restart waits for the next cold boot: the rollout stages it, or the run
    strategy is never restarted."""
    if new_restart:
        return ChangeReason(Why.RESTART_STAGED, text=d.run_strategy, flag=rollout == Rollout.STAGE)
    return ChangeReason(Why.STAGED_DIFFERS, names=_names(staged, d))


def _power_reasons(
    ops: tuple[LiveOp, ...], rd: RunningDiff | None, judged: _Judged, power: PowerDecision, restart: bool
) -> list[ChangeReason]:
    """The live operations, the running diff's notes, and the power decision."""
    reasons: list[ChangeReason] = []
    if ops and not restart and not power.stop:
        reasons.append(ChangeReason(Why.LIVE, names=tuple(str(o) for o in ops)))
    if rd is not None and rd.notes and judged.heal and not power.stop:
        reasons.extend(ChangeReason(Why.NOTE, note=note) for note in rd.notes)
    if power.reason is not None:
        reasons.append(power.reason)
    return reasons


def _action(
    mark: OwnershipMark | None,
    restart: bool,
    stop: bool,
    start: bool,
    redefine: bool,
    ops: tuple[LiveOp, ...],
) -> Action:
    """Powering on or off is the headline (its own action and count); a new definition
    made on the way is carried by the change all the same."""
    if mark is None:
        return Action.ADOPT
    if restart:
        return Action.RESTART
    if stop:
        return Action.STOP
    if start:
        return Action.START
    if redefine or ops:
        return Action.UPDATE
    return Action.UNCHANGED


def _shown(fields: tuple[FieldChange, ...], rd: RunningDiff | None) -> tuple[FieldChange, ...]:
    """The fields that differ, in the definition and in the running domain, by path."""
    shown = list(fields)
    if rd is not None:
        have = {f.path for f in shown}
        shown.extend(f for f in (*rd.live, *rd.restart) if f.path not in have)
    return tuple(sorted(shown, key=lambda f: f.path))


def _definition(
    d: RenderedDomain,
    live: LiveDomain,
    docs: Documents | None,
    action: Action,
    policy: PlanPolicy,
    revision: str,
) -> Definition:
    """The final definition apply writes, with its ownership mark (an adopted one's, or ours)."""
    docs = docs or Documents(d, live)  # the trees the comparison parsed, if it did
    marked = ownership.adopted_mark if action == Action.ADOPT else ownership.mark_for
    return docs.definition(intents.carried(marked(d, revision, live.mark, policy.owner), action))


def vm_windows_open(ws: Sequence[RestartWindow], now: float | None) -> bool:
    return now is not None and any(windows.is_open(w, now) for w in ws)
