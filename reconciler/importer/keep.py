"""Keeping what the YAML cannot express: a domain's pass-through, grown from its proof.

Input: a domain's live persistent XML, the final definition adopting it would write
(its VM rendered with the pass-through so far, ``importer.verify``), the gaps between
them, and the host config. Output: the pass-through fragment (``render.passthrough``)
grown by the live XML behind each gap: an element the render does not write is copied
whole, an attribute or text it does not set is added to the rendered element, a
rendered element the live domain lacks (the guest agent channel, an interface's
``<rom>``) is omitted; and the gaps no pass-through can close. Pure.

Never keeps what the pass-through allowlist refuses (``check_element``): such a gap stays
a reason to leave the domain out, naming the element and why. A gap where the render
writes a value the live domain has otherwise is never closed here: a pass-through never
changes what the spec renders.
"""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from reconciler import ownership
from reconciler.importer.verify import Gap
from reconciler.model.devices import KINDS, MERGE
from reconciler.model.xmlpaths import paths_of
from reconciler.render.allowlist import OMIT, check_element, describe
from reconciler.render.passthrough import identity, match_child

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.settings.host import HostConfig

GUEST_AGENT = "org.qemu.guest_agent.0"


def split_path(path: str) -> list[str]:
    """``metadata/{http://x/y}a/{http://x/y}b`` -> its segments (``/`` inside ``{}`` and
    ``[]`` kept)."""
    out: list[str] = []
    depth = 0
    cur = ""
    for ch in path:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "/" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def element_of(path: str) -> tuple[str, str | None]:
    """An essence path's element path and attribute (None: the element's text)."""
    last = split_path(path)[-1]
    depth = 0
    for i, ch in enumerate(last):
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == "@" and depth == 0:
            cut = len(path) - len(last) + i
            return path[:cut], path[cut + 1 :]
    return path, None


def _prefixes(path: str) -> list[str]:
    segs = split_path(path)
    return ["/".join(segs[: i + 1]) for i in range(len(segs))]


def _shallow(el: ET.Element, device: bool) -> ET.Element:
    """``el`` with what tells it apart from its siblings only (a device's identity)."""
    out = ET.Element(el.tag)
    kind = KINDS.get(str(el.tag)) if device else None
    if kind is not None:  # what its identity reads (``model.devices``)
        for attr in kind.identity.attrs:
            if el.get(attr) is not None:
                out.set(attr, el.get(attr, ""))
        child, attr = kind.identity.child or ("", "")
        sub = el.find(child) if child else None
        if sub is not None and sub.get(attr):
            ET.SubElement(out, child, {attr: sub.get(attr, "")})
    elif el.get("name") is not None:
        out.set("name", el.get("name", ""))
    return out


def _clean(el: ET.Element, device: bool) -> ET.Element:
    """A copy of a live element without libvirt's bookkeeping (aliases; a device's own
    address, which a redefinition carries over by itself)."""
    out = copy.deepcopy(el)
    for parent in out.iter():
        parent.tail = None
        if parent.text is not None and not parent.text.strip():
            parent.text = None
        for child in list(parent):
            if child.tag == "alias" or (device and parent is out and child.tag == "address"):
                parent.remove(child)
    return out


def _rule_path(chain: Sequence[ET.Element]) -> str:
    return "/".join(str(e.tag) for e in chain)


class Keeper:
    """One domain's pass-through as it grows (``fragment``: a ``<domain>`` tree)."""

    def __init__(self, fragment: ET.Element, live_xml: str, host: HostConfig) -> None:
        self.fragment = fragment
        self.host = host
        self.live = paths_of(ownership.strip_mark(ET.fromstring(live_xml)))
        self.copied: list[str] = []

    def _container(self, chain: Sequence[ET.Element]) -> ET.Element:
        """The fragment's element for the live elements ``chain`` (from the top), made
        where missing as identity-only copies."""
        node = self.fragment
        for i, el in enumerate(chain):
            device = i == 1 and chain[0].tag == "devices"
            probe = _shallow(el, device)
            try:
                found = match_child(node, probe, device)
            except ValueError:
                found = None
            if found is None:
                node.append(probe)
                found = probe
            node = found
        return node

    def _chain(self, element_path: str) -> list[ET.Element] | None:
        chain = []
        for p in _prefixes(element_path):
            el = self.live.get(p)
            if el is None:
                return None
            chain.append(el)
        return chain

    def close(self, gaps: Sequence[Gap], final_xml: str) -> list[Gap]:
        """Grow the fragment to close ``gaps``; the gaps it cannot close, with the reason."""
        final = paths_of(ET.fromstring(final_xml)) if final_xml else {}
        left: list[Gap] = []
        for gap in gaps:
            if gap.kind == "running":
                continue  # planned again once the fields are closed
            if not gap.path or gap.kind == "other":
                left.append(gap)
                continue
            if any(gap.path == c or gap.path.startswith((f"{c}/", f"{c}@")) for c in self.copied):
                continue
            why = self._keep(gap, final) if gap.final is None else self._omit(gap, final)
            if why:
                text = gap.text or f"a redefinition would drop {gap.path}={gap.live}"
                left.append(Gap("other", f"{text}; not kept: {why}", gap.path, gap.live, gap.final))
        return left

    def _keep(self, gap: Gap, final: dict[str, ET.Element]) -> str:
        """Copy the live value behind ``gap`` (the final definition lacks it)."""
        element_path, attr = element_of(gap.path)
        if not element_path:
            return "an attribute of <domain> itself"
        chain = self._chain(element_path)
        if chain is None:
            return "no such element in the live definition"
        prefixes = _prefixes(element_path)
        first = 2 if chain[0].tag == "metadata" else 0  # metadata: one application's element
        missing = next((i for i in range(first, len(prefixes)) if prefixes[i] not in final), None)
        if missing is None:  # the rendered element is there: add the value to it
            leaf = _shallow(chain[-1], len(chain) == 2 and chain[0].tag == "devices")
            if attr is None:
                leaf.text = chain[-1].text
            else:
                leaf.set(attr, gap.live or "")
            problems = self._check(chain, leaf, merge=True)
            if problems:
                return problems[0]
            target = self._container(chain)
            if attr is None:
                target.text = chain[-1].text
            else:
                target.set(attr, gap.live or "")
            return ""
        device = missing == 1 and chain[0].tag == "devices"
        whole = _clean(chain[missing], device)
        problems = self._check(chain[: missing + 1], whole, merge=False)
        if problems:
            return problems[0]
        self._container(chain[:missing]).append(whole)
        self.copied.append(prefixes[missing])
        return ""

    def _check(self, chain: Sequence[ET.Element], el: ET.Element, merge: bool) -> list[str]:
        return check_element(_rule_path(chain), el, self.host, merge=merge)

    def _omit(self, gap: Gap, final: dict[str, ET.Element]) -> str:
        """Omit the rendered element behind ``gap`` where the pass-through may (the guest
        agent channel, an interface's ``<rom>``), keeping the live one in its place."""
        element_path, _ = element_of(gap.path)
        for p in reversed(_prefixes(element_path)):
            el = final.get(p)
            if el is None:
                continue
            segs = split_path(p)
            if len(segs) == 3 and segs[0] == "devices" and el.tag == "rom":
                return self._omit_rom(p, segs)
            if (
                len(segs) == 2
                and segs[0] == "devices"
                and el.tag == "channel"
                and identity(el) == GUEST_AGENT
            ):
                if self.omit_agent():
                    self.copied.append(p)
                return ""
        return "the render writes it and a pass-through never changes what the spec renders"

    def omit_agent(self) -> bool:
        """Omit the guest agent channel the render writes (the live domain has none)."""
        devices = self._devices()
        if any(c.tag == "channel" and identity(c) == GUEST_AGENT for c in devices):
            return False
        channel = ET.SubElement(devices, "channel", {OMIT: "yes"})
        ET.SubElement(channel, "target", {"name": GUEST_AGENT})
        return True

    def _devices(self) -> ET.Element:
        devices = self.fragment.find("devices")
        if devices is None:
            devices = ET.SubElement(self.fragment, "devices")
        return devices

    def _omit_rom(self, path: str, segs: list[str]) -> str:
        iface_path = "/".join(segs[:2])
        iface = self.live.get(iface_path)
        if iface is None:
            return "the interface is not in the live definition"
        holder = self._container([self.live["devices"], iface])
        if holder.find("rom") is None:
            rom = copy.deepcopy(self.live[path]) if path in self.live else ET.Element("rom")
            rom.attrib = {OMIT: "yes", **rom.attrib}
            holder.append(rom)
        self.copied.append(path)
        return ""


def _merged(el: ET.Element) -> bool:
    """A device a pass-through only merges into (``model.devices``: ``MERGE``)."""
    kind = KINDS.get(str(el.tag))
    return kind is not None and kind.passthrough == MERGE


def kept_summary(fragment: ET.Element) -> str:
    """What a pass-through keeps, in words: ``<pm>, <graphics type='spice'>, no <rom> on
    <interface mac='52:54:00:...'>, ...``."""
    parts: list[str] = []
    for child in fragment:
        if child.tag not in ("devices", "metadata", "features") or not len(child):
            parts.append(describe(child))
            continue
        for el in child:
            if el.get(OMIT) is not None:
                parts.append(
                    f"no {describe(el)}" if not el.attrib.keys() - {OMIT} else f"{describe(el)} replaced"
                )
            elif child.tag == "devices" and _merged(el) and not el.attrib:
                inner = [c for c in el if c.tag not in ("target", "mac")] or list(el)
                for c in inner:
                    what = (
                        f"no {describe(c)}" if c.get(OMIT) is not None and len(c.attrib) == 1 else describe(c)
                    )
                    parts.append(f"{what} on {describe(el)}")
            else:
                parts.append(describe(el))
    return ", ".join(parts)
