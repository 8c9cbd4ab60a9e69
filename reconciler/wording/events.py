"""A notification's words: the message of each event ``daemon.events.detect`` finds.

Input: the values of a host's outcome an event is about (the host, a subject, a reason,
a revision, the fields that drifted, the prune guard's refusal, a count of restarts).
Output: the event's one line, as webhooks, Slack and Alertmanager carry it, and a
commit status's description. Pure: the
daemon decides which events there are; this says them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.wording import refusal
from reconciler.wording.problems import headline

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.model.refusal import PruneRefusal


def unreachable(host: str, error: str) -> str:
    return f"host {host} unreachable: {error}"


def reachable(host: str) -> str:
    return f"host {host} reachable again"


def failed(host: str, reason: str, first_error: str) -> str:
    return f"{host}: {reason}: {first_error}"


def applied(host: str, revision: str) -> str:
    return f"{host}: applied {revision[:12]}"


def failure_over(host: str, was: str, now: str) -> str:
    """A failure (reason ``was``) cleared: reconciles succeed, or fail for another reason."""
    return f"{host}: " + ("reconciles succeed again" if now == "Succeeded" else f"no longer {was}")


def drift_left(subject: str, host: str, paths: Sequence[str]) -> str:
    return f"{subject} on {host}: drift left (selfHeal off): {', '.join(paths)}"


def drift_gone(subject: str, host: str) -> str:
    return f"{subject} on {host}: no drift any more"


def drift_healed(subject: str, host: str, paths: Sequence[str]) -> str:
    return f"{subject} on {host}: drift healed: {', '.join(paths)}"


def prune_refused(host: str, r: PruneRefusal) -> str:
    return f"{host}: {refusal.said(r)}"


def prune_allowed(host: str) -> str:
    return f"{host}: prune no longer refused"


def rollout_halted(host: str, revision: str, halted: str) -> str:
    return f"{host}: revision {revision[:12]}: rollout {halted}"


def rollout_resumed(host: str) -> str:
    return f"{host}: rollout no longer halted"


def crash_loop(subject: str, host: str) -> str:
    return f"{subject} on {host} keeps crashing: restarts wait (CrashLoopBackOff)"


def crash_loop_over(subject: str, host: str) -> str:
    return f"{subject} on {host}: crash loop over"


def crash_restart(subject: str, host: str, n: int) -> str:
    return f"{subject} on {host}: crashed, started again (restart {n})"


def autohealed(subject: str, host: str, why: str) -> str:
    """A pool's replica reprovisioned (``why``: its change's reasons, worded)."""
    return f"{subject} on {host}: {why}"


def rollback(applied: bool, from_rev: str, to_rev: str, why: str) -> str:
    return f"rollback {from_rev[:12]} -> {to_rev[:12]} {'applied' if applied else 'refused'}: {why}"


def readiness(subject: str, host: str, ready: str) -> str:
    """A VM not Ready (or Ready again), ``ready``: its Ready in words (``wording.health``)."""
    return f"{subject} on {host}: {ready}"


def liveness_failed(subject: str, host: str, answer: str) -> str:
    """A guest its liveness probe ended (``answer``: the probe's answer in words)."""
    return (
        f"{subject} on {host}: liveness probe failed ({answer}): guest ended, restarted by its run strategy"
    )


def commit_status(host: str, reason: str, first_error: str) -> str:
    """A commit status's description: ``h1: applied``, ``h1: reconciling`` (no outcome
    yet) or ``h1: BuildFailed: vms/web.yaml:12:5: ...`` (the first error's first line)."""
    if not reason:
        return f"{host}: reconciling"
    if reason == "Succeeded":
        return f"{host}: applied"
    first = headline(first_error)
    return f"{host}: {reason}" + (f": {first}" if first else "")
