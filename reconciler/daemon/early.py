"""Signals from the first instruction of ``reconciler run``: before anything else is
imported, SIGHUP, SIGTERM and SIGINT are caught and kept, so a signal sent while the
daemon starts (a reload right after ``systemctl start``, a stop during start-up) is
neither fatal (SIGHUP's default action ends the process) nor lost.

Input: the process's arguments. Output: ``pending(handler)``, the signals the handler
installed here caught so far; the daemon's own handlers replace it and replay them
(``daemon/main.py``). Imported
first by ``reconciler.cli``; it imports nothing of the project and installs nothing for
the other commands (a signal keeps its default action there).
"""

from __future__ import annotations

import signal
import sys


class _Keeper:
    """The handler of the three signals until the daemon's own: it keeps what arrives.
    Found again through ``signal.getsignal``, so no module keeps the signals itself."""

    __slots__ = ("caught",)

    def __init__(self) -> None:
        self.caught: list[int] = []

    def __call__(self, signum: int, _frame: object) -> None:
        self.caught.append(signum)


def install(argv: list[str]) -> None:
    """Catch the daemon's signals when the command is ``run``."""
    words = [a for a in argv[1:] if not a.startswith("-")]
    if words[:1] != ["run"]:
        return
    keeper = _Keeper()
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, keeper)


def pending(keeper: object) -> list[int]:
    """The signals ``keeper`` caught before the daemon's handlers replaced it (the handler
    ``signal.getsignal`` returned), in order (taken: each once); none for another handler."""
    if not isinstance(keeper, _Keeper):
        return []
    out = list(keeper.caught)
    keeper.caught.clear()
    return out


install(sys.argv)
