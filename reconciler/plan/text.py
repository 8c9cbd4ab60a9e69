"""A plan in words: what ``plan`` prints and the closing summary line.

Input: a ``Plan`` (and, after apply, its ``ApplyResult`` list). Output: the plan as text,
one line per domain with its reason, what a created or adopted VM's pass-through keeps
in its definition, its changed fields in the user's words and its live operations
(unchanged domains counted, unless verbose), its warnings (one line per cause, as
``validate`` shows them) and errors, and a terraform-style
summary (``Plan: 2 to create, ...`` / ``Applied: 2 created, ...``). Pure; golden files
hold this text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.compare import provenance
from reconciler.model.changes import Action
from reconciler.wording import problems, rollout
from reconciler.wording.images import image_line
from reconciler.wording.reasons import said

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model.changes import Change, Plan
    from reconciler.model.results import ApplyResult


# Actions that write a VM's definition as a whole: the plan names what its pass-through keeps.
_SHOWS_PASSTHROUGH = (Action.CREATE, Action.ADOPT)


def passthrough_lines(c: Change) -> list[str]:
    """What the VM's pass-through keeps in its definition beside the spec, and omits."""
    d = c.desired
    if d is None or not (d.passthrough or d.passthrough_omitted):
        return []
    out = []
    if d.passthrough:
        out.append(f"      passthrough keeps {', '.join(d.passthrough)}")
    if d.passthrough_omitted:
        out.append(f"      passthrough omits {', '.join(d.passthrough_omitted)}")
    return out


def image_lines(c: Change) -> list[str]:
    """The images the VM's volumes are made from, each with its digest."""
    if c.desired is None:
        return []
    return [f"      {image_line(v.image, v.digest, v.backing)}" for v in c.desired.volumes if v.image]


def format_plan(plan: Plan, verbose: bool = False) -> str:
    """Human-readable plan: one line per domain, then its changed fields and live operations
    (a new domain: its attributes), the VMs that run on other hosts, warnings and errors."""
    lines = [f"plan for revision {plan.revision[:12]}:"]
    for c in plan.changes:
        if (
            c.action == Action.UNCHANGED
            and not verbose
            and not (c.restart_required or c.drift or c.requeue_after_s)
        ):
            continue
        flags = []
        if c.restart_required:
            flags.append("RestartRequired")
        if c.drift:
            flags.append("drift")
        head = f"  {c.subject}: {c.action}" + (f" [{', '.join(flags)}]" if flags else "")
        lines.append(f"{head} - {said(c)}")
        if c.action == Action.CREATE and c.desired is not None:
            lines += [f"      + {text}" for text in provenance.create_attributes(c.desired)]
        kept = c.desired.passthrough if c.desired is not None else ()
        if c.action in _SHOWS_PASSTHROUGH or verbose:
            lines += passthrough_lines(c)
        if c.action not in (Action.DELETE, Action.CREATE):  # a create names them on its disks
            lines += image_lines(c)
        typed = c.desired is not None and c.desired.sized_by_instancetype
        lines += [f"      {text}" for text in provenance.lines(c.fields, verbose, kept, typed)]
        for op in c.live_ops:
            lines.append(f"      op      {op}" + (f" = {op.value}" if op.value and op.target else ""))
    lines += rollout.plan_lines(plan.pacing)
    unchanged = sum(
        1
        for c in plan.changes
        if c.action == Action.UNCHANGED and not (c.restart_required or c.drift or c.requeue_after_s)
    )
    if unchanged and not verbose:
        lines.append(f"  ({unchanged} unchanged)")
    if plan.other_hosts:
        shown = [f"{k.subject} ({('on ' + h) if h else 'selects no host'})" for k, h in plan.other_hosts]
        if not verbose and len(shown) > OTHER_HOSTS_SHOWN:
            shown = [*shown[:OTHER_HOSTS_SHOWN], f"and {len(shown) - OTHER_HOSTS_SHOWN} more (-v lists them)"]
        lines.append(
            f"  {len(plan.other_hosts)} VM(s) of the revision run on other hosts: " + ", ".join(shown)
        )
    for w in problems.group(plan.warnings):
        lines.append(f"  warning: {w}")
    for e in plan.errors:
        lines.append(f"  error: {problems.words(e)}")
    return "\n".join(lines)


OTHER_HOSTS_SHOWN = 10

_SUMMARY_ORDER = (
    Action.CREATE,
    Action.UPDATE,
    Action.RESTART,
    Action.START,
    Action.STOP,
    Action.DELETE,
    Action.ADOPT,
    Action.WAIT,
    Action.SKIPPED,
)


def summary_line(plan: Plan, applied: bool, results: Sequence[ApplyResult] = ()) -> str:
    """One closing line, as terraform's: ``Plan: 2 to create, 1 to delete, 3 unchanged.``
    or, after apply, ``Applied: 2 created, 1 deleted, 3 unchanged, 0 failed.``"""
    n = len(plan.errors)
    if n and not plan.changes:  # a revision with errors: nothing of it is applied
        return (
            f"Plan: {n} error{'s' if n != 1 else ''}: nothing will be applied; the host keeps what it runs."
        )
    counts = dict.fromkeys(_SUMMARY_ORDER, 0)
    unchanged = 0
    failed_keys = {r.key for r in results if not r.ok} if applied else set()
    for c in plan.changes:
        if c.key in failed_keys:
            continue  # counted as failed, not as what it meant to do
        if c.is_noop and c.action != Action.WAIT:
            unchanged += 1
        elif c.action in counts:
            counts[c.action] += 1
    shown = [a for a in _SUMMARY_ORDER if counts[a] or a in (Action.CREATE, Action.UPDATE, Action.DELETE)]
    if applied:
        failed = sum(1 for r in results if not r.ok)
        parts = [f"{counts[a]} {a.past}" for a in shown] + [f"{unchanged} unchanged", f"{failed} failed"]
        if plan.other_hosts:
            parts.append(f"{len(plan.other_hosts)} on other hosts")
        return "Applied: " + ", ".join(parts) + "."
    parts = [f"{counts[a]} to {a.value}" for a in shown] + [f"{unchanged} unchanged"]
    if plan.other_hosts:
        parts.append(f"{len(plan.other_hosts)} on other hosts")
    if plan.errors:
        parts.append(
            f"{len(plan.errors)} error{'s' if len(plan.errors) != 1 else ''} (nothing will be applied)"
        )
    return "Plan: " + ", ".join(parts) + "."
