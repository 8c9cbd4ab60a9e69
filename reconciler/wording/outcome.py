"""A host's reconcile outcome in words: the one place the daemon's runner gets its messages.

Input: the values the runner holds (the blocked revision's message, the applied revision,
the enforcement's message, a host error, the stage an internal error broke, what a plan
waits for). Output: the one-line messages of ``ReconcileStatus.message``, rows and the
log. Pure; the runner
deals in values and asks here for their words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.wording import problems
from reconciler.wording.escape import printable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model.results import ApplyResult

MAX_ERROR_CHARS = 300  # a host error or an internal one, as a message carries it


def held(blocked: str, applied: str, enforced: str) -> str:
    """The blocked revision's message, then the applied one enforced with its own message."""
    return blocked + (f"; enforcing {applied[:12]}: {enforced}" if enforced else "")


def held_at(applied: str, revision: str, reason: str, message: str) -> str:
    """A host held at its applied revision: which newer revision it does not apply, and why."""
    return f"held at {applied[:12]}: revision {revision[:12]} {reason}: {message}"


def held_row(applied: str, revision: str, reason: str, message: str) -> str:
    """A row of the enforced revision: held there (and why), then the row's own message."""
    note = f"held at {applied[:12]} (revision {revision[:12]} {reason})"
    return f"{note}; {message}" if message else note


def with_late(message: str, late: Sequence[ApplyResult]) -> str:
    """An apply's message with the work in flight that ended badly since (grouped by cause)."""
    return problems.joined((message, problems.summarize(late)))


def connection_lost(message: str) -> str:
    return f"connection lost: {message}"[:MAX_ERROR_CHARS]


def unreachable(err: Exception) -> str:
    return str(err)[:MAX_ERROR_CHARS]


def unenforced(blocked: str) -> str:
    return f"{blocked}; the last applied revision cannot be enforced"


def host_error(uri: str, err: Exception) -> str:
    return f"{uri}: {err}"


def host_unreachable_row(err: Exception) -> str:
    """A row's message while its host cannot be reached."""
    return f"host unreachable: {err}"


def internal_error(stage: str, err: Exception) -> str:
    return f"internal error in the {stage}: {type(err).__name__}: {printable(str(err))[:MAX_ERROR_CHARS]}"


def internal_error_event(stage: str) -> str:
    """The log's event of an internal error (its traceback follows)."""
    return f"internal error in the {stage}"


def not_answering(uri: str) -> str:
    return f"{uri}: libvirt does not answer"


def replan_wait(subject: str, restart_window: str) -> str:
    """Why a VM's plan asks to be planned again: its restart window opening, else its
    crash-loop back-off ending."""
    return f"{subject}: " + (f"restart window {restart_window}" if restart_window else "crash-loop back-off")


HOST_MOVE_WAIT = "a host move half done"  # why the plans of a host move are made again soon


# -- what /healthz says is wrong ---------------------------------------------------------------

MAX_PROBLEM_CHARS = 500  # a problem of /healthz
STOPPING = "stopping"


def host_down(host: str, error: str) -> str:
    return f"host {host} unreachable: {error}"


def host_failing(host: str, reason: str, message: str) -> str:
    """A host whose last reconcile did not succeed."""
    return f"host {host}: last reconcile {reason}: {message}"[:MAX_PROBLEM_CHARS]


def last_failed(reason: str, message: str) -> str:
    """The last reconcile, not a host's, did not succeed (the source failed, say)."""
    return f"last reconcile {reason}: {message}"[:MAX_PROBLEM_CHARS]


def state_file(error: str) -> str:
    return f"state file: {error}"


def status_line(applied: str, vms: int, synced: int, failed: int, failing: str) -> str:
    """sd_notify's STATUS: the applied commit, the VMs synced and failed (``failing``: the
    attempted revision and its reason when the last reconcile did not succeed)."""
    text = f"applied {applied[:12] or 'none'}; {vms} VMs, {synced} synced, {failed} failed"
    return text + (f"; {failing}" if failing else "")


def failing(revision: str, reason: str) -> str:
    return f"{revision[:12]} {reason}"


def host_line(host: str, text: str) -> str:
    """What is said of one host among several: ``host h1: <text>``."""
    return f"host {host}: {text}"


def not_finished(subject: str, why: str) -> str:
    """``run --once``: a VM whose work did not end."""
    return f"not finished: {subject}: {why}"


def outcome_line(reason: str, message: str) -> str:
    """The reconcile's reason and its message, where ``run --once`` ends."""
    return f"{reason}: {message}"


# -- a rollback: a head that does not descend from the applied commit --------------------------

ROLLBACK_ALLOWED = "applied (policy allowRollback: true)"


def rollback_unrelated(head: str) -> str:
    """Why a head of a history unrelated to the applied one is refused, and how it is let past."""
    return (
        "refused: the head's history is unrelated to the applied one (no common commit: another "
        f"repository?); to apply it set policy.confirmRollback: '{head[:12]}' and reload"
    )


def rollback_confirmed(unrelated: bool, confirm: str) -> str:
    what = " (an unrelated history)" if unrelated else ""
    return f"applied{what}: confirmed by policy.confirmRollback {confirm}"


def rollback_refused(head: str) -> str:
    return f"refused (policy allowRollback: false); to apply it set policy.confirmRollback: '{head[:12]}' and reload"


def rollback(from_revision: str, to_revision: str, why: str) -> str:
    """A rollback's message, as the log, the reconcile's message and ``status`` say it."""
    return (
        f"rollback: the branch moved from {from_revision[:12]} to {to_revision[:12]}, "
        f"which does not descend from it: {why}"
    )
