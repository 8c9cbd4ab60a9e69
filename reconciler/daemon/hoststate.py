"""What the daemon knows of one host between reconciles, as a value, and its steps.

Input: the state so far and what just happened (a reconcile's outcome, a revision
blocked, the host lost or reached again, its domains read, state.json read at start).
Output: the next state. Pure: the runner (``daemon/runner.py``) holds one ``HostState``
and replaces it with what a step returns; the modules that book a reconcile
(``books``, ``health``, ``reload``, ``record``, ``service``) do the same, never writing
a field of it. What is no state but a resource stays on the runner: the connection, the
caches, the work in flight, the callbacks.

Four groups of fields, each changed by its own steps:
- the revisions: the one applied last, the newer one blocked, why and its plan, the
  paced restarts, the last outcome
  and its rows, when each VM was applied (``concluded``, ``held_back``, ``converged``, ``cleared``, ``paced_by``,
  ``with_rows``, ``recorded``, ``restored``, ``reloaded``);
- the connection: whether the host's domains were read last time (other hosts' moves
  count on it), why it cannot be reached, when to try again, this cycle's error
  and our domains on it (``lost``, ``probe_at``, ``reconnected``, ``read``, ``unread``,
  ``last_copies``);
- the prune guard's memory: the managed set, the window, a refusal (``guard_restored``,
  ``window_at``, ``refusal``, ``applied_managed``);
- what the log said once (``logged``) and the VMs left to other hosts (``left_to_others``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping  # noqa: TC003
from dataclasses import field, replace
from typing import Any

from reconciler.errors import HypervisorError  # noqa: TC001
from reconciler.model.changes import Plan  # noqa: TC001
from reconciler.model.results import Reason, ReconcileStatus, VMStatus  # noqa: TC001
from reconciler.model.rollout import Paced  # noqa: TC001
from reconciler.records import dataclass
from reconciler.status.sync import worth_reading


@dataclass(frozen=True, slots=True)
class Blocked:
    """A revision newer than the last applied one that this host does not apply, and why."""

    revision: str
    reason: Reason
    message: str
    planned: bool = False  # blocked by its plan's errors (else before any plan: a rollback, the source)
    host_dependent: bool = False  # its errors depend on the host (its facts, its free resources)
    first: str = ""  # its first error on one line (``ReconcileStatus.first_error``)


@dataclass(frozen=True, slots=True)
class HostState:
    """One host's state between reconciles (see the module's docstring for its groups)."""

    # the revisions
    applied: str = ""  # the revision applied last ("" none yet)
    blocked: Blocked | None = None  # the newer revision this host holds back from, and why
    head_plan: Plan | None = None  # while blocked by its errors: the blocked revision's plan
    paced: Paced | None = None  # the last plan's paced restarts: progress, health (daemon/rollouts.py)
    status: ReconcileStatus | None = None  # the last reconcile's outcome
    rows: tuple[VMStatus, ...] = ()  # its rows (Ready from the prober)
    applied_at: Mapping[str, float] = field(default_factory=dict)  # by VM, from state.json at start
    # the connection
    reachable: bool = True  # its domains were read last time (else: the last known ones stand)
    unreachable: str = ""  # why the host cannot be reached ("" = reachable)
    next_probe: float = 0.0  # while unreachable: when to try connecting again (monotonic)
    down: HypervisorError | None = None  # this cycle's connection error (not tried twice)
    copies: tuple[str, ...] | None = None  # our domains on this host, as last read, sorted (host moves)
    # the prune guard's memory (state.json keeps it)
    managed: tuple[str, ...] | None = None  # our domains at the last applied revision
    window: tuple[float, tuple[str, ...]] | None = None  # prune window: (start, wall time; managed then)
    prune_refused: Mapping[str, Any] | None = None  # the recorded refusal: revision, limit, message
    # what was logged, each once while it holds
    drift_logged: frozenset[tuple[str, str]] = frozenset()  # (domain, reason) of drift already logged
    warned: frozenset[str] = frozenset()  # plan warnings already logged
    elsewhere_logged: frozenset[tuple[str, str]] = frozenset()  # VMs on other hosts last logged
    other_hosts: tuple[tuple[str, str], ...] = ()  # (subject, host) the last plan left to other hosts


# -- the revisions ----------------------------------------------------------------------------


def concluded(s: HostState, status: ReconcileStatus) -> HostState:
    """A reconcile's outcome: the last status, and the revision it applied (if it did).
    The status is kept with its results worth reading (changes made, failures: what
    ``state.json``, events and retries read), not one per VM left as it was: the rows
    made from them say that."""
    results = tuple(r for r in status.results if worth_reading(r))
    if len(results) != len(status.results):
        status = replace(status, results=results)
    return replace(s, status=status, applied=status.applied_revision or s.applied)


def with_rows(s: HostState, rows: tuple[VMStatus, ...]) -> HostState:
    """Its rows now; when each VM was applied, as state.json said at start, is kept only
    for the VMs they do not list (theirs say it from now on, and win over it)."""
    applied_at = s.applied_at
    if applied_at:
        listed = {r.name for r in rows}
        applied_at = {name: at for name, at in applied_at.items() if name not in listed}
    return replace(s, rows=rows, applied_at=applied_at)


def held_back(s: HostState, why: Blocked, plan: Plan | None = None) -> HostState:
    """A newer revision this host does not apply, and why: its ``plan`` when its plan's
    errors block it; before any plan of it, the plan of the same revision stands."""
    same = s.blocked is not None and s.blocked.revision == why.revision
    return replace(s, blocked=why, head_plan=plan or (s.head_plan if same else None))


def converged(s: HostState) -> HostState:
    """The head applies: nothing blocked, no blocked revision's plan."""
    return replace(s, blocked=None, head_plan=None)


def cleared(s: HostState) -> HostState:
    """Nothing blocked: the head is planned again (a reload); its last plan still shows."""
    return replace(s, blocked=None)


def paced_by(s: HostState, paced: Paced | None) -> HostState:
    """A plan's paced restarts (``None``: it paces none, the last ones stand), or those
    state.json kept at start."""
    return replace(s, paced=paced or s.paced)


def restored(s: HostState, applied: str, applied_at: Mapping[str, float] | None = None) -> HostState:
    """What state.json (or the marks) said at start: the revision applied last, and when
    each VM was applied (``None``: as it was)."""
    return replace(s, applied=applied, applied_at=s.applied_at if applied_at is None else dict(applied_at))


def recorded(s: HostState, host: Mapping[str, Any]) -> HostState:
    """The revision state.json recorded as applied on this host (its entry, ``host``)."""
    return replace(s, applied=str(host.get("applied_revision", "")))


def reloaded(old: HostState) -> HostState:
    """The same host after a configuration reload: what it knew (its revisions, its
    copies, the prune guard's memory), nothing blocked (the head is planned again under the
    new configuration), its connection as it is found, nothing logged yet."""
    return HostState(
        old.applied, None, None, None, old.status, old.rows, old.applied_at,
        copies=old.copies, managed=old.managed, window=old.window, prune_refused=old.prune_refused,
    )  # fmt: skip


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


def read(s: HostState, copies: Iterable[str]) -> HostState:
    """Its domains were read: ours are ``copies`` (this cycle's error, if any, is gone)."""
    return replace(s, reachable=True, down=None, copies=_names(s, copies))


def last_copies(s: HostState, copies: Iterable[str]) -> HostState:
    """Our domains on this host as state.json last knew them (until the host is read)."""
    return replace(s, copies=_names(s, copies))


def _names(s: HostState, names: Iterable[str]) -> tuple[str, ...]:
    """``names`` sorted, as the managed set's own tuple when they are the same names: a
    fleet's names held once (a tuple, not a set: the copies are only ever listed)."""
    out = tuple(sorted(names))
    return s.managed if out == s.managed and s.managed is not None else out


# -- the prune guard --------------------------------------------------------------------------


def guard_restored(s: HostState, recorded: Any) -> HostState:
    """The prune guard's memory from state.json (this host's entry): the managed set,
    the window and a refusal, each only when well formed."""
    if not isinstance(recorded, dict):
        return s
    managed = recorded.get("managed")
    if isinstance(managed, list) and all(isinstance(n, str) for n in managed):
        s = replace(s, managed=tuple(managed))
    window = recorded.get("prune_window")
    if (
        isinstance(window, dict)
        and isinstance(window.get("since"), int | float)
        and isinstance(window.get("managed"), list)
        and all(isinstance(n, str) for n in window["managed"])
    ):
        s = replace(s, window=(float(window["since"]), tuple(window["managed"])))
    refused = recorded.get("prune_refused")
    if (
        isinstance(refused, dict)
        and isinstance(refused.get("revision"), str)
        and isinstance(refused.get("limit"), int)
    ):
        s = replace(s, prune_refused=refused)
    return s


def window_at(s: HostState, now: float, length_s: float) -> HostState:
    """The prune window at wall time ``now``: one stepped back before its start starts
    now (its prunes still counted), one at or past its end is gone."""
    window = s.window
    if window is not None and now < window[0]:
        window = (now, window[1])
    if window is not None and now - window[0] >= length_s:
        window = None
    return replace(s, window=window)


def refusal(s: HostState, refused: Mapping[str, Any] | None) -> HostState:
    """The prune guard refused (its record), or a success ended the refusal (``None``)."""
    return replace(s, prune_refused=refused)


def applied_managed(s: HostState, managed: tuple[str, ...], now: float, length_s: float) -> HostState:
    """A revision applied, ``managed`` ours now: a window that is not open opens now and
    counts against what was managed before this apply's additions."""
    earlier = s.managed
    if managed == earlier:  # the same names: the tuple held already (the window's too, often)
        managed = earlier
    window = s.window
    if window is None or not 0 <= now - window[0] < length_s:
        window = (now, earlier if earlier is not None else managed)
    return replace(s, managed=managed, window=window)


# -- what was logged --------------------------------------------------------------------------


def logged(
    s: HostState,
    *,
    drift: frozenset[tuple[str, str]] | None = None,
    warned: frozenset[str] | None = None,
    elsewhere: frozenset[tuple[str, str]] | None = None,
) -> HostState:
    """What the log said of the last plan, each not said again while it holds (``None``: as it was)."""
    return replace(
        s,
        drift_logged=s.drift_logged if drift is None else drift,
        warned=s.warned if warned is None else warned,
        elsewhere_logged=s.elsewhere_logged if elsewhere is None else elsewhere,
    )


def left_to_others(s: HostState, other_hosts: tuple[tuple[str, str], ...]) -> HostState:
    """(subject, host) of the VMs the last plan left to other hosts (state.json shows them)."""
    return replace(s, other_hosts=other_hosts)


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
    def head_plan(self) -> Plan | None:
        return self.state.head_plan

    @property
    def paced(self) -> Paced | None:
        return self.state.paced

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

    @property
    def copies(self) -> tuple[str, ...] | None:
        return self.state.copies

    @property
    def managed(self) -> tuple[str, ...] | None:
        return self.state.managed

    @property
    def window(self) -> tuple[float, tuple[str, ...]] | None:
        return self.state.window

    @property
    def prune_refused(self) -> Mapping[str, Any] | None:
        return self.state.prune_refused

    @property
    def drift_logged(self) -> frozenset[tuple[str, str]]:
        return self.state.drift_logged

    @property
    def warned(self) -> frozenset[str]:
        return self.state.warned

    @property
    def elsewhere_logged(self) -> frozenset[tuple[str, str]]:
        return self.state.elsewhere_logged

    @property
    def other_hosts(self) -> tuple[tuple[str, str], ...]:
        return self.state.other_hosts
