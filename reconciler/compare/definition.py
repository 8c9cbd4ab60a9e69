"""A domain's final definition, computed once: what the plan shows and apply defines.

Input: a rendered domain, the live domain of its name (or none: a new domain) and the
ownership mark the definition carries. Output: a ``Definition``: the rendered XML with
the device addresses the live definition already has carried over
(``essence.carry_addresses_into``: an added device never moves an existing one, a
controller libvirt added stays where it is), the root ports the live definition sealed
kept sealed while their devices stay (``render.ports``) and the mark in ``<metadata>``,
serialized once. Apply hands it to libvirt as it is; the one step after it is KubeVirt's
too: when libvirt places devices whose root ports are sealed (a new domain, an added
disk), apply reads the definition back and seals the ports those devices took
(``seal_after_define``). A port is never sealed under a device already placed: a domain
adopted or defined by an earlier version keeps its ports as they are, so neither its
adoption nor a redefinition changes more than the plan shows.

``Documents`` holds the documents of one pairing (rendered, live persistent, live
running), each parsed at most once, on first use, and shared by the comparison
(``cache.compare``) and the definition; a domain keeps its live UUID when the VM names
none (``keep_live_uuid``: an adopted domain defined by hand) and the MACs an earlier
version derived (``keep_live_macs``). Pure: no libvirt, no I/O.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler import ownership
from reconciler.compare.essence import carry_addresses_into
from reconciler.model.changes import Definition
from reconciler.render.identity import derived_uuid
from reconciler.render.interfaces import stable_mac
from reconciler.render.ports import held_ports, seal_occupied_ports, sealed_ports, seals_pending

if TYPE_CHECKING:
    from reconciler.model import LiveDomain, OwnershipMark, RenderedDomain


def keep_live_uuid(tree: ET.Element, domain: RenderedDomain, live_uuid: str) -> None:
    """A domain keeps its UUID: libvirt cannot change it under the same name. A VM that
    names no ``firmware.uuid`` (its UUID the one derived from its name) and adopts a
    domain defined by hand takes the domain's UUID, in ``<uuid>`` and in the SMBIOS
    system entry; a UUID the VM names is left for the comparison to show."""
    el = tree.find("uuid")
    if el is None or not live_uuid or el.text == live_uuid or el.text != derived_uuid(domain.key.domain):
        return
    el.text = live_uuid
    for entry in tree.iterfind("sysinfo/system/entry[@name='uuid']"):
        entry.text = live_uuid


def keep_live_macs(
    tree: ET.Element, domain: RenderedDomain, live: ET.Element, live_domain: LiveDomain
) -> None:
    """A domain keeps the MACs it was defined with. An interface whose MAC is derived
    (seeded with the owner) and missing from the live definition keeps the one derived
    for it without a seed (earlier versions) or with the seed of the owner the domain's
    mark names (a domain adopted from another owner); the others left, when as many live
    interfaces have a MAC the VM does not name (an owner renamed: the same interfaces,
    derived anew), keep theirs in order. An interface added or removed is no such case:
    the counts differ and the plan shows it."""
    live_macs = [m.get("address", "").lower() for m in live.iterfind("devices/interface/mac")]
    have = set(live_macs)
    missing = [(new, name) for new, name in domain.derived_macs if new not in have]
    if not missing:
        return
    # the owner as written in the definition (a former owner's mark is read as this one's)
    mark = ownership.read_mark(live_domain.persistent_xml)
    seeds = ("", mark.owner) if mark is not None and mark.owner else ("",)
    old_of: dict[str, str] = {}
    left: list[str] = []
    for new, name in missing:
        old = next((m for m in (stable_mac(domain.key.domain, name, s) for s in seeds) if m in have), "")
        if old:
            old_of[new] = old
        else:
            left.append(new)
    named = {m.get("address", "").lower() for m in tree.iterfind("devices/interface/mac")}
    unclaimed = [m for m in live_macs if m not in named and m not in old_of.values()]
    if left and len(left) == len(unclaimed):
        old_of.update(zip(left, unclaimed, strict=True))
    for mac in tree.iterfind("devices/interface/mac"):
        kept = old_of.get(mac.get("address", ""))
        if kept:
            mac.set("address", kept)


class Documents:
    """The parsed documents of one rendered domain and its live domain, each parsed at
    most once (on first use). ``definition`` edits the rendered tree into the final
    definition, so it is the last use of that tree."""

    __slots__ = ("_desired", "_persistent", "_running", "domain", "live")

    def __init__(self, domain: RenderedDomain, live: LiveDomain | None) -> None:
        self.domain = domain
        self.live = live
        self._desired: ET.Element | None = None
        self._persistent: ET.Element | None = None
        self._running: ET.Element | None = None

    def desired(self) -> ET.Element:
        """The rendered domain's tree (with the live UUID when the VM names none:
        ``keep_live_uuid``)."""
        if self._desired is None:
            self._desired = ET.fromstring(self.domain.xml)
            if self.live is not None:
                keep_live_uuid(self._desired, self.domain, self.live.uuid)
                if self.domain.derived_macs and "<interface" in self.live.persistent_xml:
                    live = self.persistent()
                    assert live is not None  # a live domain
                    keep_live_macs(self._desired, self.domain, live, self.live)
        return self._desired

    def persistent(self) -> ET.Element | None:
        """The live domain's persistent definition (``None``: no live domain)."""
        if self._persistent is None and self.live is not None:
            self._persistent = ET.fromstring(self.live.persistent_xml)
        return self._persistent

    def running(self) -> ET.Element | None:
        """The running domain's definition (``None``: not running)."""
        if self._running is None and self.live is not None and self.live.active and self.live.live_xml:
            self._running = ET.fromstring(self.live.live_xml)
        return self._running

    def definition(self, mark: OwnershipMark) -> Definition:
        """The final definition carrying ``mark`` (see the module doc)."""
        tree = self.desired()
        self._desired = None  # edited below: no longer the rendered tree
        live = self.persistent()
        if live is not None:
            carry_addresses_into(tree, live)
            seal_occupied_ports(tree, only=sealed_ports(live))  # the seals of devices still there
        ownership.add_mark(tree, mark)
        pending = seals_pending(tree, new=live is None)
        return Definition(
            ET.tostring(tree, encoding="unicode"), mark, pending, held_ports(tree) if pending else frozenset()
        )
