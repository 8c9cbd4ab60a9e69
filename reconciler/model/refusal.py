"""The prune guard's refusal as a record: which guard refused the prunes of a revision,
with the counts and the limit its words name.

Input: nothing. Output: ``PruneRefusal`` and its ``Guard`` kinds. Pure. The guard
(``ownership.guard.judge``) makes it; ``Plan.prune_refused``, the reasons of the
domains it holds back (``Why.LEFT_GUARDED``, ``Why.MOVE_REFUSED``) and the daemon's
outcome carry it; ``reconciler.wording.refusal`` alone says it. Each kind fills only the
fields its words name, so two refusals compare equal exactly when they read the same.
"""

from __future__ import annotations

import enum

from reconciler.records import dataclass


class Guard(enum.StrEnum):
    """The limit that refused: ``PruneRefusal.limit`` holds its value."""

    MAX_PRUNE = "maxPrune"  # prunable (+ gone) over the count
    MAX_PRUNE_PERCENT = "maxPrunePercent"  # prunable (+ gone) of managed over the percentage
    HELD = "held"  # refused earlier for this revision, at the maxPrunePercent in ``limit``


@dataclass(frozen=True, slots=True)
class PruneRefusal:
    """Why the prunes (and moves out) of ``revision`` do not go ahead."""

    guard: Guard
    revision: str
    limit: int
    prunable: int = 0  # domains the revision would undefine here
    managed: int = 0  # the owner's managed domains the guard counts against (MAX_PRUNE_PERCENT)
    gone: int = 0  # domains of the window's base already pruned (or gone) within the window

    @property
    def total(self) -> int:
        """The deletions counted against the limit: this revision's and the window's."""
        return self.prunable + self.gone
