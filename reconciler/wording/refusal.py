"""The prune guard's refusal in words: the one place a ``PruneRefusal`` becomes text.

Input: a ``PruneRefusal`` (``model.refusal``). Output: its one line, as the plan's
warning, a held domain's reason, ``Plan`` JSON's ``pruneRefused``, status,
``state.json``, the daemon's log and its events say it. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model.refusal import Guard

if TYPE_CHECKING:
    from reconciler.model.refusal import PruneRefusal

SHORT = 12  # a revision as the refusal names it


def said(r: PruneRefusal) -> str:
    """The refusal's line: what would be deleted, over which limit, and how it is lifted."""
    rev = r.revision[:SHORT]
    hint = (
        f"held for revision {rev} until a new commit, a higher maxPrunePercent or maxPrune, or "
        f"`reconciler apply --confirm-prune {rev}` / policy.confirmPrune: '{rev}'"
    )
    earlier = f" (with {r.gone} pruned earlier in the window)" if r.gone else ""
    match r.guard:
        case Guard.MAX_PRUNE:
            return (
                f"prune refused: {r.prunable} managed domains would be deleted{earlier}, "
                f"more than maxPrune={r.limit}; {hint}"
            )
        case Guard.MAX_PRUNE_PERCENT:
            share = f"{r.total * 100 // r.managed}%" if r.managed else "all"
            return (
                f"prune refused: {r.prunable} of {r.managed} managed domains would be deleted{earlier} "
                f"({share}), more than maxPrunePercent={r.limit}; {hint}"
            )
        case Guard.HELD:
            return f"prune refused earlier for this revision (maxPrunePercent={r.limit}); {hint}"
