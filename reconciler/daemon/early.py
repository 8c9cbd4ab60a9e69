"""Signals from the first instruction of ``reconciler run``: before anything else is
imported, SIGHUP, SIGTERM and SIGINT are caught and kept, so a signal sent while the
daemon starts (a reload right after ``systemctl start``, a stop during start-up) is
neither fatal (SIGHUP's default action ends the process) nor lost.

Input: the process's arguments. Output: ``pending()``, the signals caught so far; the
daemon's own handlers replace these and replay them (``daemon/main.py``). Imported
first by ``reconciler.cli``; it imports nothing of the project and installs nothing for
the other commands (a signal keeps its default action there).
"""

from __future__ import annotations

import signal
import sys

_CAUGHT: list[int] = []  # process-wide by nature: signals are


def _keep(signum: int, _frame: object) -> None:
    _CAUGHT.append(signum)


def install(argv: list[str]) -> None:
    """Catch the daemon's signals when the command is ``run``."""
    words = [a for a in argv[1:] if not a.startswith("-")]
    if words[:1] != ["run"]:
        return
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _keep)


def pending() -> list[int]:
    """The signals caught before the daemon's handlers, in order (taken: each once)."""
    out = list(_CAUGHT)
    _CAUGHT.clear()
    return out


install(sys.argv)
