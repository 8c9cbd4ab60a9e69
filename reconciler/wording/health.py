"""A VM's health in words: a probe's answer, why a VM is Ready or not, where its address
came from.

Input: ``model/health.py`` records. Output: short text for the status table, the page,
events and notifications ("guestAgentPing: no answer", "not Ready: exec: exit 1").
Pure; nothing reads these words back (the records travel beside them).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.model.health import Answer, Readiness, ReadyReason

_OUTCOME: Mapping[str, str] = MappingProxyType(
    {
        "Passed": "passed",
        "Failed": "failed",
        "NoAgent": "no answer from the guest agent",
        "Timeout": "no answer in time",
        "Refused": "connection refused",
        "NoAddress": "no guest address known",
        "Error": "could not be run",
    }
)
_READY: Mapping[str, str] = MappingProxyType(
    {
        "Running": "running (no readiness probe)",
        "ProbePassed": "readiness probe passed",
        "NotRunning": "not running",
        "ProbePending": "readiness probe not passed yet",
        "ProbeFailed": "readiness probe failing",
    }
)


def answer_words(action: str, answer: Answer | None) -> str:
    """``guestAgentPing: no answer from the guest agent``, ``exec: exit 1``,
    ``httpGet 10.0.0.5:80: HTTP 503`` (``action`` alone before any answer)."""
    if answer is None:
        return f"{action}: no answer yet"
    where = f" {answer.address.address}" if answer.address is not None else ""
    if str(answer.outcome) == "Failed" and answer.code is not None:
        what = f"exit {answer.code}" if action == "exec" else f"HTTP {answer.code}"
    else:
        what = _OUTCOME.get(str(answer.outcome), str(answer.outcome))
    return f"{action}{where}: {what}"


def reason_words(reason: ReadyReason) -> str:
    words = _READY.get(str(reason.kind), str(reason.kind))
    if reason.action is not None and reason.answer is not None:
        return f"{words} ({answer_words(str(reason.action), reason.answer)})"
    return words


def ready_words(readiness: Readiness) -> str:
    """``Ready`` or ``not Ready: <why>``."""
    return "Ready" if readiness.ready else f"not Ready: {reason_words(readiness.reason)}"
