"""A plan laid out as text: what ``plan`` prints and the closing summary line.

Input: a ``Plan`` (and, after apply, its ``ApplyResult`` list). Output: the plan as text,
one line per domain with its reason, what a created or adopted VM's pass-through keeps
in its definition, its changed fields in the user's words and its live operations
(unchanged domains counted, unless verbose), its warnings (one line per cause, as
``validate`` shows them) and errors, and a terraform-style summary (``Plan: 2 to
create, ...`` / ``Applied: 2 created, ...``). The layout is this module's: which lines,
in which order, indented how, and the counts of the summary; every sentence is
``wording.plan_lines``'s (the fields' lines ``compare.provenance``'s, a rollout's
``wording.rollout``'s). Pure; golden files hold this text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.compare import provenance
from reconciler.model.changes import Action
from reconciler.wording import plan_lines as words
from reconciler.wording import problems, rollout
from reconciler.wording.images import image_line

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model.changes import Change, Plan
    from reconciler.model.results import ApplyResult


# Actions that write a VM's definition as a whole: the plan names what its pass-through keeps.
_SHOWS_PASSTHROUGH = (Action.CREATE, Action.ADOPT)
_ITEM = "  "  # a domain's line, and each line about the plan as a whole
_DETAIL = "      "  # what is said of one domain, under its line


def passthrough_lines(c: Change) -> list[str]:
    """What the VM's pass-through keeps in its definition beside the spec, and omits."""
    d = c.desired
    if d is None:
        return []
    return [f"{_DETAIL}{text}" for text in words.passthrough(d.passthrough, d.passthrough_omitted)]


def image_lines(c: Change) -> list[str]:
    """The images the VM's volumes are made from, each with its digest."""
    if c.desired is None:
        return []
    return [f"{_DETAIL}{image_line(v.image, v.digest, v.backing)}" for v in c.desired.volumes if v.image]


def _shown(c: Change, verbose: bool) -> bool:
    """A domain the plan lists: a change, or what an unchanged one still has to say."""
    return c.action != Action.UNCHANGED or verbose or bool(c.restart_required or c.drift or c.requeue_after_s)


def format_plan(plan: Plan, verbose: bool = False) -> str:
    """Human-readable plan: one line per domain, then its changed fields and live operations
    (a new domain: its attributes), the VMs that run on other hosts, warnings and errors."""
    lines = [words.heading(plan.revision)]
    for c in plan.changes:
        if not _shown(c, verbose):
            continue
        lines.append(f"{_ITEM}{words.change(c)}")
        if c.action == Action.CREATE and c.desired is not None:
            lines += [f"{_DETAIL}+ {text}" for text in provenance.create_attributes(c.desired)]
        kept = c.desired.passthrough if c.desired is not None else ()
        if c.action in _SHOWS_PASSTHROUGH or verbose:
            lines += passthrough_lines(c)
        if c.action not in (Action.DELETE, Action.CREATE):  # a create names them on its disks
            lines += image_lines(c)
        typed = c.desired is not None and c.desired.sized_by_instancetype
        lines += [f"{_DETAIL}{text}" for text in provenance.lines(c.fields, verbose, kept, typed)]
        lines += [f"{_DETAIL}{words.live_op(op)}" for op in c.live_ops]
    lines += rollout.plan_lines(plan.pacing)
    unchanged = sum(1 for c in plan.changes if not _shown(c, False))
    if unchanged and not verbose:
        lines.append(f"{_ITEM}{words.unchanged(unchanged)}")
    if plan.other_hosts:
        lines.append(f"{_ITEM}{words.other_hosts(plan.other_hosts, None if verbose else OTHER_HOSTS_SHOWN)}")
    lines += [f"{_ITEM}{words.warning(w)}" for w in problems.group(plan.warnings)]
    lines += [f"{_ITEM}{words.error(e)}" for e in plan.errors]
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
    if plan.errors and not plan.changes:  # a revision with errors: nothing of it is applied
        return words.errors_only(len(plan.errors))
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
    shown = [(a, n) for a, n in counts.items() if n or a in (Action.CREATE, Action.UPDATE, Action.DELETE)]
    others = len(plan.other_hosts)
    if applied:
        return words.applied(shown, unchanged, sum(1 for r in results if not r.ok), others)
    return words.planned(shown, unchanged, others, len(plan.errors))
