"""One VM of a PR diff in words: what merging creates, deletes or changes, and what a host does.

Input: the records ``prdiff.entry`` found (the ``Change`` of the plan built over the
simulated host, the VM's run strategy, the prune guard's refusal, the hosts of a move,
a volume's sizes, what a pass-through keeps). Output: the consequence of each kind
(``created``, ``deleted``, ``changed``, ``NOTHING_TO_APPLY``) and the notes beside it
(``host_move``, ``volume_resized``, ``passthrough_kept``, ``NEW_FOR_BASE_FAILED``), as ``VMEntry`` carries them. Pure: the entry
decides what is said, and these functions say it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model import RunStrategy
from reconciler.model.changes import Action, ChangeClass
from reconciler.model.units import format_bytes
from reconciler.wording import refusal
from reconciler.wording.reasons import arrow, said

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model.changes import Change
    from reconciler.model.refusal import PruneRefusal


# A VM of head whose base did not build: it is compared as a new VM.
NEW_FOR_BASE_FAILED = "did not build at base: compared as new"
# A VM whose expanded spec moved and whose domain definition did not.
NOTHING_TO_APPLY = "the expanded spec changed but the domain definition did not: nothing to apply"


def created(start: bool, strategy: str) -> str:
    """A new domain: defined, and started or not by its run strategy."""
    if start:
        return f"new domain: defined and started (runStrategy {strategy})"
    return f"new domain: defined, not started (runStrategy {strategy})"


_PRUNED = (
    "left git: pruned (shut down gracefully and undefined, disks kept) on hosts with pruning on; "
    "kept on hosts with pruning off (the default)"
)


def deleted(c: Change, guard: PruneRefusal | None, pruning: bool | None = None) -> str:
    """A VM that left git. ``pruning``: the host's policy.prune where the report speaks for
    one host (``None``: any host, with pruning on or off)."""
    if c.action == Action.DELETE:
        return (
            _PRUNED
            if pruning is None
            else "left git: pruned (shut down gracefully and undefined, disks kept)"
        )
    if c.live is not None and c.live.mark is not None and not c.live.mark.prune:
        return said(c)  # kept by its reconciler.kubevirt.io/prune annotation
    if pruning is False:
        return "left git: kept, the domain stays defined (pruning is off in the daemon's policy)"
    # The prune guard tripped on the whole repository taken as one host; the real
    # guard counts per host, so say what a host holding all of them does.
    refused = refusal.said(guard) if guard is not None else ""
    if pruning:
        return f"left git: to be pruned, but a host holding all of base's VMs refuses: {refused}"
    return f"{_PRUNED}; but a host holding all of base's VMs refuses: {refused}"


def changed(c: Change, strategy: RunStrategy, keeps_running: bool) -> str:
    """A changed VM: how its change class, the rollout and its run strategy meet on a host
    (``keeps_running``: the strategy keeps the VM running, so no "if running")."""
    maybe = "" if keeps_running else " (if running)"
    restart = any(f.change_class == ChangeClass.RESTART for f in c.fields)
    ops = ", ".join(str(op) for op in c.live_ops)
    parts: list[str] = []
    if c.action == Action.RESTART:
        parts.append(f"{strategy} VM: restart-class change: will be restarted (rollout Restart)")
    elif c.restart_required and c.restart_window:
        parts.append(
            f"{strategy} VM: restart-class change: will be restarted in the next restart window "
            f"({c.restart_window})"
        )
        if ops:
            parts.append(f"applied live now: {ops}")
    elif c.restart_required:
        parts.append(
            f"{strategy} VM{maybe}: restart-class change staged, RestartRequired until the next cold boot"
        )
        if ops:
            parts.append(f"applied live now: {ops}")
    elif restart:
        parts.append(f"{strategy} VM: definition updated; the change takes effect at the next start")
    elif c.fields:
        if strategy == RunStrategy.HALTED:
            parts.append(f"{strategy} VM: definition updated")
        else:
            parts.append(f"{strategy} VM{maybe}: applied live{f' ({ops})' if ops else ''}, no restart")
    elif c.action == Action.UPDATE or c.redefine:
        parts.append("ownership record refreshed, no field of the definition differs")
    if c.start:
        parts.append(f"will be started (runStrategy {strategy})")
    if c.stop:
        parts.append(f"will be stopped (runStrategy {strategy})")
    return "; ".join(parts)


def host_move(old: str, new: str) -> str:
    """A VM whose host moves from ``old`` to ``new``."""
    return (
        f"{arrow(old, new)}: stopped gracefully and undefined on the old host (disks kept) "
        "before it starts on the new one; not started while the old host is unreachable"
    )


def volume_resized(path: str, before: int, after: int) -> str:
    """A volume whose capacity (bytes) differs: taken only where the disk is created."""
    return (
        f"volume {path}: capacity {format_bytes(before)} -> {format_bytes(after)} "
        "(an existing disk is never resized: this takes effect only where it is created)"
    )


def passthrough_kept(keeps: Sequence[str], omits: Sequence[str]) -> str:
    """What the VM's pass-through keeps in its definition beside the spec, and omits."""
    parts = []
    if keeps:
        parts.append("keeps " + ", ".join(keeps))
    if omits:
        parts.append("omits " + ", ".join(omits))
    return f"domain XML kept beside the spec (passthrough annotation): {'; '.join(parts)}"


# -- the report: the diff as a whole, an instancetype's revisions, a Secret --------------------

DEFINITION_UNCHANGED = "definition unchanged"  # a changed VM whose domain definition did not move


def summary(
    created: int,
    deleted: int,
    changed: int,
    by_class: Sequence[tuple[str, int]],
    unchanged: int,
    revisions: int,
    errors: int,
) -> str:
    """``2 created, 0 deleted, 3 changed (1 restart, 2 live), 7 unchanged``: the VMs
    counted (``by_class``: the changed ones by class, those with none left out), the
    instancetypes and preferences that moved, the errors."""
    classes = [f"{n} {label}" for label, n in by_class if n]
    parts = [
        f"{created} created",
        f"{deleted} deleted",
        f"{changed} changed" + (f" ({', '.join(classes)})" if classes else ""),
        f"{unchanged} unchanged",
    ]
    if revisions:
        parts.append(f"{revisions} instancetype/preference change{'s' if revisions != 1 else ''}")
    if errors:
        parts.append(f"{errors} error{'s' if errors != 1 else ''}")
    return ", ".join(parts)


def policy_assumed(
    config: str,
    host: str,
    prune: int | None,
    rollout: str,
    follow: bool,
    restart_windows: Sequence[str],
) -> str:
    """The daemon's policy a diff assumed (``diff --config``), in one line (``prune``: the
    ``maxPrunePercent`` where the host prunes, ``None`` where it does not)."""
    parts = [
        f"prune {'off' if prune is None else f'on (at most {prune}% of managed domains)'}",
        f"rollout {rollout}",
        f"instancetypeRevisions {'follow' if follow else 'pin'}",
    ]
    if restart_windows:
        parts.append("restart windows " + "; ".join(restart_windows))
    return f"policy assumed ({config}, host {host}): " + ", ".join(parts)


def revision_use(subject: str, pinned: bool, base_hash: str) -> str:
    """A VM an instancetype's or preference's new revision reaches: pinned to base's, or not."""
    if pinned:
        return f"{subject}: pinned to base's revision {base_hash}, unchanged"
    return f"{subject}: takes the head revision"


def reaches(vms: int) -> str:
    return f"reaches {vms} VM{'s' if vms != 1 else ''}"


REACHES_NO_VM_AT_HEAD = "reaches no VM at head"


def pinning_note(follow: bool) -> str:
    """Which revision of an instancetype or preference a VM takes, in the diff's setting."""
    if follow:
        return "instancetypeRevisions: follow: every VM takes the head revision of what it uses."
    return (
        "With no host to ask, a VM that exists at base is taken as pinned to the revisions base gives it "
        "(a host that applied base captured them): it moves to a newer revision only when rolled forward "
        '(annotation reconciler.kubevirt.io/roll-forward: "true" in git, or `reconciler apply --roll-forward '
        "vm/NAME` on the host), when its revisionName is changed or cleared, or where the host config says "
        "instancetypeRevisions: follow. VMs new at head take the head revision."
    )


def secret(namespace: str, name: str, change: str, encrypted: bool, vms: Sequence[str]) -> str:
    """``Secret db-creds changed (encrypted): reaches vm/db``: the name, never a value."""
    ns = "" if namespace in ("", "default") else f"{namespace}/"
    reach = f": reaches {', '.join(vms)}" if vms else ": reaches no VM"
    return f"Secret {ns}{name} {change}" + (" (encrypted)" if encrypted else "") + reach
