"""Failures grouped by cause: one line per cause with a count, not one per VM.

Input: failed ``ApplyResult``s. Output: a short summary text for the reconcile's
message (state file, log line, ``/healthz``). Pure. When a host goes away in the
middle of an apply every remaining change fails the same way; listing each of them
made a 10 KB line nobody reads.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model import ApplyResult

MAX_CAUSES = 5
MAX_NAMES = 3
MAX_CAUSE_CHARS = 300


def _cause(r: ApplyResult) -> str:
    """The message with the VM's own name taken out, so equal causes compare equal."""
    name = r.subject.split("/", 1)[-1]
    text = r.message
    if name:
        text = re.sub(rf"(?<![\w.-]){re.escape(r.subject)}(?![\w.-])", "<vm>", text)
        text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", "<vm>", text)
    return text[:MAX_CAUSE_CHARS]


def summarize(failed: Sequence[ApplyResult]) -> str:
    """``"<cause> (1 VM: vm/a)"``, or ``"<cause> (116 VMs: vm/a, vm/b, vm/c and 113 more)"``, per cause."""
    if not failed:
        return ""
    groups: dict[str, list[str]] = {}
    for r in failed:
        groups.setdefault(_cause(r), []).append(r.subject)
    if len(groups) == len(failed) and len(failed) <= MAX_CAUSES:
        return "; ".join(r.message[:MAX_CAUSE_CHARS] for r in failed)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    parts = []
    for cause, subjects in ordered[:MAX_CAUSES]:
        shown = ", ".join(subjects[:MAX_NAMES])
        more = f" and {len(subjects) - MAX_NAMES} more" if len(subjects) > MAX_NAMES else ""
        noun = "VM" if len(subjects) == 1 else "VMs"
        parts.append(f"{cause} ({len(subjects)} {noun}: {shown}{more})")
    rest = ordered[MAX_CAUSES:]
    if rest:
        parts.append(f"{sum(len(s) for _, s in rest)} more VMs failed for {len(rest)} other causes")
    return "; ".join(parts)
