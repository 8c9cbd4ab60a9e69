"""A plan's own errors and warnings (about a VM, or a host's facts file), as records: a
kind and the values its words name.

Input: nothing. Output: the ``PlanError`` record and its ``Unplanned`` kinds. Pure. The
plan (plan/build.py, with ``ownership.adoption_refused``; moves.py, revision.py) makes them where it decides;
``reconciler.wording.plan_errors`` alone turns one into the ``Problem.message`` the plan
reports, so nothing below ``wording`` makes these words.
"""

from __future__ import annotations

import enum

from reconciler.records import dataclass


class Unplanned(enum.StrEnum):
    # errors: the VM is not planned on this host (a ``skipped`` change)
    UNMANAGED = "unmanaged"  # a domain of this name exists, unmarked
    OTHER_OWNER = "other-owner"  # owner: the domain's owner
    ADOPTION_REFUSED = "adoption-refused"  # owner: the domain's owner; came: whom it adopted from
    NOT_COMPARED = "not-compared"  # detail: why the live definition cannot be compared
    # warnings: the VM is planned
    ADOPTED = "adopted"  # came: whom it was adopted from; the adopt annotation is left
    DISK_NOT_RESIZED = "disk-not-resized"  # path, size (in git), was (created with)
    # warnings of ``plan --config`` (plan/moves.py): no daemon of the configuration runs the VM
    HOST_UNKNOWN = "host-unknown"  # owner: the host its selector names; path: the config; names: its hosts
    NO_HOST_CLAIMS = "no-host-claims"  # path: the config (it selects no host, and no host claims such VMs)
    # warnings about a host's facts file (plan/revision.py): path: the factsFile
    FACTS_MISSING = "facts-missing"  # not in the repository
    FACTS_UNREADABLE = "facts-unreadable"  # detail: the reader's error
    FACTS_STALE = "facts-stale"  # names: the facts that differ


UNMANAGED = "unmanaged"  # ``came`` of a domain adopted while no owner marked it


@dataclass(frozen=True, slots=True)
class PlanError:
    """One of the plan's errors or warnings: its kind and the values its words name."""

    kind: Unplanned
    owner: str = ""  # an owner, or a host
    came: str = ""  # an owner, or ``UNMANAGED``
    detail: str = ""  # a parser's or comparison's own message
    path: str = ""  # a disk's path, a file's
    names: tuple[str, ...] = ()
    size: int = 0  # bytes
    was: int = 0  # bytes
