"""One libvirt connection: opened lazily, every libvirt error translated.

Input: a libvirt URI. Output: a ``Connection`` the host operations build on
(``hypervisor``, ``storage``, ``events``). The only place libvirt is imported, lazily,
so host-less commands (build, expand, render, diff) work without libvirt-python. Every
``libvirtError`` becomes a ``HypervisorError`` here; no other module sees a libvirt type.

Faults are told by the connection, never guessed from an error code: an error is
``HypervisorUnavailable`` (the host cannot be reached: the daemon stops the rest of
the plan and probes it) only when the connection itself is gone; a refused start or a
system error of one domain (virtlogd down, a full disk) fails that domain alone. Every
call is bounded: opening waits ``OPEN_DEADLINE_S`` at most (a hung libvirtd accepts the
socket and never answers), and the daemon's connections carry libvirt keepalives, which
close a connection whose peer stops answering, failing the call in flight.
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
OPEN_DEADLINE_S = 10.0  # a host that does not answer a connection within this is unreachable
READ_THREADS = 4
READ_CHUNK = 16  # domains per task
PARALLEL_MIN = 4 * READ_CHUNK  # fewer: one after another, no threads


def _libvirt() -> ModuleType:
    try:
        import libvirt
    except ImportError as err:
        raise HypervisorUnavailable(import_failure(err)) from err
    # libvirt prints every error to stderr by default; ours are raised and reported instead.
    libvirt.registerErrorHandler(_ignore_libvirt_error, None)
    module: ModuleType = libvirt
    return module


def libvirt_qemu() -> ModuleType:
    """libvirt's QEMU module (the guest agent's commands), loaded with libvirt."""
    _libvirt()
    try:
        import libvirt_qemu as qemu
    except ImportError as err:
        raise HypervisorUnavailable(import_failure(err)) from err
    module: ModuleType = qemu
    return module


def import_failure(err: ImportError) -> str:
    """Why libvirt-python cannot be used, with the real cause: missing, or present and
    failing to load (a memory limit, a library of another version)."""
    if isinstance(err, ModuleNotFoundError) and err.name in ("libvirt", "libvirtmod"):
        return "libvirt-python is not installed: install the 'libvirt' extra for plan/apply/run"
    return f"libvirt-python cannot be loaded: {err}"


def _open(lv: ModuleType, uri: str, deadline_s: float) -> Any:
    """``libvirt.open(uri)``, given up after ``deadline_s`` (a connection that answers
    late is closed by its own thread). The in-process test driver opens at once."""
    if uri.startswith("test:///"):
        return lv.open(uri)
    lock = threading.Lock()
    done = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            conn = lv.open(uri)
        except lv.libvirtError as err:
            conn, box["error"] = None, err
        with lock:
            if box.get("abandoned") and conn is not None:
                with contextlib.suppress(lv.libvirtError):
                    conn.close()
                return
            box["conn"] = conn
            done.set()

    threading.Thread(target=run, name="libvirt-open", daemon=True).start()
    done.wait(deadline_s)
    with lock:
        if not done.is_set():
            box["abandoned"] = True
            raise HypervisorUnavailable(f"cannot connect to {uri}: no answer within {deadline_s:.0f}s")
    if "error" in box:
        raise box["error"]
    return box["conn"]


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

    def __init__(self, uri: str, open_deadline_s: float = OPEN_DEADLINE_S) -> None:
        self.uri = uri
        self._libvirt = _libvirt()
        self._lock = threading.RLock()
        try:
            self._conn = _open(self._libvirt, uri, open_deadline_s)
        except self._libvirt.libvirtError as err:
            raise HypervisorUnavailable(f"cannot connect to {uri}: {err.get_error_message()}") from err

    @contextmanager
    def _call(self, what: str, subject: str | None = None) -> Iterator[None]:
        with self._lock, self._translated(what, subject):
            yield

    @contextmanager
    def _translated(self, what: str, subject: str | None = None) -> Iterator[None]:
        """Every ``libvirtError`` raised inside becomes one of ours: ``HypervisorUnavailable``
        only when the connection is gone, whatever the error's code."""
        lv = self._libvirt
        try:
            yield
        except lv.libvirtError as err:
            code = err.get_error_code() or 0
            msg = f"{what} failed: {err.get_error_message()}"
            if code == lv.VIR_ERR_NO_DOMAIN:
                raise DomainNotFound(msg, code, subject) from err
            if not self.alive():
                raise HypervisorUnavailable(msg, code, subject) from err
            passing = code in (lv.VIR_ERR_SYSTEM_ERROR, lv.VIR_ERR_RPC, lv.VIR_ERR_OPERATION_TIMEOUT)
            raise HypervisorError(msg, code, subject, transient=passing or None) from err

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
