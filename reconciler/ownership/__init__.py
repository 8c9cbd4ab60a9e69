"""Ownership: which domains are ours, and how many of them one revision may remove.

Input: ownership marks (read from and written into a domain's ``<metadata>``), owner
identities, live domains. Output: marks, verdicts. Pure.

- ``inventory``: the reconciler's element in a domain's ``<metadata>`` (the mark):
  written, read back, stripped before a comparison;
- ``guard``: whose a domain is (owner identity), and the prune guard.

Callers use the package: ``from reconciler import ownership``; ``ownership.read_mark``,
``ownership.owned_by``.
"""

from reconciler.ownership.guard import (
    MIN_CONFIRM_CHARS,
    GuardPolicy,
    PruneVerdict,
    adoption_refused,
    claimable,
    confirms,
    default_owner,
    foreign,
    gone_count,
    judge,
    legacy_owner,
    managed_count,
    owned_by,
)
from reconciler.ownership.inventory import (
    NS,
    PREFIX,
    ROOT,
    MarkCache,
    add_mark,
    adopted_mark,
    mark_current,
    mark_element,
    mark_for,
    mark_xml,
    read_mark,
    strip_mark,
    unmarked,
    with_mark,
    with_start,
)

__all__ = [
    "MIN_CONFIRM_CHARS",
    "NS",
    "PREFIX",
    "ROOT",
    "GuardPolicy",
    "MarkCache",
    "PruneVerdict",
    "add_mark",
    "adopted_mark",
    "adoption_refused",
    "claimable",
    "confirms",
    "default_owner",
    "foreign",
    "gone_count",
    "judge",
    "legacy_owner",
    "managed_count",
    "mark_current",
    "mark_element",
    "mark_for",
    "mark_xml",
    "owned_by",
    "read_mark",
    "strip_mark",
    "unmarked",
    "with_mark",
    "with_start",
]
