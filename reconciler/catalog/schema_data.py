"""The part of KubeVirt's pinned OpenAPI schema the catalog reads, in a file of its own.

``reconciler/data/kubevirt/swagger.json`` (KubeVirt's, pinned with its license) is 730 kB,
mostly paths and descriptions; decoding it was a fiftieth of a ``diff``. The catalog reads
only the definitions the kinds it checks reach, without their descriptions:
``definitions.json`` next to it holds exactly those, made from it by :func:`derive`
(``scripts/derive-kubevirt-definitions``; tests/unit/test_schema_data.py holds the file
equal to what :func:`derive` makes of the pinned schema). Pure, but for reading the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

# kind -> the schema definition of its objects (apiVersion checked by the catalog; read
# by reconciler.catalog.schema)
DEFINITIONS = MappingProxyType(
    {
        "VirtualMachine": "v1.VirtualMachine",
        "VirtualMachineInstancetype": "v1beta1.VirtualMachineInstancetype",
        "VirtualMachineClusterInstancetype": "v1beta1.VirtualMachineClusterInstancetype",
        "VirtualMachinePreference": "v1beta1.VirtualMachinePreference",
        "VirtualMachineClusterPreference": "v1beta1.VirtualMachineClusterPreference",
        "VirtualMachineInstancePreset": "v1.VirtualMachineInstancePreset",
        "VirtualMachinePool": "v1beta1.VirtualMachinePool",
    }
)
DERIVED = "data/kubevirt/definitions.json"
PINNED = "data/kubevirt/swagger.json"


def derive(swagger: Mapping[str, Any], roots: Iterable[str]) -> dict[str, Any]:
    """The definitions ``roots`` reach through ``$ref`` (themselves included), in the
    schema's order, each without its descriptions (the text of a node's ``description``;
    a property named ``description`` is kept)."""
    defs: Mapping[str, Any] = swagger["definitions"]
    reached: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(_refs(defs[name]))
    return {name: _undescribed(node) for name, node in defs.items() if name in reached}


def encode(defs: Mapping[str, Any]) -> bytes:
    """The bytes of ``definitions.json`` for ``defs`` (compact: read, not edited)."""
    return json.dumps(defs, separators=(",", ":")).encode() + b"\n"


def read(name: str = DERIVED) -> dict[str, Any]:
    """The derived definitions, decoded afresh (the caller changes them). Read beside this
    package's files (``importlib.resources`` would import zipfile and tempfile into every
    command's start)."""
    data: dict[str, Any] = json.loads((Path(__file__).parent.parent / name).read_bytes())
    return data


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        found = [ref.rsplit("/", 1)[-1]] if isinstance(ref, str) else []
        for value in node.values():
            found.extend(_refs(value))
        return found
    if isinstance(node, list):
        return [name for value in node for name in _refs(value)]
    return []


def _undescribed(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: _undescribed(v) for k, v in node.items() if not (k == "description" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_undescribed(v) for v in node]
    return node
