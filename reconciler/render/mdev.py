"""Mediated devices (vGPUs) handed out on one host: which instance of each pool a VM gets.

Input: the rendered domains of one revision for one host (their ``mdev_needs``: a
deviceName per ``<hostdev type="mdev">``), the host config's pools (``hostDevices``
entries with ``mdev: {type, uuids}``), the instances each domain holds now (read back
from its live definition, the record of an earlier allocation) and, when known, the
mediated devices the host has (UUID -> type, from its facts). Output: each VM's UUIDs
(in the order of its mdev host devices) and (``assign``, called by ``render.finish`` on
the domain's element tree before it is serialized) its ``<source><address uuid>``; or,
for a VM that does not fit, an error naming the deviceName's field and the VMs holding
the pool. Pure and deterministic (``render.allocate``): a VM keeps its instances while
they stay in the pool and on the host; the others take the first free ones in the
pool's order, VMs by name. An instance the host lacks, or of another type than the pool
names, is never handed out. Two VMs never share an instance. Never parses or serializes
a whole domain: what a live domain holds is read from its ``<hostdev>`` elements alone.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler.records import dataclass
from reconciler.render.allocate import allocate
from reconciler.render.xml import sub

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from reconciler.settings.host import HostDevice


@dataclass(frozen=True, slots=True)
class Placement:
    """UUIDs per domain name, and per domain that did not fit: (field path, why)."""

    uuids: Mapping[str, tuple[str, ...]]
    errors: Mapping[str, tuple[str, str]]


def held_mdevs(xml: str) -> tuple[str, ...]:
    """The mediated devices a domain definition passes through, by UUID, in order. Only
    its ``<hostdev>`` elements are parsed, never the whole domain."""
    out = []
    close = "</hostdev>"
    start = xml.find("<hostdev ")
    while start >= 0:
        end = xml.find(close, start)
        if end < 0:
            break
        try:
            hostdev = ET.fromstring(xml[start : end + len(close)])
        except ET.ParseError:
            return ()
        if hostdev.get("type") == "mdev":
            for address in hostdev.findall("source/address"):
                if address.get("uuid"):
                    out.append(address.get("uuid", "").lower())
        start = xml.find("<hostdev ", end)
    return tuple(out)


def place(
    needs: Sequence[tuple[str, Sequence[tuple[str, str]]]],
    pools: Mapping[str, HostDevice],
    held: Mapping[str, tuple[str, ...]],
    available: Mapping[str, str] | None = None,
    host: str = "",
) -> Placement:
    """Hand out instances (see the module doc). ``needs``: per domain name, its
    ``mdev_needs``; ``available``: UUID -> mdev type of the host's mediated devices
    (``None``: not known, every pool member counts as present)."""
    wanted: dict[str, dict[str, int]] = {}  # deviceName -> domain -> count
    fields: dict[tuple[str, str], str] = {}
    for name, mdevs in needs:
        for device, field in mdevs:
            wanted.setdefault(device, {})
            wanted[device][name] = wanted[device].get(name, 0) + 1
            fields.setdefault((name, device), field)
    got: dict[tuple[str, str], list[str]] = {}
    errors: dict[str, tuple[str, str]] = {}
    where = f"host {host}" if host else "the host"
    for device in sorted(wanted):
        pool = pools[device]
        usable, missing, other = _usable(pool, available)
        members = set(pool.uuids)
        mine = {n: tuple(u for u in uuids if u in members) for n, uuids in held.items()}
        result = allocate(sorted(wanted[device].items()), usable, {n: u for n, u in mine.items() if u})
        for name, uuids in result.items.items():
            got[(name, device)] = list(uuids)
        for name, short in sorted(result.short.items()):
            if name in errors:
                continue
            count = wanted[device][name]
            text = (
                f"needs {count} of {where}'s mediated devices {device!r} ({len(pool.uuids)} in its pool); "
                f"{short.free} are free"
            )
            holders = short.held_by()
            if holders:
                text += f", the others held by {holders}"
            if missing:
                text += f"; not on this host: {', '.join(missing)} (create them, e.g. mdevctl define --auto)"
            if other:
                text += f"; not of type {pool.address}: {', '.join(other)}"
            errors[name] = (fields[(name, device)], text)
    out: dict[str, tuple[str, ...]] = {}
    for name, mdevs in needs:
        if name in errors:
            continue
        queues = {device: list(got.get((name, device), ())) for device, _ in mdevs}
        out[name] = tuple(queues[device].pop(0) for device, _ in mdevs)
    return Placement(out, errors)


def _usable(pool: HostDevice, available: Mapping[str, str] | None) -> tuple[list[str], list[str], list[str]]:
    """(members the host has, of the pool's type; members it lacks; members of another type)."""
    if available is None:
        return list(pool.uuids), [], []
    missing = [u for u in pool.uuids if u not in available]
    other = [u for u in pool.uuids if u in available and pool.address and available[u] != pool.address]
    usable = [u for u in pool.uuids if u not in missing and u not in other]
    return usable, missing, other


def assign(domain: ET.Element, uuids: Sequence[str]) -> None:
    """Give each ``<hostdev type="mdev">`` of the domain's element tree its instance, in
    order, in place."""
    hostdevs = domain.findall("devices/hostdev[@type='mdev']")
    for hostdev, uuid in zip(hostdevs, uuids, strict=True):
        source = hostdev.find("source")
        if source is None:
            source = sub(hostdev, "source")
        for old in source.findall("address"):
            source.remove(old)
        sub(source, "address", uuid=uuid)
