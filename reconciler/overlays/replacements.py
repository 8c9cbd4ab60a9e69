"""kustomize ``replacements``: copy a field of one resource into fields of others.

Input: one replacement spec (``source`` + ``targets``) and the resources. Output: new
resource records (unchanged ones are the same objects). Pure.

A value of a Secret (any field but its metadata and type) may be copied into Secrets
only: anywhere else it would be shown (plans, diffs, domain XML). Errors name the
objects and field paths, never a value.

Field paths are dotted (``spec.template.spec.volumes.[name=rootdisk].image``); a
``[key=value]`` segment picks the list element whose ``key`` equals ``value``; a number
picks by index. Sources and targets are selected by exact group/version/kind/name/
namespace (current or earlier names) plus label and annotation selectors; ``reject``
drops targets. ``options.delimiter``/``index`` split a scalar; ``options.create``
creates missing maps on the way.

Typing, as kustomize's: a scalar copied over an existing scalar keeps the target's type
(the source's text is read as that type: ``"4"`` from a ConfigMap's data into
``cores: 1`` is the number 4; a number into a string field is its text), and text the
target's type cannot hold (``"abc"`` into a number, ``"4"`` into a boolean or a null) is
an error, as in kustomize; a new field, or a map or list on either side, takes the
source's value as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from reconciler.errors import OverlayError
from reconciler.manifests.reader import resolve_plain
from reconciler.overlays.linked import overwrite, propagate
from reconciler.overlays.resource import Res
from reconciler.overlays.selector import Selector, split_outside

Each = Callable[[tuple[Any, ...] | None, Iterable[Res], Callable[[Res], Res | None]], list[Res]]
_ELEMENT = re.compile(r"^\[([^=\]]+)=([^\]]*)\]$")
_MISSING = object()  # the old value of a field a replacement creates


def split_field_path(path: str) -> list[str]:
    return [p for p in split_outside(path, ".", "[", "]") if p != ""]


def _find(node: Any, seg: str) -> tuple[bool, Any, Any]:
    """(found, key, value) of ``seg`` in ``node``."""
    m = _ELEMENT.match(seg)
    if m and isinstance(node, list):
        k, v = m.group(1), m.group(2)
        for idx, item in enumerate(node):
            if isinstance(item, dict) and k in item and _text(item[k]) == v:
                return True, idx, item
        return False, None, None
    if isinstance(node, list) and (seg.isdigit() or seg == "-"):
        if seg.isdigit() and int(seg) < len(node):
            return True, int(seg), node[int(seg)]
        return False, None, None
    if isinstance(node, dict) and seg in node:
        return True, seg, node[seg]
    return False, None, None


def _text(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "" if value is None else str(value)


def _yaml_tag(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "str"


def typed_like(old: Any, value: Any) -> Any:
    """``value`` written over ``old`` as kustomize writes a scalar over a scalar: only the
    text is copied and the target keeps its type (an ``OverlayError`` when it cannot)."""
    if isinstance(old, (dict, list)) or isinstance(value, (dict, list)):
        return value
    text = _text(value)
    tag = _yaml_tag(old)
    if tag == "str":
        return text
    found, typed = resolve_plain(text)
    if found == tag or (tag == "float" and found == "int"):
        return typed
    raise OverlayError(f"cannot decode !!{found} `{text}` as a !!{tag} (the type of the target field)")


def lookup(obj: Any, parts: list[str]) -> tuple[bool, Any]:
    node = obj
    for seg in parts:
        found, _key, node = _find(node, seg)
        if not found:
            return False, None
    return True, node


def _set(node: Any, parts: list[str], i: int, create: bool, fn: Callable[[Any], Any]) -> Any:
    """Copy-on-write set; returns ``node`` itself when the path is missing and not created."""
    if i == len(parts):
        return fn(node)
    seg = parts[i]
    found, key, child = _find(node, seg)
    if not found:
        if not create or not isinstance(node, (dict, type(None))) or _ELEMENT.match(seg):
            if create and isinstance(node, list) and _ELEMENT.match(seg):
                m = _ELEMENT.match(seg)
                assert m is not None
                new_item = _set({m.group(1): m.group(2)}, parts, i + 1, create, fn)
                return [*node, new_item]
            return node
        base = node if isinstance(node, dict) else {}
        new_child = _set({} if i + 1 < len(parts) else _MISSING, parts, i + 1, create, fn)
        return {**base, seg: new_child}
    new_child = _set(child, parts, i + 1, create, fn)
    if new_child is child:
        return node
    if isinstance(node, list):
        out = list(node)
        out[key] = new_child
        return out
    return {**node, key: new_child}


def _selector(spec: Any, what: str) -> Selector:
    if not isinstance(spec, dict):
        raise OverlayError(f"replacement {what} must be a mapping")
    return Selector(spec, regex=False)


def apply_replacement(spec: Any, items: list[Res], each: Each, key: tuple[Any, ...] | None) -> list[Res]:
    if not isinstance(spec, dict) or not isinstance(spec.get("source"), dict) or not spec.get("targets"):
        raise OverlayError("replacements must specify a source and at least one target")
    source, field_path, value = _source_value(spec["source"], items)
    secret = source.cur.kind == "Secret" and split_field_path(field_path)[0] not in _SECRET_PLAIN_FIELDS
    value_key: object = json.dumps(value, sort_keys=True, default=str)
    if secret:
        value_key = _Unshown(value_key)  # a memo key: kept in memory, never printed
    for t_idx, target in enumerate(spec["targets"]):
        chosen, fn = _target(target, items, value)
        if secret:
            _secret_to_secrets(items, chosen, field_path, source)
        step_key = None if key is None else (*key, t_idx, value_key)
        out: list[Res] = []
        for r in items:
            if id(r) in chosen:
                out.extend(each(step_key, [r], fn))
            else:
                out.append(r)
        items = out
    return items


def _source_value(src: dict[str, Any], items: list[Res]) -> tuple[Res, str, Any]:
    """(the one resource ``src`` selects, its field path, the value copied: the field's,
    or the piece ``options.delimiter``/``index`` cut from it)."""
    source_sel = _selector(src, "source")
    matches = [r for r in items if source_sel.matches_exact(r)]
    if not matches:
        raise OverlayError(f"nothing selected by replacement source {_describe(src)}")
    if len(matches) > 1:
        raise OverlayError(f"more than one resource selected by replacement source {_describe(src)}")
    field_path = str(src.get("fieldPath") or "metadata.name")
    source = matches[0]
    found, value = lookup(source.obj, split_field_path(field_path))
    if not found:
        raise OverlayError(f"fieldPath `{field_path}` is missing for replacement source {source.cur}")
    options = src.get("options") or {}
    if options.get("delimiter"):
        if isinstance(value, (dict, list)):
            raise OverlayError("delimiter option can only be used with scalar nodes")
        pieces = _text(value).split(str(options["delimiter"]))
        index = int(options.get("index") or 0)
        if index < 0 or index >= len(pieces):
            raise OverlayError(
                f"options.index {index} is out of bounds for the value at {field_path} of {source.cur} "
                f"split at {str(options['delimiter'])!r}"
            )
        value = pieces[index]
    return source, field_path, value


def _target(target: Any, items: list[Res], value: Any) -> tuple[set[int], Callable[[Res], Res | None]]:
    """(ids of the resources ``target`` selects and does not reject, the replacement of
    ``value`` into one of them at the target's field paths)."""
    if not isinstance(target, dict) or not isinstance(target.get("select"), dict):
        raise OverlayError("target must specify resources to select")
    select = _selector(target["select"], "target")
    rejects = [_selector(r, "reject") for r in target.get("reject") or ()]
    paths = [split_field_path(str(p)) for p in target.get("fieldPaths") or ["metadata.name"]]
    t_opts = target.get("options") or {}
    create = bool(t_opts.get("create"))
    delimiter = str(t_opts.get("delimiter") or "")
    index = int(t_opts.get("index") or 0)
    setter = partial(_written, value=value, delimiter=delimiter, index=index)
    chosen = {
        id(r)
        for r in items
        if select.matches_exact(r, any_id=True) and not any(x.matches_exact(r) for x in rejects)
    }
    return chosen, partial(_replaced_in, paths=paths, create=create, setter=setter)


def _written(old: Any, value: Any, delimiter: str, index: int, rewrites: Any = None) -> Any:
    """What a target field holds once ``value`` is written over ``old`` (``_MISSING``: a
    field created), whole or as the ``index``-th piece of its text split at ``delimiter``."""
    created = old is _MISSING
    if created:  # a new field: a mapping or list as it is; a scalar as kustomize makes it,
        # an untyped node given the text alone: its type is the text's ("8080": 8080)
        if isinstance(value, (dict, list)):
            return value
        if not delimiter:
            return resolve_plain(_text(value))[1]
        old = None
    if not delimiter:
        value = typed_like(old, value)
        return overwrite(old, value, rewrites) if rewrites is not None else value
    if isinstance(old, (dict, list)):
        raise OverlayError("delimiter option can only be used with scalar nodes")
    pieces = _text(old).split(delimiter) if old is not None else [""]
    if index < 0:
        pieces = [_text(value), *pieces]
    elif index >= len(pieces):
        pieces = [*pieces, _text(value)]
    else:
        pieces[index] = _text(value)
    if created:
        return resolve_plain(delimiter.join(pieces))[1]
    joined = typed_like(old, delimiter.join(pieces)) if old is not None else delimiter.join(pieces)
    return overwrite(old, joined, rewrites) if rewrites is not None else joined


def _replaced_in(r: Res, paths: list[list[str]], create: bool, setter: Callable[..., Any]) -> Res | None:
    """``r`` with ``setter``'s value at each of ``paths`` (fields missing created when
    ``create``), the links of the values it replaced carried over."""
    obj = r.obj
    rewrites: dict[object, Any] = {}
    for parts in paths:
        found, _old = lookup(obj, parts)
        if not found and not create:
            raise OverlayError(f'unable to find field "{".".join(parts)}" in replacement target {r.cur}')
        try:
            obj = _set(obj, parts, 0, create, partial(setter, rewrites=rewrites))
        except OverlayError as err:
            raise OverlayError(f"replacement target {r.cur} {'.'.join(parts)}: {err}") from err
    obj = propagate(obj, rewrites)
    return r if obj is r.obj else r.with_obj(obj)


def _secret_to_secrets(items: list[Res], chosen: set[int], field_path: str, source: Res) -> None:
    """A Secret's value is copied into Secrets only: anywhere else it would be shown."""
    for r in items:
        if id(r) in chosen and r.cur.kind != "Secret":
            raise OverlayError(
                f"replacement copies {field_path} of {source.cur} into {r.cur}: a Secret's "
                "values go to Secrets only (anywhere else they would show in plans, diffs "
                "and domain XML); let the VM name the Secret instead"
            )


# A Secret's fields that hold no value: a replacement may copy them anywhere.
_SECRET_PLAIN_FIELDS = ("apiVersion", "kind", "metadata", "type", "immutable")


class _Unshown:
    """A memo key standing for a Secret's value: equal and hashed by it, never shown."""

    __slots__ = ("_key",)

    def __init__(self, key: object) -> None:
        self._key = key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unshown) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return "<a Secret's value>"


def _describe(spec: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v}" for k, v in spec.items() if k in ("group", "version", "kind", "name", "namespace")
    )
