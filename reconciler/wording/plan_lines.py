"""A plan in words: the sentences ``plan.text`` lays out, and its closing summary line.

Input: the plan's records (its revision, a ``Change``, a ``LiveOp``, the VMs of other
hosts, a ``Problem``) and the counts ``plan.text`` takes of a plan and its results.
Output: one line each, without the indentation the plan's layout gives it: a domain's
head (action, flags, reasons), what its pass-through keeps and omits, a live operation,
the VMs counted (unchanged, on other hosts), a warning or error, and a terraform-style
summary (``Plan: 2 to create, ...`` / ``Applied: 2 created, ...``). Pure; golden files
hold this text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.wording import problems
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model import VMKey
    from reconciler.model.changes import Action, Change, LiveOp
    from reconciler.model.problems import Problem


def heading(revision: str) -> str:
    return f"plan for revision {revision[:12]}:"


def change(c: Change) -> str:
    """A domain's line: ``vm/web: update [RestartRequired, drift] - <its reasons>``."""
    flags = []
    if c.restart_required:
        flags.append("RestartRequired")
    if c.drift:
        flags.append("drift")
    head = f"{c.subject}: {c.action}" + (f" [{', '.join(flags)}]" if flags else "")
    return f"{head} - {said(c)}"


def passthrough(keeps: Sequence[str], omits: Sequence[str]) -> list[str]:
    """What the VM's pass-through keeps in its definition beside the spec, and omits."""
    out = []
    if keeps:
        out.append(f"passthrough keeps {', '.join(keeps)}")
    if omits:
        out.append(f"passthrough omits {', '.join(omits)}")
    return out


def live_op(op: LiveOp) -> str:
    return f"op      {op}" + (f" = {op.value}" if op.value and op.target else "")


def unchanged(n: int) -> str:
    return f"({n} unchanged)"


def elsewhere(subject: str, host: str) -> str:
    """A VM of the revision that another host runs (``host``; ``""``: none selected)."""
    return f"{subject} ({('on ' + host) if host else 'selects no host'})"


def other_hosts(others: Sequence[tuple[VMKey, str]], shown_at_most: int | None) -> str:
    """The VMs of the revision that run on other hosts (``shown_at_most``: the names listed,
    the rest counted; ``None``: all listed)."""
    shown = [elsewhere(k.subject, h) for k, h in others]
    if shown_at_most is not None and len(shown) > shown_at_most:
        shown = [*shown[:shown_at_most], f"and {len(shown) - shown_at_most} more (-v lists them)"]
    return f"{len(others)} VM(s) of the revision run on other hosts: " + ", ".join(shown)


def warning(grouped: str) -> str:
    """A warning, as ``problems.group`` says it once per cause."""
    return f"warning: {grouped}"


def error(e: Problem) -> str:
    return f"error: {problems.words(e)}"


def _errors(n: int) -> str:
    return f"{n} error{'s' if n != 1 else ''}"


def errors_only(n: int) -> str:
    """A revision with errors and no change: nothing of it is applied."""
    return f"Plan: {_errors(n)}: nothing will be applied; the host keeps what it runs."


def planned(counts: Sequence[tuple[Action, int]], unchanged: int, other_hosts: int, errors: int) -> str:
    """``Plan: 2 to create, 0 to update, 1 to delete, 3 unchanged.``"""
    parts = [f"{n} to {a.value}" for a, n in counts] + [f"{unchanged} unchanged"]
    if other_hosts:
        parts.append(f"{other_hosts} on other hosts")
    if errors:
        parts.append(f"{_errors(errors)} (nothing will be applied)")
    return "Plan: " + ", ".join(parts) + "."


def applied(counts: Sequence[tuple[Action, int]], unchanged: int, failed: int, other_hosts: int) -> str:
    """``Applied: 2 created, 0 updated, 1 deleted, 3 unchanged, 0 failed.``"""
    parts = [f"{n} {a.past}" for a, n in counts] + [f"{unchanged} unchanged", f"{failed} failed"]
    if other_hosts:
        parts.append(f"{other_hosts} on other hosts")
    return "Applied: " + ", ".join(parts) + "."


# -- a plan applied later: what moved on the host since it was made ---------------------------


def defined_since(subject: str) -> str:
    return f"{subject}: a domain of this name was defined since the plan"


def undefined_since(subject: str) -> str:
    return f"{subject}: the domain was undefined since the plan"


def state_since(subject: str, was: str, now: str) -> str:
    """A domain whose power state moved (``was`` when planned, ``now``)."""
    return f"{subject}: was {was} when planned, now {now}"


def definition_since(subject: str) -> str:
    return f"{subject}: its definition changed since the plan"


def running_since(subject: str) -> str:
    return f"{subject}: the running domain changed since the plan"


def window_closed(subject: str) -> str:
    """A restart planned inside a restart window that has closed since."""
    return f"{subject}: its restart was planned inside a restart window, which has closed since"


# -- a plan shown and applied by the CLI --------------------------------------------------------


def shown(verb: str, host: str, uri: str, revision: str, entry: str) -> str:
    """What ``plan`` and ``apply`` show a plan of: the host, its URI, the revision and entry."""
    return f"{verb}: host {host} at {uri}, revision {revision[:12]}, entry {entry}"


def in_memory(uri: str, what: str) -> str:
    """A plan made against an in-memory test driver (``what``: what that driver is)."""
    return f"note: {uri} is {what}; give --connect or --config for a real host"


def question(changes: int, host: str, uri: str, adopts: Sequence[str]) -> str:
    """The consent asked on a terminal before any change (``adopts``: the VMs that take
    over a domain someone else defined)."""
    taking = f", adopting {', '.join(adopts)} (defined by someone else)" if adopts else ""
    return f"apply {changes} change{'s' if changes != 1 else ''} to host {host} ({uri}){taking}?"


NOT_CONFIRMED = "not confirmed"


def needs_yes(stopping: Sequence[tuple[str, str]]) -> str:
    """Why a plan is not applied without a terminal: the VMs it deletes, restarts, stops or
    adopts (subject, what), the first five named."""
    named = [f"{subject} ({what})" for subject, what in stopping]
    listed = ", ".join(named[:5]) + (f" and {len(named) - 5} more" if len(named) > 5 else "")
    return (
        f"the plan deletes, restarts, stops or adopts {len(named)} VM(s): {listed}; "
        "without a terminal to ask on, that needs --yes"
    )


def host_changed(changed: Sequence[str]) -> str:
    """Why a plan shown is not applied: what moved on the host since (a line each)."""
    return "the host changed since the plan; nothing applied, plan again:\n  " + "\n  ".join(changed)


def not_applied(why: str) -> str:
    return f"not applied: {why}"


# Why apply does not define or delete a domain, as it finds the domain just before: its mark decides.
UNDEFINED_SINCE = "the domain was undefined since the plan"
DEFINED_SINCE = "a domain of this name was defined since the plan: not touched"
NOT_MANAGED = "the domain is not managed by the reconciler (no ownership mark): not touched"
ANOTHER_OWNER = "the domain belongs to another owner: not touched"
MARK_CHANGED = "the domain's ownership mark changed since the plan: not touched"
