"""An import in words: what ``reconciler import`` says of each domain or object it read.

Input: the values of an import's outcomes (where each came from and went, its notes, why
one was left out) and their counts. Output: a line each and the closing summary
(``Import: 2 imported (1 adjusted), 1 left out.``), which ``cli.adopt`` lays out. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence


def imported(source: str, path: str, notes: Sequence[str]) -> str:
    """A domain (or object) imported to ``path``, with what was adjusted on the way."""
    note = f" ({'; '.join(notes)})" if notes else ""
    return f"imported  {source} -> {path}{note}"


def left_out(source: str) -> str:
    return f"left out  {source}"


def note(text: str) -> str:
    return f"note: {text}"


def summary(imported: int, adjusted: int, left_out: int) -> str:
    return f"Import: {imported} imported ({adjusted} adjusted), {left_out} left out."
