"""Ancestry: a new head that does not descend from the last applied commit is a rollback.

Input: the last applied commit, the new head, whether git says one descends from the
other, and the policy (``allowRollback``, ``confirmRollback``). Output: a
``Rollback`` record (what the log, the state file and ``status`` show) or None.
Pure: the git question is answered by the caller (``GitSource.is_ancestor``).

A force-push that moves the branch back (or sideways, to a history that does not
contain the applied commit) would otherwise revert VMs silently. By default it is
applied with a loud warning; with ``allowRollback: false`` it is refused until
``confirmRollback`` names the new head. A head of a history unrelated to the applied
one (no common commit: another repository force-pushed over this one) is refused
whatever ``allowRollback`` says, until ``confirmRollback`` names it. Signature
verification still runs on the head as on any other revision. While a rollback is
refused the hosts enforce the last applied revision (runner.py).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from reconciler.records import dataclass
from reconciler.wording import outcome

if TYPE_CHECKING:
    from reconciler.config.daemon import Policy

APPLIED = "applied"
REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Rollback:
    from_revision: str  # the last applied commit
    to_revision: str  # the new head, which does not descend from it
    decision: str  # APPLIED or REFUSED
    why: str  # the decision in words (``wording.outcome``), as state.json, /healthz and the page show it
    detected_at: float = 0.0

    @property
    def refused(self) -> bool:
        return self.decision == REFUSED

    def message(self) -> str:
        return outcome.rollback(self.from_revision, self.to_revision, self.why)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def confirmed(policy: Policy, head: str) -> bool:
    want = policy.confirm_rollback.lower()
    return len(want) >= 7 and head.lower().startswith(want)


def decide(
    applied: str, head: str, descends: bool | None, policy: Policy, now: float, related: bool | None = True
) -> Rollback | None:
    """None when ``head`` is no rollback (it descends from ``applied``, is ``applied``, or
    ``applied`` is unknown to the repository: nothing to compare with); ``now`` (wall
    time) is when it was detected; ``related``: whether the two share any history."""
    if not applied or head == applied or descends is None or descends:
        return None
    if related is False and not confirmed(policy, head):  # confirmed: said below
        return Rollback(applied, head, REFUSED, outcome.rollback_unrelated(head), now)
    if policy.allow_rollback and related is not False:
        return Rollback(applied, head, APPLIED, outcome.ROLLBACK_ALLOWED, now)
    if confirmed(policy, head):
        why = outcome.rollback_confirmed(related is False, policy.confirm_rollback)
        return Rollback(applied, head, APPLIED, why, now)
    return Rollback(applied, head, REFUSED, outcome.rollback_refused(head), now)
