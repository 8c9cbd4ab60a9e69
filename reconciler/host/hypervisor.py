"""A libvirt host: its domains as ``LiveDomain`` records, domain operations, host facts.

Input: a libvirt URI. Output: ``LiveDomain`` records, domain operations (define, start,
stop, undefine, hotplug, balloon, vCPUs, metadata) and ``HostFacts``. I/O, through
``host.connection`` (the one place libvirt is imported, every error translated).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from reconciler import ownership
from reconciler.errors import DomainNotFound, HypervisorError
from reconciler.host.connection import _state_of
from reconciler.host.events import Events
from reconciler.host.storage import Storage
from reconciler.model import LiveDomain, PowerState, VMKey
from reconciler.model.health import LIVENESS_FAILED
from reconciler.settings.host import path_inside

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from reconciler.hostfacts import HostFacts


def is_local(uri: str) -> bool:
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


IMAGE_DIR_FILES = 10000  # a directory holding more is not listed (its files stay unknown)


def image_dir_files(paths: Iterable[str], allowed_dirs: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """For each image path that is a directory (a ``kernelBoot`` image's files): the
    regular files below it, relative, whose real path (symlinks resolved) lies inside
    ``allowed_dirs``. Directory symlinks are not followed; a directory holding more than
    ``IMAGE_DIR_FILES`` entries, or one that cannot be read, is left out (unknown)."""
    out: dict[str, tuple[str, ...]] = {}
    for top in paths:
        if not Path(top).is_dir():
            continue
        found: list[str] = []
        try:
            for root, _dirs, files in os.walk(top, onerror=_raise):
                for name in files:
                    full = Path(root) / name
                    real = os.path.realpath(full)
                    if Path(real).is_file() and path_inside(real, tuple(allowed_dirs)):
                        found.append(str(full.relative_to(top)))
                if len(found) > IMAGE_DIR_FILES:
                    raise OSError("too many files")
        except OSError:
            continue
        out[top] = tuple(sorted(found))
    return out


def _raise(err: OSError) -> None:
    raise err


def _forward_mode(network_xml: str) -> str:
    """A libvirt network's ``<forward mode>`` ("" for an isolated network)."""
    forward = ET.fromstring(network_xml).find("forward")
    return "" if forward is None else forward.get("mode", "nat")


class Hypervisor(Storage, Events):
    """A libvirt host: its domains (read, define, start, stop, live changes) and facts;
    storage pools and events come from ``Storage`` and ``Events``. The marks of its
    domains are parsed once while they stay unchanged (``marks``, a run of it being one
    listing)."""

    def __init__(self, uri: str, marks: ownership.MarkCache | None = None) -> None:
        super().__init__(uri)
        self.marks = marks if marks is not None else ownership.MarkCache()
        # Domains a failing liveness probe ends (the daemon's prober), by name, with the ID
        # of the run it ends: that run's destroy reads as a failure (``LIVENESS_FAILED``),
        # restarted under the crash-loop back-off; a run of another ID forgets it.
        self.ended_by_probe: dict[str, int] = {}

    # -- helpers ---------------------------------------------------------------------

    def _live(
        self, dom: Any, key: VMKey, state_of: tuple[int, int] | None = None, persistent: bool | None = None,
        live: bool = True,
    ) -> LiveDomain:  # fmt: skip
        """One domain as read now (``key``: the VM its name stands for, made once by the
        caller); ``state_of`` and ``persistent`` when a listing already read them for
        every domain (two calls for the whole host instead of two each); ``live``: its
        running XML read too (else ``live_xml`` is "")."""
        lv = self._libvirt
        state_code, reason_code = state_of if state_of is not None else dom.state()
        state = _state_of(lv, state_code)
        persistent_xml = dom.XMLDesc(lv.VIR_DOMAIN_XML_INACTIVE | lv.VIR_DOMAIN_XML_SECURE)
        live_xml = dom.XMLDesc(lv.VIR_DOMAIN_XML_SECURE) if live and state != PowerState.SHUTOFF else ""
        reason = self._reason_of(state_code, reason_code)
        ended = self.ended_by_probe.get(dom.name()) if self.ended_by_probe else None
        if ended is not None:
            if state != PowerState.SHUTOFF and dom.ID() != ended:
                self.ended_by_probe.pop(dom.name(), None)  # started again since
            elif reason == "destroyed":
                reason = LIVENESS_FAILED
        return LiveDomain(
            name=dom.name(),
            uuid=dom.UUIDString(),
            state=state,
            persistent_xml=persistent_xml,
            live_xml=live_xml,
            mark=ownership.read_mark(persistent_xml, self.marks),
            persistent=bool(dom.isPersistent()) if persistent is None else persistent,
            state_reason=reason,
            key=key,
        )

    # -- reads -----------------------------------------------------------------------

    def list_domains(self) -> list[LiveDomain]:
        """Every domain: its states and which are transient read in one call each for the
        whole host, then each one's definitions (the host's cost is its XML reads, made
        over several threads on a host with many domains)."""
        lv = self._libvirt
        with self._call("list domains"):
            doms = self._conn.listAllDomains(0)
            transient = {
                d.UUIDString() for d in self._conn.listAllDomains(lv.VIR_CONNECT_LIST_DOMAINS_TRANSIENT)
            }
            states = self._all_states()

        def read(d: Any) -> LiveDomain | None:
            uuid = d.UUIDString()
            try:
                key = VMKey.from_domain(d.name())  # name(): no call to the host
                with self._translated("read", key.subject):
                    return self._live(d, key, states.get(uuid), uuid not in transient)
            except DomainNotFound:
                return None  # undefined while we were listing: it is simply gone

        listed = [live for live in self._read_all(read, doms) if live is not None]
        self.marks.end_run()
        return listed

    def autostarted(self) -> frozenset[str]:
        """The names of the domains libvirt starts with the host (autostart), in one call."""
        lv = self._libvirt
        with self._call("list domains"):
            return frozenset(
                d.name() for d in self._conn.listAllDomains(lv.VIR_CONNECT_LIST_DOMAINS_AUTOSTART)
            )

    def _all_states(self) -> dict[str, tuple[int, int]]:
        """(state, reason) of every domain by UUID, in one call; ``{}`` where the driver
        cannot (each domain is then asked on its own)."""
        lv = self._libvirt
        try:
            stats = self._conn.getAllDomainStats(lv.VIR_DOMAIN_STATS_STATE)
        except lv.libvirtError:
            return {}
        out: dict[str, tuple[int, int]] = {}
        for dom, values in stats:
            code, reason = values.get("state.state"), values.get("state.reason")
            if isinstance(code, int) and isinstance(reason, int):
                out[dom.UUIDString()] = (code, reason)
        return out

    def get_domain(self, name: str, *, live: bool = True) -> LiveDomain | None:
        """The domain ``name`` as read now, None if there is none (``live``: see ``_live``)."""
        try:
            dom = self._lookup(name)
        except DomainNotFound:
            return None
        key = VMKey.from_domain(name)
        with self._call("read", key.subject):
            return self._live(dom, key, live=live)

    def state(self, name: str) -> PowerState:
        dom = self._lookup(name)
        with self._call("state", VMKey.from_domain(name).subject):
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

    @property
    def runs_guests(self) -> bool:
        """False for libvirt's test driver (``test://``, in-process or behind libvirtd): it
        keeps definitions and states only, so there is no host disk to create for it."""
        with self._call("driver type"):
            return str(self._conn.getType()).upper() != "TEST"

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

    def host_facts(
        self, image_paths: Iterable[str] = (), allowed_dirs: Sequence[str] = (), devices: bool = True
    ) -> HostFacts:
        """What this host offers (``hostfacts.HostFacts``), read in a handful of calls.

        Facts that this driver cannot tell are left unknown (``None``, never checked).
        Host files (hugetlbfs mounts, image files and the files of image directories,
        network interfaces without an interface driver) are looked at only when the
        connection is local; ``allowed_dirs``: where those files' real paths may lie.
        ``devices``: read the host's PCI, USB and mediated devices (one call per device;
        a host config mapping no ``hostDevices`` has nothing to check them against)."""
        from reconciler.hostfacts import parse_host_facts

        lv = self._libvirt
        caps_xml, domcaps_xml = self.capabilities_xml()
        local = is_local(self.uri)
        with self._call("host facts"):
            info = self._conn.getInfo()
            nets = self._conn.listAllNetworks(0)
            networks = {n.name(): bool(n.isActive()) for n in nets}
            hostdev_networks = [n.name() for n in nets if _forward_mode(n.XMLDesc(0)) == "hostdev"]
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
        free = self._free_hugepages(sizes) if sizes else None
        node_devices = self._node_devices() if devices else None
        paths = sorted(set(image_paths))
        return parse_host_facts(
            caps_xml,
            domcaps_xml,
            host=self.hostname(),
            host_cpus=int(info[2]),
            host_memory_kib=int(info[1]) * 1024,
            hugepages_free=free,
            hugetlbfs_mounted=_hugetlbfs_mounted() if local and sizes else None,
            networks=networks,
            hostdev_networks=hostdev_networks,
            interfaces=interfaces,
            pools=pools,
            images={p: Path(p).exists() for p in paths} if local else None,
            image_dirs=image_dir_files(paths, allowed_dirs) if local else None,
            node_devices=node_devices,
        )

    def _free_hugepages(self, sizes: list[int]) -> dict[int, int] | None:
        """Free huge pages of each of ``sizes`` (KiB), summed over the NUMA cells (None: unknown)."""
        try:
            per_cell = self._conn.getFreePages(sorted(set(sizes)), -1, 1, 0) or {}
        except self._libvirt.libvirtError:
            return None
        free: dict[int, int] = {}
        for cell in per_cell.values():
            for size, count in cell.items():
                free[int(size)] = free.get(int(size), 0) + int(count)
        return free

    def _node_devices(self) -> list[str] | None:
        """The XML of the host's PCI functions, USB devices and active mediated devices;
        None where the driver has none to tell (the test driver keeps no real devices)."""
        lv = self._libvirt
        if not self.runs_guests:
            return None
        flags = (
            lv.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV
            | lv.VIR_CONNECT_LIST_NODE_DEVICES_CAP_USB_DEV
            | lv.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV
        )
        try:
            with self._call("node devices"):
                devices = self._conn.listAllDevices(flags)
                return [d.XMLDesc(0) for d in devices if not hasattr(d, "isActive") or d.isActive()]
        except HypervisorError:
            return None

    # -- writes ----------------------------------------------------------------------

    def define(self, xml: str, name: str) -> None:
        """Define (or redefine) the persistent config in one call."""
        with self._call("define", VMKey.from_domain(name).subject):
            self._conn.defineXML(xml)

    def start(self, name: str, paused: bool = False) -> None:
        """Start the domain; ``paused``: with its vCPUs paused (startStrategy Paused)."""
        dom = self._lookup(name)
        with self._call("start", VMKey.from_domain(name).subject):
            dom.createWithFlags(self._libvirt.VIR_DOMAIN_START_PAUSED if paused else 0)

    def shutdown(self, name: str) -> None:
        """Ask the guest to power off (ACPI)."""
        dom = self._lookup(name)
        with self._call("shutdown", VMKey.from_domain(name).subject):
            dom.shutdown()

    def destroy(self, name: str) -> None:
        """Power off at once."""
        dom = self._lookup(name)
        with self._call("destroy", VMKey.from_domain(name).subject):
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
        with self._call("undefine", VMKey.from_domain(name).subject):
            try:
                dom.undefineFlags(flags)
            except lv.libvirtError as err:
                if (
                    err.get_error_code() != lv.VIR_ERR_NO_SUPPORT
                    and err.get_error_code() != lv.VIR_ERR_INVALID_ARG
                ):
                    raise
                dom.undefine()

    # -- storage pools (used by reconciler.host.provision) ---------------------------------

    # -- live changes and events -----------------------------------------------------
    # Used by reconciler.host.live (hotplug, balloon, vCPUs, metadata) and the daemon
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
        with self._call("read", VMKey.from_domain(name).subject):
            return str(dom.XMLDesc(lv.VIR_DOMAIN_XML_INACTIVE | lv.VIR_DOMAIN_XML_SECURE))

    def running_xml(self, name: str) -> str:
        dom = self._lookup(name)
        with self._call("read", VMKey.from_domain(name).subject):
            return str(dom.XMLDesc(self._libvirt.VIR_DOMAIN_XML_SECURE)) if dom.isActive() else ""

    def attach_device(self, name: str, xml: str, config: bool = False) -> None:
        """Hotplug a device into the running domain (``config``: into the definition too)."""
        dom = self._lookup(name)
        lv = self._libvirt
        flags = lv.VIR_DOMAIN_AFFECT_LIVE | (lv.VIR_DOMAIN_AFFECT_CONFIG if config else 0)
        with self._call("attach device", VMKey.from_domain(name).subject):
            dom.attachDeviceFlags(xml, flags)

    def detach_device(self, name: str, xml: str, config: bool = False) -> None:
        """Ask the running domain to release a device; the guest may take its time or refuse."""
        dom = self._lookup(name)
        lv = self._libvirt
        flags = lv.VIR_DOMAIN_AFFECT_LIVE | (lv.VIR_DOMAIN_AFFECT_CONFIG if config else 0)
        with self._call("detach device", VMKey.from_domain(name).subject):
            dom.detachDeviceFlags(xml, flags)

    def update_device(self, name: str, xml: str, config: bool = False) -> None:
        """Change a device in place (cdrom media, link state)."""
        dom = self._lookup(name)
        lv = self._libvirt
        flags = lv.VIR_DOMAIN_AFFECT_LIVE | (lv.VIR_DOMAIN_AFFECT_CONFIG if config else 0)
        with self._call("update device", VMKey.from_domain(name).subject):
            dom.updateDeviceFlags(xml, flags)

    def set_memory(self, name: str, kib: int) -> None:
        """Balloon target, live and in the definition (within the maximum)."""
        dom = self._lookup(name)
        with self._call("set memory", VMKey.from_domain(name).subject):
            self._both_or_live(dom, lambda flags: dom.setMemoryFlags(int(kib), flags))

    def set_vcpus(self, name: str, count: int) -> None:
        """Online vCPUs, live and in the definition (within the maximum)."""
        dom = self._lookup(name)
        with self._call("set vcpus", VMKey.from_domain(name).subject):
            self._both_or_live(dom, lambda flags: dom.setVcpusFlags(int(count), flags))

    def set_text_metadata(self, name: str, which: str, text: str) -> None:
        """``which``: "title" or "description", live and in the definition."""
        dom = self._lookup(name)
        lv = self._libvirt
        kind = lv.VIR_DOMAIN_METADATA_TITLE if which == "title" else lv.VIR_DOMAIN_METADATA_DESCRIPTION
        with self._call(f"set {which}", VMKey.from_domain(name).subject):
            dom.setMetadata(kind, text or None, None, None, self._affect(dom))

    def set_element_metadata(
        self, name: str, xml: str | None, prefix: str, uri: str, config: bool = True
    ) -> None:
        """Set (or with ``xml=None`` remove) the metadata element of namespace ``uri``."""
        dom = self._lookup(name)
        kind = self._libvirt.VIR_DOMAIN_METADATA_ELEMENT
        with self._call("set metadata", VMKey.from_domain(name).subject):
            dom.setMetadata(kind, xml, prefix if xml else None, uri, self._affect(dom, config))
