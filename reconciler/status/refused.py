"""The prune guard's refusal as ``state.json`` keeps it: its record, worded when shown.

Input: a ``PruneRefusal`` with what the guard holds it by (the ``maxPrunePercent`` in
force, the domains it would delete), or a host's ``prune_refused`` entry of the file.
Output: the entry (``kept``: ``revision`` and ``limit``, which the guard reads back as
``PlanPolicy.prune_held``, ``would_prune`` and ``refusal``, the record's fields); the
record read back (``recorded``); and the entry worded where it is shown (``shown``:
``status -o json``; ``message``: the page), by ``wording.refusal``. An entry written
by an older version kept the refusal's words (``message``) and no record: it reads, and
is shown, as the refusal it holds for, ``Guard.HELD`` at its revision and limit (how the
guard words a revision it holds refused); its words are never read back. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.model.refusal import Guard, PruneRefusal
from reconciler.wording import refusal as words

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

_COUNTS = ("prunable", "managed", "gone")


def kept(r: PruneRefusal, limit: int, would_prune: Sequence[str]) -> dict[str, Any]:
    """The entry of a refusal: ``limit``, the ``maxPrunePercent`` the guard holds it at."""
    record = {"guard": r.guard.value, "revision": r.revision, "limit": r.limit}
    return {
        "revision": r.revision,
        "limit": limit,
        "would_prune": list(would_prune),
        "refusal": record | {k: getattr(r, k) for k in _COUNTS},
    }


def _record(fields: object) -> PruneRefusal | None:
    """The ``refusal`` of an entry, when well formed."""
    if not isinstance(fields, dict) or fields.get("guard") not in tuple(Guard):
        return None
    numbers = [fields.get("limit"), *(fields.get(k, 0) for k in _COUNTS)]
    if not isinstance(fields.get("revision"), str) or not all(_count(n) for n in numbers):
        return None
    counts = {k: int(fields.get(k, 0)) for k in _COUNTS}
    return PruneRefusal(Guard(fields["guard"]), fields["revision"], int(fields["limit"]), **counts)


def _count(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool)


def recorded(entry: Mapping[str, Any]) -> PruneRefusal:
    """The refusal of a well-formed entry (``revision`` and ``limit`` read by the guard)."""
    record = _record(entry.get("refusal"))
    if record is not None:
        return record
    return PruneRefusal(Guard.HELD, str(entry["revision"]), int(entry["limit"]))  # an older version's


def shown(host: Any) -> Any:
    """A host's entry of ``state.json`` as ``status -o json`` shows it: its refusal worded
    (``revision``, ``limit``, ``message``, ``would_prune``), the record left out."""
    entry = host.get("prune_refused") if isinstance(host, dict) else None
    if not isinstance(entry, dict) or not (said := message(entry)):
        return host  # none, or one not well formed: as it is
    worded = {"revision": entry["revision"], "limit": entry["limit"], "message": said}
    if "would_prune" in entry:
        worded["would_prune"] = entry["would_prune"]
    return {**host, "prune_refused": worded}


def message(entry: Mapping[str, Any] | None) -> str:
    """The refusal's words (``""``: none, or an entry not well formed)."""
    if not entry or not isinstance(entry.get("revision"), str) or not isinstance(entry.get("limit"), int):
        return ""
    return words.said(recorded(entry))
