"""What the daemon keeps of the guests its liveness probes ended, across its restart.

Input: a host runner (``ended_by_probe``: domain -> the ID of the run the prober ended)
and the ``hosts.<name>`` entry and ``vms`` rows of ``state.json``. Output: the entry's
``liveness_ended`` (``state``); the runner's ``ended_by_probe`` restored (``restore``: a
daemon started again still reads that run's end as a liveness failure, restarted under
the crash-loop back-off, never as a stop from outside started at once) with each VM's
liveness restarts as its last row counted them (``restarts``), handed to the prober to
count on from. Pure, but for the runner's dict, filled in place (its connection shares it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.model.keys import VMKey

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from reconciler.daemon.prober import Prober
    from reconciler.daemon.runner import HostRunner

KEY = "liveness_ended"


def state(h: HostRunner) -> dict[str, Any]:
    """The ``liveness_ended`` entry of a host in state.json (none: no guest ended unrestarted)."""
    ended = dict(h.ended_by_probe)  # one copy (the prober's thread adds to it)
    return {KEY: ended} if ended else {}


def restored(hosts: Sequence[HostRunner], doc: Mapping[str, Any], prober: Prober) -> Sequence[HostRunner]:
    """``hosts``, each with what ``state.json`` (``doc``) kept of its liveness (``restore``)."""
    for h in hosts:
        restore(h, doc, prober)
    return hosts


def restore(h: HostRunner, doc: Mapping[str, Any], prober: Prober) -> None:
    """From ``state.json`` (``doc``): the guests of ``h`` a liveness probe ended and no
    start has followed yet, and the liveness restarts of its VMs, which ``prober`` counts on from."""
    hosts = doc.get("hosts")
    recorded = hosts.get(h.name) if isinstance(hosts, dict) else None
    kept = recorded.get(KEY) if isinstance(recorded, dict) else None
    if isinstance(kept, dict):
        h.ended_by_probe.update(
            {str(d): run for d, run in kept.items() if isinstance(run, int) and not isinstance(run, bool)}
        )
    prober.keep_restarts(restarts(h.name, doc.get("vms")))


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
