"""The lines under the status table in words: the daemon's last reconcile and each host's.

Input: the values ``status.summary_lines`` reads of ``state.json`` (revisions, reasons,
messages, a rollback, a held host, a rollout, the VMs other hosts run) and when the
applied revision was applied (as a time and an age). Output: a line each, as ``reconciler
status`` prints them. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.wording.plan_lines import elsewhere

if TYPE_CHECKING:
    from collections.abc import Sequence

OTHER_HOSTS_SHOWN = 10  # the VMs of other hosts named, the rest counted


def revisions(attempted: str, reason: str, applied: str, at: str) -> str:
    """``last attempted <rev> (<reason>), last applied <rev>`` (``at``: ``applied_at``'s words, or "")."""
    return f"last attempted {attempted[:12] or '-'} ({reason or '-'}), last applied {applied[:12] or '-'}{at}"


def applied_at(when: str, ago: str) -> str:
    return f" at {when} ({ago} ago)"


def message(text: str) -> str:
    return f"message: {text}"


def rollback(from_revision: str, to_revision: str, why: str) -> str:
    return f"rollback: {from_revision[:12]} -> {to_revision[:12]} (not a descendant): {why}"


def held(host: str, enforced: str, blocked: str, reason: str, text: str) -> str:
    """A host that enforces its applied revision and holds a newer one back."""
    return f"host {host}: applied {enforced[:12]} enforced; newer revision {blocked[:12]} blocked ({reason}): {text}"


def failing(host: str, uri: str, reason: str, text: str) -> str:
    return f"host {host} ({uri}): {reason}: {text}"


def rollout(host: str, revision: str, text: str) -> str:
    """A host's paced restarts that are not Healthy (``text``: their health in words)."""
    return f"host {host}: revision {revision[:12]} {text}"


def other_hosts(host: str, others: Sequence[tuple[str, str]]) -> str:
    """The VMs of the revision that other hosts run (subject, host; the first ten named)."""
    shown = ", ".join(elsewhere(subject, on) for subject, on in others[:OTHER_HOSTS_SHOWN])
    more = f" and {len(others) - OTHER_HOSTS_SHOWN} more" if len(others) > OTHER_HOSTS_SHOWN else ""
    return f"host {host}: {len(others)} VM(s) of the revision run on other hosts: {shown}{more}"
