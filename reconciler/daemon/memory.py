"""The daemon's process memory: glibc's malloc arenas limited, transient memory returned.

Input: nothing (the process itself). Output: a smaller RSS for a long-lived process
whose reconciles allocate and free much (Linux with glibc; elsewhere a no-op).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os

M_ARENA_MAX = -8  # glibc's mallopt parameter


def limit_arenas() -> None:
    """At most two glibc malloc arenas, before any thread starts. glibc gives each thread
    that allocates its own arena (up to 8 per CPU), which keeps the freed memory of every
    listing's reader threads (``connection.READ_THREADS``) as RSS: ~3 MiB with 1000 VMs.
    Python allocates under its lock anyway, so arenas buy this process no concurrency.
    The second is made by the thread that opens a remote connection (``libvirt-open``):
    it holds that connection's client state and what the reader threads leave, 0.1-0.5
    MiB after a trim whatever the fleet's size (not per VM); one arena saves it, within
    the noise of the daemon's RSS, so two stay.
    Same as ``MALLOC_ARENA_MAX=2`` in the environment, which wins when set."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, 2)


def release() -> None:
    """Hand the transient memory of a full reconcile back to the system (glibc keeps freed
    heap pages otherwise, so the idle daemon would sit at its peak RSS)."""
    gc.collect(1)  # the young generations only: a full pass over the caches costs ~70 ms with 1000 VMs
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
