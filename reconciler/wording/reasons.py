"""A change's reasons in words: the one place a ``ChangeReason`` becomes text.

Input: the records of ``Change.reasons`` (``model.reasons``), in the order the plan
decided them. Output: the change's one line (``said``: the reasons joined by ``"; "``)
that the plan text, saved plans, status rows, apply results and the PR report show.
Pure. Nothing reads these words back: the records travel, the words are made here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from reconciler.wording import rollout

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model.reasons import ChangeReason

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
    match str(r.kind):  # the kind's value (``model.reasons.Why``; wording sits below the model)
        case "create":
            how = ": define and start" if r.flag else ": define only"
            return f"not defined on this host; runStrategy {r.text}{how}"
        case "problem" | "note":
            return r.text
        case "not-started":
            return f"not started: {joined(r.of)}"
        case "in-sync":
            return f"in sync ({r.text}, {r.other})"
        case "intent-gone":
            return "a restart decided earlier no longer applies"
        case "intent-restart":
            return "restart decided before the daemon stopped and not made: graceful restart now"
        case "intent-start":
            return "restart decided before the daemon stopped: the guest is off, starting it"
        case "intent-made":
            return "a restart decided earlier has been made"
    return None


def _existing(r: ChangeReason) -> str | None:
    match str(r.kind):
        case "adopt" if r.flag:
            return f"adopting a domain of owner {r.text} (reconciler.kubevirt.io/adopt)"
        case "adopt":
            return "adopting an existing domain (reconciler.kubevirt.io/adopt)"
        case "ports-reserved":
            return (
                f"{r.count} hotplug root port(s) reserved: added to the definition, "
                "the guest gets them at its next cold boot"
            )
        case "spec-changed":
            return f"spec changed: {fields(r.names)}"
        case "drift":
            return f"drift from git in {fields(r.names)}: {_heal(r.flag, 'reverting')}"
        case "owner-renamed":
            return f"ownership record refreshed (owner renamed to {r.text})"
        case "mark-refreshed":
            return "ownership record refreshed (rendering changed, no field differs)"
        case "transient":
            verb = _heal(r.flag, "defining it again")
            return f"drift from git: the domain is transient (its definition was undefined): {verb}"
        case "live":
            return "live: " + ", ".join(r.names)
    return None


def _restart(r: ChangeReason) -> str | None:
    match str(r.kind):
        case "restart-in-window":
            return f"restart-class change: graceful restart in the next restart window, {r.text}"
        case "restart-requested":
            return "restart-class change: graceful restart now (restart now requested)"
        case "restart-window-now":
            when = "restart now requested" if r.flag else "inside the restart window"
            return f"restart-class change: graceful restart now ({when}, rollout Restart)"
        case "restart-differs":
            return (
                f"restart required: the running domain still differs in {fields(r.names)}: "
                "graceful restart now (rollout Restart)"
            )
        case "restart-now":
            return "restart-class change: graceful restart now (rollout Restart)"
        case "restart-staged":
            why = " (rollout Stage)" if r.flag else f" (runStrategy {r.text} is never restarted)"
            return f"restart-class change staged{why}: RestartRequired until the next cold boot"
        case "staged-differs":
            return f"restart required: the running domain still differs in {fields(r.names)} until the next cold boot"
    return None


def _power(r: ChangeReason) -> str | None:
    strategy = r.text
    state = f"{r.other} ({r.detail})" if r.detail else r.other
    match str(r.kind):
        case "once-start":
            return f"runStrategy Once: domain is {state} and was never started, starting"
        case "power-start":
            return f"runStrategy {strategy}: domain is {state}, starting"
        case "powered-off":
            return f"runStrategy Always: the guest powered off ({state}), starting again"
        case "out-of-band" if r.flag:
            return f"runStrategy {strategy}: domain is {state} out of band, starting again"
        case "out-of-band":
            return f"runStrategy {strategy}: domain is {state} out of band: reporting only (selfHeal off)"
        case "halted-report":
            return f"runStrategy Halted: domain is {state}: reporting only (selfHeal off)"
        case "halted-stop":
            return f"runStrategy Halted: domain is {state}, stopping"
        case "crash-backoff":
            return f"runStrategy {strategy}: domain {state}; crash loop back-off: restart {r.count} in {r.seconds:.0f}s"
        case "crash-restart":
            after = f" after {r.seconds:.0f}s back-off" if r.seconds else ""
            return f"runStrategy {strategy}: domain {state}, starting again (restart {r.count}{after})"
    return None


def _moved(r: ChangeReason) -> str | None:
    match str(r.kind):
        case "move-out":
            return (
                f"{arrow(r.text, r.other)}: stop gracefully and undefine here (disks kept) "
                f"before it starts on {r.other or 'its new host'}"
            )
        case "move-wait" if r.flag:
            return (
                f"{arrow(r.text, r.other)}: host {r.text} is unreachable and its copy may still run; "
                "not created here until that host answers and its copy is gone"
            )
        case "move-wait":
            return f"{arrow(r.text, r.other)}: waits until the copy on {r.text} is stopped and undefined"
        case "move-refused":
            return f"{arrow(r.text, r.other)}: not moved: {r.detail}"
        case "left-no-owner":
            return (
                "VM left git; its mark names no owner (written before owners existed): never pruned "
                "automatically, remove it by hand or adopt it"
            )
        case "left-kept":
            why = (
                "pruning is disabled, domain kept" if r.flag else "kept (reconciler.kubevirt.io/prune: false)"
            )
            return f"VM left git; {why}"
        case "left-guarded":
            return f"VM left git; not pruned: {r.detail}"
        case "left-delete":
            kept = f"disks kept, {r.count} ephemeral artefact(s) removed" if r.count else "disks kept"
            how = " (prune confirmed for this revision)" if r.flag else ""
            return f"VM left git: stop gracefully and undefine ({kept}){how}"
        case "released":
            return "released: another owner may adopt it"
    return None


def _paced(r: ChangeReason) -> str | None:
    match str(r.kind):
        case "pace-staged":
            return rollout.staged(r.text)
        case "pace-halted" if r.halt is not None:
            return rollout.held_by_halt(r.halt)
        case "pace-waiting":
            return rollout.waiting(r.count, r.total, r.keys)
        case "autohealed":
            return rollout.autohealed(r.count, r.total, r.seconds, r.limit_s)
    return None


def arrow(old: str, new: str) -> str:
    """``move a → b``: a VM's move between hosts (either may be any claiming host)."""
    return f"move {old or '(any claiming host)'} → {new or '(any claiming host)'}"
