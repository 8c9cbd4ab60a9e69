"""The only module that imports libvirt: a typed wrapper and the error mapping.

Input: a libvirt URI. Output: ``LiveDomain`` records and domain operations. I/O.
Every ``libvirtError`` is translated into a ``HypervisorError`` here; no other module
sees a libvirt type. libvirt is imported lazily so hostless commands (build, expand,
render, diff) work where libvirt-python is not installed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from reconciler import inventory
from reconciler.errors import DomainNotFound, HypervisorError, HypervisorUnavailable
from reconciler.model import LiveDomain, PowerState


def _libvirt() -> ModuleType:
    try:
        import libvirt  # noqa: PLC0415 - imported lazily on purpose
    except ImportError as err:  # pragma: no cover - depends on the install
        raise HypervisorUnavailable(
            "libvirt-python is not installed: install the 'libvirt' extra for plan/apply/run"
        ) from err
    return libvirt


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


class Hypervisor:
    """One libvirt connection. Not thread-safe for concurrent calls; one reconcile at a time."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._libvirt = _libvirt()
        self._lock = threading.RLock()
        try:
            self._conn = self._libvirt.open(uri)
        except self._libvirt.libvirtError as err:
            raise HypervisorUnavailable(f"cannot connect to {uri}: {err.get_error_message()}") from err

    # -- helpers ---------------------------------------------------------------------

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
                if code in (lv.VIR_ERR_SYSTEM_ERROR, lv.VIR_ERR_RPC, lv.VIR_ERR_NO_CONNECT) or not self.alive():
                    raise HypervisorUnavailable(msg, code, subject) from err
                raise HypervisorError(msg, code, subject) from err

    def alive(self) -> bool:
        try:
            return bool(self._conn.isAlive())
        except self._libvirt.libvirtError:
            return False

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except self._libvirt.libvirtError:
                pass

    def __enter__(self) -> Hypervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lookup(self, name: str) -> Any:
        with self._call("lookup", f"vm/{name}"):
            return self._conn.lookupByName(name)

    def _live(self, dom: Any) -> LiveDomain:
        lv = self._libvirt
        state_code = dom.state()[0]
        state = _state_of(lv, state_code)
        persistent_xml = dom.XMLDesc(lv.VIR_DOMAIN_XML_INACTIVE | lv.VIR_DOMAIN_XML_SECURE)
        live_xml = dom.XMLDesc(lv.VIR_DOMAIN_XML_SECURE) if state != PowerState.SHUTOFF else ""
        return LiveDomain(
            name=dom.name(),
            uuid=dom.UUIDString(),
            state=state,
            persistent_xml=persistent_xml,
            live_xml=live_xml,
            mark=inventory.read_mark(persistent_xml),
            persistent=bool(dom.isPersistent()),
        )

    # -- reads -----------------------------------------------------------------------

    def list_domains(self) -> list[LiveDomain]:
        with self._call("list domains"):
            doms = self._conn.listAllDomains(0)
            return [self._live(d) for d in doms]

    def get_domain(self, name: str) -> LiveDomain | None:
        try:
            dom = self._lookup(name)
        except DomainNotFound:
            return None
        with self._call("read", f"vm/{name}"):
            return self._live(dom)

    def state(self, name: str) -> PowerState:
        dom = self._lookup(name)
        with self._call("state", f"vm/{name}"):
            return _state_of(self._libvirt, dom.state()[0])

    def capabilities_xml(self) -> tuple[str, str | None]:
        """(capabilities XML, domain capabilities XML or None where unsupported)."""
        with self._call("capabilities"):
            caps = self._conn.getCapabilities()
        try:
            domcaps = self._conn.getDomainCapabilities()
        except self._libvirt.libvirtError:
            domcaps = None
        return caps, domcaps

    def hostname(self) -> str:
        with self._call("hostname"):
            return str(self._conn.getHostname())

    # -- writes ----------------------------------------------------------------------

    def define(self, xml: str, name: str) -> None:
        """Define (or redefine) the persistent config in one call."""
        with self._call("define", f"vm/{name}"):
            self._conn.defineXML(xml)

    def start(self, name: str) -> None:
        dom = self._lookup(name)
        with self._call("start", f"vm/{name}"):
            dom.create()

    def shutdown(self, name: str) -> None:
        """Ask the guest to power off (ACPI)."""
        dom = self._lookup(name)
        with self._call("shutdown", f"vm/{name}"):
            dom.shutdown()

    def destroy(self, name: str) -> None:
        """Power off at once."""
        dom = self._lookup(name)
        with self._call("destroy", f"vm/{name}"):
            dom.destroy()

    def stop(self, name: str, grace_s: float, poll_s: float = 0.2, sleep: Callable[[float], None] = time.sleep) -> bool:
        """Graceful stop, forced after ``grace_s``. Returns True when the guest stopped by itself."""
        if self.state(name) == PowerState.SHUTOFF:
            return True
        try:
            self.shutdown(name)
        except HypervisorError:
            pass  # no ACPI: fall through to the forced stop
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if self.state(name) == PowerState.SHUTOFF:
                return True
            sleep(poll_s)
        if self.state(name) != PowerState.SHUTOFF:
            self.destroy(name)
            return False
        return True

    def undefine(self, name: str) -> None:
        lv = self._libvirt
        dom = self._lookup(name)
        flags = lv.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | lv.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
        flags |= lv.VIR_DOMAIN_UNDEFINE_NVRAM
        with self._call("undefine", f"vm/{name}"):
            try:
                dom.undefineFlags(flags)
            except lv.libvirtError as err:
                if err.get_error_code() != lv.VIR_ERR_NO_SUPPORT and err.get_error_code() != lv.VIR_ERR_INVALID_ARG:
                    raise
                dom.undefine()

    # -- storage pools (used by reconciler.provision) ---------------------------------

    def _pool(self, pool: str) -> Any:
        with self._call("storage pool lookup", f"pool/{pool}"):
            p = self._conn.storagePoolLookupByName(pool)
            if not p.isActive():
                raise HypervisorError(f"storage pool {pool} is not active", 0, f"pool/{pool}")
            p.refresh(0)
            return p

    def pool_volume_exists(self, pool: str, name: str) -> bool:
        p = self._pool(pool)
        with self._call("volume list", f"pool/{pool}"):
            return name in p.listVolumes()

    def create_pool_volume(self, pool: str, name: str, capacity: int, fmt: str) -> str:
        """Create a sparse volume; returns its path."""
        from xml.sax.saxutils import escape  # noqa: PLC0415

        xml = (
            f"<volume><name>{escape(name)}</name><capacity unit='bytes'>{int(capacity)}</capacity>"
            f"<allocation unit='bytes'>0</allocation><target><format type='{escape(fmt)}'/></target></volume>"
        )
        p = self._pool(pool)
        with self._call("volume create", f"pool/{pool}"):
            vol = p.createXML(xml, 0)
            return str(vol.path())

    def upload_pool_volume(self, pool: str, name: str, source: str) -> None:
        """Write the bytes of a local file into a volume (works over remote connections too)."""
        from pathlib import Path  # noqa: PLC0415

        p = self._pool(pool)
        src = Path(source)
        size = src.stat().st_size
        with self._call("volume upload", f"pool/{pool}"), src.open("rb") as f:
            vol = p.storageVolLookupByName(name)
            stream = self._conn.newStream(0)
            vol.upload(stream, 0, size, 0)
            stream.sendAll(lambda _st, nbytes, fh: fh.read(nbytes), f)
            stream.finish()
