"""A daemon subprocess whose wall clock a test steps (libfaketime, Debian's ``faketime``).

Input: a directory for the offset file and a ``sitecustomize``. Output: the environment
that preloads libfaketime with its offset read from a file (``Stepped.step`` rewrites
it), the monotonic clock left real as a clock step leaves it.
"""

from __future__ import annotations

from pathlib import Path

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
# libfaketime 0.9.10 with the monotonic clock left real fails an absolute
# ``clock_nanosleep`` on it (EINVAL), which is how ``time.sleep`` waits: the daemon's
# sleeps go through select() instead, which it leaves alone.
SLEEP_BY_SELECT = """\
import select, time
time.sleep = lambda seconds: select.select([], [], [], seconds) and None
"""


class Stepped:
    """The wall clock of the processes started with ``env``: real until ``step``."""

    def __init__(self, where: Path) -> None:
        assert LIBFAKETIME.exists(), "Debian package faketime (scripts/setup installs it)"
        self.offset = where / "faketime"
        self.offset.write_text("+0\n")
        site = where / "site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(SLEEP_BY_SELECT)
        self.env = {
            "PYTHONPATH": str(site),
            "LD_PRELOAD": str(LIBFAKETIME),
            "FAKETIME_TIMESTAMP_FILE": str(self.offset),
            "FAKETIME_CACHE_DURATION": "1",
            "DONT_FAKE_MONOTONIC": "1",
        }

    def step(self, seconds: int) -> None:
        """The wall clock at real time plus ``seconds`` (negative: behind), read within 1 s."""
        self.offset.write_text(f"{seconds:+d}\n")
