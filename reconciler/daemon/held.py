"""A revision a host holds back from: why (``Blocked``), and the last applied revision
enforced meanwhile (``enforceable``, ``held_rows``).

Input: a blocked revision's reason and words, a planned revision, a host's rows.
Output: the records and rows the runner keeps and shows while it holds. Pure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from reconciler.wording import outcome

if TYPE_CHECKING:
    from reconciler.daemon.hoststate import Blocked
    from reconciler.model.results import VMStatus
    from reconciler.plan.planned import PlannedRevision


class Unenforced(Exception):  # a signal inside the runner's _pass, never raised out of it
    def __init__(self, why: Blocked) -> None:
        super().__init__(why.message)
        self.why = why


def enforceable(planned: PlannedRevision) -> PlannedRevision:
    """The last applied revision as enforcement applies it: a VM the host meets with an
    error now (a name taken, a comparison that fails) is skipped, the others enforced."""
    return replace(planned, errors=()) if planned.plan.changes else planned


def held_rows(rows: tuple[VMStatus, ...], applied: str, why: Blocked) -> tuple[VMStatus, ...]:
    """Rows of the enforced revision: each says it is held there, and why."""
    return tuple(
        replace(r, message=outcome.held_row(applied, why.revision, why.reason, r.message)) for r in rows
    )
