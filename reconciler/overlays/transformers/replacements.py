"""replacements: copy a field of one object into fields of others."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.errors import OverlayError
from reconciler.manifests import parse_yaml_value
from reconciler.overlays.kustomization import SELECTOR, frozen_spec

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from reconciler.overlays.kustomization import Acc, Kust
    from reconciler.overlays.patching import Patching
    from reconciler.overlays.resource import Res

FIELDS = ("replacements",)  # the kustomization fields this transformer reads
SHAPES: Mapping[str, Any] = frozen_spec(
    {
        "replacements": [
            "[]",
            {
                "path": None,
                "source": {
                    "group": None,
                    "version": None,
                    "kind": None,
                    "name": None,
                    "namespace": None,
                    "fieldPath": None,
                    "options": {"delimiter", "index", "create"},
                },
                "targets": [
                    "[]",
                    {
                        "select": SELECTOR,
                        "reject": ["[]", SELECTOR],
                        "fieldPaths": None,
                        "options": {"delimiter", "index", "create"},
                    },
                ],
            },
        ]
    }
)  # the keys each may hold (kustomize reads strictly)
TYPES: Mapping[str, Any] = frozen_spec({})  # where a YAML 1.1 boolean or number is an error


def run(b: Patching, kust: Kust, acc: Acc) -> None:
    from reconciler.overlays.replacements import apply_replacement

    for i, entry in enumerate(kust.list_field("replacements")):
        where: tuple[str | int, ...] = ("replacements", i)
        if not isinstance(entry, dict):
            raise kust.error("replacements entries must be mappings", *where)
        specs: list[dict[str, Any]]
        if entry.get("path"):
            path, data = b.read_kust_file(kust, str(entry["path"]), (*where, "path"))
            specs = []
            for doc in parse_yaml_value(data, path):
                specs.extend(doc if isinstance(doc, list) else [doc])
            origin = (path, 1)
        else:
            specs = [entry]
            origin = (kust.path, kust.pos(*where)[0])

        def each(
            key: tuple[Any, ...] | None,
            items: Iterable[Res],
            fn: Callable[[Res], Res | None],
            origin: tuple[str, int] = origin,
        ) -> list[Res]:
            return b.each(key, items, b.recorded(fn, *origin))

        for j, spec in enumerate(specs):
            try:
                acc.res = apply_replacement(spec, acc.res, each, b.fingerprint(kust, "replacement", i, j))
            except OverlayError as err:
                if err.path:
                    raise
                raise kust.error(err.message, *where) from err
