"""Pure per-item work spread over forked processes (the CLI's builds use every core).

Input: a list of items, a function of one item, and the number of processes. Output:
the function's results in item order, exactly what a loop in this process returns.
Each forked child computes a share of the items on a copy of this process's memory
(inputs are never pickled) and sends its results back pickled; this process computes
the first share meanwhile. Whatever a child cannot do is done here, so an item's
result, or the exception it raises, is the one a plain loop gives:

- the function, called with ``in_child=True``, raises ``Deferred`` for an item that
  needs this process (reading git through a pipe this process owns, formatting an
  error that reads files through it);
- an item that raised anything else, or whose result does not pickle, or a child that
  died, is computed again here.

Only for callers without threads or open connections a child could disturb (the CLI's
``diff``, ``validate`` and ``render``); the daemon never forks its work.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

T = TypeVar("T")
R = TypeVar("R")

MIN_SHARE = 200  # fewer items per process than this: forking costs more than it saves


class Deferred(Exception):
    """Raised in a child for an item only the parent process may compute."""


def workers() -> int:
    """Processes worth using here: the CPUs this process may run on, at most 4."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, 4))


def map_forked(fn: Callable[[T, bool], R], items: Sequence[T], processes: int) -> list[R]:
    """``[fn(x, False) for x in items]``, with shares computed by ``processes - 1`` children."""
    shares = min(processes, len(items) // MIN_SHARE) if hasattr(os, "fork") else 1
    if shares <= 1:
        return [fn(x, False) for x in items]
    bounds = [len(items) * i // shares for i in range(shares + 1)]
    children = [_spawn(fn, items[bounds[i] : bounds[i + 1]]) for i in range(1, shares)]
    try:
        out = [fn(x, False) for x in items[: bounds[1]]]
        for i, child in enumerate(children, start=1):
            got = _collect(child)
            for j, x in enumerate(items[bounds[i] : bounds[i + 1]]):
                out.append(_unpickled(got[j], fn, x) if got is not None and j < len(got) else fn(x, False))
        return out
    finally:
        for pid, r in children:  # after an exception here: no child left behind
            with contextlib.suppress(OSError):
                os.close(r)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _unpickled(blob: bytes | None, fn: Callable[[T, bool], R], x: T) -> R:
    """One child's result, or ``fn`` again here if the child left it or it does not unpickle."""
    if blob is not None:
        with contextlib.suppress(Exception):
            return pickle.loads(blob)  # type: ignore[no-any-return]
    return fn(x, False)


def _spawn(fn: Callable[[T, bool], R], share: Sequence[T]) -> tuple[int, int]:
    """Fork a child computing ``share``; returns (pid, read end of its result pipe)."""
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, exit without running the parent's cleanup
        status = 1
        try:
            os.close(r)
            blobs: list[bytes | None] = []
            for x in share:
                try:
                    blobs.append(pickle.dumps(fn(x, True), protocol=pickle.HIGHEST_PROTOCOL))
                except Exception:
                    blobs.append(None)
            data = pickle.dumps(blobs, protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as f:
                f.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(w)
    return pid, r


def _collect(child: tuple[int, int]) -> list[bytes | None] | None:
    """The child's pickled results (None for each item it left), or None if it failed."""
    pid, r = child
    with os.fdopen(r, "rb", closefd=False) as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        return None
    with contextlib.suppress(Exception):
        got = pickle.loads(data)
        if isinstance(got, list):
            return got
    return None
