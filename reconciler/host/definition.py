"""The definition a change's live operations take their device XML from, parsed once.

Input: a planned ``Change`` (after its definition was defined) and the ``Hypervisor``.
Output: ``Devices``: the XML of one device of the new persistent definition, of the
running domain, or the metadata element of a namespace. They come from what the plan
carries (the definition it defined, or the persistent definition it read, and the
running definition it read), parsed once per change; the host is read only for what
the plan cannot know: a device libvirt placed when it defined the domain (a device the
plan adds carries no address; libvirt's definition, read back once, has it), or a
domain the plan did not read.
"""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler.compare.essence import device_index

if TYPE_CHECKING:
    from reconciler.host.hypervisor import Hypervisor
    from reconciler.model.changes import Change


def _index(domain_xml: str) -> dict[str, ET.Element]:
    devices = ET.fromstring(domain_xml).find("devices")
    return device_index(devices) if devices is not None else {}


def _without_alias(el: ET.Element) -> str:
    clone = copy.deepcopy(el)
    for alias in clone.findall("alias"):
        clone.remove(alias)
    return ET.tostring(clone, encoding="unicode")


class Devices:
    """The device XML of one change's domain, each document parsed at most once."""

    def __init__(self, c: Change, hv: Hypervisor) -> None:
        self._c = c
        self._hv = hv
        if c.defines and c.definition is not None:
            self._planned: str | None = c.definition.xml
        else:
            self._planned = c.live.persistent_xml if c.live is not None else None
        self._parsed: dict[str, dict[str, ET.Element]] = {}
        self._read_back: str | None = None

    def _devices(self, which: str, xml: str) -> dict[str, ET.Element]:
        if which not in self._parsed:
            self._parsed[which] = _index(xml)
        return self._parsed[which]

    def _persistent_read(self) -> dict[str, ET.Element]:
        if self._read_back is None:
            self._read_back = self._hv.persistent_xml(self._c.name)
        return self._devices("read back", self._read_back)

    def persistent(self, key: str) -> str | None:
        """The device ``key`` (``disk[vdb]``) of the new persistent definition: as planned
        when it has its address there, else as libvirt placed it (read back once)."""
        if self._planned is not None:
            el = self._devices("planned", self._planned).get(key)
            if el is not None and el.find("address") is not None:
                return _without_alias(el)
        el = self._persistent_read().get(key)
        return _without_alias(el) if el is not None else None

    def running(self, key: str) -> str | None:
        """The device ``key`` of the running domain, as the plan read it."""
        live = self._c.live
        xml = live.live_xml if live is not None and live.live_xml else self._hv.running_xml(self._c.name)
        el = self._devices("running", xml).get(key) if xml else None
        return _without_alias(el) if el is not None else None

    def metadata(self, target: str) -> tuple[str | None, str]:
        """(element XML or None, namespace URI) of ``metadata/{uri}tag`` in the new definition."""
        uri = target.split("{", 1)[1].split("}", 1)[0] if "{" in target else ""
        xml = self._planned if self._planned is not None else self._hv.persistent_xml(self._c.name)
        md = ET.fromstring(xml).find("metadata")
        for el in md if md is not None else ():
            if el.tag.startswith("{" + uri + "}"):
                return ET.tostring(el, encoding="unicode"), uri
        return None, uri
