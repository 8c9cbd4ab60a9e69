"""What applying a plan did: per-domain results, and the status of a reconcile.

Input: nothing. Output: types: ``ApplyResult`` (one change applied, or its failure as a
``Problem``), ``Reason`` (the closed list of a reconcile's outcomes), ``VMStatus`` (one
row of the status, by ``VMKey``) and ``ReconcileStatus``. Pure: frozen records, no I/O.
"""

from __future__ import annotations

import enum

# Imported at run time (not for type checking only), as model/__init__.py held them:
# readers of these records may resolve their annotations.
from collections.abc import Mapping  # noqa: TC003
from dataclasses import field
from typing import Any

from reconciler.model.changes import Action  # noqa: TC001
from reconciler.model.keys import VMKey  # noqa: TC001
from reconciler.model.problems import Problem  # noqa: TC001
from reconciler.records import dataclass


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What applying one change did. ``message`` says it in words (the change's reason
    when it went well); a failure is also a record, ``problem``, whose message is the
    cause with this VM's own name left out, so equal failures of many VMs group by it
    (``wording.problems.summarize``) without reading ``message`` back."""

    key: VMKey
    action: Action
    ok: bool
    message: str = ""
    transient: bool = False
    problem: Problem | None = None
    pending: bool = False  # the work runs on in the background (a graceful stop under way)

    @property
    def subject(self) -> str:
        return self.key.subject


class Reason(enum.StrEnum):
    SUCCEEDED = "Succeeded"
    SOURCE_FAILED = "SourceFailed"
    BUILD_FAILED = "BuildFailed"
    EXPANSION_FAILED = "ExpansionFailed"
    RENDER_FAILED = "RenderFailed"
    APPLY_FAILED = "ApplyFailed"
    PRUNE_FAILED = "PruneFailed"
    ROLLBACK_REFUSED = "RollbackRefused"


class Sync(enum.StrEnum):
    """Where a VM stands against the revision (``status``'s SYNC column, state.json's ``sync``)."""

    SYNCED = "Synced"
    OUT_OF_SYNC = "OutOfSync"
    FAILED = "Failed"
    UNMANAGED = "Unmanaged"  # a domain not ours, or one a policy leaves alone
    ORPHANED = "Orphaned"  # ours, no longer in git, not pruned
    UNKNOWN = "Unknown"  # the host did not answer, or the domain changed since the daemon's last row
    CRASH_LOOP = "CrashLoopBackOff"  # KubeVirt's printable status: restarts held back

    @classmethod
    def recorded(cls, value: object, default: Sync) -> Sync:
        """A row's ``sync`` as state.json holds it; ``default`` when it has none we know."""
        try:
            return cls(str(value)) if value else default
        except ValueError:
            return default


@dataclass(frozen=True, slots=True)
class VMStatus:
    key: VMKey
    host: str
    run_strategy: str
    state: str
    sync: Sync
    revision: str
    restart_required: bool = False
    message: str = ""
    applied_at: float = 0.0  # epoch seconds of the last change applied to it (0: not known)
    # What the last plan said will not happen to it: (``Notice`` kind, the warning's words)
    notes: tuple[tuple[str, str], ...] = ()
    # Ready, from the daemon's prober (``None``: not known, e.g. no daemon); ``ready_reason``
    # a ``model.health.ReadyKind``; ``probe``: each probe's last answer, in words; the guest
    # address network probes use and its source (agent | lease | spec)
    ready: bool | None = None
    ready_reason: str = ""
    ready_since: float = 0.0
    probe: str = ""
    address: str = ""
    address_source: str = ""
    liveness_restarts: int = 0
    # The images its volumes are made from: (reference as written, digest; "" = a local file)
    images: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        """The libvirt domain name."""
        return self.key.domain

    @property
    def subject(self) -> str:
        return self.key.subject


@dataclass(frozen=True, slots=True)
class ReconcileStatus:
    reason: Reason
    attempted_revision: str
    applied_revision: str
    started_at: float
    duration_ms: int
    results: tuple[ApplyResult, ...] = ()
    vms: tuple[VMStatus, ...] = ()
    message: str = ""  # the outcome in words (``wording.problems``), as state.json and the log show it
    # The outcome as values, what its readers take (never cut out of ``message``):
    problems: tuple[Problem, ...] = ()  # the errors that held the revision (its plan's, its apply's)
    first_error: str = ""  # the first error on one line, set where it is made (events, commit statuses)
    failed_commit: str = ""  # the commit the source refused (it does not verify)
    rollback: Mapping[str, Any] | None = None  # a rollback to this revision, as state.json keeps it
    hosts: Mapping[str, Any] = field(default_factory=dict)  # each host's outcome, as state.json keeps it
