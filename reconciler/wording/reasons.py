"""A change's reasons in words: the one place a ``ChangeReason`` becomes text.

Input: the records of ``Change.reasons`` (``model.reasons``), in the order the plan
decided them. Output: the change's one line (``said``: the reasons joined by ``"; "``)
that the plan text, saved plans, status rows, apply results and the PR report show; a
comparison's ``Note`` in words (``note``). Pure. Nothing reads these words back: the records travel, the words are made here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from reconciler.model.changes import LiveOp, LiveOpKind
from reconciler.model.reasons import Noted, Why
from reconciler.wording import refusal, rollout

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model.reasons import ChangeReason, Note

SHOWN_FIELDS = 4  # fields a reason names before ``(+N more)``


class HasReasons(Protocol):
    @property
    def reasons(self) -> tuple[ChangeReason, ...]: ...


def said(c: HasReasons) -> str:
    """The change's line: its reasons in words, joined by ``"; "``."""
    return joined(c.reasons)


def joined(reasons: Sequence[ChangeReason]) -> str:
    return "; ".join(one(r) for r in reasons)


def one(r: ChangeReason) -> str:
    for words in (_planned, _existing, _restart, _power, _moved, _paced):
        text = words(r)
        if text is not None:
            return text
    raise ValueError(f"no words for the reason {r.kind}")  # pragma: no cover - every kind has words


def fields(names: Sequence[str]) -> str:
    """The fields in the VM's own terms (KubeVirt paths), the first few and a count."""
    what = ", ".join(names[:SHOWN_FIELDS])
    more = len(names) - SHOWN_FIELDS
    return what + (f" (+{more} more)" if more > 0 else "")


def _heal(on: bool, verb: str) -> str:
    return f"{verb} (selfHeal)" if on else "reporting only (selfHeal off)"


def _planned(r: ChangeReason) -> str | None:
    match r.kind:
        case Why.CREATE:
            how = ": define and start" if r.flag else ": define only"
            return f"not defined on this host; runStrategy {r.text}{how}"
        case Why.PROBLEM if r.problem is not None:
            return r.problem.message  # the plan error's cause, as ``Plan.errors`` says it
        case Why.NOTE if r.note is not None:
            return note(r.note)
        case Why.NOT_STARTED:
            return f"not started: {joined(r.of)}"
        case Why.IN_SYNC:
            return f"in sync ({r.text}, {r.other})"
        case Why.INTENT_GONE:
            return "a restart decided earlier no longer applies"
        case Why.INTENT_RESTART:
            return "restart decided before the daemon stopped and not made: graceful restart now"
        case Why.INTENT_START:
            return "restart decided before the daemon stopped: the guest is off, starting it"
        case Why.INTENT_MADE:
            return "a restart decided earlier has been made"
    return None


def _existing(r: ChangeReason) -> str | None:
    match r.kind:
        case Why.ADOPT if r.flag:
            return f"adopting a domain of owner {r.text} (reconciler.kubevirt.io/adopt)"
        case Why.ADOPT:
            return "adopting an existing domain (reconciler.kubevirt.io/adopt)"
        case Why.PORTS_RESERVED:
            return (
                f"{r.count} hotplug root port(s) reserved: added to the definition, "
                "the guest gets them at its next cold boot"
            )
        case Why.SPEC_CHANGED:
            return f"spec changed: {fields(r.names)}"
        case Why.DRIFT:
            return f"drift from git in {fields(r.names)}: {_heal(r.flag, 'reverting')}"
        case Why.OWNER_RENAMED:
            return f"ownership record refreshed (owner renamed to {r.text})"
        case Why.MARK_REFRESHED:
            return "ownership record refreshed (rendering changed, no field differs)"
        case Why.TRANSIENT:
            verb = _heal(r.flag, "defining it again")
            return f"drift from git: the domain is transient (its definition was undefined): {verb}"
        case Why.LIVE:
            return "live: " + ", ".join(r.names)
    return None


def _restart(r: ChangeReason) -> str | None:
    match r.kind:
        case Why.RESTART_IN_WINDOW:
            return f"restart-class change: graceful restart in the next restart window, {r.text}"
        case Why.RESTART_REQUESTED:
            return "restart-class change: graceful restart now (restart now requested)"
        case Why.RESTART_WINDOW_NOW:
            when = "restart now requested" if r.flag else "inside the restart window"
            return f"restart-class change: graceful restart now ({when}, rollout Restart)"
        case Why.RESTART_DIFFERS:
            return (
                f"restart required: the running domain still differs in {fields(r.names)}: "
                "graceful restart now (rollout Restart)"
            )
        case Why.RESTART_NOW:
            return "restart-class change: graceful restart now (rollout Restart)"
        case Why.RESTART_STAGED:
            why = " (rollout Stage)" if r.flag else f" (runStrategy {r.text} is never restarted)"
            return f"restart-class change staged{why}: RestartRequired until the next cold boot"
        case Why.STAGED_DIFFERS:
            return f"restart required: the running domain still differs in {fields(r.names)} until the next cold boot"
    return None


def _power(r: ChangeReason) -> str | None:
    strategy = r.text
    state = f"{r.other} ({r.detail})" if r.detail else r.other
    match r.kind:
        case Why.ONCE_START:
            return f"runStrategy Once: domain is {state} and was never started, starting"
        case Why.POWER_START:
            return f"runStrategy {strategy}: domain is {state}, starting"
        case Why.POWERED_OFF:
            return f"runStrategy Always: the guest powered off ({state}), starting again"
        case Why.OUT_OF_BAND if r.flag:
            return f"runStrategy {strategy}: domain is {state} out of band, starting again"
        case Why.OUT_OF_BAND:
            return f"runStrategy {strategy}: domain is {state} out of band: reporting only (selfHeal off)"
        case Why.HALTED_REPORT:
            return f"runStrategy Halted: domain is {state}: reporting only (selfHeal off)"
        case Why.HALTED_STOP:
            return f"runStrategy Halted: domain is {state}, stopping"
        case Why.CRASH_BACKOFF:
            return f"runStrategy {strategy}: domain {state}; crash loop back-off: restart {r.count} in {r.seconds:.0f}s"
        case Why.CRASH_RESTART:
            after = f" after {r.seconds:.0f}s back-off" if r.seconds else ""
            return f"runStrategy {strategy}: domain {state}, starting again (restart {r.count}{after})"
    return None


def _moved(r: ChangeReason) -> str | None:
    match r.kind:
        case Why.MOVE_OUT:
            return (
                f"{arrow(r.text, r.other)}: stop gracefully and undefine here (disks kept) "
                f"before it starts on {r.other or 'its new host'}"
            )
        case Why.MOVE_WAIT if r.flag:
            return (
                f"{arrow(r.text, r.other)}: host {r.text} is unreachable and its copy may still run; "
                "not created here until that host answers and its copy is gone"
            )
        case Why.MOVE_WAIT:
            return f"{arrow(r.text, r.other)}: waits until the copy on {r.text} is stopped and undefined"
        case Why.MOVE_REFUSED if r.refusal is not None:
            return f"{arrow(r.text, r.other)}: not moved: {refusal.said(r.refusal)}"
        case Why.LEFT_NO_OWNER:
            return (
                "VM left git; its mark names no owner (written before owners existed): never pruned "
                "automatically, remove it by hand or adopt it"
            )
        case Why.LEFT_KEPT:
            why = (
                "pruning is disabled, domain kept" if r.flag else "kept (reconciler.kubevirt.io/prune: false)"
            )
            return f"VM left git; {why}"
        case Why.LEFT_GUARDED if r.refusal is not None:
            return f"VM left git; not pruned: {refusal.said(r.refusal)}"
        case Why.LEFT_DELETE:
            kept = f"disks kept, {r.count} ephemeral artefact(s) removed" if r.count else "disks kept"
            how = " (prune confirmed for this revision)" if r.flag else ""
            return f"VM left git: stop gracefully and undefine ({kept}){how}"
        case Why.RELEASED:
            return "released: another owner may adopt it"
    return None


def _paced(r: ChangeReason) -> str | None:
    match r.kind:
        case Why.PACE_STAGED:
            return rollout.staged(r.text)
        case Why.PACE_HALTED if r.halt is not None:
            return rollout.held_by_halt(r.halt)
        case Why.PACE_WAITING:
            return rollout.waiting(r.count, r.total, r.keys)
        case Why.AUTOHEALED:
            return rollout.autohealed(r.count, r.total, r.seconds, r.limit_s)
    return None


def arrow(old: str, new: str) -> str:
    """``move a → b``: a VM's move between hosts (either may be any claiming host)."""
    return f"move {old or '(any claiming host)'} → {new or '(any claiming host)'}"


def note(n: Note) -> str:
    """A comparison's note of a running domain: where a live change goes, or why it waits."""
    match n.kind:
        case Noted.PORTS_RESERVED:
            return f"{n.count} hotplug ports reserved at next boot"
        case Noted.SPARE_SLOT:
            return f"{n.target}: hot-added into a spare hotplug slot ({n.count} left)"
        case Noted.NO_SPARE_SLOT:
            return f"{n.target}: no spare hotplug slot on the running domain: restart-class"
        case Noted.PORT_SEALED:
            return f"{n.target}: its root port is sealed (hotplug off): restart-class"
        case Noted.VCPUS_UNPLUG:
            return f"vCPUs {n.count} -> {n.value}: the guest can unplug {n.total}: restart-class"
        case Noted.NO_BALLOON:
            return "memory: the running domain has no balloon: restart-class"
        case Noted.OP_REFUSED:
            op = LiveOp(LiveOpKind(n.op), n.target, n.value)
            return f"live {op} was refused by libvirt: takes effect at the next cold boot"
