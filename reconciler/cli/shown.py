"""The plan shown, and applied as shown: what ``plan``, ``apply`` and ``apply FILE`` print
before they act, the consent they ask for, and the apply of exactly that plan.

Input: a ``PlannedRevision`` (planned here or read from a saved plan), the parsed
arguments, the host's connection, the printer. Output: the target, the policy and the
plan on stdout; the results and status rows once applied; an exit code. ``apply`` acts
only with consent and only while the host still matches the plan; it never plans again.
Both ``cli.host`` and ``cli.saved_plan`` call this module; it imports neither.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from reconciler.cli.common import EXIT_ERROR, EXIT_OK, ask, progress_printer, say_error, terminal

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from reconciler.host.hypervisor import Hypervisor
    from reconciler.model.results import ApplyResult
    from reconciler.plan.planned import PlannedRevision


def show(
    say: Callable[..., None], planned: PlannedRevision, verb: str, verbose: bool, saved: str = ""
) -> None:
    """The target, the policy and the plan, as ``plan`` and ``apply`` print them."""
    from reconciler.config import targets
    from reconciler.plan.text import format_plan, summary_line
    from reconciler.settings.targets import HostTarget
    from reconciler.wording import plan_lines as words

    target = HostTarget(planned.uri, planned.config, planned.policy)
    entry = planned.entry or "."
    say(words.shown(verb, planned.host, planned.uri, planned.revision, entry))
    if saved:
        say(f"  {saved}")
    if targets.in_memory(planned.uri):
        say(f"  {words.in_memory(planned.uri, targets.TEST_DRIVER_NOTE)}")
    say(f"  {targets.describe(target)}")
    say(format_plan(planned.plan, verbose=verbose))
    say(summary_line(planned.plan, applied=False))


def apply_shown(
    args: argparse.Namespace,
    planned: PlannedRevision,
    hv: Hypervisor,
    say: Callable[..., None],
    text: bool,
) -> tuple[int, tuple[ApplyResult, ...] | None]:
    """Apply the plan shown: with consent, while the host still matches it (exit code, results)."""
    import time

    from reconciler.daemon.books import live_after
    from reconciler.plan.planned import closed_windows
    from reconciler.plan.text import summary_line
    from reconciler.reconcile import apply_planned, host_changes, planned_status
    from reconciler.status import vm_statuses
    from reconciler.status.table import format_table
    from reconciler.wording import plan_lines as words

    plan = planned.plan
    if plan.has_changes:
        refused = consent(planned, args.yes)
        if not refused:
            changed = host_changes(planned, hv) + closed_windows(planned, time.time())
            if changed:
                refused = words.host_changed(changed)
        if refused:
            say_error(words.not_applied(refused))
            return EXIT_ERROR, None
        progress = progress_printer() if text and sys.stdout.isatty() else None
        status = apply_planned(planned, hv, progress=progress)
        say()
        after = live_after(hv, plan, planned.host)  # the changed domains read again, no listing
        say(format_table(vm_statuses(plan, status.results, after, planned.host)))
        say(summary_line(plan, applied=True, results=status.results))
    else:
        status = planned_status(planned)
    if status.reason != "Succeeded":
        say_error(status.message or str(status.reason))
        return EXIT_ERROR, status.results
    return EXIT_OK, status.results


def consent(planned: PlannedRevision, yes: bool) -> str:
    """Why the plan may not be applied ("" when it may). On a terminal, the answer to a
    question before any change; elsewhere, a plan that deletes, restarts or stops a VM,
    or takes over a domain it did not define (an adoption), needs ``--yes``. ``--yes``
    is consent to all of it."""
    from reconciler.model.changes import Action
    from reconciler.plan.planned import needs_consent, takes_over
    from reconciler.wording import plan_lines as words

    if yes:
        return ""
    touched = planned.touched
    if terminal():
        adopts = [c.subject for c in touched if takes_over(c)]
        if ask(words.question(len(touched), planned.host, planned.uri, adopts)):
            return ""
        return words.NOT_CONFIRMED
    stopping = [
        (
            c.subject,
            c.action if c.action in (Action.RESTART, Action.DELETE) else "adopt" if takes_over(c) else "stop",
        )
        for c in touched
        if needs_consent(c)
    ]
    return words.needs_yes(stopping) if stopping else ""
