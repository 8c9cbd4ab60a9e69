"""A clock for tests: it moves only when the test says so.

Input: a start (wall and monotonic seconds). Output: ``FakeClock``, a
``reconciler.context.Clock`` whose ``advance`` moves both times together. Never reads
the system's clock after it is created.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


def _now() -> float:
    return float(int(time.time()))


@dataclass
class FakeClock:
    """Wall time starts at the real time the clock is made (ages and restart windows read
    as today's), monotonic time at an arbitrary 1000 s; neither moves until ``advance``."""

    wall: float = field(default_factory=_now)
    mono: float = 1000.0

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds
