"""What the daemon keeps of the guests its liveness probes ended, across its restart.

Input: a host runner (``ended_by_probe``: domain -> the ID of the run the prober ended)
and the ``hosts.<name>`` entry and ``vms`` rows of ``state.json``. Output: the entry's
``liveness_ended`` (``state``); the runner's ``ended_by_probe`` restored (``restore``: a
daemon started again still reads that run's end as a liveness failure, restarted under
the crash-loop back-off, never as a stop from outside started at once); each VM's
liveness restarts as its last row counted them (``restarts``), which the prober counts
on from. Pure, but for the runner's dict, filled in place (its connection shares it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.model.keys import VMKey

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.daemon.runner import HostRunner

KEY = "liveness_ended"


def state(h: HostRunner) -> dict[str, Any]:
    """The ``liveness_ended`` entry of a host in state.json (none: no guest ended unrestarted)."""
    ended = dict(h.ended_by_probe)  # one copy (the prober's thread adds to it)
    return {KEY: ended} if ended else {}


def restore(h: HostRunner, recorded: Any) -> None:
    """The guests a liveness probe ended and no start has followed yet, as state.json kept them."""
    kept = recorded.get(KEY) if isinstance(recorded, dict) else None
    if not isinstance(kept, dict):
        return
    h.ended_by_probe.update(
        {str(d): run for d, run in kept.items() if isinstance(run, int) and not isinstance(run, bool)}
    )


def restarts(host: str, rows: Any) -> Mapping[VMKey, int]:
    """Each VM of ``host``'s liveness restarts, as its last row in state.json counted them."""
    if not isinstance(rows, list):
        return {}
    out = {}
    for r in rows:
        if not isinstance(r, dict) or r.get("host") not in (host, "", None):
            continue
        count, name = r.get("liveness_restarts"), r.get("name")
        if isinstance(count, int) and not isinstance(count, bool) and count > 0 and isinstance(name, str):
            out[VMKey.from_domain(name)] = count
    return out
