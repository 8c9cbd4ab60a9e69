"""Paced restarts in words: a restart that waits for its batch, a staged pool, a halt,
the batches a plan shows and a revision's health.

Input: the rollout's records (``model.rollout``). Output:
text for plan lines, status, the page, events, notifications and the commit status.
Pure. The records travel as values; only these functions make words of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model import VMKey
    from reconciler.model.rollout import Batch, Halt, Paced


def _names(keys: Sequence[VMKey]) -> str:
    return ", ".join(k.domain for k in keys)


def duration(seconds: float) -> str:
    """``10m``, ``90s``, ``1h5m``: how long a batch waited."""
    s = int(seconds)
    if s < 120 and s % 60:
        return f"{s}s"
    h, m = divmod(s // 60, 60)
    return f"{h}h{m}m" if h and m else f"{h}h" if h else f"{m}m"


def staged(strategy: str) -> str:
    return f"staged (pool updateStrategy {strategy}): RestartRequired until the guest restarts"


def waiting(number: int, total: int, after: Sequence[VMKey]) -> str:
    then = f", after {_names(after)} {'is' if len(after) == 1 else 'are'} Ready" if after else ""
    return f"the restart waits: batch {number} of {total}{then}"


def unready_cause(restarted: bool, state: str) -> str:
    """Why a VM of a batch is not Ready when its readiness source says nothing more."""
    if not restarted:
        return "still running its old definition"
    return "" if state == "running" else f"domain {state}"


def halt(h: Halt) -> str:
    """``halted at vm/web-1: not Ready after 10m (guestAgentPing: no answer)``."""
    cause = f" ({h.cause})" if h.cause else ""
    return f"halted at {h.key.subject}: not Ready after {duration(h.after_s)}{cause}"


def reverting(keys: Sequence[VMKey], revision: str) -> str:
    """The log line of ``policy.onFailure: revert``."""
    return f"rollout halted: {_names(keys)} back to the last healthy revision {revision[:12]}"


def held_by_halt(h: Halt) -> str:
    return f"the restart waits: rollout {halt(h)}"


def batches(found: Sequence[Batch]) -> str:
    """``restart in 3 batches of 1: web-0, web-1, web-2; each waits for Ready (running)``."""
    if not found:
        return ""
    sizes = sorted({len(b.keys) for b in found})
    of = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    waits = sorted({b.waits_for for b in found})
    plural = "batch" if len(found) == 1 else "batches"
    listed = (", " if sizes == [1] else " | ").join(_names(b.keys) for b in found)
    return f"restart in {len(found)} {plural} of {of}: {listed}; each waits for Ready ({', '.join(waits)})"


def autohealed(failures: int, threshold: int, failing_s: float, min_failing_s: float) -> str:
    """Why a pool's replica is reprovisioned (its ``autohealing``), and what that does."""
    if failures >= threshold:
        why = f"{failures} failed starts in a row (startUpFailureThreshold {threshold})"
    else:
        why = f"failing to start for {duration(failing_s)} (minFailingToStartDuration {duration(min_failing_s)})"
    return (
        f"autohealing: {why}: reprovisioned from the pool's template, its disks recreated from their sources"
    )


def reprovisioned(removed: Sequence[str]) -> str:
    """What a reprovision removed before the disks were made again."""
    return (
        f"reprovisioned: {len(removed)} disk(s) removed and made again ({', '.join(removed)})"
        if removed
        else ""
    )


def health(p: Paced) -> str:
    """The revision's health on the host, with what it waits for or where it halted."""
    detail = health_detail(p)
    return f"{p.health}: {detail}" if detail else str(p.health)


def pacing_wait(p: Paced) -> str:
    """Why the daemon plans again soon while a rollout progresses: the revision and what it waits for."""
    return f"paced restarts of {p.progress.revision[:12]}: {health_detail(p)}"


def health_detail(p: Paced) -> str:
    """What a revision that is not Healthy waits for, or where it halted ("" Healthy)."""
    if p.progress.halt is not None and p.progress.reverted:
        back = f"; {_names(p.progress.reverted)} reverted to {p.progress.healthy[:12]}"
        return halt(p.progress.halt) + back
    if p.progress.halt is not None:
        return halt(p.progress.halt)
    if p.progress.batch:
        return f"waiting for {_names(p.progress.batch)} to be Ready"
    if p.waiting:
        return f"{len(p.waiting)} restart(s) waiting for their batch"
    if p.not_ready:
        return f"not Ready: {_names(p.not_ready)}"
    return ""


def plan_lines(p: Paced | None) -> list[str]:
    """The plan's lines for its paced restarts: the batches, a halt, staged pools."""
    if p is None:
        return []
    out = []
    if p.batches:
        out.append(f"  rollout: {batches(p.batches)}")
    if p.progress.halt is not None:
        out.append(f"  rollout: {halt(p.progress.halt)}: no restart until a new commit")
    return out
