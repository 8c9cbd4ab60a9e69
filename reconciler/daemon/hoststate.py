"""What the daemon knows of one host between reconciles, as a value, and its steps.

Input: the state so far and what just happened (a reconcile's outcome, a revision
blocked, the host lost or reached again, its domains read, state.json read at start).
Output: the next state. Pure: the runner (``daemon/runner.py``) holds one ``HostState``
and replaces it with what a step returns; the modules that book a reconcile
(``books``, ``health``, ``reload``, ``record``, ``service``) do the same, never writing
a field of it. What is no state but a resource stays on the runner: the connection, the
caches, the work in flight, the callbacks.

Two groups of fields, each changed by its own steps:
- the revisions: the one applied last, the newer one blocked and why, the last outcome
  and its rows, when each VM was applied (``concluded``, ``held_back``, ``cleared``,
  ``with_rows``, ``recorded``, ``restored``, ``reloaded``);
- the connection: whether the host's domains were read last time (other hosts' moves
  count on it), why it cannot be reached, when to try again, this cycle's error
  (``lost``, ``probe_at``, ``reconnected``, ``read``, ``unread``).
"""

from __future__ import annotations

from collections.abc import Mapping  # noqa: TC003
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.errors import HypervisorError  # noqa: TC001
from reconciler.model.results import Reason, ReconcileStatus, VMStatus  # noqa: TC001


@dataclass(frozen=True, slots=True)
class Blocked:
    """A revision newer than the last applied one that this host does not apply, and why."""

    revision: str
    reason: Reason
    message: str
    planned: bool = False  # blocked by its plan's errors (else before any plan: a rollback, the source)
    host_dependent: bool = False  # its errors depend on the host (its facts, its free resources)
    first: str = ""  # its first error on one line (``ReconcileStatus.first_error``)

    def words(self, applied: str) -> str:
        return f"held at {applied[:12]}: revision {self.revision[:12]} {self.reason}: {self.message}"


@dataclass(frozen=True, slots=True)
class HostState:
    """One host's state between reconciles (see the module's docstring for its groups)."""

    # the revisions
    applied: str = ""  # the revision applied last ("" none yet)
    blocked: Blocked | None = None  # the newer revision this host holds back from, and why
    status: ReconcileStatus | None = None  # the last reconcile's outcome
    rows: tuple[VMStatus, ...] = ()  # its rows (Ready from the prober)
    applied_at: Mapping[str, float] = field(default_factory=dict)  # by VM, from state.json at start
    # the connection
    reachable: bool = True  # its domains were read last time (else: the last known ones stand)
    unreachable: str = ""  # why the host cannot be reached ("" = reachable)
    next_probe: float = 0.0  # while unreachable: when to try connecting again (monotonic)
    down: HypervisorError | None = None  # this cycle's connection error (not tried twice)


# -- the revisions ----------------------------------------------------------------------------


def concluded(s: HostState, status: ReconcileStatus) -> HostState:
    """A reconcile's outcome: the last status, and the revision it applied (if it did)."""
    return replace(s, status=status, applied=status.applied_revision or s.applied)


def with_rows(s: HostState, rows: tuple[VMStatus, ...]) -> HostState:
    return replace(s, rows=rows)


def held_back(s: HostState, why: Blocked) -> HostState:
    """A newer revision this host does not apply, and why."""
    return replace(s, blocked=why)


def cleared(s: HostState) -> HostState:
    """Nothing blocked: the head applies (or is planned again, after a reload)."""
    return replace(s, blocked=None)


def restored(s: HostState, applied: str, applied_at: Mapping[str, float] | None = None) -> HostState:
    """What state.json (or the marks) said at start: the revision applied last, and when
    each VM was applied (``None``: as it was)."""
    return replace(s, applied=applied, applied_at=s.applied_at if applied_at is None else dict(applied_at))


def recorded(s: HostState, host: Mapping[str, Any]) -> HostState:
    """The revision state.json recorded as applied on this host (its entry, ``host``)."""
    return replace(s, applied=str(host.get("applied_revision", "")))


def reloaded(old: HostState) -> HostState:
    """The same host after a configuration reload: what it knew, nothing blocked (the
    head is planned again under the new configuration), its connection as it was found."""
    return HostState(old.applied, None, old.status, old.rows, old.applied_at)


# -- the connection -------------------------------------------------------------------------


def lost(s: HostState, why: str, *, unread: bool = False) -> HostState:
    """The host cannot be reached (``why``); ``unread``: its domains could not be read either."""
    return replace(s, unreachable=why, reachable=s.reachable and not unread)


def probe_at(s: HostState, when: float) -> HostState:
    """While unreachable: the next attempt to connect, at monotonic ``when``."""
    return replace(s, next_probe=when)


def reconnected(s: HostState) -> HostState:
    """A connection was made: the host is reachable again."""
    return replace(s, unreachable="")


def read(s: HostState) -> HostState:
    """Its domains were read (this cycle's error, if any, is gone)."""
    return replace(s, reachable=True, down=None)


def unread(s: HostState, err: HypervisorError | None) -> HostState:
    """Its domains could not be read (``err``; ``None``: a new cycle, nothing tried yet)."""
    return replace(s, reachable=s.reachable if err is None else False, down=err)


class StateView:
    """A runner's ``state`` fields, read-only: the runner replaces ``state`` with what a
    step returns, never writes a field of it."""

    state: HostState

    @property
    def applied(self) -> str:
        return self.state.applied

    @property
    def blocked(self) -> Blocked | None:
        return self.state.blocked

    @property
    def status(self) -> ReconcileStatus | None:
        return self.state.status

    @property
    def rows(self) -> tuple[VMStatus, ...]:
        return self.state.rows

    @property
    def applied_at(self) -> Mapping[str, float]:
        return self.state.applied_at

    @property
    def reachable(self) -> bool:
        return self.state.reachable

    @property
    def unreachable(self) -> str:
        return self.state.unreachable

    @property
    def next_probe(self) -> float:
        return self.state.next_probe

    @property
    def down(self) -> HypervisorError | None:
        return self.state.down
