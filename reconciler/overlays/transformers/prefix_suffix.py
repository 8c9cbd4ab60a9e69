"""namePrefix / nameSuffix: rename objects (kept as prefixes for name references)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.overlays.kustomization import STR, frozen_spec
from reconciler.overlays.resource import MISSING, Res, update_path

if TYPE_CHECKING:
    from collections.abc import Mapping

    from reconciler.overlays.kustomization import Acc, Kust
    from reconciler.overlays.patching import Patching

_PREFIX_SKIP = frozenset(
    {
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        ("", "Namespace"),
    }
)
FIELDS = ("namePrefix", "nameSuffix")  # the kustomization fields this transformer reads
SHAPES: Mapping[str, Any] = frozen_spec({})  # the keys each may hold (kustomize reads strictly)
TYPES: Mapping[str, Any] = frozen_spec(
    {
        "namePrefix": STR,
        "nameSuffix": STR,
    }
)  # where a YAML 1.1 boolean or number is an error


def run(b: Patching, kust: Kust, acc: Acc) -> None:
    prefix, suffix = kust.str_field("namePrefix"), kust.str_field("nameSuffix")
    if not prefix and not suffix:
        return
    specs = acc.config.name_prefix

    def fn(r: Res) -> Res | None:
        cur = r.cur
        if (cur.group, cur.kind) in _PREFIX_SKIP:
            return r
        obj = r.obj
        for fs in specs:
            if fs.applies_to(cur):
                obj = update_path(
                    obj,
                    fs.path,
                    fs.create,
                    lambda old: f"{prefix}{old}{suffix}" if isinstance(old, str) else MISSING,
                )
        if obj is r.obj:
            return r
        new = r.with_obj(obj)
        return replace(
            new,
            prefixes=(*new.prefixes, prefix) if prefix else new.prefixes,
            suffixes=(*new.suffixes, suffix) if suffix else new.suffixes,
        )

    acc.res = b.each(b.fingerprint(kust, "prefix", specs), acc.res, fn)
