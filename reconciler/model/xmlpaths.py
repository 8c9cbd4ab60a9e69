"""Where each element of a domain's XML sits in its essence: ``devices/disk[vda]/driver``.

Input: a parsed ``<domain>`` element (ownership mark already removed, as the essence
removes it). Output: ``element_paths``: for every element, the path its values have in
the essence of that XML (``compare.essence``; a value is ``<path>@<attribute>`` or
``<path>`` for its text). The keys are the essence's: children of ``<devices>`` by
their identity (``model.devices.device_key``), other repeated children by their
distinct ``name`` or their position among their tag, a single child by its tag. Pure:
reads an element tree, never changes it. The render's pass-through names what it added
in these paths, and the importer finds the live element behind a path with them;
``tests/unit/test_passthrough.py`` holds them equal to the essence's paths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model.devices import device_key

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

# What the essence leaves out: libvirt's bookkeeping, never part of a spec.
VOLATILE_CHILDREN = frozenset({"alias"})
VOLATILE_TOP = frozenset({"seclabel", "resource", "vcpus", "keywrap"})
SIZED = frozenset({"memory", "currentMemory", "maxMemory"})


def _children(el: ET.Element, path: str, device: bool) -> list[tuple[str, ET.Element]]:
    """``(key, child)`` of the children the essence walks, in document order."""
    children = list(el)
    devices = path == "devices"
    if len(children) == 1:
        child = children[0]
        if child.tag in VOLATILE_CHILDREN or (device and child.tag == "address"):
            return []
        return [(device_key(child, 0, False) if devices else str(child.tag), child)]
    counts: dict[str, int] = {}
    names: dict[str, set[str] | None] = {}
    for child in children:
        tag = child.tag
        counts[tag] = counts.get(tag, 0) + 1
        if not devices:
            name = child.get("name")
            got = names.get(tag, set())
            names[tag] = None if got is None or name is None or name in got else got | {name}
    out: list[tuple[str, ET.Element]] = []
    seen: dict[str, int] = {}
    for child in children:
        tag = child.tag
        if tag in VOLATILE_CHILDREN or (device and tag == "address"):
            continue
        i = seen.get(tag, 0)
        seen[tag] = i + 1
        repeated = counts[tag] > 1
        if devices:
            key = device_key(child, i, repeated)
        elif repeated and names.get(tag) is not None:
            key = f"{tag}[{child.get('name')}]"
        else:
            key = f"{tag}[{i}]" if repeated else tag
        out.append((key, child))
    return out


def element_paths(dom: ET.Element) -> dict[int, tuple[str, ET.Element]]:
    """``id(element) -> (essence path, element)`` for every element below ``dom``."""
    out: dict[int, tuple[str, ET.Element]] = {}
    counts: dict[str, int] = {}
    for child in dom:
        counts[child.tag] = counts.get(child.tag, 0) + 1
    seen: dict[str, int] = {}
    stack: list[tuple[str, ET.Element, bool]] = []
    for child in dom:
        if child.tag in VOLATILE_TOP:
            continue
        i = seen.get(child.tag, 0)
        seen[child.tag] = i + 1
        key = f"{child.tag}[{i}]" if counts[child.tag] > 1 else str(child.tag)
        stack.append((key, child, False))
    while stack:
        path, el, device = stack.pop()
        out[id(el)] = (path, el)
        if el.tag in SIZED and el.text and el.text.strip():
            continue
        inner = path == "devices"  # its children are devices: their own address is libvirt's
        for key, child in _children(el, path, device):
            stack.append((f"{path}/{key}", child, inner))
    return out


def paths_of(dom: ET.Element) -> dict[str, ET.Element]:
    """``essence path -> element`` for every element below ``dom``."""
    return dict(element_paths(dom).values())
