"""The only module that imports libvirt: a typed wrapper and the error mapping.

Input: a libvirt URI. Output: ``LiveDomain`` records and domain operations. I/O.
Every ``libvirtError`` is translated into a ``HypervisorError`` here; no other module
sees a libvirt type. libvirt is imported lazily so hostless commands (build, expand,
render, diff) work where libvirt-python is not installed.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from reconciler import inventory
from reconciler.errors import DomainNotFound, HypervisorError, HypervisorUnavailable
from reconciler.model import LiveDomain, PowerState

if TYPE_CHECKING:
    from reconciler.hostfacts import HostFacts


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


def _is_local(uri: str) -> bool:
    """A hypervisor on this machine (``qemu:///system``): its host files are ours to look
    at. Not ``qemu+ssh://other/``, and not libvirt's test driver, which has no files."""
    parts = urlsplit(uri)
    driver, _, transport = parts.scheme.partition("+")
    return not parts.hostname and transport in ("", "unix") and driver != "test"


def _hugetlbfs_mounted() -> bool:
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8")
        return any(line.split()[2:3] == ["hugetlbfs"] for line in mounts.splitlines())
    except OSError:
        return False


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

    def __enter__(self) -> Hypervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lookup(self, name: str) -> Any:
        with self._call("lookup", f"vm/{name}"):
            return self._conn.lookupByName(name)

    def _live(self, dom: Any) -> LiveDomain:
        lv = self._libvirt
        state_code, reason_code = dom.state()
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
            state_reason=self._reason_of(state_code, reason_code),
        )

    # -- reads -----------------------------------------------------------------------

    def list_domains(self) -> list[LiveDomain]:
        with self._call("list domains"):
            doms = self._conn.listAllDomains(0)
        out = []
        for d in doms:
            try:
                with self._call("read", "vm/?"):
                    out.append(self._live(d))
            except DomainNotFound:
                continue  # undefined while we were listing: it is simply gone
        return out

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

    def qemu_owner(self) -> tuple[int, int] | None:
        """(uid, gid) QEMU runs as (the DAC security model's base label), or None."""
        caps, _ = self.capabilities_xml()
        for model in ET.fromstring(caps).iter("secmodel"):
            if model.findtext("model") == "dac":
                for label in model.iter("baselabel"):
                    m = re.fullmatch(r"\+?(\d+):\+?(\d+)", (label.text or "").strip())
                    if m:
                        return int(m.group(1)), int(m.group(2))
        return None

    def hostname(self) -> str:
        with self._call("hostname"):
            return str(self._conn.getHostname())

    def host_facts(self, image_paths: Iterable[str] = ()) -> HostFacts:
        """What this host offers (``hostfacts.HostFacts``), read in a handful of calls.

        Facts that this driver cannot tell are left unknown (``None``, never checked).
        Host files (hugetlbfs mounts, image files, network interfaces without an
        interface driver) are looked at only when the connection is local."""
        from reconciler.hostfacts import parse_host_facts

        lv = self._libvirt
        caps_xml, domcaps_xml = self.capabilities_xml()
        local = _is_local(self.uri)
        with self._call("host facts"):
            info = self._conn.getInfo()
            networks = {n.name(): bool(n.isActive()) for n in self._conn.listAllNetworks(0)}
            pools = {p.name(): bool(p.isActive()) for p in self._conn.listAllStoragePools(0)}
        interfaces: set[str] | None
        try:
            interfaces = {i.name() for i in self._conn.listAllInterfaces(0)}
        except lv.libvirtError:
            interfaces = set() if local else None
        sysfs = Path("/sys/class/net")
        if local and interfaces is not None and sysfs.is_dir():
            interfaces |= {p.name for p in sysfs.iterdir()}
        sizes = [
            int(p.get("size") or 0)
            for p in ET.fromstring(caps_xml).findall("host/topology/cells/cell/pages")
            if int(p.get("size") or 0) > 4
        ]
        free: dict[int, int] | None = None
        if sizes:
            try:
                per_cell = self._conn.getFreePages(sorted(set(sizes)), -1, 1, 0) or {}
                free = {}
                for cell in per_cell.values():
                    for size, count in cell.items():
                        free[int(size)] = free.get(int(size), 0) + int(count)
            except lv.libvirtError:
                free = None
        return parse_host_facts(
            caps_xml,
            domcaps_xml,
            host=self.hostname(),
            host_cpus=int(info[2]),
            host_memory_kib=int(info[1]) * 1024,
            hugepages_free=free,
            hugetlbfs_mounted=_hugetlbfs_mounted() if local and sizes else None,
            networks=networks,
            interfaces=interfaces,
            pools=pools,
            images={p: Path(p).exists() for p in image_paths} if local else None,
        )

    # -- writes ----------------------------------------------------------------------

    def define(self, xml: str, name: str) -> None:
        """Define (or redefine) the persistent config in one call."""
        with self._call("define", f"vm/{name}"):
            self._conn.defineXML(xml)

    def start(self, name: str, paused: bool = False) -> None:
        """Start the domain; ``paused``: with its vCPUs paused (startStrategy Paused)."""
        dom = self._lookup(name)
        with self._call("start", f"vm/{name}"):
            dom.createWithFlags(self._libvirt.VIR_DOMAIN_START_PAUSED if paused else 0)

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

    def stop(
        self, name: str, grace_s: float, poll_s: float = 0.2, sleep: Callable[[float], None] = time.sleep
    ) -> bool:
        """Graceful stop, forced after ``grace_s``. Returns True when the guest stopped by itself."""
        if self.state(name) == PowerState.SHUTOFF:
            return True
        with contextlib.suppress(HypervisorError):  # no ACPI: fall through to the forced stop
            self.shutdown(name)
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
                if (
                    err.get_error_code() != lv.VIR_ERR_NO_SUPPORT
                    and err.get_error_code() != lv.VIR_ERR_INVALID_ARG
                ):
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

    def pool_volume_format(self, pool: str, name: str) -> str:
        """The volume's format as the pool reports it ("qcow2", "raw", ...; "" if none)."""
        import xml.etree.ElementTree as ET

        p = self._pool(pool)
        with self._call("volume lookup", f"pool/{pool}"):
            xml = p.storageVolLookupByName(name).XMLDesc(0)
        fmt = ET.fromstring(xml).find("target/format")
        return (fmt.get("type") or "") if fmt is not None else ""

    def create_pool_volume(self, pool: str, name: str, capacity: int, fmt: str) -> str:
        """Create a sparse volume; returns its path."""
        from xml.sax.saxutils import escape

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
        from pathlib import Path

        p = self._pool(pool)
        src = Path(source)
        size = src.stat().st_size
        with self._call("volume upload", f"pool/{pool}"), src.open("rb") as f:
            vol = p.storageVolLookupByName(name)
            stream = self._conn.newStream(0)
            vol.upload(stream, 0, size, 0)
            stream.sendAll(lambda _st, nbytes, fh: fh.read(nbytes), f)
            stream.finish()

    # -- live changes and events -----------------------------------------------------
    # Used by reconciler.apply (hotplug, balloon, vCPUs, metadata) and the daemon
    # (lifecycle events). Device XML comes from the new persistent definition, so a
    # hotplugged device gets the address the definition gave it.

    def _reason_of(self, state_code: int, reason_code: int) -> str:
        """libvirt's state reason as a word ("shutdown", "crashed", "destroyed", ...)."""
        lv = self._libvirt
        if state_code == lv.VIR_DOMAIN_SHUTOFF:
            table = {
                lv.VIR_DOMAIN_SHUTOFF_UNKNOWN: "unknown",
                lv.VIR_DOMAIN_SHUTOFF_SHUTDOWN: "shutdown",
                lv.VIR_DOMAIN_SHUTOFF_DESTROYED: "destroyed",
                lv.VIR_DOMAIN_SHUTOFF_CRASHED: "crashed",
                lv.VIR_DOMAIN_SHUTOFF_MIGRATED: "migrated",
                lv.VIR_DOMAIN_SHUTOFF_SAVED: "saved",
                lv.VIR_DOMAIN_SHUTOFF_FAILED: "failed",
                lv.VIR_DOMAIN_SHUTOFF_FROM_SNAPSHOT: "from-snapshot",
            }
            return table.get(reason_code, "unknown")
        if state_code == lv.VIR_DOMAIN_CRASHED:
            return "crashed"
        if state_code == lv.VIR_DOMAIN_RUNNING:
            return {
                lv.VIR_DOMAIN_RUNNING_BOOTED: "booted",
                lv.VIR_DOMAIN_RUNNING_UNPAUSED: "unpaused",
                lv.VIR_DOMAIN_RUNNING_RESTORED: "restored",
                lv.VIR_DOMAIN_RUNNING_MIGRATED: "migrated",
            }.get(reason_code, "running")
        return ""

    def _affect(self, dom: Any, config: bool = True) -> int:
        lv = self._libvirt
        flags = lv.VIR_DOMAIN_AFFECT_CONFIG if config else 0
        if dom.isActive():
            flags |= lv.VIR_DOMAIN_AFFECT_LIVE
        return flags

    def _both_or_live(self, dom: Any, call: Callable[[int], Any]) -> None:
        """``call(LIVE|CONFIG)``; drivers that refuse both at once (test://) get LIVE then CONFIG."""
        lv = self._libvirt
        flags = self._affect(dom)
        try:
            call(flags)
        except lv.libvirtError as err:
            if flags != lv.VIR_DOMAIN_AFFECT_LIVE | lv.VIR_DOMAIN_AFFECT_CONFIG:
                raise
            if err.get_error_code() not in (lv.VIR_ERR_INVALID_ARG, lv.VIR_ERR_NO_SUPPORT):
                raise
            call(lv.VIR_DOMAIN_AFFECT_LIVE)
            call(lv.VIR_DOMAIN_AFFECT_CONFIG)

    def persistent_xml(self, name: str) -> str:
        dom = self._lookup(name)
        lv = self._libvirt
        with self._call("read", f"vm/{name}"):
            return str(dom.XMLDesc(lv.VIR_DOMAIN_XML_INACTIVE | lv.VIR_DOMAIN_XML_SECURE))

    def running_xml(self, name: str) -> str:
        dom = self._lookup(name)
        with self._call("read", f"vm/{name}"):
            return str(dom.XMLDesc(self._libvirt.VIR_DOMAIN_XML_SECURE)) if dom.isActive() else ""

    def attach_device(self, name: str, xml: str, config: bool = False) -> None:
        """Hotplug a device into the running domain (``config``: into the definition too)."""
        dom = self._lookup(name)
        lv = self._libvirt
        flags = lv.VIR_DOMAIN_AFFECT_LIVE | (lv.VIR_DOMAIN_AFFECT_CONFIG if config else 0)
        with self._call("attach device", f"vm/{name}"):
            dom.attachDeviceFlags(xml, flags)

    def detach_device(self, name: str, xml: str, config: bool = False) -> None:
        """Ask the running domain to release a device; the guest may take its time or refuse."""
        dom = self._lookup(name)
        lv = self._libvirt
        flags = lv.VIR_DOMAIN_AFFECT_LIVE | (lv.VIR_DOMAIN_AFFECT_CONFIG if config else 0)
        with self._call("detach device", f"vm/{name}"):
            dom.detachDeviceFlags(xml, flags)

    def update_device(self, name: str, xml: str, config: bool = False) -> None:
        """Change a device in place (cdrom media, link state)."""
        dom = self._lookup(name)
        lv = self._libvirt
        flags = lv.VIR_DOMAIN_AFFECT_LIVE | (lv.VIR_DOMAIN_AFFECT_CONFIG if config else 0)
        with self._call("update device", f"vm/{name}"):
            dom.updateDeviceFlags(xml, flags)

    def set_memory(self, name: str, kib: int) -> None:
        """Balloon target, live and in the definition (within the maximum)."""
        dom = self._lookup(name)
        with self._call("set memory", f"vm/{name}"):
            self._both_or_live(dom, lambda flags: dom.setMemoryFlags(int(kib), flags))

    def set_vcpus(self, name: str, count: int) -> None:
        """Online vCPUs, live and in the definition (within the maximum)."""
        dom = self._lookup(name)
        with self._call("set vcpus", f"vm/{name}"):
            self._both_or_live(dom, lambda flags: dom.setVcpusFlags(int(count), flags))

    def set_text_metadata(self, name: str, which: str, text: str) -> None:
        """``which``: "title" or "description", live and in the definition."""
        dom = self._lookup(name)
        lv = self._libvirt
        kind = lv.VIR_DOMAIN_METADATA_TITLE if which == "title" else lv.VIR_DOMAIN_METADATA_DESCRIPTION
        with self._call(f"set {which}", f"vm/{name}"):
            dom.setMetadata(kind, text or None, None, None, self._affect(dom))

    def set_element_metadata(
        self, name: str, xml: str | None, prefix: str, uri: str, config: bool = True
    ) -> None:
        """Set (or with ``xml=None`` remove) the metadata element of namespace ``uri``."""
        dom = self._lookup(name)
        kind = self._libvirt.VIR_DOMAIN_METADATA_ELEMENT
        with self._call("set metadata", f"vm/{name}"):
            dom.setMetadata(kind, xml, prefix if xml else None, uri, self._affect(dom, config))

    _event_loop_started = False

    @classmethod
    def start_event_loop(cls) -> None:
        """Run libvirt's default event loop in a daemon thread (once per process).

        Must run before the connections that deliver events are opened.
        """
        if cls._event_loop_started:
            return
        lv = _libvirt()
        lv.virEventRegisterDefaultImpl()

        def run() -> None:
            while True:
                lv.virEventRunDefaultImpl()

        threading.Thread(target=run, name="libvirt-events", daemon=True).start()
        cls._event_loop_started = True

    def watch_lifecycle(self, callback: Callable[[str, str, str], None]) -> Callable[[], None]:
        """Call ``callback(domain name, event, detail)`` on lifecycle events; returns an unsubscribe.

        Events and details are words: ("stopped", "crashed"), ("stopped", "shutdown"),
        ("started", "booted"), ("crashed", "panicked"), ("defined", "updated"), ...; also
        ("device-added", alias), ("device-removed", alias), ("metadata-change", type).
        Needs ``start_event_loop()`` before this connection was opened.
        """
        lv = self._libvirt
        events = {
            lv.VIR_DOMAIN_EVENT_DEFINED: ("defined", ("added", "updated", "renamed", "from-snapshot")),
            lv.VIR_DOMAIN_EVENT_UNDEFINED: ("undefined", ("removed", "renamed")),
            lv.VIR_DOMAIN_EVENT_STARTED: (
                "started",
                ("booted", "migrated", "restored", "from-snapshot", "wakeup"),
            ),
            lv.VIR_DOMAIN_EVENT_SUSPENDED: ("suspended", ()),
            lv.VIR_DOMAIN_EVENT_RESUMED: ("resumed", ()),
            lv.VIR_DOMAIN_EVENT_STOPPED: (
                "stopped",
                ("shutdown", "destroyed", "crashed", "migrated", "saved", "failed", "from-snapshot"),
            ),
            lv.VIR_DOMAIN_EVENT_SHUTDOWN: ("shutdown", ("finished", "guest", "host")),
            lv.VIR_DOMAIN_EVENT_PMSUSPENDED: ("pmsuspended", ()),
            lv.VIR_DOMAIN_EVENT_CRASHED: ("crashed", ("panicked", "crashloaded")),
        }

        def on_event(_conn: Any, dom: Any, event: int, detail: int, _opaque: Any) -> None:
            word, details = events.get(event, ("other", ()))
            callback(dom.name(), word, details[detail] if 0 <= detail < len(details) else str(detail))

        def on_device(word: str) -> Callable[..., None]:
            def handler(_conn: Any, dom: Any, what: Any, *_rest: Any) -> None:
                callback(dom.name(), word, str(what) if what is not None else "")

            return handler

        with self._call("register lifecycle events"):
            ids = [self._conn.domainEventRegisterAny(None, lv.VIR_DOMAIN_EVENT_ID_LIFECYCLE, on_event, None)]
            for event_id, word in (
                (lv.VIR_DOMAIN_EVENT_ID_DEVICE_ADDED, "device-added"),
                (lv.VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED, "device-removed"),
                (lv.VIR_DOMAIN_EVENT_ID_METADATA_CHANGE, "metadata-change"),
            ):
                # A driver without this event: its changes wait for the resync.
                with contextlib.suppress(lv.libvirtError):
                    ids.append(self._conn.domainEventRegisterAny(None, event_id, on_device(word), None))

        def unsubscribe() -> None:
            with self._call("deregister lifecycle events"):
                for cb_id in ids:
                    self._conn.domainEventDeregisterAny(cb_id)

        return unsubscribe

    def watch_connection(
        self, on_close: Callable[[str], None], keepalive_s: int = 5, keepalive_count: int = 3
    ) -> bool:
        """Call ``on_close(reason)`` (from the event thread) when the connection drops, and
        probe an idle connection with libvirt keepalives so a dead peer is noticed between
        reconciles. Needs ``start_event_loop()``. False where the driver has no such thing
        (``test:///default`` lives in this process: it cannot drop)."""
        lv = self._libvirt
        reasons = {
            lv.VIR_CONNECT_CLOSE_REASON_ERROR: "error",
            lv.VIR_CONNECT_CLOSE_REASON_EOF: "end of file (the daemon went away)",
            lv.VIR_CONNECT_CLOSE_REASON_KEEPALIVE: "keepalive timeout",
        }

        def closed(_conn: Any, reason: int, _opaque: Any) -> None:
            self.invalidate()  # one close callback per connection: do the live cache's job too
            if reason != lv.VIR_CONNECT_CLOSE_REASON_CLIENT:  # our own close() is no outage
                on_close(reasons.get(reason, str(reason)))

        with self._lock:
            try:
                self._conn.registerCloseCallback(closed, None)
            except lv.libvirtError:
                return False
            with contextlib.suppress(lv.libvirtError):  # a local driver has no keepalive
                self._conn.setKeepAlive(keepalive_s, keepalive_count)
        return True

    # Event-refreshed listing: a resync re-reads only the domains that changed.
    # Needs start_event_loop() before this connection was opened; a domain is re-read
    # when an event names it (lifecycle, device, metadata, balloon, tunable), when its
    # state or state reason moved, or after invalidate(); everything is re-read after
    # the connection closes. A periodic full resync should still call list_domains().

    def enable_live_cache(self) -> None:
        lv = self._libvirt
        if getattr(self, "_live_cache", None) is not None:
            return
        self._live_cache: dict[str, LiveDomain] = {}
        self._dirty: set[str] = set()
        self._cache_valid = True

        def dirty(_conn: Any, dom: Any, *_args: Any) -> None:
            with self._lock:
                self._dirty.add(dom.UUIDString())

        ids = [
            lv.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
            lv.VIR_DOMAIN_EVENT_ID_DEVICE_ADDED,
            lv.VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
            lv.VIR_DOMAIN_EVENT_ID_METADATA_CHANGE,
            lv.VIR_DOMAIN_EVENT_ID_BALLOON_CHANGE,
            lv.VIR_DOMAIN_EVENT_ID_TUNABLE,
            lv.VIR_DOMAIN_EVENT_ID_REBOOT,
            lv.VIR_DOMAIN_EVENT_ID_TRAY_CHANGE,
        ]
        with self._call("register events"):
            for event_id in ids:
                try:
                    self._conn.domainEventRegisterAny(None, event_id, dirty, None)
                except lv.libvirtError:
                    if event_id == lv.VIR_DOMAIN_EVENT_ID_LIFECYCLE:
                        raise
                    # A driver without this event: its changes are caught by the state check only.

            def closed(_conn: Any, _reason: int, _opaque: Any) -> None:
                self.invalidate()

            try:  # noqa: SIM105
                self._conn.registerCloseCallback(closed, None)
            except lv.libvirtError:
                pass  # test:// has no close callback: it cannot close under us

    def invalidate(self, name: str | None = None) -> None:
        """Forget the cached read of ``name`` (every domain when None)."""
        with self._lock:
            cache = getattr(self, "_live_cache", None)
            if cache is None:
                return
            if name is None:
                cache.clear()
            else:
                for uuid, d in list(cache.items()):
                    if d.name == name:
                        del cache[uuid]

    def list_domains_cached(self) -> list[LiveDomain]:
        """Like list_domains(), re-reading only what changed (see enable_live_cache)."""
        cache = getattr(self, "_live_cache", None)
        if cache is None:
            return self.list_domains()
        with self._call("list domains"):
            doms = self._conn.listAllDomains(0)
        with self._lock:
            dirty, self._dirty = self._dirty, set()
        out: list[LiveDomain] = []
        seen: set[str] = set()
        for dom in doms:
            try:
                with self._call("read", "vm/?"):
                    uuid = dom.UUIDString()
                    seen.add(uuid)
                    got = cache.get(uuid)
                    if got is not None and uuid not in dirty:
                        state_code, reason_code = dom.state()
                        if (
                            _state_of(self._libvirt, state_code) == got.state
                            and self._reason_of(state_code, reason_code) == got.state_reason
                        ):
                            out.append(got)
                            continue
                    fresh = self._live(dom)
                    cache[uuid] = fresh
                    out.append(fresh)
            except DomainNotFound:
                continue
        for uuid in set(cache) - seen:
            del cache[uuid]
        return out
