"""Values a transformer links like kustomize's YAML nodes, and map values as it prints them.

Input: plain object trees (``resource``'s copy-on-write paths). Output: ``SharedText``
(a label or annotation value with the identity of the node kustomize would link into
every field a transformer touches), ``overwrite``/``propagate`` (an in-place write that
every linked value follows), ``detach`` (the links cut, as a JSON patch cuts them),
``set_map_entries`` (entries written into a map along a field spec), and
``pair_value``/``label_value`` (a scalar as kustomize prints it in a string map). Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.manifests import ScalarText
from reconciler.overlays.resource import MISSING

if TYPE_CHECKING:
    from collections.abc import Callable


class SharedText(ScalarText):
    """A label or annotation value written by a transformer, with its YAML node's identity.

    kustomize writes one YAML node per resource and key and links it into every field
    the transformer touches (metadata.labels, selectors, templates). A later in-place
    write to any of those places (another label transformer, a strategic merge patch, a
    replacement) changes them all; a JSON patch copies the object and cuts the links.
    ``cell`` stands for that node; ``propagate`` applies such writes.
    """

    cell: object


def shared(value: str, cell: object) -> SharedText:
    text = SharedText(value)
    text.typed = str(value)
    text.cell = cell
    return text


def overwrite(old: Any, value: Any, rewrites: dict[object, Any]) -> Any:
    """The value of a field after an in-place write of ``value`` over ``old``."""
    if isinstance(old, SharedText):
        rewrites[old.cell] = value
        return shared(value, old.cell) if isinstance(value, str) else value
    return value


def propagate(node: Any, rewrites: dict[object, Any]) -> Any:
    """Copy-on-write: every ``SharedText`` whose cell was written takes the new value."""
    if not rewrites:
        return node
    if isinstance(node, SharedText):
        if node.cell in rewrites:
            value = rewrites[node.cell]
            if isinstance(value, str):
                return node if str(node) == value else shared(value, node.cell)
            return value
        return node
    if isinstance(node, dict):
        out = None
        for k, v in node.items():
            new = propagate(v, rewrites)
            if new is not v:
                if out is None:
                    out = dict(node)
                out[k] = new
        return node if out is None else out
    if isinstance(node, list):
        items = [propagate(v, rewrites) for v in node]
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    return node


def detach(node: Any) -> Any:
    """A copy of the tree (every mapping and list new, scalars shared) with every
    ``SharedText`` turned into a plain string (links cut): what a JSON patch edits in place."""
    if isinstance(node, SharedText):
        return str(node)
    if isinstance(node, dict):
        return {k: detach(v) for k, v in node.items()}
    if isinstance(node, list):
        return [detach(v) for v in node]
    return node


def set_map_entries(entries: dict[str, str], rewrites: dict[object, Any]) -> Callable[[Any], Any]:
    """``fn`` for update_path that writes entries into a map (creating it when missing).

    New keys share one node per key (see ``SharedText``); existing keys are written in
    place, recording in ``rewrites`` which linked values must follow.
    """
    cells = {k: object() for k in entries}

    def fn(old: Any) -> Any:
        if old is MISSING or old is None:
            return {k: shared(v, cells[k]) for k, v in entries.items()}
        if not isinstance(old, dict):
            return MISSING
        out = None
        for k, v in entries.items():
            if k in old:
                cur = old[k]
                if isinstance(cur, str) and cur == v:
                    continue
                new = overwrite(cur, v, rewrites)
            else:
                new = shared(v, cells[k])
            if out is None:
                out = dict(old)
            out[k] = new
        return MISSING if out is None else out

    return fn


def pair_value(value: Any) -> str:
    """A value of a kustomization's string map (``commonLabels: {a: }`` gives "")."""
    return "" if value is None else label_value(value)


def label_value(value: Any) -> str:
    """A scalar as kustomize prints it inside a string map."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)
