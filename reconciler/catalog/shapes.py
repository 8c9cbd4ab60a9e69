"""What the catalog checks of a document's shape beyond KubeVirt's schema.

Input: one parsed document and the catalog's error maker. Output: nothing, or a
``ManifestError`` at the field's line: labels and annotations that are no mappings of
strings, or an annotation under ``reconciler.kubevirt.io/`` the reconciler does not
read; a VM's lists whose entries later stages find by name (volumes, networks, disks,
...) with an entry that has no name or another's; a ConfigMap's ``data``/``binaryData``
or a Secret's ``data``/``stringData`` that is no mapping (``data: [a, b]`` refused
here, never read as a list by a later stage). Pure.
"""

from __future__ import annotations

import difflib
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from reconciler.model import annotation_names as vm_annotations
from reconciler.model import format_path

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from reconciler.errors import ManifestError
    from reconciler.model import FieldPath, Manifest

    ErrorMaker = Callable[[Manifest, str, FieldPath], ManifestError]


# The key -> value blocks of a ConfigMap and a Secret (each a mapping, as the API server
# requires: ``data: [a, b]`` is refused at its line, never read as a list later).
DATA_BLOCKS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"ConfigMap": ("data", "binaryData"), "Secret": ("data", "stringData")}
)


def yaml_type(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "a string" if isinstance(value, str) else type(value).__name__


def check_metadata_maps(m: Manifest, error: ErrorMaker) -> None:
    """Labels and annotations as an API server takes them: string values only (a bare
    ``adopt: true`` is a YAML boolean a cluster refuses: quote it); and under
    ``reconciler.kubevirt.io/`` only the annotations the reconciler reads (a misspelt one
    would be ignored: it is an error naming the closest)."""
    places: list[FieldPath] = [("metadata",)]
    if m.kind == "VirtualMachine":
        places.append(("spec", "template", "metadata"))
    for place in places:
        meta: Any = m.obj
        for part in place:
            meta = meta.get(part) if isinstance(meta, dict) else None
        if not isinstance(meta, dict):
            continue
        for which in ("labels", "annotations"):
            values = meta.get(which)
            if values is None:
                continue
            where = f"{format_path(place)}.{which}"
            if not isinstance(values, dict):
                raise error(m, f"{m.kind} {m.name}: {where} must be a mapping of strings", (*place, which))
            for key, value in values.items():
                if not isinstance(key, str):
                    raise error(
                        m, f"{m.kind} {m.name}: {where}: key {key!r} is not a string", (*place, which)
                    )
                if not isinstance(value, str):
                    shown = str(value).lower() if isinstance(value, bool) else str(value)
                    raise error(
                        m,
                        f"{m.kind} {m.name}: {where}[{key}]: {value!r} is not a string; values are strings "
                        f'on a cluster too: quote it ({key}: "{shown}")',
                        (*place, which, key),
                    )
                if which == "annotations" and key.startswith(vm_annotations.PREFIX):
                    if key in vm_annotations.KNOWN:
                        continue
                    close = difflib.get_close_matches(key, sorted(vm_annotations.KNOWN), n=1, cutoff=0.6)
                    hint = f"did you mean {close[0]}? " if close else ""
                    known = ", ".join(sorted(vm_annotations.KNOWN))
                    raise error(
                        m,
                        f"{m.kind} {m.name}: {where}: unknown annotation {key}: {hint}"
                        f"(the reconciler reads {known})",
                        (*place, which, key),
                    )


# Lists of the template spec whose entries later stages find by name.
NAMED_LISTS: tuple[FieldPath, ...] = (
    ("volumes",),
    ("networks",),
    ("domain", "devices", "disks"),
    ("domain", "devices", "interfaces"),
    ("domain", "devices", "filesystems"),
    ("domain", "devices", "inputs"),
)


def check_named_lists(m: Manifest, tspec: object, error: ErrorMaker) -> None:
    """Every entry of the named lists is a mapping with a unique, non-empty ``name``."""
    base: FieldPath = ("spec", "template", "spec")
    if not isinstance(tspec, dict):
        return
    for path in NAMED_LISTS:
        items: object = tspec
        for part in path:
            items = items.get(part) if isinstance(items, dict) else None
        if items is None:
            continue
        if not isinstance(items, list):
            field = format_path((*base, *path))
            raise error(m, f"VirtualMachine {m.name}: {field} must be a list", (*base, *path))
        seen: set[str] = set()
        for i, item in enumerate(items):
            name = item.get("name") if isinstance(item, dict) else None
            if isinstance(name, str) and name and name not in seen:
                seen.add(name)
                continue
            where: FieldPath = (*base, *path, i)
            if not isinstance(name, str) or not name:
                raise error(m, f"VirtualMachine {m.name}: {format_path(where)}.name is required", where)
            raise error(
                m, f"VirtualMachine {m.name}: {format_path(where)}.name '{name}' must be unique", where
            )


def check_data_blocks(m: Manifest, error: ErrorMaker) -> None:
    """A ConfigMap's or a Secret's key -> value blocks are mappings."""
    for block in DATA_BLOCKS.get(m.kind, ()):
        value = m.obj.get(block)
        if value is not None and not isinstance(value, dict):
            raise error(
                m,
                f"{m.kind} {m.name}: {block} must be a mapping of keys to strings, got {yaml_type(value)}",
                (block,),
            )
