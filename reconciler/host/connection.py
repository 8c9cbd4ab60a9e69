"""One libvirt connection: opened lazily, every libvirt error translated.

Input: a libvirt URI. Output: a ``Connection`` the host operations build on
(``hypervisor``, ``storage``, ``events``). The only place libvirt is imported, lazily,
so host-less commands (build, expand, render, diff) work without libvirt-python. Every
``libvirtError`` becomes a ``HypervisorError`` here; no other module sees a libvirt type.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Self, TypeVar

from reconciler.errors import DomainNotFound, HypervisorError, HypervisorUnavailable
from reconciler.model import PowerState, VMKey

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from types import ModuleType

T = TypeVar("T")
R = TypeVar("R")

# Reads of many domains (their XML) go out over this many threads: each call mostly waits
# on the host, and one libvirt connection serves calls from several threads at once
# (2000 XML reads from libvirtd: ~2-3x faster with 4 threads than one after another).
READ_THREADS = 4
READ_CHUNK = 16  # domains per task
PARALLEL_MIN = 4 * READ_CHUNK  # fewer: one after another, no threads


def _libvirt() -> ModuleType:
    try:
        import libvirt
    except ImportError as err:  # pragma: no cover - depends on the install
        raise HypervisorUnavailable(
            "libvirt-python is not installed: install the 'libvirt' extra for plan/apply/run"
        ) from err
    # libvirt prints every error to stderr by default; ours are raised and reported instead.
    libvirt.registerErrorHandler(_ignore_libvirt_error, None)
    module: ModuleType = libvirt
    return module


def _ignore_libvirt_error(_ctx: object, _err: object) -> None:
    return None


def _state_of(libvirt: ModuleType, code: int) -> PowerState:
    table = {
        libvirt.VIR_DOMAIN_RUNNING: PowerState.RUNNING,
        libvirt.VIR_DOMAIN_BLOCKED: PowerState.RUNNING,
        libvirt.VIR_DOMAIN_PAUSED: PowerState.PAUSED,
        libvirt.VIR_DOMAIN_PMSUSPENDED: PowerState.PAUSED,
        libvirt.VIR_DOMAIN_SHUTDOWN: PowerState.RUNNING,  # shutting down: still running
        libvirt.VIR_DOMAIN_SHUTOFF: PowerState.SHUTOFF,
        libvirt.VIR_DOMAIN_CRASHED: PowerState.CRASHED,
    }
    return table.get(code, PowerState.OTHER)


class Connection:
    """One libvirt connection. One reconcile at a time: every call holds the connection's
    lock, except the reads a listing spreads over threads while it holds the lock."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._libvirt = _libvirt()
        self._lock = threading.RLock()
        try:
            self._conn = self._libvirt.open(uri)
        except self._libvirt.libvirtError as err:
            raise HypervisorUnavailable(f"cannot connect to {uri}: {err.get_error_message()}") from err

    @contextmanager
    def _call(self, what: str, subject: str | None = None) -> Iterator[None]:
        with self._lock, self._translated(what, subject):
            yield

    @contextmanager
    def _translated(self, what: str, subject: str | None = None) -> Iterator[None]:
        """Every ``libvirtError`` raised inside becomes one of ours."""
        lv = self._libvirt
        try:
            yield
        except lv.libvirtError as err:
            code = err.get_error_code() or 0
            msg = f"{what} failed: {err.get_error_message()}"
            if code == lv.VIR_ERR_NO_DOMAIN:
                raise DomainNotFound(msg, code, subject) from err
            if code in (lv.VIR_ERR_SYSTEM_ERROR, lv.VIR_ERR_RPC, lv.VIR_ERR_NO_CONNECT) or not self.alive():
                raise HypervisorUnavailable(msg, code, subject) from err
            raise HypervisorError(msg, code, subject) from err

    @property
    def in_process(self) -> bool:
        """libvirt's test driver in this process (``test:///...``): each call is a function
        call under the driver's lock, so threads would only contend for it."""
        return self.uri.startswith("test:///")

    def _read_all(self, read: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[read(x) for x in items]``, over ``READ_THREADS`` threads when there are many.

        Holds the connection's lock throughout, so nothing else uses or closes the
        connection meanwhile; ``read`` must not take it (use ``_translated``). Every
        task has ended when this returns or raises (the first item's error, in order).
        """
        if len(items) < PARALLEL_MIN or self.in_process:
            with self._lock:
                return [read(x) for x in items]

        def chunk(part: Sequence[T]) -> list[R]:
            return [read(x) for x in part]

        # Threads for this listing only: none is left running once it returns or raises,
        # whatever the caller does next.
        with self._lock, ThreadPoolExecutor(READ_THREADS, thread_name_prefix="libvirt-read") as pool:
            tasks = [pool.submit(chunk, items[i : i + READ_CHUNK]) for i in range(0, len(items), READ_CHUNK)]
            wait(tasks)
        return [x for t in tasks for x in t.result()]

    def alive(self) -> bool:
        try:
            return bool(self._conn.isAlive())
        except self._libvirt.libvirtError:
            return False

    def close(self) -> None:
        with self._lock, contextlib.suppress(self._libvirt.libvirtError):
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lookup(self, name: str) -> Any:
        with self._call("lookup", VMKey.from_domain(name).subject):
            return self._conn.lookupByName(name)
