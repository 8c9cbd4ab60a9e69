"""The VM table ``reconciler status`` prints: one row per VM, kubectl's AGE.

Input: ``VMStatus`` rows and the time now. Output: text. Pure.
"""

from __future__ import annotations

import time
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from reconciler.model.results import VMStatus


def format_table(rows: Iterable[VMStatus], now: float | None = None) -> str:
    header = (
        "NAME",
        "HOST",
        "STRATEGY",
        "STATE",
        "READY",
        "SYNC",
        "REVISION",
        "APPLIED",
        "AGE",
        "RESTART",
        "MESSAGE",
    )
    at = time.time() if now is None else now
    table = [header]
    for r in rows:
        table.append(
            (
                r.name,
                r.host,
                r.run_strategy,
                r.state,
                "-" if r.ready is None else "yes" if r.ready else "no",
                r.sync,
                r.revision,
                time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(r.applied_at)) if r.applied_at else "-",
                age(at - r.applied_at) if r.applied_at else "-",
                "yes" if r.restart_required else "",
                "; ".join(
                    [r.message] * bool(r.message)
                    + [NOTICE_WORDS.get(k, k) for k, _ in r.notes]
                    + [r.probe] * bool(r.probe and r.ready is False)
                ),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    lines = []
    for row in table:
        cells = [row[i].ljust(widths[i]) for i in range(len(widths))] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


# The table's word for each notice (the whole warning is in ``status -o json``'s ``notes``).
NOTICE_WORDS: Mapping[str, str] = MappingProxyType(
    {
        "pinned-revision": "pinned: git holds a newer instancetype/preference (roll forward: see -o json)",
        "disk-not-resized": "disk size in git not applied (see -o json)",
    }
)


def age(seconds: float) -> str:
    """kubectl's AGE: 45s, 12m, 5h, 3d."""
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"
