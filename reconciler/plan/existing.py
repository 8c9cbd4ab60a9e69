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

from typing import TYPE_CHECKING

from reconciler import ownership
from reconciler.compare import provenance
from reconciler.compare.cache import CompareCache, compare_parsed
from reconciler.compare.changes import RunningDiff, config_changes, reserved_port_field
from reconciler.compare.definition import Documents
from reconciler.config import windows
from reconciler.model import ConfigDigest, LiveDomain, RenderedDomain, RestartWindow, Rollout
from reconciler.model.changes import Action, Change, ChangeClass, FieldChange, LiveOp
from reconciler.model.reasons import ChangeReason, Why
from reconciler.plan import intents
from reconciler.plan.power import RESTARTABLE, Backoff, decide_power
from reconciler.plan.running import pending_unplugs, refused_ops

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.plan.build import PlanPolicy


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
    (fields, rd), docs = compare_parsed(d, live, cache)
    mark = live.mark if not ownership.foreign(live.mark, policy.owner) else None  # adopting
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
        fields, rd = _config_fields(d, live, mark.config, tuple(fields), rd)
    spec_moved = mark is None or mark.spec_hash != d.spec_hash
    mark_stale = mark is not None and (
        renamed or not ownership.mark_current(mark, d) or mark.owner != policy.owner
    )
    reasons: list[ChangeReason] = []

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
    if mark is None:
        owner = live.mark.owner if live.mark is not None else ""
        reasons.append(ChangeReason(Why.ADOPT, text=owner, flag=live.mark is not None))
    elif fields and not spec_moved and not (config_drift or live_drift):  # reserved root ports alone
        ports = len({f.path.split("@", 1)[0] for f in fields})
        reasons.append(ChangeReason(Why.PORTS_RESERVED, count=ports))
    elif fields and not (config_drift or live_drift):
        reasons.append(ChangeReason(Why.SPEC_CHANGED, names=_names(fields, d)))
    elif config_drift or live_drift:
        drifted = fields or (rd.live if rd is not None else ())
        reasons.append(ChangeReason(Why.DRIFT, names=_names(drifted, d), flag=policy.self_heal))
    elif renamed:  # (the owner seeds derived MACs: its rendering moves with it, no field differs)
        reasons.append(ChangeReason(Why.OWNER_RENAMED, text=policy.owner))
    elif (spec_moved or mark_stale) and not transient:
        reasons.append(ChangeReason(Why.MARK_REFRESHED))
    if transient:
        reasons.append(ChangeReason(Why.TRANSIENT, flag=policy.self_heal))

    redefine = heal and (bool(fields) or spec_moved or mark_stale or transient)
    ops: tuple[LiveOp, ...] = rd.ops if (rd is not None and heal) else ()

    # Restart-class changes on the running domain: new ones now, or staged before. Drift
    # is judged on the definition it happened to: an edit of the persistent definition
    # alone is corrected there (the redefinition), and the guest restarts only for what
    # it runs differently from git (the running diff).
    if config_drift or live_drift:
        new_restart = list(rd.restart) if heal and rd is not None else []
    else:
        new_restart = [f for f in fields if f.change_class == ChangeClass.RESTART] if heal else []
    staged = list(rd.restart) if rd is not None else []
    power = decide_power(
        d.run_strategy,
        live,
        policy.self_heal,
        now,
        Backoff(policy.crash_backoff_s, policy.crash_backoff_max_s, policy.crash_reset_s),
    )
    resume = intents.resumed(mark, live, d, policy, bool(new_restart or staged), power)
    restart = False
    restart_required = False
    window = ""  # the restart window a staged restart waits for
    wait_s = power.wait_s
    if resume is not None and resume.stale:
        redefine = redefine or heal  # the mark written again without the intent
        reasons.append(resume.reason)
    if live.active and (new_restart or staged) and not power.stop:
        rollout = d.rollout or policy.rollout
        forced = policy.restart_now  # the operator's --restart-now: whatever the rollout and windows
        restartable = (rollout == Rollout.RESTART or forced) and d.run_strategy in RESTARTABLE
        vm_windows = d.restart_windows or policy.restart_windows
        gate = windows.gate(() if (d.restart_now or forced) else vm_windows, now)
        if resume is not None and resume.restart:  # decided before, the daemon stopped half-way
            restart = True
            reasons.append(resume.reason)
        elif restartable and vm_windows and not gate.open:
            restart_required = True  # live changes go ahead; the restart waits
            window = gate.text
            reasons.append(ChangeReason(Why.RESTART_IN_WINDOW, text=window))
            if gate.opens_at is not None and now is not None:
                wait_s = min(wait_s, gate.opens_at - now) if wait_s else gate.opens_at - now
        elif forced and restartable:  # staged ones too
            restart = True
            reasons.append(ChangeReason(Why.RESTART_REQUESTED))
        elif restartable and vm_windows:  # inside a window (or the VM's "now"): staged ones too
            restart = True
            requested = gate.open and not vm_windows_open(vm_windows, now)
            reasons.append(ChangeReason(Why.RESTART_WINDOW_NOW, flag=requested))
        elif restartable and policy.restart_staged and not new_restart:
            restart = True
            reasons.append(ChangeReason(Why.RESTART_DIFFERS, names=_names(staged, d)))
        elif new_restart and restartable:
            restart = True
            reasons.append(ChangeReason(Why.RESTART_NOW))
        else:
            restart_required = True
            if new_restart:
                stage = rollout == Rollout.STAGE
                reasons.append(ChangeReason(Why.RESTART_STAGED, text=d.run_strategy, flag=stage))
            else:
                reasons.append(ChangeReason(Why.STAGED_DIFFERS, names=_names(staged, d)))
    if ops and not restart and not power.stop:
        reasons.append(ChangeReason(Why.LIVE, names=tuple(str(o) for o in ops)))
    if rd is not None and rd.notes and heal and not power.stop:
        reasons.extend(ChangeReason(Why.NOTE, text=note) for note in rd.notes)
    if power.reason is not None:
        reasons.append(power.reason)

    start = power.start or (resume is not None and resume.start)
    if resume is not None and resume.start:
        reasons.append(resume.reason)
    stop = power.stop
    if restart or stop:
        ops = ()  # the cold boot applies everything; a domain being stopped needs nothing live
    # Powering on or off is the headline (its own action and count); a new definition
    # made on the way is carried by the change all the same.
    if mark is None:
        action = Action.ADOPT
    elif restart:
        action = Action.RESTART
    elif stop:
        action = Action.STOP
    elif start:
        action = Action.START
    elif redefine or ops:
        action = Action.UPDATE
    else:
        action = Action.UNCHANGED
    shown = list(fields)
    if rd is not None:
        have = {f.path for f in shown}
        shown.extend(f for f in (*rd.live, *rd.restart) if f.path not in have)
    if not reasons:
        reasons.append(ChangeReason(Why.IN_SYNC, text=str(d.run_strategy), other=str(live.state)))
    definition = None
    if define and (action.defines or redefine):
        docs = docs or Documents(d, live)  # the trees the comparison parsed, if it did
        marked = ownership.adopted_mark if action == Action.ADOPT else ownership.mark_for
        definition = docs.definition(intents.carried(marked(d, revision, live.mark, policy.owner), action))
    return Change(
        key=d.key,
        action=action,
        reasons=tuple(reasons),
        fields=tuple(sorted(shown, key=lambda f: f.path)),
        desired=d,
        live=live,
        start=start,
        stop=stop,
        restart_required=restart_required,
        live_ops=ops,
        drift=drift or power.drift,
        restarts=power.restarts,
        requeue_after_s=wait_s,
        definition=definition,
        restart_window=window,
        redefine=redefine and not action.defines,
    )


def vm_windows_open(ws: Sequence[RestartWindow], now: float | None) -> bool:
    return now is not None and any(windows.is_open(w, now) for w in ws)
