"""One libvirt connection: opened lazily, every libvirt error translated.

Input: a libvirt URI. Output: a ``Connection`` the host operations build on
(``hypervisor``, ``storage``, ``events``). The only place libvirt is imported, lazily,
so host-less commands (build, expand, render, diff) work without libvirt-python. Every
``libvirtError`` becomes a ``HypervisorError`` here; no other module sees a libvirt type.
"""

from __future__ import annotations

import contextlib
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Self

from reconciler.errors import DomainNotFound, HypervisorError, HypervisorUnavailable
from reconciler.model import PowerState

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import ModuleType


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
    """One libvirt connection. Not thread-safe for concurrent calls; one reconcile at a time."""

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
        lv = self._libvirt
        with self._lock:
            try:
                yield
            except lv.libvirtError as err:
                code = err.get_error_code() or 0
                msg = f"{what} failed: {err.get_error_message()}"
                if code == lv.VIR_ERR_NO_DOMAIN:
                    raise DomainNotFound(msg, code, subject) from err
                if (
                    code in (lv.VIR_ERR_SYSTEM_ERROR, lv.VIR_ERR_RPC, lv.VIR_ERR_NO_CONNECT)
                    or not self.alive()
                ):
                    raise HypervisorUnavailable(msg, code, subject) from err
                raise HypervisorError(msg, code, subject) from err

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
        with self._call("lookup", f"vm/{name}"):
            return self._conn.lookupByName(name)
