"""A host's paced rollout between reconciles: kept in state.json, restored at start, and
said where the team looks (the commit status, state.json, the wait before the next plan).

Input: the runner's ``paced`` (what pacing made of its last plan: batches, progress,
health) and the ``hosts.<name>.rollout`` entry of state.json. Output: the entry written
(``state``), the ``Paced`` restored (``restore``: a daemon restarted mid-rollout resumes
it, a halt stays halted until a new commit), the commit status a revision's health gives
(``commit_state``: pending while Progressing or Degraded, failure when Halted), how soon
a rollout in progress is planned again (``requeue``) and whether ``run --once`` waits or
fails (``progressing``, ``unhealthy``). The runner's readiness source is its ``ready``
(None: Ready = running). I/O: none itself; the daemon writes state.json (statefile.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from reconciler.daemon import forge
from reconciler.model.keys import VMKey
from reconciler.model.rollout import Halt, Health, Paced, RolloutProgress
from reconciler.wording import rollout as words

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from reconciler.context import Clock

POLL_S = 5.0  # a rollout in progress is planned again this often (the next batch, the deadline)
ONCE_TIMEOUT_S = 600.0  # ``run --once`` waits this long for paced restarts by default (--timeout)


class _Looping(Protocol):
    """What ``wait_out`` needs of the daemon."""

    @property
    def hosts(self) -> Sequence[Any]: ...  # the runners, each with its ``paced``

    clock: Clock
    triggers: Any  # ``sleep(seconds) -> bool``: True when woken (a stop asked)
    keep_plans: bool

    def cycle(self, fetch: bool, force: bool) -> None: ...


def once(daemon: _Looping, timeout_s: float) -> list[Paced | None]:
    """``run --once``: one reconcile (its plans kept to print), then, while a host's
    restarts are paced, another every ``POLL_S`` up to ``timeout_s``; the hosts' rollouts."""
    daemon.keep_plans = True
    daemon.cycle(fetch=True, force=True)
    end = daemon.clock.monotonic() + timeout_s
    while progressing(h.paced for h in daemon.hosts) and daemon.clock.monotonic() < end:
        if daemon.triggers.sleep(min(POLL_S, max(end - daemon.clock.monotonic(), 0.0))):
            break  # asked to stop
        daemon.cycle(fetch=False, force=True)
    return [h.paced for h in daemon.hosts]


def progressing(found: Iterable[Paced | None]) -> bool:
    return any(p is not None and p.health == Health.PROGRESSING for p in found)


def unhealthy(found: Iterable[Paced | None]) -> bool:
    """A host whose rollout halted or still progresses (``run --once`` exits 1)."""
    return any(p is not None and p.health in (Health.HALTED, Health.PROGRESSING) for p in found)


def requeue(found: Iterable[Paced | None]) -> list[tuple[float, str]]:
    """(seconds, why) for each rollout in progress: planned again soon, so the next batch
    starts once the last is Ready and a missed deadline halts it."""
    return [(POLL_S, words.pacing_wait(p)) for p in found if p is not None and p.health == Health.PROGRESSING]


def state(paced: Paced | None) -> dict[str, Any]:
    """The ``rollout`` entry of a host in state.json (none: nothing paced yet)."""
    if paced is None or not paced.progress.revision:
        return {}
    progress = paced.progress
    out: dict[str, Any] = {
        "revision": progress.revision,
        "health": str(paced.health),
        "message": words.health(paced),
        "batch": [k.domain for k in progress.batch],
        "started_at": progress.started_at,
        "batches": [[k.domain for k in b.keys] for b in paced.batches],
        "waiting": [k.domain for k in paced.waiting],
        "not_ready": [k.domain for k in paced.not_ready],
    }
    if progress.healthy:
        out["healthy_revision"] = progress.healthy
    if progress.halt is not None:
        h = progress.halt
        out["halt"] = {"vm": h.key.domain, "after_s": h.after_s, "cause": h.cause, "at": h.at}
        out["reverted"] = [k.domain for k in progress.reverted]
    return {"rollout": out}


def _names(value: Any) -> tuple[VMKey, ...] | None:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        return None
    return tuple(VMKey.from_domain(n) for n in value)


def restore(recorded: Any) -> Paced | None:
    """The rollout state.json kept for a host (None: none, or not readable as one)."""
    r = recorded.get("rollout") if isinstance(recorded, dict) else None
    if not isinstance(r, dict) or not isinstance(r.get("revision"), str):
        return None
    batch, waiting, not_ready = _names(r.get("batch")), _names(r.get("waiting")), _names(r.get("not_ready"))
    started = r.get("started_at")
    if batch is None:
        return None
    halt = None
    h = r.get("halt")
    if isinstance(h, dict) and isinstance(h.get("vm"), str) and isinstance(h.get("after_s"), int | float):
        at = h.get("at")
        halt = Halt(
            VMKey.from_domain(h["vm"]),
            float(h["after_s"]),
            str(h.get("cause") or ""),
            float(at) if isinstance(at, int | float) else 0.0,
        )
    progress = RolloutProgress(
        revision=r["revision"],
        batch=batch,
        started_at=float(started) if isinstance(started, int | float) else 0.0,
        halt=halt,
        reverted=_names(r.get("reverted")) or (),
        healthy=str(r.get("healthy_revision") or ""),
    )
    try:
        health = Health(str(r.get("health")))
    except ValueError:
        health = Health.HALTED if halt is not None else Health.PROGRESSING
    return Paced(progress=progress, health=health, waiting=waiting or (), not_ready=not_ready or ())


def halted(paced: Paced | None) -> str:
    """Where and why a host's rollout halted, in words ("" not halted): its event."""
    if paced is None or paced.progress.halt is None:
        return ""
    return words.health_detail(paced)


def page(paced: Paced | None) -> dict[str, str] | None:
    """The revision's health on the status page and in /api/status (None: nothing paced)."""
    if paced is None:
        return None
    return {
        "revision": paced.progress.revision,
        "health": str(paced.health),
        "message": words.health_detail(paced),
    }


def commit_state(paced: Paced | None, revision: str) -> tuple[str, str, str] | None:
    """The commit status a revision's health gives on a host that applied it: (state,
    health, its words), or None when it is Healthy or nothing says its health."""
    if paced is None or paced.progress.revision != revision:
        return None
    if paced.health == Health.HALTED:
        return forge.FAILURE, str(paced.health), words.health_detail(paced)
    if paced.health in (Health.PROGRESSING, Health.DEGRADED):
        return forge.PENDING, str(paced.health), words.health_detail(paced)
    return None
