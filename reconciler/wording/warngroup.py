"""Warnings once: one line per distinct cause, with the number of VMs and the first few.

Input: warning lines as the stages write them, a VM's own prefixed by its subject
(``vm/<name>: <cause>``). Output: one line per distinct cause, in order of first
appearance; a cause shared by several VMs reads
``<cause> (1000 VMs: vm/a, vm/b, vm/c, ...)``, one VM's warning stays as it was.
Pure.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

FIRST_NAMES = 3

_SUBJECT = re.compile(r"^(?P<subject>vm/[^\s:]+): (?P<cause>.+)$", re.S)


def group(warnings: Iterable[str], first: int = FIRST_NAMES) -> tuple[str, ...]:
    """One line per distinct cause (see the module doc)."""
    causes: dict[str, list[str]] = {}  # cause (or a whole line without subject) -> subjects
    for w in warnings:
        m = _SUBJECT.match(w)
        if m is None:
            causes.setdefault(w, [])
            continue
        subjects = causes.setdefault(m["cause"], [])
        if m["subject"] not in subjects[-1:]:
            subjects.append(m["subject"])
    out: list[str] = []
    for cause, subjects in causes.items():
        names = list(dict.fromkeys(subjects))
        if not names:
            out.append(cause)
        elif len(names) == 1:
            out.append(f"{names[0]}: {cause}")
        else:
            shown = ", ".join(names[:first]) + (", ..." if len(names) > first else "")
            out.append(f"{cause} ({len(names)} VMs: {shown})")
    return tuple(out)
