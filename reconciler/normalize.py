"""Reduce desired and live domain XML to their comparable essence.

Input: domain XML strings. Output: an *essence*: a flat ``{path: value}`` mapping, with
paths like ``devices/disk[vda]/source@file``. Pure.

What is normalised away:
- the reconciler's ownership element (it is not part of the spec);
- units: memory sizes become KiB integers;
- device identity: disks are keyed by target dev, interfaces by MAC, other repeated
  siblings by position, so a reordering in libvirt's output is no change.

What libvirt *adds* on read-back (defaults, addresses, aliases, controllers) is not
removed here: ``diff.py`` compares the desired essence as a subset of the live one,
except for the device kinds in ``MANAGED_DEVICES``, whose extra live instances are
drift.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping

from reconciler import inventory

Essence = Mapping[str, str]

# Device kinds whose set is owned by the spec: an extra one on the live side is drift.
MANAGED_DEVICES = ("disk", "interface", "hostdev", "filesystem")

_UNIT_KIB = {
    "b": 1 / 1024,
    "bytes": 1 / 1024,
    "k": 1,
    "kib": 1,
    "kb": 1000 / 1024,
    "m": 1024,
    "mib": 1024,
    "mb": 1000**2 / 1024,
    "g": 1024**2,
    "gib": 1024**2,
    "gb": 1000**3 / 1024,
    "t": 1024**3,
    "tib": 1024**3,
    "tb": 1000**4 / 1024,
}
_SIZED = {"memory", "currentMemory", "maxMemory"}
# Attributes that only libvirt's bookkeeping carries.
_VOLATILE_CHILDREN = {"alias"}


def to_kib(value: str, unit: str | None) -> int:
    factor = _UNIT_KIB.get((unit or "KiB").lower())
    if factor is None:
        raise ValueError(f"unknown memory unit {unit!r}")
    return int(round(int(value) * factor))


def _key(parent_path: str, el: ET.Element, index: int, repeated: bool) -> str:
    tag = el.tag
    if parent_path == "devices":
        if tag == "disk":
            target = el.find("target")
            if target is not None and target.get("dev"):
                return f"disk[{target.get('dev')}]"
        elif tag == "interface":
            mac = el.find("mac")
            if mac is not None and mac.get("address"):
                return f"interface[{mac.get('address', '').lower()}]"
    return f"{tag}[{index}]" if repeated else tag


def _walk(el: ET.Element, path: str, out: dict[str, str]) -> None:
    if el.tag in _SIZED and el.text and el.text.strip():
        out[path] = str(to_kib(el.text.strip(), el.get("unit")))
        for name, value in el.attrib.items():
            if name != "unit":
                out[f"{path}@{name}"] = value
        return
    for name, value in el.attrib.items():
        out[f"{path}@{name}"] = value.lower() if name == "address" and el.tag == "mac" else value
    text = (el.text or "").strip()
    if text:
        out[path] = text
    counts: dict[str, int] = {}
    for child in el:
        counts[child.tag] = counts.get(child.tag, 0) + 1
    seen: dict[str, int] = {}
    for child in el:
        if child.tag in _VOLATILE_CHILDREN or not isinstance(child.tag, str):
            continue
        i = seen.get(child.tag, 0)
        seen[child.tag] = i + 1
        key = _key(path, child, i, counts[child.tag] > 1)
        _walk(child, f"{path}/{key}" if path else key, out)


def essence(xml: str) -> dict[str, str]:
    """The flat essence of a domain XML (ownership element removed)."""
    dom = inventory.strip_mark(ET.fromstring(xml))
    out: dict[str, str] = {}
    for name, value in dom.attrib.items():
        out[f"@{name}"] = value
    counts: dict[str, int] = {}
    for child in dom:
        counts[child.tag] = counts.get(child.tag, 0) + 1
    seen: dict[str, int] = {}
    for child in dom:
        i = seen.get(child.tag, 0)
        seen[child.tag] = i + 1
        _walk(child, _key("", child, i, counts[child.tag] > 1), out)
    return out


def device_roots(ess: Essence) -> set[str]:
    """The managed device identities present in an essence, e.g. ``devices/disk[vda]``."""
    roots = set()
    for path in ess:
        parts = path.split("/")
        if len(parts) >= 2 and parts[0] == "devices":
            head = parts[1].split("@", 1)[0]
            if head.split("[", 1)[0] in MANAGED_DEVICES:
                roots.add(f"devices/{head}")
    return roots
