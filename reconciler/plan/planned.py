"""A planned revision: one host's plan as a value, with what it was computed against.

Input: a ``Plan``, the live domains it was planned against, the host's target (URI,
host config with the policy applied, plan policy) and the revision. Output: a
``PlannedRevision``, which ``plan`` prints, ``plan --out`` saves (``plan/saved.py``)
and ``reconcile.apply_planned`` applies as it is; the ``Fingerprint`` of every domain a
change touches, and, given those domains read again, what changed since
(``changed_since``); which changes need consent (``needs_consent``: a stop, restart
or delete, or an adoption, ``takes_over``); and, given a domain as read just before
apply defines or deletes it, why its ownership mark forbids that
(``ownership_refusal``). Pure: never reads the host; the caller passes what it read.
"""

from __future__ import annotations

import hashlib
from dataclasses import field, replace
from typing import TYPE_CHECKING

from reconciler import ownership
from reconciler.model import LiveDomain, Problem  # noqa: TC001 (plan/saved.py reads the annotations)
from reconciler.model.changes import Action, Change, Plan
from reconciler.model.keys import VMKey
from reconciler.model.results import Reason
from reconciler.records import dataclass
from reconciler.settings import windows
from reconciler.wording import plan_lines as words

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from reconciler.settings.host import HostConfig
    from reconciler.settings.policy import PlanPolicy


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a plan assumed of one live domain: its power state and the digests of its
    persistent and running definitions (the ownership mark is part of the former)."""

    state: str
    definition: str  # sha256 of the persistent XML
    running: str = ""  # sha256 of the running XML; "" when not running


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest() if text else ""


def fingerprint(d: LiveDomain) -> Fingerprint:
    return Fingerprint(str(d.state), _digest(d.persistent_xml), _digest(d.live_xml))


@dataclass(frozen=True, slots=True)
class PlannedRevision:
    """The plan of one revision for one host, and everything it was computed against.

    ``live`` holds, for every domain a change touches, its fingerprint when it was
    planned (``None``: no such domain then). Apply runs ``plan`` as it is; a saved plan
    is applied only while the host still matches ``live``.
    """

    plan: Plan
    uri: str
    host: str  # the host's name (kubernetes.io/hostname)
    config: HostConfig  # the host config, with the daemon-wide policy applied
    policy: PlanPolicy
    revision: str  # the commit
    entry: str = ""
    repo: str = ""  # where the revision was read (a path or URL; "" unknown)
    live: Mapping[str, Fingerprint | None] = field(default_factory=dict)
    planned_at: float = 0.0  # epoch seconds
    plan_ms: int = 0  # how long reading the host and planning took
    errors: tuple[Problem, ...] = ()  # the revision's errors here (host_errors too): nothing is applied
    reason: Reason = Reason.SUCCEEDED  # why the revision failed (with ``errors``)
    host_errors: tuple[Problem, ...] = ()  # of ``errors``, the VMs of this host it cannot run

    @property
    def touched(self) -> tuple[Change, ...]:
        """The changes that do something."""
        return tuple(c for c in self.plan.changes if not c.is_noop)


def touched_fingerprints(plan: Plan, live: Iterable[LiveDomain]) -> dict[str, Fingerprint | None]:
    """The fingerprint of every domain a change of ``plan`` touches (``None``: absent)."""
    by_name = {d.name: d for d in live}
    out: dict[str, Fingerprint | None] = {}
    for c in plan.changes:
        if not c.is_noop:
            d = by_name.get(c.name)
            out[c.name] = fingerprint(d) if d is not None else None
    return out


def stops_a_vm(c: Change) -> bool:
    """Whether applying ``c`` deletes, restarts or stops a VM (these need consent)."""
    return c.stop or c.action in (Action.RESTART, Action.DELETE)


def takes_over(c: Change) -> bool:
    """Whether applying ``c`` takes over a domain its owner did not define: an adoption of
    an unmanaged domain, or of one another owner marked (it redefines what someone else
    made, often a running guest)."""
    if c.action == Action.ADOPT:
        return True
    d, live = c.desired, c.live
    return (
        d is not None
        and d.adopt
        and live is not None
        and c.definition is not None
        and (live.mark is None or live.mark.owner != c.definition.mark.owner)
    )


def needs_consent(c: Change) -> bool:
    """Whether applying ``c`` needs consent: it deletes, restarts or stops a VM, or takes
    over a domain (``apply`` asks on a terminal; elsewhere it needs ``--yes``)."""
    return stops_a_vm(c) or takes_over(c)


def ownership_refusal(c: Change, now: LiveDomain | None) -> str:
    """Why apply may not define or delete ``c``'s domain, given the domain as read just
    before (``now``; "" when it may): the ownership mark decides, whatever the plan says.
    A domain created meanwhile is not created over; an unmanaged domain, or one of
    another owner, is touched only by an adoption; a mark whose owner changed since the
    plan read it is left alone."""
    if now is None:
        return "" if c.action != Action.DELETE else words.UNDEFINED_SINCE
    if c.live is None:
        return words.DEFINED_SINCE
    adopt = c.desired is not None and c.desired.adopt
    if now.mark is None and not adopt:
        return words.NOT_MANAGED
    theirs = c.live.mark.owner if c.live.mark is not None else ""  # as the plan read it
    if not adopt and c.definition is not None and theirs not in ("", c.definition.mark.owner):
        return words.ANOTHER_OWNER
    planned = ownership.read_mark(c.live.persistent_xml) if c.live.persistent_xml else c.live.mark
    if (planned.owner if planned else None) != (now.mark.owner if now.mark else None):
        return words.MARK_CHANGED
    return ""


def changed_since(planned: PlannedRevision, now: Mapping[str, LiveDomain | None]) -> tuple[str, ...]:
    """One line per touched domain that differs from what the plan assumed, given the
    domains read again (``now``: by name, ``None`` for absent)."""
    subjects = {c.name: c.subject for c in planned.plan.changes}
    out: list[str] = []
    for name, was in sorted(planned.live.items()):
        d = now.get(name)
        cur = fingerprint(d) if d is not None else None
        if cur == was:
            continue
        who = subjects.get(name) or VMKey.from_domain(name).subject
        if was is None:
            out.append(words.defined_since(who))
        elif cur is None:
            out.append(words.undefined_since(who))
        elif cur.state != was.state:
            out.append(words.state_since(who, was.state, cur.state))
        elif cur.definition != was.definition:
            out.append(words.definition_since(who))
        else:
            out.append(words.running_since(who))
    return tuple(out)


def with_live(planned: PlannedRevision, now: Mapping[str, LiveDomain | None]) -> PlannedRevision:
    """``planned`` with each touched change's live domain as read again (a saved plan
    holds fingerprints, not domains; apply reads the marks and addresses it carries)."""
    changes = tuple(
        replace(c, live=now.get(c.name)) if c.name in planned.live else c for c in planned.plan.changes
    )
    return replace(planned, plan=replace(planned.plan, changes=changes))


def closed_windows(planned: PlannedRevision, now: float) -> tuple[str, ...]:
    """One line per restart the plan decided inside a restart window that is closed at
    ``now`` (a saved plan applied later must not restart outside its window)."""
    out = []
    for c in planned.plan.changes:
        d = c.desired
        if c.action != Action.RESTART or d is None or d.restart_now or planned.policy.restart_now:
            continue
        ws = d.restart_windows or planned.policy.restart_windows
        if ws and not windows.gate(ws, now).open:
            out.append(words.window_closed(c.subject))
    return tuple(out)
