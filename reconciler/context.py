"""The caller-owned context of a run: the clock (and, as the stages take them, the caches
and the mapper of per-item work).

Input: nothing. Output: ``Clock`` and ``SystemClock``. The CLI, the daemon and tests
create what they need and pass it down explicitly; no module of ``reconciler`` keeps
state of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    """Time as the daemon reads it: the wall clock for records people read, the monotonic
    clock for every timer, back-off and deadline (a wall-clock step moves neither)."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds of a clock that never steps backwards."""
        ...


@dataclass(frozen=True, slots=True)
class SystemClock:
    """The process's real clocks."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()
