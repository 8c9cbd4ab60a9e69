"""Serialize a domain element tree to text with a fixed element order.

Input: an ``xml.etree`` ``<domain>`` element built by the area modules. Output: the
XML text, indented with two spaces, ending in a newline. Pure and deterministic:
children of ``<domain>`` are put in the fixed order below and those of ``<devices>``
in the order of the device kinds (``model.devices``), a stable sort, so devices of one
kind keep the order the VM gave them; attributes keep the order they were set in.
Never reorders anything else. Tags are written as the tree holds them: a namespaced
element a pass-through adds carries its ``prefix:name`` tag and ``xmlns:prefix``
attribute (``render.passthrough``).
"""

from __future__ import annotations

import hashlib
import re
import sys
import xml.etree.ElementTree as ET
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.model.devices import ALL_DEVICES_ORDER

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.model import ConfigDigest

DOMAIN_ORDER = (
    "name",
    "uuid",
    "title",
    "description",
    "metadata",
    "maxMemory",
    "memory",
    "currentMemory",
    "memtune",
    "memoryBacking",
    "vcpu",
    "vcpus",
    "iothreads",
    "cputune",
    "numatune",
    "sysinfo",
    "os",
    "features",
    "cpu",
    "clock",
    "on_poweroff",
    "on_reboot",
    "on_crash",
    "on_lockfailure",
    "pm",
    "perf",
    "devices",
)


def sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str | None) -> ET.Element:
    """Append a child; attributes whose value is None are left out (keyword order kept)."""
    # The keywords themselves when none is None (most calls); SubElement copies them.
    kept: dict[str, Any] = (
        {k: v for k, v in attrs.items() if v is not None} if None in attrs.values() else attrs
    )
    el = ET.SubElement(parent, tag, kept)
    if text is not None:
        el.text = text
    return el


def _ranks(order: tuple[str, ...]) -> Mapping[str, int]:
    return MappingProxyType({tag: i for i, tag in enumerate(order)})


# Each tag's place, made once (not per domain).
DOMAIN_RANK = _ranks(DOMAIN_ORDER)
DEVICES_RANK = _ranks(ALL_DEVICES_ORDER)


def _reorder(el: ET.Element, rank: Mapping[str, int]) -> None:
    """The children of ``el`` by their tags' ``rank``, a stable sort."""
    children = list(el)
    try:
        ranks = [rank[c.tag] for c in children]
    except KeyError as err:
        raise ValueError(f"<{err.args[0]}> has no place in the element order of <{el.tag}>") from None
    el[:] = [children[i] for i in sorted(range(len(children)), key=ranks.__getitem__)]


def _escape_text(text: str) -> str:
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    return text


_SPECIAL = re.compile(r'[&<>"\r\n\t]')
_special = _SPECIAL.search  # bound once: the writer calls it for every attribute


def _escape_attr(value: str) -> str:
    if not _SPECIAL.search(value):
        return value
    value = _escape_text(value)
    for raw, esc in (('"', "&quot;"), ("\r", "&#13;"), ("\n", "&#10;"), ("\t", "&#09;")):
        if raw in value:
            value = value.replace(raw, esc)
    return value


def _write(parent: ET.Element, pad: str, out: list[str]) -> None:
    """The children of ``parent``, each on its lines at indent ``pad`` (one call per
    element holding children, not one per element)."""
    append = out.append
    for el in parent:
        tag = el.tag
        attrs = ""
        # In order; a value escaped only when it needs it (a word or number, most values,
        # is known clean without the regex). ``items()`` makes no attribute dict for an
        # element without attributes (``attrib`` would).
        for k, v in el.items():
            attrs += f' {k}="{v}"' if v.isalnum() or not _special(v) else f' {k}="{_escape_attr(v)}"'
        if len(el):
            append(f"{pad}<{tag}{attrs}>\n")
            _write(el, pad + "  ", out)
            append(f"{pad}</{tag}>\n")
        elif (text := el.text) is not None:
            append(f"{pad}<{tag}{attrs}>{_escape_text(text)}</{tag}>\n")
        else:
            append(f"{pad}<{tag}{attrs} />\n")


def serialize(domain: ET.Element) -> str:
    """Two-space indented XML, one element per line (elements carry text or children, never both)."""
    _reorder(domain, DOMAIN_RANK)
    devices = domain.find("devices")
    if devices is not None:
        _reorder(devices, DEVICES_RANK)
    holder = ET.Element("")  # the domain as the one child written at the top level
    holder.append(domain)
    out: list[str] = []
    _write(holder, "", out)
    return "".join(out)


def serialize_hashed(domain: ET.Element, config: tuple[ConfigDigest, ...] = ()) -> tuple[str, str]:
    """The domain serialized once (``serialize``) and its ``spec_hash``."""
    xml = serialize(domain)
    return xml, spec_hash(xml, config)


def spec_hash(xml: str, config: tuple[ConfigDigest, ...] = ()) -> str:
    """sha256 of the domain XML and of the generated ISOs' payloads (their digests): a
    changed cloud-init, ConfigMap or Secret of the build is a change of the VM."""
    h = hashlib.sha256(xml.encode())
    for c in config:
        h.update(f"\0{c.volume}\0{c.digest}".encode())
    return sys.intern(h.hexdigest())  # one copy with the ownership mark read back (the daemon keeps both)
