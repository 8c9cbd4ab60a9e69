"""kustomize's ``vars`` (deprecated there in favour of ``replacements``, still read):
``$(NAME)`` in the fields of ``varReference`` replaced by a field of a named object.

Input: each level's ``vars`` entries and its accumulated records; at the top, the
records after names are final and the merged config's ``varReference`` field specs
(kustomize's default table, pinned in ``data/kustomize/varreference.json``, and the
repository's ``configurations:``). Output: records marked with the vars they provide
(``mark_vars``, per level, as kustomize's ``MergeVars``), then the records with every
``$(NAME)`` replaced (``resolve_vars``, as its ``ResolveVars`` and ``refvar`` filter):
a whole-field ``$(NAME)`` takes the value's type, ``$$`` is a literal ``$``, an unknown
name is left as written. A var defined twice, an object that matches a var ambiguously,
or a field a var names that is missing is an ``OverlayError``. Pure.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.errors import OverlayError
from reconciler.overlays.kustomization import Var
from reconciler.overlays.replacements import lookup, split_field_path
from reconciler.overlays.resource import MISSING, is_cluster_scoped, update_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.overlays.kustomization import Acc, Kust
    from reconciler.overlays.resource import FieldSpec, Res

_INDEX = re.compile(r"^(.*)\[(\d+)\]$")


def _var(kust: Kust, i: int, entry: Any) -> Var:
    if not isinstance(entry, dict) or not entry.get("name"):
        raise kust.error("vars entries need a name", "vars", i)
    ref = entry.get("objref")
    if not isinstance(ref, dict) or not ref.get("kind") or not ref.get("name"):
        raise kust.error(f"var {entry['name']!r}: objref needs a kind and a name", "vars", i)
    group, version = str(ref.get("group") or ""), str(ref.get("version") or "")
    api = str(ref.get("apiVersion") or "")
    if api:
        group, _, version = api.rpartition("/")
    field_ref = entry.get("fieldref")
    path = str(field_ref.get("fieldpath") or "") if isinstance(field_ref, dict) else ""
    return Var(
        str(entry["name"]),
        group,
        version,
        str(ref["kind"]),
        str(ref["name"]),
        str(ref.get("namespace") or ""),
        path or "metadata.name",
    )


def mark_vars(
    kust: Kust, acc: Acc, each: Callable[[str, Res, Callable[[Res], Res]], Res] | None = None
) -> None:
    """This level's vars added to ``acc.vars`` and each marked on the object it reads
    (``each``: the build's memoised step, by the var's name: a rebuild hands out the
    same marked record)."""
    for i, entry in enumerate(kust.list_field("vars")):
        var = _var(kust, i, entry)
        exact = bool(var.namespace) or is_cluster_scoped(var.group, var.kind)
        matched = [
            idx
            for idx, r in enumerate(acc.res)
            if any(
                (rid.group, rid.version, rid.kind, rid.name)
                == (var.group, var.version, var.kind, var.obj_name)
                and (not exact or (rid.namespace or "") == var.namespace)
                for rid in r.all_ids()
            )
        ]
        if len(matched) > 1:
            raise kust.error(
                f"found {len(matched)} resId matches for var {var.name!r} (unable to disambiguate)", "vars", i
            )
        if matched:

            def marked(r: Res, name: str = var.name) -> Res:
                return r.but(ref_vars=(*r.ref_vars, name))

            r = acc.res[matched[0]]
            acc.res[matched[0]] = marked(r) if each is None else each(var.name, r, marked)
        add_var(kust, acc, var, ("vars", i))


def add_var(kust: Kust, acc: Acc, var: Var, where: tuple[str | int, ...] = ()) -> None:
    if var.name in acc.vars:
        raise kust.error(f"var '{var.name}' already encountered", *where)
    acc.vars[var.name] = var


def _field_value(r: Res, path: str) -> tuple[bool, Any]:
    parts: list[str] = []
    for seg in split_field_path(path):
        m = _INDEX.match(seg)
        parts += [m.group(1), m.group(2)] if m and m.group(1) else [seg]
    return lookup(r.obj, parts)


def resolve_vars(
    items: list[Res],
    vars_: dict[str, Var],
    specs: tuple[FieldSpec, ...],
    each: Callable[[str, list[Res], Callable[[Res], Res]], list[Res]] | None = None,
) -> list[Res]:
    """Every ``$(NAME)`` at ``specs`` replaced by the value of var ``NAME``; ``each``: the
    build's memoised step (its key's data, the records, the step), so that a rebuild with
    the same values reads no unchanged record."""
    if not vars_:
        return items
    values: dict[str, Any] = {}
    for name in sorted(vars_):
        var = vars_[name]
        source = next((r for r in items if name in r.ref_vars), None)
        if source is None:
            raise OverlayError(
                f"var '{name}' cannot be mapped to a field in the set of known resources "
                f"({var.kind} {var.obj_name!r} not found)"
            )
        found, value = _field_value(source, var.field_path)
        if not found:
            raise OverlayError(
                f"field {var.field_path!r} specified in var '{name}' not found in {source.cur}",
                source.path,
                source.line,
            )
        values[name] = value

    def resolved(r: Res) -> Res:
        obj = r.obj
        for fs in specs:
            if fs.applies_to(r.cur):
                obj = update_path(obj, fs.path, False, lambda old: _replaced(old, values))
        return r if obj is r.obj else replace(r, obj=obj)

    if each is None:
        return [resolved(r) for r in items]
    return each(repr((sorted(values.items()), specs)), items, resolved)


def _replaced(old: Any, values: dict[str, Any]) -> Any:
    if isinstance(old, str):
        new = expand(old, values)
        return MISSING if new == old and type(new) is type(old) else new
    if isinstance(old, dict):
        changed = {k: expand(v, values) if isinstance(v, str) else v for k, v in old.items()}
        return MISSING if changed == old else changed
    return MISSING


def expand(text: str, values: dict[str, Any]) -> Any:
    """kustomize's ``refvar.DoReplacements``: ``$(NAME)`` replaced, ``$$`` a ``$``; the
    whole text one ``$(NAME)`` takes the value as it is (a number stays a number)."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    n = len(text)
    while cursor < n:
        if text[cursor] == "$" and cursor + 1 < n:
            out.append(text[checkpoint:cursor])
            nxt = text[cursor + 1]
            if nxt == "$":
                read, is_var, advance = "$", False, 1
            elif nxt == "(":
                close = text.find(")", cursor + 2)
                if close >= 0:
                    read, is_var, advance = text[cursor + 2 : close], True, close - cursor
                else:
                    read, is_var, advance = "$(", False, 1
            else:
                read, is_var, advance = "$" + nxt, False, 1
            if is_var:
                mapped = values.get(read, f"$({read})") if _primitive(values.get(read)) else f"$({read})"
                if text == f"$({read})":
                    return mapped
                out.append(_go_text(mapped))
            else:
                out.append(read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


def _primitive(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _go_text(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)
