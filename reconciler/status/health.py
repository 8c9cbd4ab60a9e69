"""A VM's health as ``reconciler status`` shows it: the daemon's last word, read back.

Input: a VM's row of ``state.json`` (written by the daemon, its Ready fields from the
prober) and whether its domain runs now. Output: the ``VMStatus`` fields of its health.
Pure. A domain that does not run is not Ready, whatever the row said.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.model.health import ReadyKind

if TYPE_CHECKING:
    from collections.abc import Mapping


def recorded_health(prev: Mapping[str, Any], running: bool) -> dict[str, Any]:
    """The daemon's word on a VM's health (its last row), while the domain still runs; a
    domain that does not run is not Ready whatever the row said."""
    if not isinstance(prev.get("ready"), bool):
        return {}
    kept = {
        "probe": str(prev.get("probe", "")),
        "address": str(prev.get("address", "")),
        "address_source": str(prev.get("address_source", "")),
        "liveness_restarts": int(prev.get("liveness_restarts") or 0),
    }
    if not running:
        return {**kept, "ready": False, "ready_reason": str(ReadyKind.NOT_RUNNING)}
    return {
        **kept,
        "ready": bool(prev["ready"]),
        "ready_reason": str(prev.get("ready_reason", "")),
        "ready_since": float(prev["ready_since"])
        if isinstance(prev.get("ready_since"), int | float)
        else 0.0,
    }
